#!/usr/bin/env bash
# Installs what is missing, then builds and runs every test:
#  1. the `dev` preset (Debug, warnings as errors): unit tests, header self-containment,
#     package consumers (find_package and add_subdirectory), examples, the bench harness,
#     and the CUDA adapter compiled (not run without a GPU) when nvcc is present;
#  2. the `asan` preset: the unit tests and examples under AddressSanitizer + UBSan;
#  3. the `tsan` preset: the tests labelled `threads` under ThreadSanitizer, then the Python
#     module's thread and misuse tests against a TSan-built module (python/tests/run_tsan.sh);
#  4. the Python package from a clean copy of the sources, as a user installs it: a fresh
#     venv (--system-site-packages), pip install --no-build-isolation ./python offline, the
#     examples and the pytest suite in it (the dev preset's ctest already ran the suite
#     against the CMake-built module, label `python`).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
jobs=${FRUGAL_JOBS:-$(nproc)}

for preset in dev asan tsan; do
  echo "=== ${preset} ==="
  cmake --preset "$preset" >/dev/null
  if [ "$preset" = tsan ]; then
    # Only the suites that start threads need TSan; build just those executables.
    targets=$( (grep -rl --include=CMakeLists.txt "LABELS.*threads" tests || true) |
      xargs -r grep -ho "frugal_add_test(frugal_test_[a-z_]*" | sed 's/frugal_add_test(//' | sort -u)
    if [ -z "$targets" ]; then echo "no threaded suites yet"; continue; fi
    cmake --build --preset tsan -j "$jobs" --target $targets
    ctest --preset tsan -j "$jobs" -L threads
  else
    cmake --build --preset "$preset" -j "$jobs"
    ctest --preset "$preset" -j "$jobs"
  fi
done
echo "=== python under ThreadSanitizer ==="
# Every bound class from two threads at once and the misuse cases, against the module built
# with -fsanitize=thread (Debian's python3 with libtsan preloaded).
FRUGAL_JOBS="$jobs" bash python/tests/run_tsan.sh
echo "=== python (fresh venv) ==="
# Debian's interpreter, whose numpy and pybind11 setup.sh installed (a pyenv or conda python3
# earlier on PATH has neither); FRUGAL_PYTHON overrides.
FRUGAL_TEST_VENV=1 FRUGAL_BUILD_JOBS="$jobs" "${FRUGAL_PYTHON:-/usr/bin/python3}" -m pytest -q -p no:cacheprovider \
  python/tests/test_install.py
echo "all test presets passed"
