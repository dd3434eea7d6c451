#!/usr/bin/env bash
# The pruning target's protocol over many seed pairs: calibrate on generated seed s for
# precision@10 >= 0.99, apply the threshold to seed s + 1, and count the pairs that meet
# both targets (precision >= 0.99, candidate-layers skipped >= 0.40). dev/notes/pruning.md's
# calibration table comes from it. Extra arguments go to every `frugal-bench prune` replay
# (e.g. --confirmations 0 --margin-se 1.645 --padding-queries 0).
# Usage: scripts/prune-seed-pairs.sh [FRUGAL-BENCH] [prune flags...]
# Environment: SEEDS (calibration seeds; default the 36 of the docs), QUERIES (default 200),
# CAL_QUERIES (queries of the calibration seeds; default QUERIES), FIXED_THRESHOLD (skip
# calibration and apply this threshold to every test seed).
set -euo pipefail
bench=${1:-build/release/bench/frugal-bench}
shift || true
seeds=${SEEDS:-"1 3 5 7 9 11 13 15 17 19 21 23 31 33 35 37 39 41 43 45 47 49 51 53 61 63 65 67 69 71 73 75 77 79 81 83"}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# --margin-se and --padding-queries only matter to calibration; the replays take the policy flags alone
calibrate=("$@") policy=()
while [ $# -gt 0 ]; do
    case $1 in
    --margin-se | --padding-queries) shift 2 ;;
    *) policy+=("$1"); shift ;;
    esac
done
field() { python3 -c 'import json,sys; print(next(json.loads(l)[sys.argv[1]] for l in sys.stdin if l.startswith("{")))' "$1"; }
for s in $seeds; do
    "$bench" prune --generate --out "$work/$s.txt" --queries "${CAL_QUERIES:-${QUERIES:-200}}" --candidates 20 --layers 28 --seed "$s" >/dev/null
    "$bench" prune --generate --out "$work/$((s + 1)).txt" --queries "${QUERIES:-200}" --candidates 20 --layers 28 --seed $((s + 1)) >/dev/null
    if [ -n "${FIXED_THRESHOLD:-}" ]; then
        th=$FIXED_THRESHOLD
    else
        th=$("$bench" prune --trajectories "$work/$s.txt" --k 10 --calibrate 0.99 --json ${calibrate[@]+"${calibrate[@]}"} | field threshold)
    fi
    out=$("$bench" prune --trajectories "$work/$((s + 1)).txt" --k 10 --threshold "$th" --json ${policy[@]+"${policy[@]}"})
    echo "$s $th $(echo "$out" | field precision_at_k) $(echo "$out" | field layer_compute_saved)"
done | python3 -c '
import sys
rows = [l.split() for l in sys.stdin]
ok = 0
for s, th, p, v in rows:
    good = float(p) >= 0.99 and float(v) >= 0.40
    ok += good
    print(f"seeds {s}/{int(s) + 1}: threshold {float(th):.4f} precision@10 {float(p):.4f} skipped {float(v):.3f}" + ("" if good else "  MISSED"))
print(f"pairs meeting both targets: {ok} of {len(rows)}; lowest precision@10 {min(float(r[2]) for r in rows):.4f}; "
      f"lowest skipped {min(float(r[3]) for r in rows):.3f}")'
