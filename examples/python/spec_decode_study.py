#!/usr/bin/env python3
"""Speculative-decoding study over a .tok file: MAT per drafter, as `frugal-bench draft` prints it.

The offline simulator of frugal-bench draft (bench/commands/draft.cpp), replayed through the
Python bindings: each record's response is the model's greedy output; every step drafts from
the prompt plus the accepted tokens, accepts the longest matching prefix (or tree path) plus
one bonus token, and costs one verification pass. MAT = response tokens / steps.

Drafters: pld (Prompt Lookup Decoding, the baseline), sam (frugal's suffix-automaton chain
drafter) and sam-tree (its tree drafts), with history on: the sam drafters also draft from
earlier records' responses.

    python3 examples/python/spec_decode_study.py specbench_vicuna7b.tok
    frugal-bench draft --data specbench_vicuna7b.tok   # the same MAT

The .tok format: per record, "# <id> <category>",
"P <prompt ids>" and "R <response ids>".
"""
import argparse
import json
import sys
from collections import defaultdict
from dataclasses import dataclass, field

import numpy as np

import frugal
from frugal import draft, sim

HISTORY_TOKENS = 1 << 22  # as frugal-bench: never evicts on the bundled file


@dataclass
class Record:
    id: str
    category: str
    prompt: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int32))
    response: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int32))


@dataclass
class Totals:
    records: int = 0
    tokens: int = 0
    steps: int = 0
    drafted: int = 0
    accepted: int = 0

    def merge(self, o):
        self.records += o.records
        self.tokens += o.tokens
        self.steps += o.steps
        self.drafted += o.drafted
        self.accepted += o.accepted

    @property
    def mat(self):
        return self.tokens / self.steps if self.steps else 0.0


def read_tok(path):
    """The records of a .tok file."""
    records = []
    with open(path) as f:
        for line_no, line in enumerate(f, 1):
            line = line.rstrip("\n")
            if not line:
                continue
            if line[0] == "#":
                rid, category = line[1:].split()[:2]
                records.append(Record(rid, category))
            elif records and line[0] in "PR":
                ids = np.array(line[1:].split(), dtype=np.int64)
                if ids.size and (ids.min() < 0 or ids.max() > np.iinfo(np.int32).max):
                    raise ValueError(f"{path}:{line_no}: token out of range")
                setattr(records[-1], "prompt" if line[0] == "P" else "response", ids.astype(np.int32))
            else:
                raise ValueError(f"{path}:{line_no}: unexpected line")
    return records


def replay(rec, begin, propose, accept):
    """One record through the simulator; propose() returns (tokens, parents) (a chain: parents i - 1)."""
    s = Totals(records=1, tokens=len(rec.response))
    response = rec.response
    begin(rec.prompt)
    pos = 0
    while pos < len(response):
        tokens, parents = propose()
        remaining = len(response) - pos
        # The model's greedy prediction after a node at depth d is response[pos + d]; past the
        # end it is EOS (-1 here), which no draft token equals.
        depth = np.empty(len(tokens), np.int64)
        for i, p in enumerate(parents.tolist()):
            depth[i] = 1 if p < 0 else depth[p] + 1
        predictions = np.full(len(tokens) + 1, -1, np.int32)
        predictions[0] = response[pos]
        inside = depth < remaining
        predictions[1:][inside] = response[pos + depth[inside]]
        v = draft.verify_tree(tokens, parents, predictions)
        emitted = min(v.accepted + 1, remaining)
        s.steps += 1
        s.drafted += len(tokens)
        s.accepted += v.accepted
        accept(response[pos:pos + emitted])
        pos += emitted
    return s


def chain_parents(n):
    return np.arange(-1, n - 1, dtype=np.int32)


def simulate(records, kind, max_draft, tree_budget, use_history):
    """Totals per category ("all" included) for one drafter."""
    by_category = defaultdict(Totals)
    history = draft.History(HISTORY_TOKENS)
    # As frugal-bench: the tree's depth is the chain's length K.
    sam = draft.Drafter(history if use_history else None, max_draft=max_draft, tree_depth=max_draft,
                        tree_budget=tree_budget)
    for rec in records:
        if kind == "pld":
            context = np.empty(len(rec.prompt) + len(rec.response), np.int32)
            size = 0

            def begin(prompt):
                nonlocal size
                context[:len(prompt)] = prompt
                size = len(prompt)

            def propose():
                chain = sim.prompt_lookup_draft(context[:size], 3, max_draft)
                return chain, chain_parents(len(chain))

            def accept(tokens):
                nonlocal size
                context[size:size + len(tokens)] = tokens
                size += len(tokens)

            s = replay(rec, begin, propose, accept)
        else:
            if kind == "sam-tree":
                def propose():
                    tree = sam.tree()
                    return tree.tokens, tree.parents
            else:
                def propose():
                    chain = sam.chain()
                    return chain, chain_parents(len(chain))
            s = replay(rec, sam.begin, propose, sam.accept)
            if use_history:
                history.add(rec.response)
        by_category["all"].merge(s)
        by_category[rec.category].merge(s)
    return by_category


def rows(records, drafters, max_draft, tree_budget, use_history):
    """frugal-bench draft's rows: every drafter's "all" first, then the categories."""
    first, rest = [], []
    for kind in drafters:
        stats = simulate(records, kind, max_draft, tree_budget, use_history)
        for category in sorted(stats):
            s = stats[category]
            row = {"drafter": kind, "category": category, "records": s.records, "mat": s.mat,
                   "accept_rate": s.accepted / s.drafted if s.drafted else 0.0,
                   "drafted_per_step": s.drafted / s.steps, "tokens": s.tokens, "steps": s.steps}
            (first if category == "all" else rest).append(row)
    return first + rest


def print_table(out, table):
    """A table the way frugal-bench prints one (right-aligned columns, %.4g floats)."""
    def fmt(v):
        return f"{v:.4g}" if isinstance(v, float) else str(v)
    columns = list(table[0])
    width = [max(len(c), *(len(fmt(r[c])) for r in table)) for c in columns]
    out.write("".join(c.rjust(w + 2) for c, w in zip(columns, width)) + "\n")
    for r in table:
        out.write("".join(fmt(r[c]).rjust(w + 2) for c, w in zip(columns, width)) + "\n")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("data", help="token file (.tok)")
    ap.add_argument("--drafter", default="all", choices=["sam", "sam-tree", "pld", "all"])
    ap.add_argument("--max-draft", type=int, default=10, help="K: longest draft")
    ap.add_argument("--tree-budget", type=int, default=64, help="most tokens in a sam-tree draft")
    ap.add_argument("--history", default="on", choices=["on", "off"],
                    help="draft also from earlier records' responses")
    ap.add_argument("--json", action="store_true", help="print one JSON object per row")
    args = ap.parse_args(argv)
    records = read_tok(args.data)
    drafters = ["pld", "sam", "sam-tree"] if args.drafter == "all" else [args.drafter]
    table = rows(records, drafters, args.max_draft, args.tree_budget, args.history == "on")
    if args.json:
        for r in table:
            print(json.dumps(r))
    else:
        print(f"frugal {frugal.__version__}: {len(records)} records of {args.data}, K = {args.max_draft}, "
              f"tree budget {args.tree_budget}, history {args.history}")
        print_table(sys.stdout, table)


if __name__ == "__main__":
    main()
