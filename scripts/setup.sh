#!/usr/bin/env bash
# Installs the Debian packages frugal's tests, benchmarks and report need (as root, or
# with sudo when available). Only missing packages are installed; safe to re-run.
set -euo pipefail

packages=(
  cmake make g++ git pkg-config
  libboost-dev                      # frugal::frugal: Boost.Intrusive/Container/Heap headers
  libeigen3-dev libxsimd-dev xtl-dev  # frugal::eigen: the reference CPU backend
  libgtest-dev libgmock-dev         # tests
  qemu-user                         # tests: the mixed -march program on older CPU models (qemu-x86_64 -cpu)
  libbenchmark-dev                  # micro-benchmarks
  libcli11-dev nlohmann-json3-dev   # frugal-bench: argument parsing and JSON records
  libzstd-dev zlib1g-dev            # frugal-bench: compressed cache traces
  python3 python3-matplotlib        # report plots (bench/plot.py)
  libfaiss-dev                      # frugal::faiss: the FAISS IVF adapter and its tests
  libhiredis-dev redis-server       # frugal::redis: the Redis cache tier, tested against a real server
  python3-dev pybind11-dev python3-pybind11  # the Python package (python/): headers and pybind11
  python3-numpy python3-pytest mypy  # the Python package's arrays, its tests and its stubs' check (stubtest)
  python3-venv python3-setuptools python3-wheel  # pip install --no-build-isolation ./python in a venv
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all packages present"
  exit 0
fi
echo "setup: installing ${missing[*]}"
sudo_cmd=()
if [ "$(id -u)" -ne 0 ]; then sudo_cmd=(sudo); fi
export DEBIAN_FRONTEND=noninteractive
"${sudo_cmd[@]}" apt-get update -qq
"${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
