#!/usr/bin/env python3
"""Draws frugal-bench report plots: `plot.py plots.json`.

plots.json is a list of specs written by `frugal-bench report`; each names a JSONL file
of result records, the x and y fields, an optional series field and a record filter.
Needs matplotlib (Debian: python3-matplotlib).
"""
import json
import sys
from collections import OrderedDict

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def load(path, flt):
    rows = []
    with open(path) as f:
        for line in f:
            line = line.strip()
            if not line:
                continue
            r = json.loads(line)
            if all(r.get(k) == v for k, v in flt.items()):
                rows.append(r)
    return rows


def draw(spec):
    rows = [r for r in load(spec["jsonl"], spec.get("filter", {}))
            if spec["x"] in r and spec["y"] in r]
    if not rows:
        print(f"plot.py: no records for {spec['out']}", file=sys.stderr)
        return
    groups = OrderedDict()
    for r in rows:
        groups.setdefault(str(r.get(spec["series"], "")) if spec.get("series") else "", []).append(r)
    fig, ax = plt.subplots(figsize=(6.4, 4.0), dpi=110)
    if spec.get("kind") == "bar":
        labels = list(OrderedDict.fromkeys(str(r[spec["x"]]) for r in rows))
        width = 0.8 / max(1, len(groups))
        for i, (name, rs) in enumerate(groups.items()):
            vals = {str(r[spec["x"]]): r[spec["y"]] for r in rs}
            xs = [j + i * width for j in range(len(labels))]
            ax.bar(xs, [vals.get(l, 0) for l in labels], width, label=name or None)
        ax.set_xticks([j + width * (len(groups) - 1) / 2 for j in range(len(labels))])
        ax.set_xticklabels(labels, rotation=30, ha="right")
    else:
        for name, rs in groups.items():
            rs = sorted(rs, key=lambda r: r[spec["x"]])
            ax.plot([r[spec["x"]] for r in rs], [r[spec["y"]] for r in rs], marker="o", label=name or None)
        if spec.get("logx"):
            ax.set_xscale("log", base=2)
    if spec.get("logy"):
        ax.set_yscale("log")
    ax.set_title(spec["title"])
    ax.set_xlabel(spec["xlabel"])
    ax.set_ylabel(spec["ylabel"])
    ax.grid(True, alpha=0.3)
    if len(groups) > 1 or next(iter(groups)):
        ax.legend()
    fig.tight_layout()
    fig.savefig(spec["out"])
    plt.close(fig)


def main():
    with open(sys.argv[1]) as f:
        specs = json.load(f)
    for spec in specs:
        draw(spec)


if __name__ == "__main__":
    main()
