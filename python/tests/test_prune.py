"""frugal.prune against independent oracles: numpy dispersion, brute-force k-means over all
contiguous partitions, GRATING's routing rule written out in Python, and rankings of a numpy
scoring model."""
import itertools

import numpy as np
import pytest

import frugal
from frugal import prune


def test_dispersion_against_numpy(rng):
    for dtype in (np.float32, np.float64):
        x = rng.uniform(0.1, 5.0, 50).astype(dtype)
        xd = x.astype(np.float64)
        assert prune.dispersion(x) == pytest.approx(np.std(xd) / abs(np.mean(xd)), rel=1e-12)
        med = np.median(xd)
        robust = 1.4826 * np.median(np.abs(xd - med)) / abs(med)
        assert prune.dispersion(x, prune.DispersionMeasure.robust_cv) == pytest.approx(robust, rel=1e-12)
    assert prune.dispersion([2.0, 2.0, 2.0]) == 0.0
    with pytest.raises(frugal.InvalidArgumentError, match="score 1 is nan"):
        prune.dispersion([1.0, float("nan")])


def brute_force_sse(sorted_x, k):
    """Minimal SSE over every split of the sorted scores into k contiguous groups."""
    n, best = len(sorted_x), np.inf
    for cuts in itertools.combinations(range(1, n), k - 1):
        groups = np.split(sorted_x, cuts)
        best = min(best, sum(((g - g.mean()) ** 2).sum() for g in groups))
    return best


def test_kmeans1d_against_brute_force(rng):
    for _ in range(40):
        n = int(rng.integers(1, 10))
        x = rng.normal(size=n) * rng.choice([1.0, 100.0])
        for k in range(1, min(n, 4) + 1):
            r = prune.kmeans1d_optimal(x, k)
            assert r.sse == pytest.approx(brute_force_sse(np.sort(x), k), rel=1e-9, abs=1e-9)
            assert r.labels.shape == (n,) and r.labels.dtype == np.uint32
            assert r.sizes.sum() == n and np.all(np.diff(r.centroids) >= 0)
            for c in range(k):  # labels, centroids and within-cluster sums agree
                members = x[r.labels == c]
                assert r.centroids[c] == pytest.approx(members.mean()) and r.sizes[c] == len(members)
                assert r.withinss[c] == pytest.approx(((members - members.mean()) ** 2).sum(), abs=1e-9)


def python_bic(x, labels, k):
    """Ckmeans.1d.dp's BIC: a mixture with one unbiased variance per cluster."""
    n, loglik = len(x), 0.0
    for c in range(k):
        m = x[labels == c]
        var = m.var(ddof=1) if len(m) > 1 else 0.0
        if var > 0:
            loglik += -0.5 * (len(m) - 1) + len(m) * (np.log(len(m) / n) - 0.5 * np.log(2 * np.pi * var))
        else:
            loglik += len(m) * np.log(len(m) / n)
    return 2 * loglik - (3 * k - 1) * np.log(n)


def test_kmeans1d_bic(rng):
    x = np.concatenate([rng.normal(0, 0.1, 30), rng.normal(5, 0.1, 30), rng.normal(10, 0.1, 30)]).astype(np.float32)
    km = prune.KMeans1D()
    km.fit(x, 6)
    assert len(km) == 90 and km.k_max == 6
    bics = [python_bic(x.astype(np.float64), km.clustering(k).labels, k) for k in range(1, 7)]
    for k in range(1, 7):
        assert km.bic(k) == pytest.approx(bics[k - 1], rel=1e-6)
    assert km.select_k_bic() == 1 + int(np.argmax(bics)) == 3
    assert np.all(np.diff(x[km.order]) >= 0)


