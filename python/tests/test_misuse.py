"""Misuse from Python: arrays of the wrong layout, dtype or writability, ints too large or
negative where a size or an id goes, and callbacks that raise or re-enter the object that calls
them. The oracle for each: a clear frugal or Python exception that names the bad argument (or
the documented result), never a crash and never a silently wrong answer."""
import numpy as np
import pytest

import frugal
from frugal import attention as att
from frugal import cache, draft, prune
from frugal import schedule as sch
from id_reranker import IdReranker

BUSY = "used from two threads at once"


# ---- arrays ---------------------------------------------------------------------------

def small_attention(rng):
    p = att.plan(q_heads=2, kv_heads=2, q_len=4, kv_len=4, head_dim=8)
    q, k, v = (rng.standard_normal((2, 4, 8)).astype(np.float32) for _ in range(3))
    return p, q, k, v


@pytest.mark.parametrize("axis", [0, 1])
@pytest.mark.parametrize("arg", ["q", "k", "out"])
def test_negative_outer_strides_are_refused_by_name(rng, axis, arg):
    p, q, k, v = small_attention(rng)
    arrays = {"q": q, "k": k, "out": np.zeros_like(q)}
    arrays[arg] = np.flip(arrays[arg], axis)  # a view: the same memory read backwards along `axis`
    remedy = "without reversed axes" if arg == "out" else rf"numpy.ascontiguousarray\({arg}\)"
    with pytest.raises(ValueError, match=rf"{arg} has a negative stride on axis {axis} \(.*{remedy}"):
        att.run(p, arrays["q"], arrays["k"], v, out=arrays["out"])


def test_negative_strides_elsewhere_are_not_c_contiguous(rng):
    with pytest.raises(ValueError, match="chunks must be C-contiguous"):
        cache.PrefixTree(budget_bytes=100).match(np.arange(4, dtype=np.int64)[::-1])
    with pytest.raises(ValueError, match="scores must be C-contiguous"):
        prune.ClusterPruner().decide(np.arange(4, dtype=np.float32)[::-1], 1)
    with pytest.raises(ValueError, match="lse must be C-contiguous"):
        out = np.zeros((2, 2, 4), np.float32)
        att.merge_state_in_place(out, np.zeros((2, 2), np.float32)[::-1], out.copy(), np.zeros((2, 2), np.float32))


def test_non_contiguous_arrays_are_refused_by_name(rng):
    s = cache.SemanticCache(capacity=4, dim=4, tau=0.5)
    with pytest.raises(ValueError, match="embedding must be C-contiguous"):
        s.lookup("q", np.zeros(8, np.float32)[::2])
    with pytest.raises(ValueError, match="out must be C-contiguous"):
        prune.ClusterPruner().decide(np.arange(4, dtype=np.float32), 1, out=np.zeros(8, np.uint8)[::2])
    p, q, k, v = small_attention(rng)
    with pytest.raises(ValueError, match="q must be C-contiguous along its last axis"):
        att.run(p, np.zeros((2, 4, 16), np.float32)[:, :, ::2], k, v)
    plan = att.BatchPlan(np.array([0, 1], np.int32), np.array([0], np.int32), np.array([4], np.int32),
                         np.array([0, 1]), page_size=4, q_heads=2, kv_heads=1, head_dim=8)
    pool = np.zeros((1, 4, 1, 8), np.float32)
    with pytest.raises(ValueError, match="q must be C-contiguous"):
        plan.run(np.zeros((1, 4, 8), np.float32)[:, ::2], pool, pool)


def test_read_only_outputs_are_refused_and_read_only_inputs_read(rng):
    p, q, k, v = small_attention(rng)
    ro = np.zeros_like(q)
    ro.flags.writeable = False
    with pytest.raises(ValueError, match="out is read-only"):
        att.run(p, q, k, v, out=ro)
    routes = np.zeros(4, np.uint8)
    routes.flags.writeable = False
    with pytest.raises(ValueError, match="out is read-only"):
        prune.ClusterPruner().decide(np.arange(4, dtype=np.float32), 1, out=routes)
    lse = np.zeros((2, 4), np.float32)
    lse.flags.writeable = False
    with pytest.raises(ValueError, match="lse is read-only"):
        att.merge_state_in_place(q.transpose(1, 0, 2).copy(), lse, q.transpose(1, 0, 2).copy(), lse)
    for a in (q, k, v):
        a.flags.writeable = False
    assert att.run(p, q, k, v).shape == q.shape  # inputs are only read
    tokens = np.array([5, 6, 5, 6], np.int32)
    tokens.flags.writeable = False
    d = draft.Drafter()
    d.begin(tokens)
    assert d.chain().tolist()[:1] == [5]


