"""Shared fixtures of frugal's pytest suite: the repository paths, the evaluation data and a
fresh interpreter for code that may crash."""
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def pytest_configure(config):
    # The suite uses the current API: a deprecated name it reaches by accident fails the test; the
    # tests of the deprecated names expect their warning (pytest.deprecated_call).
    config.addinivalue_line("filterwarnings", "error::DeprecationWarning")


def data_dir():
    """../shared/data beside the repository (FRUGAL_DATA_DIR overrides), or None: a user's clone has none."""
    d = Path(os.environ.get("FRUGAL_DATA_DIR", ROOT.parent / "shared" / "data"))
    return d if d.is_dir() else None


@pytest.fixture
def rng():
    import numpy as np
    return np.random.default_rng(20261124)


@pytest.fixture
def specbench():
    d = data_dir()
    path = d / "drafting" / "specbench_vicuna7b.tok" if d else None
    if path is None or not path.exists():
        pytest.skip("the drafting data (../shared/data/drafting/specbench_vicuna7b.tok) is not present")
    return path


@pytest.fixture
def run_alone():
    """Runs Python source in a fresh interpreter that imports the same frugal and returns its
    output: a crash or a hang there fails the test that asked, not the whole suite."""
    def run(code, timeout=300):
        r = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                           timeout=timeout, env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
        assert r.returncode == 0, f"exit status {r.returncode}\n{r.stdout}\n{r.stderr}"
        return r.stdout
    return run
