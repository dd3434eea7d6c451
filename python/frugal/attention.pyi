"""Tiled attention under a workspace budget and batched attention over paged K/V (frugal::attention)."""
import enum
from typing import Any, List, Literal, Optional

import numpy as np
import numpy.typing as npt

class CausalAlignment(enum.Enum):
    top_left = 0
    bottom_right = 1
    offset = 2

class SoftmaxBase(enum.Enum):
    e = 0
    two = 1

class Layout(enum.Enum):
    head_major = 0
    token_major = 1

class Mask:
    @staticmethod
    def none() -> "Mask": ...
    @staticmethod
    def causal(alignment: CausalAlignment = ..., offset: int = 0) -> "Mask": ...
    @staticmethod
    def sliding_window(window: int, alignment: CausalAlignment = ..., offset: int = 0) -> "Mask": ...
    def visible(self, i: int, j: int, q_len: int, kv_len: int) -> bool: ...
    @property
    def is_causal(self) -> bool: ...
    @property
    def alignment(self) -> CausalAlignment: ...
    @property
    def offset(self) -> int: ...
    @property
    def window(self) -> int: ...

class Plan:
    @property
    def q_heads(self) -> int: ...
    @property
    def kv_heads(self) -> int: ...
    @property
    def q_len(self) -> int: ...
    @property
    def kv_len(self) -> int: ...
    @property
    def head_dim(self) -> int: ...
    @property
    def q_tile(self) -> int: ...
    @property
    def kv_tile(self) -> int: ...
    @property
    def workers(self) -> int: ...
    @property
    def workspace_bytes(self) -> int: ...

def plan(*, q_heads: int, kv_heads: int, q_len: int, kv_len: int, head_dim: int, mask: Mask = ...,
         scale: float = 0.0, lse_base: SoftmaxBase = ..., threads: int = 1, q_tile: int = 256, kv_tile: int = 256,
         budget_bytes: int = 16777216) -> Plan: ...

def run(plan: Plan, q: npt.NDArray[np.float32], k: npt.NDArray[np.float32], v: npt.NDArray[np.float32], *,
        out: Optional[npt.NDArray[np.float32]] = None, lse: Optional[npt.NDArray[np.float32]] = None,
        layout: Layout = ...) -> npt.NDArray[np.float32]: ...

class KVLayout(enum.Enum):
    nhd = 0
    hnd = 1

def batch_run(q: npt.NDArray[Any], k_pages: npt.NDArray[Any], v_pages: npt.NDArray[Any],
              kv_indptr: npt.NDArray[np.int32], kv_indices: npt.NDArray[np.int32],
              kv_last_page_len: npt.NDArray[np.int32], qo_indptr: npt.NDArray[np.int64], *,
              out: Optional[npt.NDArray[Any]] = None, kv_layout: KVLayout = ..., mask: Mask = ...,
              scale: float = 0.0, threads: int = 1) -> npt.NDArray[Any]: ...

class BatchPlan:
    def __init__(self, kv_indptr: npt.NDArray[np.int32], kv_indices: npt.NDArray[np.int32],
                 kv_last_page_len: npt.NDArray[np.int32], qo_indptr: npt.NDArray[np.int64], *, page_size: int,
                 q_heads: int, kv_heads: int, head_dim: int,
                 dtype: Literal["float32", "float16", "bfloat16"] = "float32", mask: Mask = ..., scale: float = 0.0,
                 threads: int = 1) -> None: ...
    def run(self, q: npt.NDArray[Any], k_pages: npt.NDArray[Any], v_pages: npt.NDArray[Any], *,
            out: Optional[npt.NDArray[Any]] = None, lse: Optional[npt.NDArray[np.float32]] = None,
            kv_layout: KVLayout = ...) -> npt.NDArray[Any]: ...
    @property
    def batch(self) -> int: ...
    @property
    def tokens(self) -> int: ...
    @property
    def kv_lens(self) -> List[int]: ...
    @property
    def page_size(self) -> int: ...
    @property
    def dtype(self) -> str: ...
    @property
    def workers(self) -> int: ...
    @property
    def kv_chunk(self) -> int: ...
    @property
    def workspace_bytes(self) -> int: ...
