"""Builds frugal's Python extension: `pip install --no-build-isolation ./python`.

Works with any Python 3 that has setuptools (and, for pip's wheel, the wheel package): the C++
headers come from ../include; pybind11's headers from the `pybind11` module when this Python
can import it, else from Debian's pybind11-dev (/usr/include/pybind11, found with pkg-config),
and the build stops naming the package to install when neither is there. Eigen 3.4 and xsimd
(the reference CPU backend that runs attention) come from the system (libeigen3-dev,
libxsimd-dev). The module's sources are listed in sources.txt, which python/CMakeLists.txt (the
CMake option FRUGAL_BUILD_PYTHON) reads too. FRUGAL_BUILD_JOBS sets the parallel compile jobs
(default: the CPU count); FRUGAL_NATIVE=1 compiles for this machine's ISA (-march=native), which a
wheel meant for other machines must not. With hiredis (libhiredis-dev) found by pkg-config,
frugal.cache.RedisTier is built too.
"""
import importlib.util
import os
import re
import shlex
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from setuptools import Extension, setup

HERE = Path(__file__).resolve().parent
INCLUDE = HERE.parent / "include"
PYBIND11_MINIMUM = (2, 10)
SYSTEM_INCLUDE = Path("/usr/include")  # where Debian's pybind11-dev puts pybind11/


def version():
    text = (INCLUDE / "frugal" / "core" / "version.hpp").read_text()
    return re.search(r'version = "([0-9.]+)"', text).group(1)


def pkg_config(*args):
    """pkg-config's output split into words, or None when it or the package is missing."""
    try:
        return subprocess.run(["pkg-config", *args], capture_output=True, text=True, check=True).stdout.split()
    except (OSError, subprocess.CalledProcessError):
        return None


def pybind11_include():
    """The directory holding pybind11/pybind11.h: the pybind11 module's (pip's pybind11, or Debian's
    python3-pybind11 for Debian's Python), else Debian's pybind11-dev. Stops the build with the
    package to install when neither has a pybind11 this recent."""
    candidates = []
    if importlib.util.find_spec("pybind11") is not None:
        import pybind11
        candidates.append(Path(pybind11.get_include()))
    candidates += [Path(flag[2:]) for flag in pkg_config("--cflags-only-I", "pybind11") or [] if flag.startswith("-I")]
    candidates.append(SYSTEM_INCLUDE)
    found = []
    for directory in candidates:
        header = directory / "pybind11" / "detail" / "common.h"
        if header.is_file():
            text = header.read_text()
            v = tuple(int(re.search(rf"#define PYBIND11_VERSION_{part} (\d+)", text).group(1)) for part in ("MAJOR", "MINOR"))
            if v >= PYBIND11_MINIMUM:
                return str(directory)
            found.append(f"{directory} has pybind11 {v[0]}.{v[1]}")
    sys.exit("frugal: pybind11's C++ headers (>= {}.{}) were not found{}: install Debian's pybind11-dev "
             "(sudo apt-get install pybind11-dev; scripts/setup.sh does), or the pybind11 package for this Python "
             "(pip install pybind11)".format(*PYBIND11_MINIMUM, f" ({'; '.join(found)})" if found else ""))


def bdist_wheel_available():
    try:
        from setuptools.dist import Distribution
        Distribution().get_command_class("bdist_wheel")
        return True
    except Exception:  # distutils' "invalid command"
        return False


DEBIAN_WHEEL = Path("/usr/lib/python3/dist-packages")  # Debian's python3-wheel (pure Python)


def check_wheel(commands):
    """pip's --no-build-isolation builds a wheel (and its metadata) with this Python's own `wheel`
    package (setuptools before 70.1 has no bdist_wheel of its own). A Python without one (a pyenv
    or conda interpreter) borrows Debian's python3-wheel, pure Python, from the end of sys.path;
    without either the build would stop on "invalid command 'bdist_wheel'" instead of naming the
    package."""
    if not {"bdist_wheel", "dist_info"} & set(commands) or bdist_wheel_available():
        return
    if (DEBIAN_WHEEL / "wheel").is_dir() and str(DEBIAN_WHEEL) not in sys.path:
        sys.path.append(str(DEBIAN_WHEEL))
    if not bdist_wheel_available():
        import setuptools
        sys.exit(f"frugal: building a wheel with setuptools {setuptools.__version__} needs the wheel package for "
                 f"{sys.executable}: install it (pip install wheel; Debian's python3-wheel for Debian's Python)")


def eigen_include():
    return [flag[2:] for flag in pkg_config("--cflags-only-I", "eigen3") or []] or ["/usr/include/eigen3"]


def hiredis():
    """frugal.cache.RedisTier's hiredis (Debian libhiredis-dev), found with pkg-config; without it
    the module is built without RedisTier."""
    cflags, libs = pkg_config("--cflags-only-I", "hiredis"), pkg_config("--libs-only-l", "hiredis")
    if cflags is None or libs is None:
        return {}
    return {"include_dirs": [flag[2:] for flag in cflags], "libraries": [flag[2:] for flag in libs],
            "define_macros": [("FRUGAL_PYTHON_HAVE_REDIS", "1")]}


def compile_in_parallel(jobs):
    """Compiles an extension's sources `jobs` at a time (distutils compiles them one by one)."""
    import distutils.ccompiler  # setuptools' own copy, once setuptools is imported

    def compile(self, sources, output_dir=None, macros=None, include_dirs=None, debug=0, extra_preargs=None,
                extra_postargs=None, depends=None):
        macros, objects, extra_postargs, pp_opts, build = self._setup_compile(output_dir, macros, include_dirs,
                                                                              sources, depends, extra_postargs)
        cc_args = self._get_cc_args(pp_opts, debug, extra_preargs)

        def one(obj):
            src, ext = build[obj]
            self._compile(obj, src, ext, cc_args, extra_postargs, pp_opts)

        with ThreadPoolExecutor(max_workers=jobs) as pool:
            list(pool.map(one, objects))
        return objects

    distutils.ccompiler.CCompiler.compile = compile


def main():
    check_wheel(sys.argv[1:])
    sources = [line.strip() for line in (HERE / "sources.txt").read_text().splitlines()
               if line.strip() and not line.startswith("#")]
    # pybind11's recommended flags: its symbols hidden; no debug information unless CFLAGS asks for it.
    flags = ["-std=c++20", "-fvisibility=hidden"]
    if not any(f.startswith("-g") for f in shlex.split(os.environ.get("CFLAGS", "") + " " + os.environ.get("CPPFLAGS", ""))):
        flags.append("-g0")
    if os.environ.get("FRUGAL_NATIVE") == "1":
        flags.append("-march=native")
    compile_in_parallel(int(os.environ.get("FRUGAL_BUILD_JOBS") or os.cpu_count() or 1))
    redis = hiredis()
    setup(
        version=version(),
        ext_modules=[Extension(
            "frugal._frugal",
            sources,
            include_dirs=[pybind11_include(), str(INCLUDE), *eigen_include(), *redis.get("include_dirs", [])],
            libraries=redis.get("libraries", []),
            define_macros=redis.get("define_macros", []),
            extra_compile_args=flags,
            language="c++",
        )],
    )


if __name__ == "__main__":  # as pip's build backend runs it; the tests import it
    main()
