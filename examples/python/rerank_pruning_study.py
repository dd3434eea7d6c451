#!/usr/bin/env python3
"""Reranker-pruning study: GRATING's progressive cluster pruning over a numpy scoring model.

A layer-wise cross-encoder stand-in written in numpy (residual layers over each candidate's
hidden state, a classifier head read after every layer) ranks a pool of candidates per query.
The study
  1. records full per-layer score trajectories on calibration queries,
  2. calibrates the cluster pruner's dispersion threshold to a precision@K target
     (frugal.prune.calibrate_threshold, GRATING 4.1's automatic mode),
  3. ranks new queries twice with frugal.prune.progressive_rank: unpruned (threshold inf)
     and pruned with the calibrated threshold, and prints precision@K against the unpruned
     top-K, the candidate-layers skipped and the numpy forward time of both, measured in
     the same run.

    python3 examples/python/rerank_pruning_study.py --queries 100 --pool 64 --k 10 --target 0.95
"""
import argparse
import time

import numpy as np

from frugal import prune


class NumpyReranker:
    """Candidates' hidden states go through `layers` residual layers h += tanh(h W_l); the
    head scores sigmoid(h . head). W_l amplifies the relevance direction, so scores separate
    layer by layer, the behaviour progressive pruning exploits."""

    def __init__(self, layers=16, dim=128, seed=0):
        rng = np.random.default_rng(seed)
        self.layers, self.dim = layers, dim
        self.head = rng.normal(size=dim) / np.sqrt(dim)
        u = self.head / np.linalg.norm(self.head)
        self.weights = [(0.35 * np.outer(u, u) + rng.normal(scale=0.6 / np.sqrt(dim), size=(dim, dim))).astype(np.float32)
                        for _ in range(layers)]
        self.direction = u
        self.hidden = None
        self.forwarded = 0

    def new_query(self, pool, rng):
        """A pool whose relevance is a few strong candidates among weak ones."""
        relevance = np.where(rng.random(pool) < 0.2, rng.uniform(1.0, 2.0, pool), rng.uniform(-1.0, 0.5, pool))
        self.docs = (relevance[:, None] * self.direction[None, :] +
                     rng.normal(scale=0.8, size=(pool, self.dim)) / np.sqrt(self.dim)).astype(np.float32)
        self.hidden = np.zeros_like(self.docs)

    # frugal.prune.ProgressiveModel: layers, embed, forward, score.
    def embed(self, ids):
        self.hidden[ids] = self.docs[ids]

    def forward(self, layer, ids):
        h = self.hidden[ids]
        self.hidden[ids] = h + np.tanh(h @ self.weights[layer])
        self.forwarded += len(ids)

    def score(self, ids):
        return 1.0 / (1.0 + np.exp(-(self.hidden[ids] @ self.head)))

    def trajectory(self):
        """Every candidate's score after each layer of a full forward pass: candidates x layers."""
        ids = np.arange(len(self.docs))
        self.embed(ids)
        out = np.empty((len(ids), self.layers), np.float32)
        for layer in range(self.layers):
            self.forward(layer, ids)
            out[:, layer] = self.score(ids)
        return out


def study(queries, pool, k, target, calibration_queries, seed, out=print):
    model = NumpyReranker(seed=seed)
    rng = np.random.default_rng(seed + 1)
    cal = []
    for _ in range(calibration_queries):
        model.new_query(pool, rng)
        cal.append(model.trajectory())
    calibration = prune.calibrate_threshold(prune.TrajectorySet(cal), k, target)
    out(f"calibration: {calibration_queries} queries, K = {k}, target precision@K {target}: threshold "
        f"{calibration.threshold:.4g} (met: {calibration.met}; on the calibration set precision "
        f"{calibration.chosen.precision_at_k:.4f}, layer compute saved {calibration.chosen.layer_compute_saved:.3f})")

    rows = {"unpruned": [0.0, 0, 0.0], "pruned": [0.0, 0, 0.0]}  # seconds, candidate-layers, precision
    test_rng = np.random.default_rng(seed + 2)
    for _ in range(queries):
        model.new_query(pool, test_rng)
        full = None
        for name, threshold in (("unpruned", float("inf")), ("pruned", calibration.threshold)):
            model.forwarded = 0
            start = time.perf_counter()
            r = prune.progressive_rank(model, pool, k, prune.ClusterPruner(threshold=threshold))
            rows[name][0] += time.perf_counter() - start
            rows[name][1] += model.forwarded
            if full is None:
                full = set(r.top.tolist())
            rows[name][2] += len(full & set(r.top.tolist())) / k
    base_seconds = rows["unpruned"][0]
    out(f"{queries} test queries, pool {pool}, {model.layers} layers, K = {k}:")
    out(f"{'ranking':>10} {'precision@K':>12} {'layers computed':>16} {'seconds':>9} {'time / unpruned':>16}")
    for name, (seconds, computed, precision) in rows.items():
        out(f"{name:>10} {precision / queries:>12.4f} {computed / (queries * pool * model.layers):>16.3f} "
            f"{seconds:>9.3f} {seconds / base_seconds:>16.3f}")
    return calibration, {name: precision / queries for name, (_, _, precision) in rows.items()}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--queries", type=int, default=100, help="test queries")
    ap.add_argument("--calibration-queries", type=int, default=200)
    ap.add_argument("--pool", type=int, default=64, help="candidates per query")
    ap.add_argument("--k", type=int, default=10)
    ap.add_argument("--target", type=float, default=0.95, help="precision@K target of the calibration")
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args(argv)
    study(a.queries, a.pool, a.k, a.target, a.calibration_queries, a.seed)


if __name__ == "__main__":
    main()
