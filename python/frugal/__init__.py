"""frugal: algorithms that make LLM inference cheaper, from Python.

The C++20 library's modules, one Python module each (numpy arrays in and out, the GIL released
around the work):

- frugal.draft      speculative drafting: suffix automaton, live history, chain and tree drafts,
                    the batch Speculator sized by a verification cost, verification
- frugal.cache      ten key/value caches behind one Cache interface (LRU, LFU, LFUDA, GDSF,
                    W-TinyLFU, S3-FIFO, SIEVE, ARC, LIRS, 2Q), the prefix tree of KV chunks (one
                    PrefixTree, its policy an argument), the semantic cache, and the tiers shared
                    between processes (DiskTier, RedisTier, TieredPrefixTree)
- frugal.prune      dispersion, exact 1-D k-means, the cluster pruner, calibration, progressive ranking
- frugal.attention  tiled attention (plan / run) in float32, and batched attention over a paged
                    K/V cache (BatchPlan, batch_run) in float32, float16 or bfloat16, its pages
                    also in FP8 (E4M3, E5M2) or int8 with their scales (quantize_into writes them)
- frugal.schedule   the timeline simulator, graph-switch and placement planners
- frugal.rag        RAG workflow graphs and the HedraRAG runtime over a Python generator and retriever
- frugal.sim        paper baselines: Prompt Lookup Decoding, the paper's greedy graph switch

Dtypes are numpy's (numpy.float32, numpy.float16, numpy.int8) and frugal.bfloat16,
frugal.float8_e4m3 and frugal.float8_e5m2, which numpy lacks (their arrays hold the bits as
uint16 and uint8). Results are small classes with named fields.

Errors are frugal.Error subclasses that are also the matching built-in exception
(InvalidArgumentError is a ValueError, OutOfRangeError an IndexError, RuntimeFailureError a
RuntimeError) and carry the C++ message. See docs/python.md.
"""
from ._frugal import (BFloat16, Error, Float8E4M3, Float8E5M2, InvalidArgumentError, OutOfRangeError,
                      RuntimeFailureError, __version__, attention, bfloat16, cache, draft, float8_e4m3, float8_e5m2,
                      prune, rag, schedule, sim)
from . import _deprecated  # noqa: F401  (the previous release's names, for one more release)
from . import _types

_types.attach_protocols()

__all__ = ["BFloat16", "Error", "Float8E4M3", "Float8E5M2", "InvalidArgumentError", "OutOfRangeError",
           "RuntimeFailureError", "attention", "bfloat16", "cache", "draft", "float8_e4m3", "float8_e5m2", "prune", "rag",
           "schedule", "sim", "__version__"]