def test_wrong_dtypes_are_refused_by_name(rng):
    with pytest.raises(TypeError, match="embedding must be a numpy array of float32, got float64"):
        cache.SemanticCache(capacity=4, dim=4, tau=0.5).lookup("q", np.zeros(4))
    tree = cache.PrefixTree(budget_bytes=100)
    with pytest.raises(TypeError, match="handles must be a numpy array of int64, got int32"):
        tree.insert(np.arange(2), np.arange(2, dtype=np.int32), np.ones(2, np.uint64))
    with pytest.raises(TypeError, match="bytes must be a numpy array of uint64, got float64"):
        tree.insert(np.arange(2), np.arange(2), np.ones(2))
    with pytest.raises(TypeError, match="out must be float32, float16 or uint16"):
        att.merge_state_in_place(np.zeros((1, 1, 4), np.int32), np.zeros((1, 1), np.float32),
                                 np.zeros((1, 1, 4), np.int32), np.zeros((1, 1), np.float32))
    with pytest.raises(TypeError, match="ids must be a numpy array of uint64, got float32"):
        draft.Speculator().propose(np.zeros(1, np.float32))
    with pytest.raises(TypeError, match="tokens must hold integers"):
        draft.SuffixAutomaton().append([1.5])


# ---- ints out of range ------------------------------------------------------------------

@pytest.mark.parametrize("value", [2**70, 2**40, -2**40])
def test_single_tokens_outside_int32_are_refused_by_value(value):
    sp = draft.Speculator()
    sp.start(1, [1, 2])
    calls = {"SuffixAutomaton.append": draft.SuffixAutomaton().append, "Drafter.accept": draft.Drafter().accept,
             "Speculator.append": lambda t: sp.append(1, t)}
    for name, call in calls.items():
        with pytest.raises(ValueError, match=rf"token {value} is outside int32"):
            call(value)


def test_huge_and_negative_sizes_and_ids():
    with pytest.raises(ValueError, match="cache keys that are ints must fit in int64"):
        cache.LRUCache(4).put(2**70, 1)
    with pytest.raises(OverflowError):
        cache.LRUCache(4).put(1, 1, weight=2**70)
    with pytest.raises(OverflowError):
        cache.LRUCache(4).put(1, 1, weight=-1)
    with pytest.raises(TypeError):
        cache.LRUCache(-1)
    with pytest.raises(TypeError):
        draft.Speculator().start(-1, [1, 2])
    with pytest.raises(ValueError, match="ids holds values outside the range of uint64"):
        draft.Speculator().propose([-1])
    with pytest.raises(ValueError, match="ids holds values outside the range of uint64"):
        draft.Speculator().propose([2**70])
    with pytest.raises(ValueError, match="chunks holds values outside the range of int64"):
        cache.PrefixTree(budget_bytes=100).match([2**70])
    with pytest.raises(ValueError, match="bytes holds values outside the range of uint64"):
        cache.PrefixTree(budget_bytes=100).insert([1], [1], [-1])
    with pytest.raises(TypeError):
        cache.PrefixTree(budget_bytes=-1)
    with pytest.raises(frugal.OutOfRangeError, match="state 1000000"):
        draft.SuffixAutomaton().count(10**6)
    with pytest.raises(frugal.InvalidArgumentError, match="max_tokens = 4611686018427387904"):
        draft.History(2**62)
    with pytest.raises(frugal.InvalidArgumentError, match="k = 4611686018427387904"):
        prune.kmeans1d_optimal(np.arange(5.0), 2**62)
    with pytest.raises(frugal.OutOfRangeError, match="TrajectorySet: query 100 >= 1"):
        prune.TrajectorySet([np.zeros((2, 2), np.float32)])[100]
    t = sch.Timeline()
    t.add(sch.Resource.io, 1.0, after=[2**64 - 1])
    with pytest.raises(frugal.OutOfRangeError, match="depends on task 18446744073709551615"):
        t.simulate()


def test_batch_plan_refuses_a_threads_count_above_its_bound():
    table = (np.array([0, 1], np.int32), np.array([0], np.int32), np.array([1], np.int32), np.array([0, 1]))
    with pytest.raises(ValueError, match="threads 1000000"):
        att.BatchPlan(*table, page_size=4, q_heads=1, kv_heads=1, head_dim=8, threads=10**6)


# ---- merge_state_in_place: NaN and +inf LSEs --------------------------------------------

@pytest.mark.parametrize("bad", [float("nan"), float("inf")])
@pytest.mark.parametrize("which", ["lse", "other_lse"])
def test_merge_refuses_nan_and_plus_inf_lse_before_writing(rng, bad, which):
    out = rng.standard_normal((3, 2, 4)).astype(np.float32)  # [tokens, heads, d]
    other = rng.standard_normal((3, 2, 4)).astype(np.float32)
    lse = {name: rng.standard_normal((2, 3)).astype(np.float32) for name in ("lse", "other_lse")}
    lse[which][1, 2] = bad  # head 1, token 2: the last row merged
    before = out.copy(), lse["lse"].copy()
    with pytest.raises(frugal.InvalidArgumentError, match=rf"{which}\[1, 2\] = {bad} \(head 1, token 2\)"):
        att.merge_state_in_place(out, lse["lse"], other, lse["other_lse"])
    np.testing.assert_array_equal(out, before[0])  # nothing written, not even the rows before it
    np.testing.assert_array_equal(lse["lse"], before[1])


