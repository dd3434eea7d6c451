#!/usr/bin/env bash
# Runs every differential fuzz target (tests/fuzz/*_fuzz.cpp) for longer than CI does:
# coverage-guided with clang's libFuzzer under ASan + UBSan. Usage:
#   scripts/fuzz.sh [SECONDS_PER_TARGET] [TARGET_NAME_REGEX]
# Findings are written to build/fuzz/findings/<target>/ and make the script fail.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-60}
filter=${2:-.}
bash scripts/setup.sh
command -v clang++ >/dev/null || { echo "fuzz.sh needs clang++ (Debian clang)"; exit 1; }
cmake -S . -B build/fuzz -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_COMPILER=clang++ \
  -DFRUGAL_BUILD_TESTS=ON -DFRUGAL_BUILD_BENCH=OFF -DFRUGAL_BUILD_EXAMPLES=OFF -DFRUGAL_WITH_CUDA=OFF \
  -DFRUGAL_TEST_HEADERS=OFF -DFRUGAL_TEST_PACKAGE=OFF -DFRUGAL_FUZZ_LIBFUZZER=ON \
  -DCMAKE_CXX_FLAGS="-fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer" >/dev/null
targets=$(cd tests/fuzz && ls *_fuzz.cpp | sed 's/\.cpp$//' | grep -E "$filter" | sed 's/^/frugal_/')
cmake --build build/fuzz -j "${FRUGAL_JOBS:-$(nproc)}" --target $targets
status=0
for t in $targets; do
  mkdir -p "build/fuzz/findings/$t" "build/fuzz/corpus/$t"
  echo "=== $t ($seconds s)"
  if ! "build/fuzz/tests/fuzz/$t" -max_total_time="$seconds" -artifact_prefix="build/fuzz/findings/$t/" \
       "build/fuzz/corpus/$t" 2>&1 | tail -3; then
    status=1
  fi
done
exit $status
