#!/usr/bin/env bash
# The thread tests under ThreadSanitizer: builds the Python module alone with -fsanitize=thread
# (CMake option FRUGAL_PYTHON_TSAN, in its own build folder), then runs test_threads.py,
# test_misuse.py and test_rag.py (the RAG runtime's threads calling Python) in Debian's python3
# with libtsan preloaded. Only the module is instrumented, so
# every report is a race in frugal's bindings or headers: CPython and numpy are invisible to
# TSan, and the GIL (a pthread mutex) orders whatever runs under it. No suppressions.
# Environment: FRUGAL_TSAN_BUILD (build folder, default build/python-tsan), FRUGAL_JOBS
# (default: all CPUs), FRUGAL_PYTHON (default /usr/bin/python3), TSAN_OPTIONS (appended, so
# halt_on_error=0 counts every race instead of stopping at the first), pytest arguments. pytest
# captures sys.stdout/stderr only, so that a report on the process's stderr survives its abort.
set -euo pipefail
cd "$(dirname "$0")/../.."
build=${FRUGAL_TSAN_BUILD:-build/python-tsan}
python=${FRUGAL_PYTHON:-/usr/bin/python3}
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DFRUGAL_BUILD_PYTHON=ON -DFRUGAL_PYTHON_TSAN=ON \
  -DFRUGAL_BUILD_TESTS=OFF -DFRUGAL_BUILD_BENCH=OFF -DFRUGAL_BUILD_EXAMPLES=OFF -DFRUGAL_INSTALL=OFF \
  -DFRUGAL_WITH_CUDA=OFF -DPython3_EXECUTABLE="$python" >/dev/null
cmake --build "$build" -j "${FRUGAL_JOBS:-$(nproc)}" --target frugal_python
cxx=$(sed -n 's/^CMAKE_CXX_COMPILER:[A-Z]*=//p' "$build/CMakeCache.txt")
tsan=$("$cxx" -print-file-name=libtsan.so)
[ -f "$tsan" ] || { echo "run_tsan.sh: $cxx has no libtsan.so (Debian: libgcc-12-dev)" >&2; exit 1; }
LD_PRELOAD="$tsan" TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1 ${TSAN_OPTIONS:-}" \
  PYTHONPATH="$build/python" PYTHONDONTWRITEBYTECODE=1 \
  "$python" -m pytest -q -p no:cacheprovider --capture=sys python/tests/test_threads.py python/tests/test_misuse.py \
  python/tests/test_rag.py "$@"
