"""Types shared by the stubs, real at run time too: the array aliases the signatures use, the
protocols of the Python objects frugal drives (attached to their modules: prune.ProgressiveModel,
rag.Generator, rag.Retriever, ...), and pybind11's base class and metaclass of every bound class."""
import os
import typing
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Union

import numpy as np
import numpy.typing as npt

from ._frugal import BFloat16, Float8E4M3, Float8E5M2

if TYPE_CHECKING:
    from . import cache as _cache
    from . import rag as _rag

    class pybind11_type(type):
        """The metaclass of every class frugal binds."""

    class pybind11_object(metaclass=pybind11_type):
        """The base of every class frugal binds; a class without a constructor raises TypeError."""
        def __init__(self, *args: Any, **kwargs: Any) -> None: ...
else:
    from . import _frugal

    pybind11_object = _frugal.cache.CacheStats.__mro__[-2]
    pybind11_type = type(pybind11_object)

# A numpy array of exactly this dtype is used in place (C-contiguous); a list or tuple is converted.
Int32Array = Union[npt.NDArray[np.int32], typing.Sequence[int]]
Int64Array = Union[npt.NDArray[np.int64], typing.Sequence[int]]
# Index arrays of a batch (indptr, page indices, lengths): int32, FlashInfer's; int64 is converted.
IndexArray = Union[npt.NDArray[np.int32], npt.NDArray[np.int64], typing.Sequence[int]]
UInt32Array = Union[npt.NDArray[np.uint32], typing.Sequence[int]]
UInt64Array = Union[npt.NDArray[np.uint64], typing.Sequence[int]]
Float32Array = Union[npt.NDArray[np.float32], typing.Sequence[float]]
Float64Array = Union[npt.NDArray[np.float64], typing.Sequence[float]]
Scores = Union[npt.NDArray[np.float32], npt.NDArray[np.float64], typing.Sequence[float]]
Path = Union[str, "os.PathLike[str]"]
# A dtype where one is taken: a numpy dtype (numpy.float32, numpy.float16, numpy.int8, or anything
# numpy.dtype reads as them), or frugal.bfloat16, frugal.float8_e4m3, frugal.float8_e5m2.
DTypeLike = Union[npt.DTypeLike, BFloat16, Float8E4M3, Float8E5M2]
# The dequantization scales of an 8-bit K/V cache: float32 arrays (1 value per tensor, kv_heads
# per head, or per-token pools shaped as the pages without head_dim), or one number per tensor.
Scales = Union[npt.NDArray[np.float32], float, typing.Sequence[float]]

# frugal.cache: keys of the key/value caches and the eviction callbacks.
Key = Union[int, bytes]
EvictionCallback = Callable[[Key, Any, "_cache.EvictionReason"], object]
ChunkCallback = Callable[[int, int, int, "_cache.EvictionReason"], object]
# frugal.rag: a conditional edge's router and a user node's action.
Router = Callable[["_rag.State"], int]
UserAction = Callable[["_rag.State"], None]


class ProgressiveModel(typing.Protocol):
    """What prune.progressive_rank drives: `layers`, embed, forward, score (begin_layer(layer) and
    end_layer(layer) optional). ids are int64 arrays the model may keep."""
    @property
    def layers(self) -> int: ...
    def embed(self, ids: npt.NDArray[np.int64]) -> object: ...
    def forward(self, layer: int, ids: npt.NDArray[np.int64]) -> object: ...
    def score(self, ids: npt.NDArray[np.int64]) -> Float32Array: ...


class Generator(typing.Protocol):
    """What rag.Runtime drives as the LLM engine (optional: stopped(request) -> bool, preview(state, node))."""
    def step(self, batch: List["_rag.GenerationSlot"]) -> float: ...
    def step_time(self, count: int, context: int) -> float: ...
    def length(self, state: "_rag.State", node: "_rag.Node") -> int: ...
    def commit(self, state: "_rag.State", node: "_rag.Node") -> None: ...
    def discard(self, request: int) -> None: ...


class Retriever(typing.Protocol):
    """What rag.Runtime drives as the vector index (optional: list_of(id) -> cluster)."""
    def query_of(self, state: "_rag.State", node: "_rag.Node") -> Any: ...
    def probe(self, query: Any) -> typing.Sequence[int]: ...
    def cluster_time(self, cluster: int) -> float: ...
    def search(self, batch: List["_rag.RetrievalSlot"]) -> float: ...


def attach_protocols() -> None:
    """Makes the protocols and aliases reachable where the stubs name them (prune.ProgressiveModel,
    rag.Generator, cache.Key, ...)."""
    from . import _frugal
    names: Dict[Any, Dict[str, Any]] = {
        _frugal.prune: {"ProgressiveModel": ProgressiveModel},
        _frugal.rag: {"Generator": Generator, "Retriever": Retriever, "Router": Router, "UserAction": UserAction},
        _frugal.cache: {"Key": Key, "EvictionCallback": EvictionCallback, "ChunkCallback": ChunkCallback},
    }
    for module, values in names.items():
        for name, value in values.items():
            if isinstance(value, type):
                value.__module__ = module.__name__
            setattr(module, name, value)
