"""The .pyi stubs describe the module as it is: mypy's stubtest (Debian's mypy) imports frugal
and checks every name, class, signature, property and enum value of the stubs against the
runtime objects, both ways (a name the module has and the stub lacks fails too)."""
import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

import frugal


def test_stubtest_finds_no_difference(tmp_path):
    if importlib.util.find_spec("mypy") is None:
        pytest.fail("mypy is not installed for this interpreter: install Debian's mypy (bash scripts/setup.sh)")
    package_root = str(Path(frugal.__file__).resolve().parent.parent)  # the frugal this suite imports
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([package_root, *sys.path])}
    r = subprocess.run([sys.executable, "-m", "mypy.stubtest", "frugal"], cwd=tmp_path, env=env, capture_output=True,
                       text=True, timeout=600)
    assert r.returncode == 0, f"stubtest found differences between the stubs and the module:\n{r.stdout}\n{r.stderr}"


def test_package_exports():
    assert {"Error", "InvalidArgumentError", "OutOfRangeError", "RuntimeFailureError", "bfloat16", "float8_e4m3",
            "float8_e5m2", "__version__"} <= set(frugal.__all__)
    assert frugal.draft.Drafter.__module__ == "frugal.draft"
    assert frugal.prune.ProgressiveModel.__module__ == "frugal.prune"  # the protocols live where the stubs say
