"""The extension module: frugal's exceptions, the dtypes numpy lacks (bfloat16, FP8) and one submodule per C++
module."""
from typing import Any

import numpy as np

from . import attention as attention
from . import cache as cache
from . import draft as draft
from . import prune as prune
from . import rag as rag
from . import schedule as schedule
from . import sim as sim
from ._types import pybind11_object

__version__: str

class Error(Exception):
    """Base of every error frugal raises; catch it to catch them all."""

class InvalidArgumentError(Error, ValueError):
    """Bad input: NaN scores, k > n, empty pools, zero budgets, shape mismatches."""

class OutOfRangeError(Error, IndexError):
    """An index or id outside the valid range."""

class RuntimeFailureError(Error, RuntimeError):
    """A failure outside the caller's arguments: I/O, corrupt files, concurrent use."""

class BFloat16(pybind11_object):
    """The type of frugal.bfloat16, the bfloat16 dtype (numpy has none: its arrays are uint16 bits)."""
    @property
    def name(self) -> str: ...
    @property
    def itemsize(self) -> int: ...
    @property
    def dtype(self) -> np.dtype[np.uint16]: ...
    def __eq__(self, other: object) -> bool: ...
    def __hash__(self) -> int: ...

bfloat16: BFloat16

class Float8E4M3(pybind11_object):
    """The type of frugal.float8_e4m3, FP8 E4M3 of 8-bit K/V caches (numpy has none: its arrays are uint8 bits)."""
    @property
    def name(self) -> str: ...
    @property
    def itemsize(self) -> int: ...
    @property
    def dtype(self) -> np.dtype[np.uint8]: ...
    def __eq__(self, other: object) -> bool: ...
    def __hash__(self) -> int: ...

float8_e4m3: Float8E4M3

class Float8E5M2(pybind11_object):
    """The type of frugal.float8_e5m2, FP8 E5M2 of 8-bit K/V caches (numpy has none: its arrays are uint8 bits)."""
    @property
    def name(self) -> str: ...
    @property
    def itemsize(self) -> int: ...
    @property
    def dtype(self) -> np.dtype[np.uint8]: ...
    def __eq__(self, other: object) -> bool: ...
    def __hash__(self) -> int: ...

float8_e5m2: Float8E5M2
