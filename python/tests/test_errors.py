"""frugal's C++ errors arrive as frugal.Error subclasses that are also the built-in exception
that fits, with the C++ message; bad arrays raise TypeError / ValueError naming the argument."""
import numpy as np
import pytest

import frugal
from frugal import draft, prune


def test_hierarchy():
    assert issubclass(frugal.InvalidArgumentError, frugal.Error) and issubclass(frugal.InvalidArgumentError, ValueError)
    assert issubclass(frugal.OutOfRangeError, frugal.Error) and issubclass(frugal.OutOfRangeError, IndexError)
    assert issubclass(frugal.RuntimeFailureError, frugal.Error) and issubclass(frugal.RuntimeFailureError, RuntimeError)


def test_invalid_argument_carries_the_cpp_message():
    with pytest.raises(frugal.InvalidArgumentError, match=r"k = 5 is outside 1\.\.3 \(the pool size\)"):
        prune.kmeans1d_optimal(np.array([1.0, 2.0, 3.0]), 5)
    with pytest.raises(ValueError):  # the built-in base catches it too
        prune.kmeans1d_optimal(np.array([1.0, 2.0, 3.0]), 0)


def test_out_of_range():
    d = draft.Drafter(vocab_size=100)
    with pytest.raises(frugal.OutOfRangeError, match="drafter: token 100 outside the vocabulary of 100"):
        d.begin(np.array([1, 100], np.int32))
    with pytest.raises(IndexError, match="negative token -3"):
        d.accept(-3)


def test_runtime_failure(tmp_path):
    bad = tmp_path / "history.bin"
    bad.write_bytes(b"not a history file at all, long enough for a header" * 4)
    with pytest.raises(frugal.RuntimeFailureError, match="is not a frugal history"):
        draft.History.load(bad)
    with pytest.raises(RuntimeError, match="cannot open"):
        draft.History.load(tmp_path / "missing.bin")


def test_array_checks_name_the_argument():
    with pytest.raises(TypeError, match="draft must be a numpy array of int32, got float64"):
        draft.verify_chain(np.array([1.0, 2.0]), np.array([1, 2, 3], np.int32))
    with pytest.raises(TypeError, match="predictions must be a numpy array of int32, got int64"):
        draft.verify_chain(np.array([1], np.int32), np.array([1, 2], np.int64))
    with pytest.raises(ValueError, match="draft must be C-contiguous"):
        draft.verify_chain(np.arange(10, dtype=np.int32)[::2], np.zeros(6, np.int32))
    with pytest.raises(ValueError, match="must have 1 dimension"):
        draft.verify_chain(np.zeros((2, 2), np.int32), np.zeros(5, np.int32))
    with pytest.raises(TypeError, match="must hold integers"):
        draft.verify_chain([1.5, 2.0], [1, 2, 3])
    with pytest.raises(ValueError, match="outside the range of int32"):
        draft.verify_chain([2**40], [1, 2])


def test_lists_are_accepted_and_match_arrays():
    r = draft.verify_chain([5, 6, 7], [5, 6, 9, 1])
    assert (r.accepted, r.bonus) == (2, 9)
