#!/usr/bin/env bash
# The CUDA adapter on a GPU in one run: configures and builds only the CUDA tests and
# frugal-bench-cuda (Release, sm_90, all cores), runs the tests, then the CUDA bench cases
# (decode batches, one 32k sequence, prefill) and PyTorch's SDPA on the same shapes, and
# prints one summary table (bench/cuda/gpu_summary.py). Without a GPU it stops after the
# build with "no GPU": a dry run of everything but the device.
#
# usage: scripts/gpu-check.sh [--deps DIR] [--build DIR] [--out DIR] [--reps N]
#   --deps   GoogleTest sources, CLI11 and nlohmann-json as scripts/gpu-deps.sh gathers them,
#            for a machine without Debian's packages (default: .gpu-deps when it exists)
#   --build  build folder (default build/gpu)
#   --out    logs and JSON lines (default $OUT when set, else build/gpu/out)
#   --reps   timed runs per case (default 30)
set -euo pipefail
cd "$(dirname "$0")/.."
deps=""
[ -d .gpu-deps ] && deps=.gpu-deps
build=build/gpu
out=${OUT:-}
reps=30
while [ $# -gt 0 ]; do
  case "$1" in
    --deps) deps=$2; shift 2 ;;
    --build) build=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --reps) reps=$2; shift 2 ;;
    *) echo "gpu-check: unknown argument $1" >&2; exit 2 ;;
  esac
done
out=${out:-$build/out}
mkdir -p "$out"
start=$(date +%s)
stamp() { echo "[gpu-check $(($(date +%s) - start)) s] $*"; }

nvcc=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
[ -x "$nvcc" ] || { echo "gpu-check: no nvcc on PATH or in /usr/local/cuda/bin" >&2; exit 1; }
generator=()
command -v ninja >/dev/null && generator=(-G Ninja)
args=(-DCMAKE_BUILD_TYPE=Release -DFRUGAL_CUDA_ONLY=ON -DCMAKE_CUDA_ARCHITECTURES=90
      -DCMAKE_CUDA_COMPILER="$nvcc" -DFRUGAL_BUILD_TESTS=ON -DFRUGAL_BUILD_BENCH=ON)
if [ -n "$deps" ]; then
  deps=$(cd "$deps" && pwd)
  args+=(-DCMAKE_PREFIX_PATH="$deps" -DFRUGAL_GTEST_SOURCE_DIR="$deps/googletest")
fi
stamp "configure ($build)"
cmake -S . -B "$build" "${generator[@]}" "${args[@]}" >"$out/build.log" 2>&1 || { cat "$out/build.log"; exit 1; }
stamp "build: CUDA tests and frugal-bench-cuda on $(nproc) cores"
cmake --build "$build" -j "$(nproc)" --target frugal_test_cuda frugal-bench-cuda >>"$out/build.log" 2>&1 ||
  { tail -n 60 "$out/build.log"; exit 1; }

if ! nvidia-smi -L >/dev/null 2>&1; then
  stamp "no GPU: the CUDA tests and frugal-bench-cuda built; tests and bench not run"
  exit 0
fi
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.sm,clocks.mem --format=csv,noheader

stamp "CUDA tests"
tests_rc=0
timeout 240 "$build/tests/cuda/frugal_test_cuda" --gtest_color=no >"$out/tests.log" 2>&1 || tests_rc=$?
grep -E -A4 '^\[  (FAILED|PASSED) \]|tests ran|Failure' "$out/tests.log" | head -n 80 || true

stamp "bench"
bench="$build/bench/frugal-bench-cuda"
: >"$out/bench.jsonl"
run_case() {
  timeout 90 "$bench" attention --json --reps "$reps" "$@" >>"$out/bench.jsonl" 2>>"$out/bench.err" ||
    echo "bench case failed: $*" | tee -a "$out/bench.err"
}
decode=(--mode decode --batch 8 --kv-len 4096 --kv-len-spread 0.5 --heads 32 --kv-heads 8 --d 128 --page-size 16)
run_case "${decode[@]}" --dtype bf16 --layout hnd
run_case "${decode[@]}" --dtype bf16 --layout nhd
run_case "${decode[@]}" --dtype f16 --layout hnd
run_case "${decode[@]}" --dtype f32 --layout hnd
run_case --mode decode --batch 1 --kv-len 32768 --heads 32 --kv-heads 8 --d 128 --page-size 16 --dtype bf16 --layout hnd
run_case --mode decode --batch 64 --kv-len 2048 --kv-len-spread 0.5 --heads 32 --kv-heads 4 --d 128 --page-size 64 \
  --dtype bf16 --layout nhd
run_case --mode mixed --batch 8 --kv-len 2048 --heads 32 --kv-heads 8 --d 128 --page-size 16 --chunk 128 --dtype bf16
run_case --mode prefill --batch 1 --kv-len 4096 --heads 32 --kv-heads 32 --d 128 --dtype bf16 --causal
run_case --mode prefill --batch 1 --kv-len 4096 --heads 32 --kv-heads 32 --d 128 --dtype bf16
run_case --mode prefill --batch 1 --kv-len 4096 --heads 32 --kv-heads 8 --d 128 --dtype f16 --causal

stamp "PyTorch SDPA on the same shapes"
PYTHONUNBUFFERED=1 timeout 180 python3 bench/cuda/torch_sdpa.py "$out/bench.jsonl" --reps "$reps" >"$out/torch.jsonl" \
  2>"$out/torch.err" || { echo "torch peer failed:"; tail -n 5 "$out/torch.err"; }

stamp "summary"
python3 bench/cuda/gpu_summary.py "$out/bench.jsonl" "$out/torch.jsonl" "$out/tests.log" | tee "$out/summary.txt"
[ -s "$out/bench.err" ] && { echo "bench stderr:"; tail -n 5 "$out/bench.err"; }
stamp "done (tests exit code $tests_rc)"
exit "$tests_rc"
