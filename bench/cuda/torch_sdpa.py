#!/usr/bin/env python3
"""PyTorch's scaled_dot_product_attention on the shapes frugal-bench-cuda measured: the peer
of `attention --backend cuda`, timed the same way (CUDA events, the L2 flushed before each
run, median of the repetitions) with contiguous K/V.

Reads the bench's JSON lines (impl "paged" or "tiled"), writes one JSON line per case with
impl "torch_sdpa" and the case's fields. Decode batches run one SDPA call per sequence at
its own length, captured once in a CUDA graph and replayed, so launch gaps are not counted.

usage: torch_sdpa.py BENCH.jsonl [--reps N] > torch.jsonl
"""
import argparse
import json
import sys

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

DTYPES = {"f32": torch.float32, "bf16": torch.bfloat16, "f16": torch.float16}


def timer(reps):
    l2 = torch.cuda.get_device_properties(0).L2_cache_size
    flush = torch.empty(max(2 * l2, 64 << 20), dtype=torch.uint8, device="cuda")

    def run(fn):
        for _ in range(3):
            fn()
        times = []
        for i in range(reps):
            flush.fill_(i & 0xFF)
            start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            stop.record()
            stop.synchronize()
            times.append(start.elapsed_time(stop))
        times.sort()
        return times[len(times) // 2], times[0]

    return run


def sdpa(q, k, v, causal):
    """SDPA with the flash backend when it takes the shapes, else PyTorch's own choice."""
    gqa = q.shape[1] != k.shape[1]
    try:
        with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
            F.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=gqa)
        backend = [SDPBackend.FLASH_ATTENTION]
        name = "flash"
    except RuntimeError:
        backend = [SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION, SDPBackend.CUDNN_ATTENTION,
                   SDPBackend.MATH]
        name = "default"

    def call():
        with sdpa_kernel(backend):
            return F.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=gqa)

    return call, name


def case(rec, run):
    dtype = DTYPES[rec["dtype"]]
    h, hkv, d = rec["heads"], rec["kv_heads"], rec["d"]
    gen = torch.Generator(device="cuda").manual_seed(0)

    def rand(*shape):
        return (torch.rand(*shape, generator=gen, device="cuda", dtype=torch.float32) * 3.4641 - 1.7321).to(dtype)

    calls, kv_bytes, flops, name = [], 0, 0.0, ""
    if rec["impl"] == "tiled":
        for n in rec["kv_lens"]:
            q, k, v = rand(1, h, n, d), rand(1, hkv, n, d), rand(1, hkv, n, d)
            call, name = sdpa(q, k, v, rec.get("causal", False))
            calls.append(call)
            pairs = n * (n + 1) / 2 if rec.get("causal", False) else n * n
            flops += 4.0 * d * h * pairs
    else:
        for n, ql in zip(rec["kv_lens"], rec["q_lens"]):
            q, k, v = rand(1, h, ql, d), rand(1, hkv, n, d), rand(1, hkv, n, d)
            # frugal's mask is bottom-right causal: one query sees every key.
            call, name = sdpa(q, k, v, False)
            calls.append(call)
            kv_bytes += 2 * n * hkv * d * q.element_size()

    def step():
        for c in calls:
            c()

    fn = step
    if rec["impl"] != "tiled":
        step()
        torch.cuda.synchronize()
        graph = torch.cuda.CUDAGraph()
        try:
            with torch.cuda.graph(graph):
                step()
            fn = graph.replay
        except RuntimeError:  # a backend that cannot be captured: eager calls
            fn = step
    med, best = run(fn)
    out = {k: rec[k] for k in ("mode", "batch", "kv_len", "dtype", "heads", "kv_heads", "d", "layout", "page_size")
           if k in rec}
    out.update({"impl": "torch_sdpa", "backend": name, "torch": torch.__version__, "ms": med, "min_ms": best,
                "peer_of": rec["impl"], "causal": rec.get("causal", False), "graph": fn is not step})
    if kv_bytes:
        out["gbytes_per_s"] = kv_bytes / (med * 1e6)
    if flops:
        out["tflops"] = flops / (med * 1e9)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("bench")
    ap.add_argument("--reps", type=int, default=30)
    args = ap.parse_args()
    if not torch.cuda.is_available():
        sys.exit("torch_sdpa.py: no GPU")
    run = timer(args.reps)
    with open(args.bench) as f:
        records = [json.loads(line) for line in f if line.strip()]
    for rec in records:
        # Mixed batches' prefill chunks need a bottom-right causal mask SDPA's is_causal lacks.
        if rec.get("impl") in ("paged", "tiled") and rec.get("mode") != "mixed":
            print(json.dumps(case(rec, run)), flush=True)


if __name__ == "__main__":
    main()
