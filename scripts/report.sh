#!/usr/bin/env bash
# Installs what is missing, builds frugal-bench in Release and writes the benchmark
# report: frugal-bench report --out "${1:-frugal-report}" (uses ../shared/data when present).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
out=${1:-frugal-report}
cmake --preset release >/dev/null
cmake --build --preset release -j "${FRUGAL_JOBS:-$(nproc)}" --target frugal-bench
./build/release/bench/frugal-bench report --out "$out"
