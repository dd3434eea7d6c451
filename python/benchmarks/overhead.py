#!/usr/bin/env python3
"""Per-call overhead of frugal's Python bindings, against the C++ call in the same run.

Each case times a loop of binding calls from Python and the same calls made by a C++ loop
(frugal._overhead, compiled into the module for this purpose) over the same inputs, and
prints both per call and their ratio. Nothing is asserted: the figures are for docs/python.md.
Targets (issue 22): a cache get/put pair <= 1 us from Python; a batch draft for 64 requests
<= 1.5x the C++ time.

    python3 python/benchmarks/overhead.py [--repeats 20] [--json]

A case is one function decorated with @case: it returns (python_seconds, cpp_seconds, calls),
timed over the same work; the harness repeats it and keeps the fastest run of each side.
"""
import argparse
import json
import time

import numpy as np

import frugal
from frugal import _overhead, cache, draft

CASES = []


def case(name, unit, target):
    """Registers a case; `target` describes the goal printed beside the result."""
    def register(fn):
        CASES.append((name, unit, target, fn))
        return fn
    return register


def zipf_keys(n, universe, seed=1):
    rng = np.random.default_rng(seed)
    return (rng.zipf(1.2, n) % universe).astype(np.int64)


@case("cache get + put (LRUCache, int keys)", "pair", "<= 1 us per pair")
def cache_get_put():
    keys = zipf_keys(50_000, 10_000)
    cpp = _overhead.cache_get_put(keys, 1000)
    c = cache.LRUCache(1000)
    get, put = c.get, c.put
    key_list = keys.tolist()
    start = time.perf_counter()
    for k in key_list:
        get(k)
        put(k, k)
    return time.perf_counter() - start, cpp, len(key_list)


def draft_prompts(n=64, length=2000, seed=2):
    """Prompts that repeat themselves as long conversations do: spans copied from earlier text."""
    rng = np.random.default_rng(seed)
    prompts = []
    for _ in range(n):
        text = list(rng.integers(0, 32000, 64))
        while len(text) < length:
            if rng.random() < 0.6:
                start = int(rng.integers(0, len(text) - 8))
                text.extend(text[start:start + int(rng.integers(4, 24))])
            else:
                text.append(int(rng.integers(0, 32000)))
        prompts.append(np.array(text[:length], np.int32))
    return prompts


@case("chain drafts, 64 requests (one Drafter.chain() each)", "request", "(per-request calls)")
def drafter_chain_64():
    prompts = draft_prompts()
    rounds = 20
    cpp, cpp_drafted = _overhead.drafter_chain(prompts, rounds)
    drafters = [draft.Drafter() for _ in prompts]
    for d, p in zip(drafters, prompts):
        d.begin(p)
    drafted = 0
    start = time.perf_counter()
    for _ in range(rounds):
        for d in drafters:
            drafted += len(d.chain())
    seconds = time.perf_counter() - start
    assert drafted == cpp_drafted, "the Python and C++ loops must draft the same tokens"
    return seconds, cpp, rounds * len(prompts)


def time_batches(nodes_of_batch, rounds=20):
    """(python seconds, C++ seconds, batches) for `rounds` batch drafts of 64 requests; the
    Python side counts the nodes of each batch with nodes_of_batch(spec, ids)."""
    prompts = draft_prompts()
    cpp, cpp_drafted = _overhead.speculator_propose(prompts, rounds)
    spec = draft.Speculator()
    ids = np.arange(len(prompts), dtype=np.uint64)
    for i, p in zip(ids.tolist(), prompts):
        spec.start(i, p)
    drafted = 0
    start = time.perf_counter()
    for _ in range(rounds):
        drafted += nodes_of_batch(spec, ids)
    seconds = time.perf_counter() - start
    assert drafted == cpp_drafted, "the Python and C++ batches must draft the same nodes"
    return seconds, cpp, rounds


@case("batch tree draft, 64 requests (one Speculator.propose())", "batch", "<= 1.5x C++")
def speculator_propose_64():
    return time_batches(lambda spec, ids: sum(len(d.tokens) for d in spec.propose(ids)))


@case("batch tree draft, 64 requests, propose(packed=True)", "batch", "<= 1.5x C++")
def speculator_propose_packed_64():
    return time_batches(lambda spec, ids: len(spec.propose(ids, packed=True).tokens))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeats", type=int, default=20, help="runs of each case; the fastest of each side is kept")
    ap.add_argument("--json", action="store_true", help="one JSON object per case")
    args = ap.parse_args(argv)
    if not args.json:
        print(f"frugal {frugal.__version__}: Python bindings vs the C++ call, fastest of {args.repeats} runs")
        print(f"{'case':<56} {'python us':>10} {'C++ us':>8} {'ratio':>7}  target")
    for name, unit, target, fn in CASES:
        py_best = cpp_best = float("inf")
        for _ in range(args.repeats):
            py_s, cpp_s, calls = fn()
            py_best, cpp_best = min(py_best, py_s / calls), min(cpp_best, cpp_s / calls)
        row = {"case": name, "unit": unit, "python_us": py_best * 1e6, "cpp_us": cpp_best * 1e6,
               "ratio": py_best / cpp_best, "overhead_us": (py_best - cpp_best) * 1e6, "target": target}
        if args.json:
            print(json.dumps(row))
        else:
            print(f"{name:<56} {row['python_us']:>10.3f} {row['cpp_us']:>8.3f} {row['ratio']:>7.2f}  {target} "
                  f"(per {unit})")


if __name__ == "__main__":
    main()
