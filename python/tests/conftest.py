"""Shared fixtures of frugal's pytest suite: the repository paths and the evaluation data."""
import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


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
