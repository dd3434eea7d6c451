"""The extension module: frugal's exceptions and one submodule per C++ module."""
from . import attention as attention
from . import cache as cache
from . import draft as draft
from . import prune as prune
from . import rag as rag
from . import schedule as schedule
from . import sim as sim

__version__: str

class Error(Exception):
    """Base of every error frugal raises; catch it to catch them all."""

class InvalidArgumentError(Error, ValueError):
    """Bad input: NaN scores, k > n, empty pools, zero budgets, shape mismatches."""

class OutOfRangeError(Error, IndexError):
    """An index or id outside the valid range."""

class RuntimeFailureError(Error, RuntimeError):
    """A failure outside the caller's arguments: I/O, corrupt files, concurrent use."""
