#!/usr/bin/env bash
# Gathers what scripts/gpu-check.sh needs on a GPU machine that has the CUDA toolkit and
# CMake but none of Debian's -dev packages, from this (Debian) machine's installed ones:
# GoogleTest's sources (built there) and the CLI11 and nlohmann-json headers with their
# CMake package files, about 5 MiB in DIR (default .gpu-deps, git-ignored).
# usage: scripts/gpu-deps.sh [DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${1:-.gpu-deps}
for f in /usr/src/googletest/CMakeLists.txt /usr/include/CLI/CLI.hpp /usr/include/nlohmann/json.hpp \
  /usr/share/cmake/CLI11/CLI11Config.cmake /usr/share/cmake/nlohmann_json/nlohmann_jsonConfig.cmake; do
  [ -e "$f" ] || { echo "gpu-deps: $f missing: run scripts/setup.sh first" >&2; exit 1; }
done
rm -rf "$dir"
mkdir -p "$dir/include" "$dir/share/cmake"
cp -r /usr/src/googletest "$dir/googletest"
cp -r /usr/include/CLI /usr/include/nlohmann "$dir/include/"
cp -r /usr/share/cmake/CLI11 /usr/share/cmake/nlohmann_json "$dir/share/cmake/"
echo "gpu-deps: $(du -sh "$dir" | cut -f1) in $dir"
