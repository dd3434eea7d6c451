"""From a clean copy of the sources, the documented install (a venv with --system-site-packages,
then pip install --no-build-isolation ./python, offline) builds and imports frugal, runs the
examples and passes this suite. It compiles the module (minutes), so it runs when
FRUGAL_TEST_VENV=1 (scripts/test.sh sets it)."""
import os
import shutil
import subprocess
import sys

import pytest

from conftest import ROOT, data_dir

pytestmark = pytest.mark.skipif(os.environ.get("FRUGAL_TEST_VENV") != "1",
                                reason="compiles the package: set FRUGAL_TEST_VENV=1 (scripts/test.sh does)")


def test_documented_install_in_a_fresh_venv(tmp_path):
    src = tmp_path / "clone"
    ignore = shutil.ignore_patterns("build", "*.egg-info", "__pycache__", "*.so")
    for part in ("python", "include", "examples"):
        shutil.copytree(ROOT / part, src / part, ignore=ignore)
    shutil.copy(ROOT / "LICENSE", src / "LICENSE")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "FRUGAL_TEST_VENV", "FRUGAL_BENCH")}
    env.update(PIP_NO_INDEX="1", PIP_DISABLE_PIP_VERSION_CHECK="1")  # offline: nothing may be downloaded

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
