"""frugal: algorithms that make LLM inference cheaper, from Python.

The C++20 library's modules, one Python module each (numpy arrays in and out):

- frugal.draft      suffix-automaton drafting, history, chain/tree drafts, verification
- frugal.cache      LRU / LFU / LFUDA / GDSF / W-TinyLFU caches, the prefix tree, the semantic cache
- frugal.prune      dispersion, exact 1-D k-means, the cluster pruner, calibration, progressive ranking
- frugal.attention  tiled attention (plan / run) over float32 arrays
- frugal.schedule   the timeline simulator, graph-switch and placement planners
- frugal.rag        RAG workflow graphs and the HedraRAG runtime over a Python generator and retriever
- frugal.sim        paper baselines: Prompt Lookup Decoding, the paper's greedy graph switch

Errors are frugal.Error subclasses that are also the matching built-in exception
(InvalidArgumentError is a ValueError, OutOfRangeError an IndexError, RuntimeFailureError a
RuntimeError) and carry the C++ message. See docs/python.md.
"""
from ._frugal import (Error, InvalidArgumentError, OutOfRangeError, RuntimeFailureError, __version__, attention, cache,
                      draft, prune, rag, schedule, sim)

__all__ = ["Error", "InvalidArgumentError", "OutOfRangeError", "RuntimeFailureError", "attention", "cache", "draft",
           "prune", "rag", "schedule", "sim", "__version__"]
