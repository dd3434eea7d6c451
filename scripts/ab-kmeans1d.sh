#!/usr/bin/env bash
# Times kmeans1d of the working tree against a git revision's, interleaved in one process
# (bench/ab/kmeans1d_ab.cpp says why). Usage: scripts/ab-kmeans1d.sh REV [N K FITS]
# Example: scripts/ab-kmeans1d.sh HEAD~1 1000 8
set -euo pipefail
cd "$(dirname "$0")/.."
rev=${1:?usage: scripts/ab-kmeans1d.sh REV [N K FITS]}
git rev-parse --verify --quiet "$rev^{commit}" >/dev/null || { echo "not a git checkout with $rev: skipped"; exit 0; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
git archive "$rev" include | tar -x -C "$work"
flags=(-std=c++20 -O3 -march=native -DNDEBUG)
# Renaming the namespace keeps the two versions' inline functions apart at link time.
g++ "${flags[@]}" -Dfrugal=frugal_old -DFIT=fit_old -I"$work/include" -c bench/ab/kmeans1d_fit.cpp -o "$work/old.o"
g++ "${flags[@]}" -Dfrugal=frugal_new -DFIT=fit_new -Iinclude -c bench/ab/kmeans1d_fit.cpp -o "$work/new.o"
g++ "${flags[@]}" bench/ab/kmeans1d_ab.cpp "$work/old.o" "$work/new.o" -o "$work/ab"
"$work/ab" "${@:2}"