def test_merge_takes_the_other_side_of_a_row_that_saw_no_keys(rng):
    out = rng.standard_normal((1, 2, 4)).astype(np.float32)
    other = rng.standard_normal((1, 2, 4)).astype(np.float32)
    lse = np.array([[-np.inf], [0.5]], np.float32)
    other_lse = np.array([[1.5], [0.5]], np.float32)
    want = (out[0, 1] + other[0, 1]) / 2  # equal LSEs: equal weights
    att.merge_state_in_place(out, lse, other, other_lse)
    np.testing.assert_array_equal(out[0, 0], other[0, 0])
    np.testing.assert_allclose(out[0, 1], want, rtol=1e-6)
    np.testing.assert_allclose(lse[:, 0], [1.5, 0.5 + np.log(2)], rtol=1e-6)


# ---- callbacks that raise or re-enter --------------------------------------------------

def test_items_and_keys_are_a_snapshot_when_the_collector_writes_the_cache(run_alone):
    # The heap overflow: building the Python list can run the cyclic collector, whose
    # finalizers here write the same cache (put a new key, erase an old one) mid-walk. The
    # oracle: the result is the cache's contents at one instant, between two of those writes.
    out = run_alone("""
        import gc
        from frugal import cache
        for name in ("items", "keys"):
            c = cache.LRUCache(100_000)
            for k in range(2000):
                c.put(k, k)
            writes = []
            class Writer:
                def __init__(self, n):
                    self.n, self.me = n, self  # a cycle: only the collector frees it
                def __del__(self):
                    if self.n:
                        c.put(10_000 + self.n, -1)
                        c.erase(self.n)
                        writes.append(self.n)
                        Writer(self.n - 1)  # the next collection's garbage
            gc.collect()
            threshold = gc.get_threshold()
            gc.set_threshold(1)
            Writer(1500)
            before = len(writes)
            got = getattr(c, name)()
            during = len(writes) - before
            gc.set_threshold(*threshold)
            gc.collect()
            state, instants = {k: k for k in range(2000)}, []
            for n in [None] + writes:
                if n is not None:
                    state[10_000 + n] = -1
                    del state[n]
                instants.append(dict(state) if name == "items" else set(state))
            snapshot = dict(got) if name == "items" else set(got)
            print(name, during > 0, len(snapshot) == len(got) and snapshot in instants)
    """)
    assert out.split() == ["items", "True", "True", "keys", "True", "True"]


def test_prefix_tree_callbacks_may_raise_or_reenter():
    tree = cache.PrefixTree(budget_bytes=30)
    seen = []

    def reenter(chunk, handle, nbytes, reason):
        seen.append(chunk)
        tree.on_evict = None
        tree.insert([100 + chunk], [0], np.array([1], np.uint64))  # the tree is free again: allowed

    tree.on_evict = reenter
    tree.insert(np.arange(3), np.arange(3), np.full(3, 10, np.uint64))
    tree.insert([7], [7], np.array([10], np.uint64))  # evicts the only leaf, chunk 2
    assert seen == [2] and len(tree) == 3 and tree.bytes <= 30  # chunk 102 evicted one more

    def fail(*event):
        raise ZeroDivisionError("callback failed")

    tree.on_evict = fail
    with pytest.raises(ZeroDivisionError, match="callback failed"):
        tree.evict(100)
    assert len(tree) == 0 and tree.bytes == 0  # the eviction itself completed
    with pytest.raises(TypeError, match="callable or None"):
        tree.on_evict = 5




def test_a_model_that_reenters_its_pruner_gets_the_busy_error():
    pruner = prune.ClusterPruner()

    class Reentrant(IdReranker):
        def forward(self, layer, ids):
            prune.progressive_rank(IdReranker(), 4, 2, pruner)

    with pytest.raises(frugal.RuntimeFailureError, match=f"progressive_rank: {BUSY}"):
        prune.progressive_rank(Reentrant(), 4, 2, pruner)
    assert sorted(prune.progressive_rank(IdReranker(), 4, 2, pruner).top.tolist()) == [2, 3]  # free again


@pytest.mark.parametrize("layers, error", [(-1, "model.layers = -1"), (2**70, f"model.layers = {2**70}"),
                                           ("two", "model.layers must be an int")])
def test_model_layers_out_of_range_are_named(layers, error):
    class Bad(IdReranker):
        pass
    Bad.layers = layers
    with pytest.raises((ValueError, TypeError), match=error):
        prune.progressive_rank(Bad(), 4, 2, prune.ClusterPruner())


def test_model_scores_that_are_not_numbers():
    class Strings(IdReranker):
        def score(self, ids):
            return ["a"] * len(ids)

    class NaN(IdReranker):
        def score(self, ids):
            return np.full(len(ids), np.nan)

    with pytest.raises(ValueError, match="could not convert string to float"):
        prune.progressive_rank(Strings(), 4, 2, prune.ClusterPruner())
    with pytest.raises(frugal.InvalidArgumentError, match="is nan"):
        prune.progressive_rank(NaN(), 4, 2, prune.ClusterPruner())
