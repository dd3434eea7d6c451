"""Builds frugal's Python extension with Debian's pybind11: `pip install --no-build-isolation ./python`.

The module's sources are listed in sources.txt, which python/CMakeLists.txt (the CMake option
FRUGAL_BUILD_PYTHON) reads too. The C++ headers come from ../include; Eigen 3.4 and xsimd
(the reference CPU backend that runs attention) from the system (libeigen3-dev, libxsimd-dev).
FRUGAL_BUILD_JOBS sets the parallel compile jobs (default: the CPU count); FRUGAL_NATIVE=1
compiles for this machine's ISA (-march=native), which a wheel meant for other machines must not.
With hiredis (libhiredis-dev) found by pkg-config, frugal.cache.RedisTier is built too.
"""
import os
import re
import subprocess
from pathlib import Path

from pybind11.setup_helpers import ParallelCompile, Pybind11Extension, build_ext
from setuptools import setup

HERE = Path(__file__).resolve().parent
INCLUDE = HERE.parent / "include"


def version():
    text = (INCLUDE / "frugal" / "core" / "version.hpp").read_text()
    return re.search(r'version = "([0-9.]+)"', text).group(1)


def eigen_include():
    try:
        out = subprocess.run(["pkg-config", "--cflags-only-I", "eigen3"], capture_output=True, text=True, check=True)
        return [flag[2:] for flag in out.stdout.split()]
    except (OSError, subprocess.CalledProcessError):
        return ["/usr/include/eigen3"]


def hiredis():
    """frugal.cache.RedisTier's hiredis (Debian libhiredis-dev), found with pkg-config; without it
    the module is built without RedisTier."""
    try:
        cflags = subprocess.run(["pkg-config", "--cflags-only-I", "hiredis"], capture_output=True, text=True, check=True)
        libs = subprocess.run(["pkg-config", "--libs-only-l", "hiredis"], capture_output=True, text=True, check=True)
    except (OSError, subprocess.CalledProcessError):
        return {}
    return {"include_dirs": [flag[2:] for flag in cflags.stdout.split()],
            "libraries": [flag[2:] for flag in libs.stdout.split()],
            "define_macros": [("FRUGAL_PYTHON_HAVE_REDIS", "1")]}


sources = [line.strip() for line in (HERE / "sources.txt").read_text().splitlines()
           if line.strip() and not line.startswith("#")]
flags = ["-march=native"] if os.environ.get("FRUGAL_NATIVE") == "1" else []

redis = hiredis()
ParallelCompile("FRUGAL_BUILD_JOBS").install()
setup(
    version=version(),
    ext_modules=[Pybind11Extension(
        "frugal._frugal",
        sources,
        include_dirs=[str(INCLUDE), *eigen_include(), *redis.get("include_dirs", [])],
        libraries=redis.get("libraries", []),
        define_macros=redis.get("define_macros", []),
        cxx_std=20,
        extra_compile_args=flags,
    )],
    cmdclass={"build_ext": build_ext},
)