def grating_routes(scores, open_slots, threshold, clusters):
    """GRATING 4.1 with a fixed number of clusters: over the threshold, clusters above the
    one holding the K-th score are selected, those below dropped, that one deferred; when
    selected + deferred fill the slots, all of them are selected."""
    x = scores.astype(np.float64)
    n = len(x)
    if np.std(x) / abs(np.mean(x)) <= threshold:
        return np.zeros(n, np.uint8)
    order = np.argsort(x, kind="stable")
    best, cuts_best = np.inf, None
    for cuts in itertools.combinations(range(1, n), clusters - 1):
        sse = sum(((g - g.mean()) ** 2).sum() for g in np.split(x[order], cuts))
        if sse < best - 1e-12:
            best, cuts_best = sse, cuts
    bounds = [0, *cuts_best, n]
    pivot = n - open_slots
    b = next(c for c in range(clusters) if bounds[c + 1] > pivot)
    routes = np.zeros(n, np.uint8)
    routes[order[:bounds[b]]] = int(prune.Route.dropped)
    routes[order[bounds[b + 1]:]] = int(prune.Route.selected)
    if (routes == int(prune.Route.selected)).sum() + (routes == 0).sum() == open_slots:
        routes[routes == 0] = int(prune.Route.selected)
    return routes


def test_cluster_pruner_follows_grating(rng):
    for _ in range(200):
        n = int(rng.integers(3, 10))
        scores = (rng.uniform(0.5, 1.5, n) * rng.choice([1, 3], n)).astype(np.float32)
        scores = np.unique(scores)  # distinct scores: one optimal partition
        n = len(scores)
        if n < 3:
            continue
        k_slots = int(rng.integers(1, n))
        pruner = prune.ClusterPruner(threshold=0.2, clusters=3, patience=0, confirmations=0)
        d = pruner.decide(scores, k_slots)
        step, routes = d.step, d.routes
        assert routes.dtype == np.uint8
        assert routes.tolist() == grating_routes(scores, k_slots, 0.2, 3).tolist()
        assert step.selected == (routes == 1).sum() and step.dropped == (routes == 2).sum()
    out = np.empty(4, np.uint8)
    d = prune.ClusterPruner().decide(np.array([1, 2, 3, 4], np.float32), 2, out=out)
    assert d.routes is out and repr(d).startswith("PruneDecision(step=PruneStep(triggered=")
    with pytest.deprecated_call(match="PruneDecision is no longer a tuple"):
        step, routes = d  # the previous release's tuple, for one more release
    assert routes is out and step.selected == d.step.selected
    with pytest.raises(frugal.InvalidArgumentError, match="K = 5 open slots exceed the 4 active candidates"):
        prune.ClusterPruner().decide(np.ones(4, np.float32), 5)


class NumpyReranker:
    """A layer-wise scoring model: each candidate's score drifts from noise towards its true
    relevance over the layers (the shape GRATING's pruning exploits)."""

    def __init__(self, relevance, layers, seed):
        self.relevance, self.layers = relevance, layers
        noise = np.random.default_rng(seed).normal(0, 0.3, (layers, len(relevance)))
        w = np.linspace(0.1, 1.0, layers)[:, None]
        self.trajectory = (w * relevance[None, :] + (1 - w) * noise + 2.0).astype(np.float32)
        self.layer_of = np.full(len(relevance), -1)
        self.forwarded = 0

    def embed(self, ids):
        self.layer_of[ids] = -1

    def forward(self, layer, ids):
        assert np.all(self.layer_of[ids] == layer - 1)
        self.layer_of[ids] = layer
        self.forwarded += len(ids)

    def score(self, ids):
        return self.trajectory[self.layer_of[ids], ids]  # float32; any numeric array works


