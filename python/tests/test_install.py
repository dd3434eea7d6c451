"""From a clean copy of the sources, the documented install (a venv with --system-site-packages,
then pip install --no-build-isolation ./python, offline) builds and imports frugal, runs the
examples and passes this suite; and the same install works with a Python that cannot import the
pybind11 module (a pyenv or conda interpreter: setup.py takes the headers of Debian's
pybind11-dev), or stops naming what to install. The installs compile the module (minutes), so
they run when FRUGAL_TEST_VENV=1 (scripts/test.sh sets it); the checks of setup.py's messages
always run."""
import importlib.util
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import ROOT, data_dir

compiles = pytest.mark.skipif(os.environ.get("FRUGAL_TEST_VENV") != "1",
                              reason="compiles the package: set FRUGAL_TEST_VENV=1 (scripts/test.sh does)")


def clean_copy(tmp_path):
    src = tmp_path / "clone"
    ignore = shutil.ignore_patterns("build", "*.egg-info", "__pycache__", "*.so")
    for part in ("python", "include", "examples"):
        shutil.copytree(ROOT / part, src / part, ignore=ignore)
    shutil.copy(ROOT / "LICENSE", src / "LICENSE")
    return src


def offline_env():
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "FRUGAL_TEST_VENV", "FRUGAL_BENCH")}
    env.update(PIP_NO_INDEX="1", PIP_DISABLE_PIP_VERSION_CHECK="1")  # offline: nothing may be downloaded
    return env


@compiles
def test_documented_install_in_a_fresh_venv(tmp_path):
    src, env = clean_copy(tmp_path), offline_env()

    def run(*cmd, cwd=src):
        subprocess.run(cmd, cwd=cwd, env=env, check=True)

    run(sys.executable, "-m", "venv", "--system-site-packages", str(tmp_path / "venv"))
    python = str(tmp_path / "venv" / "bin" / "python")
    run(python, "-m", "pip", "install", "--no-build-isolation", "./python")
    run(python, "-c", "import frugal, frugal.draft; print('frugal', frugal.__version__)", cwd=tmp_path)
    run(python, str(src / "examples/python/rerank_pruning_study.py"), "--queries", "4", "--calibration-queries", "20",
        cwd=tmp_path)
    data = data_dir()
    tok = data / "drafting" / "specbench_vicuna7b.tok" if data else None
    if tok is not None and tok.exists():
        run(python, str(src / "examples/python/spec_decode_study.py"), str(tok), "--drafter", "pld", cwd=tmp_path)
    run(python, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(src / "python" / "tests"), cwd=tmp_path)


def venv_without_pybind11(tmp_path, *packages):
    """A venv of this Python that sees none of its site-packages but `packages` (as a pyenv or
    conda interpreter that has numpy would: no pybind11 module)."""
    subprocess.run([sys.executable, "-m", "venv", str(tmp_path / "bare")], check=True, env=offline_env())
    python = tmp_path / "bare" / "bin" / "python"
    lent = tmp_path / "lent"
    lent.mkdir()
    for name in packages:  # the package and its metadata (setuptools finds bdist_wheel by wheel's entry points)
        spec = importlib.util.find_spec(name)
        assert spec is not None and spec.origin, f"{name} is needed by this test"
        package = Path(spec.origin).parent
        for path in [package, *package.parent.glob(f"{name}-*.*-info")]:
            (lent / path.name).symlink_to(path)
    site = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          capture_output=True, text=True, check=True).stdout.strip()
    Path(site, "lent.pth").write_text(str(lent) + "\n")
    r = subprocess.run([str(python), "-c", "import pybind11"], capture_output=True, text=True)
    assert r.returncode != 0, "the venv must not import pybind11"
    return str(python)


@compiles
def test_install_with_a_python_that_lacks_the_pybind11_module(tmp_path):
    src, env = clean_copy(tmp_path), offline_env()
    python = venv_without_pybind11(tmp_path, "numpy", "wheel")
    subprocess.run([python, "-m", "pip", "install", "--no-build-isolation", "./python"], cwd=src, env=env, check=True)
    smoke = ("import numpy as np, frugal\n"
             "from frugal import attention as att, cache\n"
             "plan = att.BatchPlan([0, 1], [0], [3], [0, 1], page_size=4, q_heads=2, kv_heads=1, head_dim=8,\n"
             "                     dtype=frugal.bfloat16)\n"
             "out = plan.run(np.zeros((1, 2, 8), frugal.bfloat16), *[np.zeros((1, 4, 1, 8), np.uint16)] * 2)\n"
             "assert out.dtype == np.uint16 and plan.dtype is frugal.bfloat16\n"
             "assert cache.PrefixTree(100).insert([1], [1], [8]).cached == 1\n"
             "print('frugal', frugal.__version__)\n")
    subprocess.run([python, "-c", smoke], cwd=tmp_path, env=env, check=True)


def load_setup_py():
    spec = importlib.util.spec_from_file_location("frugal_setup", ROOT / "python" / "setup.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # not __main__: defines its functions, builds nothing
    return module


def test_setup_takes_debian_headers_without_the_module_and_names_what_is_missing(tmp_path, monkeypatch):
    setup = load_setup_py()
    real = importlib.util.find_spec
    no_module = lambda name, *args: None if name == "pybind11" else real(name, *args)
    monkeypatch.setattr(setup.importlib.util, "find_spec", no_module)
    # Debian's pybind11-dev headers, found without the module.
    if (setup.SYSTEM_INCLUDE / "pybind11" / "pybind11.h").exists():
        monkeypatch.setattr(setup, "pkg_config", lambda *args: None)
        assert setup.pybind11_include() == str(setup.SYSTEM_INCLUDE)
    # Neither the module nor the headers: the build stops naming the packages.
    monkeypatch.setattr(setup, "pkg_config", lambda *args: None)
    monkeypatch.setattr(setup, "SYSTEM_INCLUDE", tmp_path)
    with pytest.raises(SystemExit, match=r"pybind11's C\+\+ headers \(>= 2.10\) were not found: install Debian's "
                                         r"pybind11-dev .* or the pybind11 package for this Python"):
        setup.pybind11_include()
    old = tmp_path / "pybind11" / "detail"
    old.mkdir(parents=True)
    (old / "common.h").write_text("#define PYBIND11_VERSION_MAJOR 2\n#define PYBIND11_VERSION_MINOR 6\n")
    with pytest.raises(SystemExit, match=r"has pybind11 2.6\): install Debian's pybind11-dev"):
        setup.pybind11_include()
    # A wheel build where setuptools has no bdist_wheel (before 70.1, without the wheel package) names it.
    monkeypatch.setattr(setup, "bdist_wheel_available", lambda: False)
    with pytest.raises(SystemExit, match=r"needs the wheel package .*\(pip install wheel"):
        setup.check_wheel(["dist_info"])
    setup.check_wheel(["build_ext"])  # compiling alone needs no wheel
