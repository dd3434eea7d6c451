"""Type aliases shared by the stubs."""
import os
from typing import Sequence, Union

import numpy as np
import numpy.typing as npt

# A numpy array of exactly this dtype is used in place (C-contiguous); a list or tuple is converted.
Int32Array = Union[npt.NDArray[np.int32], Sequence[int]]
Int64Array = Union[npt.NDArray[np.int64], Sequence[int]]
UInt32Array = Union[npt.NDArray[np.uint32], Sequence[int]]
UInt64Array = Union[npt.NDArray[np.uint64], Sequence[int]]
Float32Array = Union[npt.NDArray[np.float32], Sequence[float]]
Float64Array = Union[npt.NDArray[np.float64], Sequence[float]]
Scores = Union[npt.NDArray[np.float32], npt.NDArray[np.float64], Sequence[float]]
Path = Union[str, os.PathLike[str]]
