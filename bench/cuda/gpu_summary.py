#!/usr/bin/env python3
"""The summary table of scripts/gpu-check.sh: each CUDA bench case beside its roofline (device
copy or cuBLAS GEMM, same run), its target where docs/attention.md sets one, and PyTorch's
SDPA on the same shapes (ratio_to_torch = SDPA's time over frugal's).

usage: gpu_summary.py BENCH.jsonl [TORCH.jsonl] [TESTS_LOG]
"""
import json
import sys

TARGETS = [  # (fields that pick the case, figure, minimum)
    ({"impl": "paged", "mode": "decode", "batch": 8, "kv_len": 4096, "dtype": "bf16", "layout": "hnd"},
     "bandwidth_ratio", 0.70),
    ({"impl": "paged", "mode": "decode", "batch": 1, "kv_len": 32768, "dtype": "bf16"}, "bandwidth_ratio", 0.70),
    ({"impl": "tiled", "mode": "prefill", "kv_len": 4096, "dtype": "bf16", "causal": True}, "ratio_to_gemm", 0.25),
]
KEYS = ("mode", "batch", "kv_len", "dtype", "heads", "kv_heads", "d", "layout", "page_size", "causal")


def load(path):
    try:
        with open(path) as f:
            return [json.loads(line) for line in f if line.strip().startswith("{")]
    except FileNotFoundError:
        return []


def main():
    bench = load(sys.argv[1])
    torch = load(sys.argv[2]) if len(sys.argv) > 2 else []
    tests = open(sys.argv[3]).read() if len(sys.argv) > 3 else ""
    if bench:
        print(f"device: {bench[0]['device']}")
    for line in tests.splitlines():
        if "tests ran" in line or "PASSED" in line or "FAILED" in line:
            print("tests: " + line.strip())
    head = ["case", "frugal ms", "figure", "value", "target", "met", "max_abs_err", "torch ms", "ratio_to_torch",
            "torch backend"]
    rows = [head]
    failed = 0
    for rec in bench:
        if rec["impl"] not in ("paged", "tiled"):
            continue
        name = " ".join([f"{rec['mode']} {rec['batch']}x{rec['kv_len']}", f"{rec['heads']}/{rec['kv_heads']}h",
                         f"d{rec['d']}", rec["dtype"]] + ([rec["layout"]] if rec["impl"] == "paged" else []) +
                        (["causal"] if rec.get("causal") else []))
        figure = "bandwidth_ratio" if rec["impl"] == "paged" else "ratio_to_gemm"
        target, met = "", ""
        for pick, fig, low in TARGETS:
            if all(rec.get(k) == v for k, v in pick.items()) and fig == figure:
                target = f">= {low}"
                met = "yes" if rec[figure] >= low else "NO"
                failed += rec[figure] < low
        peer = next((t for t in torch if t["peer_of"] == rec["impl"] and all(t[k] == rec.get(k, t[k]) for k in KEYS
                                                                             if k in t)), None)
        rows.append([name, f"{rec['ms']:.4f}", figure, f"{rec[figure]:.3f}", target, met, f"{rec['max_abs_err']:.2e}",
                     f"{peer['ms']:.4f}" if peer else "-", f"{peer['ms'] / rec['ms']:.2f}" if peer else "-",
                     peer["backend"] if peer else "-"])
    widths = [max(len(r[i]) for r in rows) for i in range(len(head))]
    for i, r in enumerate(rows):
        print(" | ".join(c.ljust(w) for c, w in zip(r, widths)))
        if i == 0:
            print("-+-".join("-" * w for w in widths))
    for rec in bench:
        if rec["impl"] == "copy":
            print(f"copy roofline ({rec['mode']} {rec['batch']}x{rec['kv_len']} {rec['dtype']} {rec['layout']}): "
                  f"{rec['gbytes_per_s']:.0f} GB/s read+written")
        elif rec["impl"] == "gemm":
            print(f"cuBLAS GEMM {rec['gemm_shape']} {rec['dtype']}: {rec['tflops']:.0f} TFLOP/s")
    print(f"targets missed: {failed}")


if __name__ == "__main__":
    main()