def test_progressive_rank_with_a_numpy_model(rng):
    relevance = rng.permutation(np.concatenate([rng.uniform(2.5, 3.0, 5), rng.uniform(0.0, 0.5, 35)]))
    model = NumpyReranker(relevance, 12, 1)
    never = prune.progressive_rank(model, 40, 5, prune.ClusterPruner(threshold=float("inf")), chunk_size=7)
    final = model.trajectory[-1]
    assert never.top.tolist() == np.argsort(-final, kind="stable")[:5].tolist()
    np.testing.assert_array_equal(never.scores, final[never.top])
    assert never.candidate_layers_computed == 40 * 12 == model.forwarded and never.candidate_layers_skipped == 0
    assert [s.chunks for s in never.layers] == [6] * 12

    model = NumpyReranker(relevance, 12, 1)
    pruned = prune.progressive_rank(model, 40, 5, prune.ClusterPruner(threshold=0.05))
    assert pruned.candidate_layers_computed == model.forwarded < 40 * 12
    assert pruned.candidate_layers_skipped == 40 * 12 - model.forwarded
    assert len(set(pruned.top.tolist()) & set(never.top.tolist())) >= 4


def test_progressive_rank_propagates_model_errors():
    class Broken(NumpyReranker):
        def forward(self, layer, ids):
            raise ZeroDivisionError("model failed")
    with pytest.raises(ZeroDivisionError, match="model failed"):
        prune.progressive_rank(Broken(np.ones(4), 3, 0), 4, 2, prune.ClusterPruner())

    class Short(NumpyReranker):
        def score(self, ids):
            return np.zeros(len(ids) - 1)
    with pytest.raises(frugal.InvalidArgumentError, match="returned 3 scores for 4 candidates"):
        prune.progressive_rank(Short(np.ones(4), 3, 0), 4, 2, prune.ClusterPruner())


def trajectories(rng, queries, pool=20, layers=10):
    out = []
    for q in range(queries):
        model = NumpyReranker(rng.uniform(0, 3, pool), layers, q)
        out.append(np.ascontiguousarray(model.trajectory.T))  # candidates x layers
    return prune.TrajectorySet(out)


def test_calibration_meets_its_target_on_the_calibration_set(rng, tmp_path):
    cal = trajectories(rng, 60)
    assert len(cal) == 60 and cal.layers == 10 and cal[0].shape == (20, 10)
    cal.save(tmp_path / "cal.txt")
    again = prune.TrajectorySet.load(tmp_path / "cal.txt")
    np.testing.assert_array_equal(again[7], cal[7])
    result = prune.calibrate_threshold(cal, 5, 0.9, margin_standard_errors=0.0, padding_queries=0)
    thresholds = [p.threshold for p in result.curve]
    assert thresholds == sorted(thresholds) and thresholds[0] == 0.0 and thresholds[-1] == float("inf")
    assert result.met and result.threshold in thresholds
    # The paper's rule: the lowest threshold meeting the target here and at every higher one.
    ok = [p.precision_at_k >= 0.9 - 1e-12 for p in result.curve]
    first = next(i for i in range(len(ok)) if all(ok[i:]))
    assert result.threshold == thresholds[first]
    opts = prune.ClusterPrunerOptions(threshold=result.threshold)
    ev = prune.evaluate_pruning(cal, 5, opts)
    assert ev.precision_at_k == pytest.approx(result.chosen.precision_at_k)
    assert ev.precision_at_k == pytest.approx(1 - ev.query_loss.mean())
    assert ev.layer_compute_saved == pytest.approx(1 - ev.mean_active_per_layer.sum() / (20 * 10))


def test_an_object_in_use_refuses_a_second_caller():
    # progressive_rank holds the pruner busy while it calls the model; the model using the same
    # pruner meanwhile (as another thread could) gets an error, not a corrupted pruner.
    pruner = prune.ClusterPruner()

    class Meddling(NumpyReranker):
        def forward(self, layer, ids):
            pruner.decide(np.array([1.0, 2.0], np.float32), 1)
    with pytest.raises(frugal.RuntimeFailureError, match="ClusterPruner.decide: used from two threads at once, or re-entered from a callback"):
        prune.progressive_rank(Meddling(np.ones(4), 3, 0), 4, 2, pruner)
    step = pruner.decide(np.array([1.0, 2.0], np.float32), 1).step  # released again
    assert step.selected + step.deferred + step.dropped == 2
