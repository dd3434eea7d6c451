"""Every bound class used from two threads at once. Each class is either documented as safe to
share (its calls are serialized by the GIL or a lock, or it is immutable, or thread-safe in C++)
or holds a busy flag, so that a second thread entering it while a call runs without the GIL gets
frugal.RuntimeFailureError "used from two threads at once" instead of a data race (docs/python.md,
"Threads"). The oracles: the documented error or an ordinary argument error from every call,
never a crash or a hang, and, under python/tests/run_tsan.sh, no race ThreadSanitizer can see."""
import atexit
import os
import random
import shutil
import sys
import tempfile
import threading
import time
import types

import numpy as np
import pytest

import frugal
from frugal import attention as att
from frugal import cache, draft, prune, rag
from frugal import schedule as sch
from frugal._types import pybind11_object
from id_reranker import IdReranker
from tiered_serving import pages_for, serve

BUSY = "used from two threads at once"
ARGUMENT_ERRORS = (frugal.InvalidArgumentError, frugal.OutOfRangeError, KeyError)
SHARED, FLAGGED = "shared", "flagged"  # may be shared between threads / one thread at a time
SECONDS = 0.2  # of two threads calling one object's methods, per class
TMP = tempfile.mkdtemp(prefix="frugal-threads-")
atexit.register(shutil.rmtree, TMP, True)


def path_of(name):
    """A file of this thread's own (two threads saving to one path is not what is tested)."""
    return os.path.join(TMP, f"{name}-{threading.get_ident()}")


def members(obj, calls):
    """`calls` with a read of each property named in calls["_properties"]."""
    return {**{n: (lambda n=n: getattr(obj, n)) for n in calls.pop("_properties", ())}, **calls}


# ---- one small valid instance of each class and a call of each public method -------------

def enum_case(value, **calls):
    return SHARED, value, {"name": lambda: value.name, "value": lambda: value.value, **calls}


def batch_plan_case():
    plan = att.BatchPlan(np.array([0, 2], np.int32), np.array([1, 0], np.int32), np.array([3], np.int32),
                         np.array([0, 2], np.int32), page_size=4, q_heads=2, kv_heads=1, head_dim=8)
    rng = np.random.default_rng(1)
    q = rng.standard_normal((2, 2, 8)).astype(np.float32)
    k, v = (rng.standard_normal((2, 4, 1, 8)).astype(np.float32) for _ in range(2))
    table = (np.array([0, 2], np.int32), np.array([1, 0], np.int32), np.array([3], np.int32))
    plan8 = att.BatchPlan(*table, np.array([0, 2], np.int32), page_size=4, q_heads=2, kv_heads=1, head_dim=8,
                          kv_dtype=np.int8)
    k8, v8 = np.zeros((2, 4, 1, 8), np.int8), np.zeros((2, 4, 1, 8), np.int8)
    k8_scale, v8_scale = np.zeros((2, 4, 1), np.float32), np.zeros((2, 4, 1), np.float32)
    att.quantize_into(k8, v8, *table, 0, np.arange(6), rng.standard_normal((6, 1, 8)).astype(np.float32),
                      rng.standard_normal((6, 1, 8)).astype(np.float32), kv_dtype=np.int8, k_scale=k8_scale,
                      v_scale=v8_scale)

    def quantize_into():  # into pages of this call's own: it holds no state but the caller's arrays
        pages, scales = [np.zeros((2, 4, 1, 8), np.int8) for _ in range(2)], [np.zeros((2, 4, 1), np.float32)
                                                                               for _ in range(2)]
        att.quantize_into(*pages, *table, 0, np.arange(6), np.ones((6, 1, 8), np.float32),
                          np.ones((6, 1, 8), np.float32), kv_dtype=np.int8, k_scale=scales[0], v_scale=scales[1])

    calls = {"run": lambda: plan.run(q, k, v, lse=np.empty((2, 2), np.float32)),
             "run (int8 pages)": lambda: plan8.run(q, k8, v8, k_scale=k8_scale, v_scale=v8_scale),
             "attention.quantize_into": quantize_into,
             "_properties": ("batch", "dtype", "kv_chunk", "kv_dtype", "kv_lens", "page_size", "tokens", "workers",
                             "workspace_bytes")}
    return SHARED, plan, members(plan, calls)  # runs take turns on the plan's lock


def mask_case():
    m = att.Mask.sliding_window(4)
    calls = {"causal": lambda: m.causal(), "none": lambda: m.none(), "sliding_window": lambda: m.sliding_window(2),
             "visible": lambda: m.visible(1, 0, 2, 2),
             "_properties": ("alignment", "is_causal", "offset", "window")}
    return SHARED, m, members(m, calls)


def plan_case():
    p = att.plan(q_heads=2, kv_heads=1, q_len=8, kv_len=8, head_dim=8, threads=2)
    q = np.ones((2, 8, 8), np.float32)
    kv = np.ones((1, 8, 8), np.float32)
    calls = {"attention.run": lambda: att.run(p, q, kv, kv),
             "_properties": ("head_dim", "kv_heads", "kv_len", "kv_tile", "q_heads", "q_len", "q_tile", "workers",
                             "workspace_bytes")}
    return SHARED, p, members(p, calls)


def kv_cache_case(cls):
    evicted = []
    c = cls(8, on_evict=lambda key, value, reason: evicted.append(key))
    keys = list(range(12))

    def key():
        return random.choice(keys)

    def pin_unpin():
        k = key()
        c.pin(k)
        c.unpin(k)

    calls = {
        "__contains__": lambda: key() in c, "__delitem__": lambda: c.__delitem__(key()),
        "__getitem__": lambda: c[key()], "__iter__": lambda: list(c), "__len__": lambda: len(c),
        "__setitem__": lambda: c.__setitem__(key(), [key()]), "capacity": lambda: setattr(c, "capacity", 8 + key() % 2),
        "clear": lambda: c.clear() if random.random() < 0.05 else None, "erase": lambda: c.erase(key()),
        "get": lambda: c.get(key()), "items": c.items, "keys": c.keys,
        "on_evict": lambda: setattr(c, "on_evict", c.on_evict), "peek": lambda: c.peek(key()),
        "pin": pin_unpin, "unpin": pin_unpin, "pins": lambda: c.pins(key()), "purge_expired": c.purge_expired,
        "put": lambda: c.put(key(), object(), weight=1 + key() % 2), "reset_stats": c.reset_stats,
        "set_ttl": lambda: c.set_ttl(None), "_properties": ("stats", "ttl", "ttl_after_access", "weight"),
    }
    return SHARED, c, members(c, calls)  # every call holds the GIL from start to end


def cache_stats_case():
    c = cache.LRUCache(2)
    for k in range(4):
        c.put(k, k)
    s = c.stats
    return SHARED, s, members(s, {"evicted": lambda: s.evicted(cache.EvictionReason.capacity),
                                  "_properties": ("bytes_hit", "hit_ratio", "hits", "insertions", "misses")})


CHUNKS = np.arange(1, 65, dtype=np.int64)


def tree_insert(tree, n, lock=None):
    chunks = CHUNKS[:n]
    return tree.insert(chunks, chunks * 10, np.full(n, 8, np.uint64), lock=lock)


def prefix_tree_case(policy):
    tree = cache.PrefixTree(budget_bytes=400, policy=policy, on_evict=lambda *event: None)
    tree_insert(tree, 16)

    def with_match():
        with tree.match(CHUNKS[:random.randrange(1, 32)]) as m:
            tree_insert(tree, random.randrange(1, 64), lock=m)

    calls = {"__len__": lambda: len(tree), "budget": lambda: setattr(tree, "budget", tree.budget),
             "cached_length": lambda: tree.cached_length(CHUNKS), "clear": tree.clear,
             "evict": lambda: tree.evict(16), "evict_one": tree.evict_one, "insert": lambda: tree_insert(tree, 40),
             "load": lambda: tree.load(path_of("tree")) if os.path.exists(path_of("tree")) else None,
             "save": lambda: tree.save(path_of("tree")), "match": with_match,
             "on_evict": lambda: setattr(tree, "on_evict", tree.on_evict),
             "_properties": ("bytes", "evictions", "locked_bytes", "policy")}
    return FLAGGED, tree, members(tree, calls)


def prefix_match_case(policy):
    tree = cache.PrefixTree(budget_bytes=400, policy=policy)
    tree_insert(tree, 24)
    m = tree.match(CHUNKS[:24])
    calls = {"__enter__": m.__enter__, "__exit__": lambda: m.__exit__(None, None, None), "__len__": lambda: len(m),
             "handle": lambda: m.handle(0), "handles": lambda: m.handles, "namespace": lambda: m.namespace,
             "release": m.release,
             # the lock's tree, which its release writes
             "tree.insert": lambda: tree_insert(tree, 48, lock=m), "tree.evict": lambda: tree.evict(400),
             "tree.match": lambda: tree.match(CHUNKS[:random.randrange(1, 48)]).release()}
    return FLAGGED, m, calls


TIER_NS = cache.TierNamespace("threads", "bf16", "nhd", 4)
TIER_KEYS = cache.chunk_keys(np.arange(32, dtype=np.int32), TIER_NS)


def tier_calls(t):
    pages = np.zeros((len(TIER_KEYS), 64), np.uint8)
    return {"exists_prefix": lambda: t.exists_prefix(TIER_KEYS), "get": lambda: t.get(TIER_KEYS, pages.copy()),
            "put": lambda: t.put(TIER_KEYS, pages), "_properties": ("stats",)}


def disk_tier_case():
    t = cache.DiskTier(path_of("tier"), TIER_NS, byte_budget=1 << 20)
    return FLAGGED, t, members(t, {**tier_calls(t), "_properties": ("stats", "directory")})


def redis_tier_case():
    t = cache.RedisTier(TIER_NS, port=1, timeout_ms=20, max_backoff_ms=20)  # nothing listens: every call misses
    return FLAGGED, t, members(t, {**tier_calls(t), "connected": t.connected})


def tier_namespace_case():
    return SHARED, TIER_NS, members(TIER_NS, {"_properties": ("model", "dtype", "layout", "page_tokens", "id")})


def tier_stats_case():
    s = cache.DiskTier(path_of("tier-stats"), TIER_NS, byte_budget=1 << 20).stats
    return SHARED, s, members(s, {"_properties": ("hits", "misses", "puts", "evictions", "refused", "errors",
                                                  "bytes_read", "bytes_written")})


def tiered_tree():
    pages = np.zeros((24, 64), np.uint8)
    tier = cache.DiskTier(path_of("tiered"), TIER_NS, byte_budget=1 << 20)
    tree = cache.TieredPrefixTree(tier, pages, TIER_NS, budget_bytes=16 * 64, write="back")

    def serve():
        with tree.match(TIER_KEYS) as hit:
            return tree.insert(hit, TIER_KEYS, tree.allocate(len(TIER_KEYS) - len(hit)))
    return tier, tree, serve


def tiered_tree_case():
    tier, tree, serve = tiered_tree()
    calls = {"__len__": lambda: len(tree), "allocate": lambda: tree.release_rows(tree.allocate(2)),
             "release_rows": lambda: tree.release_rows(tree.allocate(1)), "evict": lambda: tree.evict(128),
             "flush": tree.flush, "insert": serve, "match": serve, "keys": lambda: tree.keys(np.arange(16, dtype=np.int32)),
             "prefetch": lambda: tree.match(tree.prefetch(TIER_KEYS)).release(),
             "tier.get": lambda: tier.exists_prefix(TIER_KEYS),  # the tier, which the tree's calls hold
             "_properties": ("budget", "bytes", "free_rows", "locked_bytes", "stats", "unwritten")}
    return FLAGGED, tree, members(tree, calls)


def tiered_match_case():
    tier, tree, serve = tiered_tree()
    m = tree.match(TIER_KEYS)
    calls = {"__enter__": m.__enter__, "__exit__": lambda: m.__exit__(None, None, None), "__len__": lambda: len(m),
             "release": m.release, "tree.serve": serve, "tree.evict": lambda: tree.evict(1024),
             "_properties": ("pages", "from_tier")}
    return FLAGGED, m, members(m, calls)


def tiered_prefetch_case():
    # The tier holds TIER_KEYS' pages, memory none: the ticket loads them all.
    tier, tree, serve_keys = tiered_tree()
    serve_keys()
    tree.flush()
    tree.evict(1 << 30)
    ticket = tree.prefetch(TIER_KEYS)
    folder = path_of("tiered")  # tiered_tree's folder (this thread's)

    def load():  # each thread loads through a tier object of its own
        ticket.load(cache.DiskTier(folder, TIER_NS, byte_budget=1 << 20))
    calls = {"load": load, "tree.match": lambda: tree.match(ticket).release(), "_properties": ("pages",)}
    return FLAGGED, ticket, members(ticket, calls)  # pages and match hold the tree's flag


def tiered_stats_case():
    _, tree, serve = tiered_tree()
    serve()
    s = tree.stats
    return SHARED, s, members(s, {"_properties": ("pages_from_memory", "pages_from_tier", "pages_written",
                                                  "write_failures")})


def result_case(r):
    """A result: its fields, and the tuple or dict it replaced, when it still answers as one."""
    fields = [n for n in dir(type(r)) if not n.startswith("_") and isinstance(getattr(type(r), n), property)]
    calls = {"__repr__": lambda: repr(r), "_properties": tuple(fields)}
    if hasattr(type(r), "__iter__"):  # a previous release's tuple
        calls.update(__iter__=lambda: tuple(r), __len__=lambda: len(r), __getitem__=lambda: r[0])
    elif hasattr(type(r), "__getitem__"):  # a previous release's dict
        calls["__getitem__"] = lambda: r[fields[0]]
    return SHARED, r, members(r, calls)


def tiered_insert_case():
    _, _, serve = tiered_tree()
    return result_case(serve())


def saved_bank(bank, name):
    """A file this thread saved from `bank` (a load of it raises the busy error, never a missing file)."""
    path = path_of(name)
    if not os.path.exists(path):
        bank.save(path)
    return path


def semantic_case():
    rng = np.random.default_rng(2)
    s = cache.SemanticCache(capacity=32, dim=16, tau=0.5)
    embeddings = rng.standard_normal((40, 16)).astype(np.float32)

    def pick():
        return random.randrange(len(embeddings))

    calls = {"__contains__": lambda: pick() in s, "__len__": lambda: len(s), "erase": lambda: s.erase(pick()),
             "find": lambda: s.find(pick()), "insert": lambda: (lambda i: s.insert(f"q{i}", embeddings[i]))(pick()),
             "lookup": lambda: (lambda i: s.lookup(f"q{i}", embeddings[i]))(pick()),
             "set_answer": lambda: s.set_answer(pick(), "a"), "tau": lambda: setattr(s, "tau", s.tau),
             "save": lambda: s.save(path_of("bank")), "load": lambda: s.load(saved_bank(s, "bank")),
             "_properties": ("capacity", "dim", "misses", "stats", "weight")}
    return FLAGGED, s, members(s, calls)


def tiered_semantic_case():
    tier = cache.DiskTier(path_of("answers"), TIER_NS, byte_budget=1 << 20)
    s = cache.TieredSemanticCache(tier, TIER_NS, capacity=16, dim=8, tau=0.5)
    embeddings = np.random.default_rng(3).standard_normal((24, 8)).astype(np.float32)

    def pick():
        return random.randrange(len(embeddings))

    calls = {"__contains__": lambda: pick() in s, "__len__": lambda: len(s), "erase": lambda: s.erase(pick()),
             "find": lambda: s.find(pick()),
             "insert": lambda: (lambda i: s.insert(f"q{i}", embeddings[i], f"a{i}"))(pick()),
             "lookup": lambda: (lambda i: s.lookup(f"q{i}", embeddings[i]))(pick()),
             "set_answer": lambda: s.set_answer(pick(), "a"), "tau": lambda: setattr(s, "tau", s.tau),
             "restore": s.restore, "tier.stats": lambda: tier.stats,  # the tier, which the bank's I/O holds
             "save": lambda: s.save(path_of("tiered-bank")), "load": lambda: s.load(saved_bank(s, "tiered-bank")),
             "_properties": ("capacity", "dim", "misses", "stats", "tiered_stats", "weight")}
    return FLAGGED, s, members(s, calls)


def shared_documents_case():
    tier = cache.DiskTier(path_of("outputs"), TIER_NS, byte_budget=1 << 20)
    s = cache.SharedDocuments(tier, TIER_NS)
    other = cache.SharedDocuments(cache.DiskTier(path_of("outputs"), TIER_NS, byte_budget=1 << 20), TIER_NS)
    calls = {"publish": lambda: s.publish(np.arange(random.randrange(1, 50), dtype=np.int32)), "pull": s.pull,
             "other.publish": lambda: other.publish(np.arange(random.randrange(50, 99), dtype=np.int32)),
             "tier.stats": lambda: tier.stats,  # the tier, which publish and pull hold
             "_properties": ("stats",)}
    return FLAGGED, s, members(s, calls)


def shared_documents_stats_case():
    s = cache.SharedDocuments(cache.DiskTier(path_of("outputs-stats"), TIER_NS, byte_budget=1 << 20), TIER_NS)
    s.publish(np.arange(5, dtype=np.int32))
    r = s.stats
    return SHARED, r, members(r, {"_properties": ("published", "write_failures", "pulled", "refused")})


def tiered_answer_stats_case():
    s = cache.TieredSemanticCache(cache.DiskTier(path_of("answer-stats"), TIER_NS, byte_budget=1 << 20), TIER_NS,
                                  capacity=4, dim=2, tau=0.5)
    s.insert("q", np.array([1, 0], np.float32), "a")
    r = s.tiered_stats
    return SHARED, r, members(r, {"_properties": ("tier_hits", "writes", "write_failures", "refused")})


PROMPT = np.array([5, 6, 7, 8, 5, 6, 7, 9, 5, 6], np.int32)


def drafter_case():
    history = draft.History(1 << 10)
    history.add(PROMPT)
    d = draft.Drafter(history, tree_budget=8)
    d.begin(PROMPT)
    calls = {"accept": lambda: d.accept(7), "begin": lambda: d.begin(PROMPT), "chain": d.chain,
             "chain_with_probabilities": d.chain_with_probabilities, "tree": d.tree,
             "_properties": ("config", "context_match", "context_size", "history_match")}
    return FLAGGED, d, members(d, calls)


def drafter_config_case():
    c = draft.Drafter().config
    return SHARED, c, members(c, {"_properties": ("backoff", "context_escape", "history_escape", "max_draft",
                                                  "max_fanout", "min_match", "min_path_score", "tree_budget",
                                                  "tree_depth", "vocab_size")})


def history_case():
    h = draft.History(1 << 9)  # small: adds evict old documents

    def save_load():
        h.save(path_of("history"))
        return draft.History.load(path_of("history"))

    def publisher():
        with h.start_publisher():
            h.add(PROMPT, publish=False)

    calls = {"__len__": lambda: len(h), "add": lambda: h.add(PROMPT), "publish": h.publish, "save": save_load,
             "load": save_load, "start_publisher": publisher,
             "drafter": lambda: draft.Drafter(h).begin(PROMPT),
             "_properties": ("documents", "max_tokens", "memory_bytes", "pending", "version", "young_tokens")}
    return SHARED, h, members(h, calls)  # thread-safe in C++


def publisher_case():
    h = draft.History(1 << 10)
    p = h.start_publisher()
    calls = {"stop": p.stop, "__enter__": p.__enter__, "__exit__": lambda: p.__exit__(None, None, None),
             "history.add": lambda: h.add(PROMPT, publish=False), "_properties": ("running",)}
    return SHARED, p, members(p, calls)  # stop() is idempotent and takes a lock


def speculator_case():
    sp = draft.Speculator(draft.History(1 << 10), tree_budget=8)
    ids = list(range(6))
    for i in ids[:3]:
        sp.start(i, PROMPT)
    costs = (draft.RooflineCost.h100_7b(), draft.MeasuredCost([(1, 4.0), (64, 9.0)]), PythonCost())
    calls = {"start": lambda: sp.start(random.choice(ids), PROMPT), "append": lambda: sp.append(random.choice(ids), 5),
             "propose": lambda: sp.propose([random.choice(ids)], cost=random.choice((None,) + costs)),
             "stop": lambda: sp.stop(random.choice(ids)),
             "__contains__": lambda: random.choice(ids) in sp, "__len__": lambda: len(sp),
             "_properties": ("calibration_observations",)}
    return FLAGGED, sp, members(sp, calls)


class PythonCost:
    """A verification cost written in Python (called with the GIL from the sizing thread)."""
    def step_ms(self, tokens):
        return 4.0 + 0.05 * tokens


def roofline_cost_case():
    c = draft.RooflineCost(4.0, 0.1)
    calls = {"step_ms": lambda: c.step_ms(random.randrange(1000)), "from_hardware": lambda: c.from_hardware(1, 1, 1, 1),
             "h100_7b": draft.RooflineCost.h100_7b, "cpu_1b": draft.RooflineCost.cpu_1b,
             "_properties": ("weights_ms", "ms_per_token")}
    return SHARED, c, members(c, calls)  # immutable


def measured_cost_case():
    c = draft.MeasuredCost([(1, 4.0), (64, 9.0)])
    calls = {"step_ms": lambda: c.step_ms(random.randrange(1000)), "_properties": ("points",)}
    return SHARED, c, members(c, calls)  # immutable


def automaton_case():
    a = draft.SuffixAutomaton()
    a.append(PROMPT)

    def state():
        return random.randrange(2)  # the root and its first child exist from the start

    calls = {"append": lambda: a.append(PROMPT[:3]), "begin_document": a.begin_document,
             "clear": lambda: (a.clear(), a.append(PROMPT)) if random.random() < 0.05 else None,
             "continuation": lambda: a.continuation(0, 4), "count": lambda: a.count(state()),
             "find": lambda: a.find(PROMPT[:2]), "first_end": lambda: a.first_end(state()),
             "last_end": lambda: a.last_end(state()), "length": lambda: a.length(state()),
             "link": lambda: a.link(state()), "next": lambda: a.next(0, 5),
             "transitions": lambda: a.transitions(0), "__len__": lambda: len(a),
             "_properties": ("document_starts", "last", "memory_bytes", "repeat_end", "repeat_length", "repeat_state",
                             "root", "state_count", "text")}
    return FLAGGED, a, members(a, calls)


def semantic_result_case(kind):
    s = cache.SemanticCache(capacity=4, dim=2, tau=0.5)
    i = s.insert("q", np.array([1, 0], np.float32), answer="a")
    return result_case(s.lookup("q", np.array([1, 0], np.float32)) if kind == "hit" else s.find(i))


def draft_result_case(packed):
    sp = draft.Speculator()
    sp.start(1, PROMPT)
    return result_case(sp.propose([1], packed=True) if packed else sp.propose([1])[0])


def verify_result_case():
    r = draft.verify_tree([4, 5, 6], [-1, -1, 1], [5, 0, 6, 8])
    return SHARED, r, members(r, {"_properties": ("accepted", "bonus", "path")})




def trajectory_set():
    rng = np.random.default_rng(3)
    return prune.TrajectorySet([rng.uniform(0, 3, (8, 4)).astype(np.float32) for _ in range(4)])


def calibration_case():
    r = prune.calibrate_threshold(trajectory_set(), 2, 0.5, grid_points=4)
    return SHARED, r, members(r, {"_properties": ("chosen", "curve", "met", "threshold")})


def chunk_planning_case():
    cp = prune.ChunkPlanning(per_token_seconds=1e-6, min_chunk_seconds=1e-5, intermediate_bytes_per_token=4,
                             next_layer_load_seconds=1e-4, memory_limit_bytes=1 << 20)
    return SHARED, cp, {"progressive_rank": lambda: prune.progressive_rank(IdReranker(), 6, 2, prune.ClusterPruner(),
                                                                           planning=cp)}


def pruner_case():
    p = prune.ClusterPruner(threshold=0.1)
    scores = np.array([1, 2, 3, 10, 11, 12], np.float32)
    calls = {"decide": lambda: p.decide(scores, 3), "reset": p.reset,
             "progressive_rank": lambda: prune.progressive_rank(IdReranker(), 6, 2, p), "_properties": ("options",)}
    return FLAGGED, p, members(p, calls)


def pruner_options_case():
    o = prune.ClusterPrunerOptions(threshold=0.2)
    fields = ("clusters", "confirmations", "lead_over_change", "max_clusters", "measure", "mode", "patience",
              "threshold")
    calls = {f: (lambda f=f: setattr(o, f, getattr(o, f))) for f in fields}
    trajectories = trajectory_set()
    # The functions that read the options without the GIL.
    calls["evaluate_pruning"] = lambda: prune.evaluate_pruning(trajectories, 2, o)
    calls["calibrate_threshold"] = lambda: prune.calibrate_threshold(trajectories, 2, 0.5, policy=o, grid_points=3)
    calls["threshold_grid"] = lambda: prune.threshold_grid(trajectories, o, 3)
    calls["ClusterPruner"] = lambda: prune.ClusterPruner(o)
    return SHARED, o, calls  # plain values: read and written with the GIL held


def kmeans_case():
    km = prune.KMeans1D()
    scores = np.array([1, 1.1, 5, 5.2, 9, 9.1])
    km.fit(scores, 3)
    calls = {"fit": lambda: km.fit(scores, 3), "sse": lambda: km.sse(2), "bic": lambda: km.bic(2),
             "select_k_bic": km.select_k_bic, "clustering": lambda: km.clustering(2), "__len__": lambda: len(km),
             "_properties": ("k_max", "order")}
    return FLAGGED, km, members(km, calls)


def kmeans_result_case():
    r = prune.kmeans1d_optimal(np.array([1.0, 1.1, 5.0, 5.2]), 2)
    return SHARED, r, members(r, {"_properties": ("centroids", "labels", "sizes", "sse", "withinss")})


def ranking():
    return prune.progressive_rank(IdReranker(), 6, 2, prune.ClusterPruner())


def layer_stats_case():
    s = ranking().layers[0]
    return SHARED, s, members(s, {"_properties": ("active", "chunk_size", "chunks", "dispersion", "dropped", "layer",
                                                  "selected", "triggered")})


def progressive_ranking_case():
    r = ranking()
    return SHARED, r, members(r, {"_properties": ("candidate_layers_computed", "candidate_layers_skipped", "layers",
                                                  "scores", "top")})


def prune_step_case():
    step = prune.ClusterPruner(threshold=0.1).decide(np.array([1, 2, 10, 11], np.float32), 2).step
    return SHARED, step, members(step, {"_properties": ("clusters", "deferred", "dispersion", "done", "dropped",
                                                        "selected", "triggered")})


def evaluation_case():
    e = prune.evaluate_pruning(trajectory_set(), 2)
    return SHARED, e, members(e, {"_properties": ("k", "layer_compute_saved", "mean_active_per_layer",
                                                  "precision_at_k", "queries", "query_loss")})


def threshold_point_case():
    p = prune.calibrate_threshold(trajectory_set(), 2, 0.5, grid_points=4).curve[0]
    return SHARED, p, members(p, {"_properties": ("layer_compute_saved", "precision_at_k", "threshold")})


def trajectories_case():
    t = trajectory_set()

    def save_load():
        t.save(path_of("trajectories"))
        return prune.TrajectorySet.load(path_of("trajectories"))

    calls = {"__getitem__": lambda: t[1], "__len__": lambda: len(t), "save": save_load, "load": save_load,
             "evaluate_pruning": lambda: prune.evaluate_pruning(t, 2), "_properties": ("layers",)}
    return SHARED, t, members(t, calls)  # immutable


def problem():
    return sch.GraphSwitchProblem(prefill_compute=[1, 1, 2], decode_compute=[1.2, 1.5, 2], load=[2, 1, 3], chunks=2)


def fragment_case():
    f = sch.Fragment(100, [0, 2])
    calls = {"place_fragments": lambda: sch.place_fragments([f, f], 150),
             "_properties": ("blocks", "bytes")}
    return SHARED, f, members(f, calls)


def graph_switch_case():
    p = problem()
    calls = {"greedy_graph_switch": lambda: sch.greedy_graph_switch(p), "exact": lambda: sch.exact_graph_switch(p),
             "makespan": lambda: sch.graph_switch_makespan(p, [1, 1, 2]),
             "_properties": ("blocks", "chunks", "decode_compute", "load", "prefill_compute")}
    return SHARED, p, members(p, calls)


def placement_case():
    frags = [sch.Fragment(100, [0]), sch.Fragment(200, [1])]
    p = sch.place_fragments(frags, 150)
    calls = {"placement_timeline": lambda: sch.placement_timeline(frags, p, np.ones(2), 100.0).simulate(),
             "_properties": ("exact", "resident", "resident_bytes", "transfer_bytes_per_pass")}
    return SHARED, p, members(p, calls)


def timeline_case():
    t = sch.Timeline()
    for i in range(50):
        t.add(sch.Resource.io if i % 2 else sch.Resource.compute, 1.0, after=[i - 1] if i else [])
    calls = {"add": lambda: t.add(sch.Resource.compute, 0.5, after=[0]), "simulate": t.simulate,
             "__len__": lambda: len(t)}
    return FLAGGED, t, calls


def timeline_result_case():
    r = sch.graph_switch_timeline(problem(), [1, 1, 2]).timeline.simulate()
    calls = {"busy_time": lambda: r.busy_time(sch.Resource.io), "idle_time": lambda: r.idle_time(sch.Resource.compute),
             "_properties": ("finish", "makespan", "peak_resident_bytes", "start")}
    return SHARED, r, members(r, calls)


class TinyEngine:
    """The smallest rag generator: one step per node, an answer at commit."""

    def step(self, batch):
        return 0.0

    def step_time(self, count, context):
        return 0.0

    def length(self, state, node):
        return 1

    def commit(self, state, node):
        state.texts[node.name] = "x"

    def discard(self, request):
        pass


class TinyIndex:
    """The smallest rag retriever: one list of three documents."""

    def query_of(self, state, node):
        return state.input

    def probe(self, query):
        return [0]

    def cluster_time(self, c):
        return 0.0

    def search(self, batch):
        for slot in batch:
            for d in range(3):
                slot.offer(float(d), d)
        return 0.0


def tiny_graph():
    return rag.one_shot_workflow(2, answer=1)


def rag_runtime_case():
    graph = tiny_graph()
    rt, spare = rag.Runtime(TinyEngine(), TinyIndex()), rag.Runtime(TinyEngine(), TinyIndex())

    def with_block():
        with rag.Runtime(TinyEngine(), TinyIndex()) as r:
            assert r.submit(graph, "q").result(timeout=30).status == rag.Status.finished

    def cleanup():
        rt.close()
        spare.close()

    calls = {"submit": lambda: rt.submit(graph, "q"), "metrics": lambda: rt.metrics().to_json(), "drain": rt.drain,
             "close": spare.close, "__enter__": with_block, "__exit__": with_block,
             "_properties": ("closed", "generator", "retriever")}
    return SHARED, rt, members(rt, calls), cleanup  # submit, metrics, drain, close: thread-safe in C++


def rag_future_case():
    rt = rag.Runtime(TinyEngine(), TinyIndex())
    f = rt.submit(tiny_graph(), "q")
    return SHARED, f, {"result": lambda: f.result(timeout=30), "done": f.done, "cancel": f.cancel}, rt.close


def rag_result_case():
    with rag.Runtime(TinyEngine(), TinyIndex()) as rt:
        r = rt.submit(tiny_graph(), "q").result()
    return SHARED, r, members(r, {"_properties": ("error", "exception", "metrics", "state", "status")})


def rag_request_metrics_case():
    with rag.Runtime(TinyEngine(), TinyIndex()) as rt:
        m = rt.submit(tiny_graph(), "q").result().metrics
    return SHARED, m, members(m, {"to_json": m.to_json, "to_dict": m.to_dict,
                                  "_properties": ("decode_steps", "end_to_end_ms", "first_token_ms", "generation_ms",
                                                  "queued_ms", "retrieval_ms", "retrieval_substages")})


def rag_runtime_metrics_case():
    with rag.Runtime(TinyEngine(), TinyIndex()) as rt:
        m = rt.metrics()
    fields = ("cancelled", "elapsed_ms", "failed", "finished", "generation_batch_max", "generation_batch_mean",
              "generation_batches", "generation_busy", "in_flight", "queued", "retrieval_batch_max",
              "retrieval_batch_mean", "retrieval_batches", "retrieval_busy", "submitted", "timed_out")
    return SHARED, m, members(m, {"to_json": m.to_json, "to_dict": m.to_dict, "_properties": fields})


def rag_state_case():
    s = rag.State("q", texts={"a": "b"}, values={"n": 1})
    calls = {"texts": lambda: setattr(s, "texts", {"a": random.choice("xyz")}), "values": lambda: s.values.update({"n": 2}),
             "input": lambda: setattr(s, "input", s.input), "text": lambda: s.text("a"), "get": lambda: s.get("n"),
             "visited": lambda: s.visited(0), "copy": s.copy, "_properties": ("request", "retrieved", "visits")}
    return SHARED, s, members(s, calls)  # every call holds the GIL


def rag_map_case(kind):
    s = rag.State("q")
    m = getattr(s, kind)
    keys = ["a", "b", "c"]

    def value():
        return random.choice(keys) if kind == "texts" else random.randrange(9)

    def delete_all():
        for k in m:  # iteration is a snapshot: deleting while walking is safe
            m.__delitem__(k)

    calls = {"__getitem__": lambda: m[random.choice(keys)], "__setitem__": lambda: m.__setitem__(random.choice(keys), value()),
             "__delitem__": lambda: m.__delitem__(random.choice(keys)), "__contains__": lambda: random.choice(keys) in m,
             "__iter__": delete_all, "__len__": lambda: len(m), "items": m.items, "keys": m.keys, "values": m.values,
             "get": lambda: m.get(random.choice(keys)), "update": lambda: m.update({random.choice(keys): value()}),
             "clear": lambda: m.clear() if random.random() < 0.05 else None}
    return SHARED, m, calls  # with the GIL


def rag_graph_case():
    g = rag.Graph()
    g.add_retrieval(0, "retrieve", 2)
    g.add_edge(rag.START, 0)
    ids = range(1, 6)

    def node_id():
        return random.choice(ids)

    calls = {"add_generation": lambda: g.add_generation(node_id(), "g", 2),
             "add_retrieval": lambda: g.add_retrieval(node_id(), "r", 2),
             "add_user": lambda: g.add_user(node_id(), "u", lambda s: None),
             "add_edge": lambda: g.add_edge(node_id(), lambda s: rag.END, targets=[rag.END]),
             "bound_visits": lambda: g.bound_visits(node_id(), 2), "validate": g.validate,
             "next": lambda: g.next(rag.START, rag.State("q")), "node": lambda: g.node(node_id()),
             "conditional": lambda: g.conditional(node_id()), "__contains__": lambda: node_id() in g,
             "_properties": ("frozen", "nodes")}
    return SHARED, g, members(g, calls)  # with the GIL; frozen (immutable) once submitted


def rag_node_case():
    n = tiny_graph().node(0)
    return SHARED, n, members(n, {"_properties": ("id", "kind", "name", "prompt_tokens", "tokens", "top_k")})


def rag_slot_case(side):
    """A slot while its call runs: the runtime's thread waits inside step or search meanwhile."""
    captured, release, box = threading.Event(), threading.Event(), {}

    def hold(batch):
        if "slot" not in box:
            box["slot"] = batch[0]
            captured.set()
            release.wait(60)

    class Engine(TinyEngine):
        def step(self, batch):
            if side == "generation":
                hold(batch)
            return 0.0

    class Index(TinyIndex):
        def search(self, batch):
            if side == "retrieval":
                hold(batch)
            return super().search(batch)

    rt = rag.Runtime(Engine(), Index())
    rt.submit(tiny_graph(), "q")
    assert captured.wait(30)
    slot = box["slot"]

    def cleanup():
        release.set()
        rt.close()

    if side == "generation":
        calls = {"_properties": ("context", "docs", "node", "request", "speculative", "state", "step")}
    else:
        calls = {"offer": lambda: slot.offer(random.random(), random.randrange(9)),
                 "_properties": ("clusters", "k", "query", "request", "results", "worst")}
    return SHARED, slot, members(slot, calls), cleanup  # with the GIL, during the call


KV_CACHES = ("ARCCache", "GDSFCache", "LFUCache", "LFUDACache", "LIRSCache", "LRUCache", "S3FIFOCache", "SIEVECache",
             "TwoQueueCache", "WTinyLFUCache")

CASES = {
    "frugal.attention.BatchPlan": batch_plan_case,
    "frugal.attention.CausalAlignment": lambda: enum_case(att.CausalAlignment.offset),
    "frugal.attention.Layout": lambda: enum_case(att.Layout.nhd, head_major=lambda: att.Layout.head_major,
                                                 token_major=lambda: att.Layout.token_major),  # deprecated names
    "frugal.attention.Mask": mask_case,
    "frugal.attention.Plan": plan_case,
    "frugal.attention.SoftmaxBase": lambda: enum_case(att.SoftmaxBase.two),
    **{f"frugal.cache.{n}": (lambda n=n: kv_cache_case(getattr(cache, n))) for n in KV_CACHES},
    "frugal.cache.Cache": lambda: kv_cache_case(cache.S3FIFOCache),  # the base of every one
    "frugal.cache.CacheStats": cache_stats_case,
    "frugal.cache.EvictionReason": lambda: enum_case(cache.EvictionReason.expired),
    "frugal.cache.PutResult": lambda: enum_case(cache.PutResult.rejected),
    "frugal.cache.PrefixTree": lambda: prefix_tree_case(cache.PrefixTreePolicy.gdsf),
    "frugal.cache.PrefixTreeMatch": lambda: prefix_match_case(cache.PrefixTreePolicy.s3fifo),
    "frugal.cache.PrefixTreePolicy": lambda: enum_case(cache.PrefixTreePolicy.lru),
    "frugal.cache.InsertResult": tiered_insert_case,
    "frugal.cache.EvictResult": lambda: result_case(cache.PrefixTree(10).evict(1)),
    "frugal.cache.SemanticEntry": lambda: semantic_result_case("entry"),
    "frugal.cache.SemanticHit": lambda: semantic_result_case("hit"),
    "frugal.cache.SemanticCache": semantic_case,
    "frugal.cache.DiskTier": disk_tier_case,
    **({"frugal.cache.RedisTier": redis_tier_case} if hasattr(cache, "RedisTier") else {}),
    "frugal.cache.TierNamespace": tier_namespace_case,
    "frugal.cache.TierStats": tier_stats_case,
    "frugal.cache.TieredPrefixTree": tiered_tree_case,
    "frugal.cache.TieredMatch": tiered_match_case,
    "frugal.cache.TieredPrefetch": tiered_prefetch_case,
    "frugal.cache.TieredStats": tiered_stats_case,
    "frugal.cache.TieredSemanticCache": tiered_semantic_case,
    "frugal.cache.TieredAnswerStats": tiered_answer_stats_case,
    "frugal.cache.SharedDocuments": shared_documents_case,
    "frugal.cache.SharedDocumentsStats": shared_documents_stats_case,
    "frugal.draft.Drafter": drafter_case,
    "frugal.draft.DrafterConfig": drafter_config_case,
    "frugal.draft.DraftTree": lambda: draft_result_case(packed=False),
    "frugal.draft.PackedDrafts": lambda: draft_result_case(packed=True),
    "frugal.draft.History": history_case,
    "frugal.draft.HistoryPublisher": publisher_case,
    "frugal.draft.MeasuredCost": measured_cost_case,
    "frugal.draft.RooflineCost": roofline_cost_case,
    "frugal.draft.Speculator": speculator_case,
    "frugal.draft.SuffixAutomaton": automaton_case,
    "frugal.draft.VerifyResult": verify_result_case,
    "frugal.prune.CalibrationResult": calibration_case,
    "frugal.prune.ChunkPlanning": chunk_planning_case,
    "frugal.prune.ClusterPruner": pruner_case,
    "frugal.prune.ClusterPrunerOptions": pruner_options_case,
    "frugal.prune.DispersionMeasure": lambda: enum_case(prune.DispersionMeasure.robust_cv),
    "frugal.prune.KMeans1D": kmeans_case,
    "frugal.prune.KMeansResult": kmeans_result_case,
    "frugal.prune.LayerStats": layer_stats_case,
    "frugal.prune.ProgressiveRanking": progressive_ranking_case,
    "frugal.prune.PruneStep": prune_step_case,
    "frugal.prune.PruneDecision": lambda: result_case(prune.ClusterPruner().decide(np.array([1, 2, 9], np.float32), 1)),
    "frugal.prune.PruningEvaluation": evaluation_case,
    "frugal.prune.RankingMode": lambda: enum_case(prune.RankingMode.exact),
    "frugal.prune.Route": lambda: enum_case(prune.Route.dropped),
    "frugal.prune.ThresholdPoint": threshold_point_case,
    "frugal.prune.TrajectorySet": trajectories_case,
    "frugal.rag.GenerationSlot": lambda: rag_slot_case("generation"),
    "frugal.rag.Future": rag_future_case,
    "frugal.rag.Graph": rag_graph_case,
    "frugal.rag.Node": rag_node_case,
    "frugal.rag.NodeKind": lambda: enum_case(rag.NodeKind.user),
    "frugal.rag.Policy": lambda: enum_case(rag.Policy.wavefront),
    "frugal.rag.RequestMetrics": rag_request_metrics_case,
    "frugal.rag.Result": rag_result_case,
    "frugal.rag.RetrievalSlot": lambda: rag_slot_case("retrieval"),
    "frugal.rag.Runtime": rag_runtime_case,
    "frugal.rag.RuntimeMetrics": rag_runtime_metrics_case,
    "frugal.rag.State": rag_state_case,
    "frugal.rag.Status": lambda: enum_case(rag.Status.timed_out),
    "frugal.rag.TextMap": lambda: rag_map_case("texts"),
    "frugal.rag.ValueMap": lambda: rag_map_case("values"),
    "frugal.schedule.Fragment": fragment_case,
    "frugal.schedule.GraphSwitchProblem": graph_switch_case,
    "frugal.schedule.GraphSwitchTimeline": lambda: result_case(sch.graph_switch_timeline(problem(), [1, 1, 2])),
    "frugal.schedule.Placement": placement_case,
    "frugal.schedule.PlacementObjective": lambda: enum_case(sch.PlacementObjective.bytes_kept),
    "frugal.schedule.Resource": lambda: enum_case(sch.Resource.io),
    "frugal.schedule.Timeline": timeline_case,
    "frugal.schedule.TimelineResult": timeline_result_case,
}

DUNDERS = {"__len__", "__contains__", "__getitem__", "__setitem__", "__delitem__", "__iter__", "__enter__", "__exit__"}


ABSTRACT = {"frugal.cache.Cache"}  # only its subclasses have instances


def bound_classes():
    """Every class of every submodule of the extension module, by its full name (not the
    protocols of the Python objects frugal drives)."""
    out = {}
    for sub in vars(frugal._frugal).values():
        if isinstance(sub, types.ModuleType):
            for name, obj in vars(sub).items():
                if isinstance(obj, type) and issubclass(obj, pybind11_object) and not name.startswith("_"):
                    out[f"{sub.__name__}.{name}"] = obj
    return out


def public_methods(cls):
    names = {n for n in dir(cls) if not n.startswith("_") or n in DUNDERS}
    return names - set(getattr(cls, "__members__", {}))  # an enum's values are not methods


def hammer(calls, seconds):
    """Two threads call random methods of `calls` for `seconds`; returns the exceptions raised, by call."""
    names = sorted(calls)
    deadline = time.monotonic() + seconds
    raised = []

    def worker(seed):
        rnd = random.Random(seed)
        while time.monotonic() < deadline:
            name = rnd.choice(names)
            try:
                calls[name]()
            except Exception as e:  # judged by the caller
                raised.append((name, e))

    threads = [threading.Thread(target=worker, args=(seed,), daemon=True) for seed in (1, 2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=seconds + 30)
    assert not any(t.is_alive() for t in threads), "a call hangs"
    return raised


@pytest.fixture
def fast_switches():
    """Hands the GIL over every 10 us instead of 5 ms, so that calls interleave."""
    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-5)
    yield
    sys.setswitchinterval(old)


@pytest.mark.parametrize("name", sorted(set(bound_classes()) | set(CASES)))
@pytest.mark.filterwarnings("ignore::DeprecationWarning")  # the results' tuple and dict forms are called too
def test_two_threads_at_once(name, fast_switches):
    classes = bound_classes()
    assert name in CASES, f"{name} has no case here: add a factory and a call of each of its methods"
    assert name in classes, f"{name} is not a class of the module"
    random.seed(name)
    kind, obj, calls, *cleanup = CASES[name]()  # a case that holds threads ends them after
    try:
        assert type(obj) is classes[name] or (name in ABSTRACT and isinstance(obj, classes[name]))
        assert public_methods(classes[name]) <= set(calls), f"no call of {public_methods(classes[name]) - set(calls)}"
        for call, e in hammer(calls, SECONDS):
            if isinstance(e, frugal.RuntimeFailureError) and BUSY in str(e):
                assert kind == FLAGGED, f"{name}.{call}: documented as safe to share, raised {e!r}"
            else:
                assert isinstance(e, ARGUMENT_ERRORS), f"{name}.{call} raised {e!r}"
    finally:
        for end in cleanup:
            end()


# ---- a call without the GIL marks its object busy for every other method ------------------

def busy_is_seen(long_call, probe, seconds=3.0):
    """Whether `probe` raises the busy error while another thread repeats `long_call`."""
    stop = threading.Event()

    def loop():
        while not stop.is_set():
            long_call()

    t = threading.Thread(target=loop, daemon=True)
    t.start()
    try:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            try:
                probe()
            except frugal.RuntimeFailureError as e:
                assert BUSY in str(e)
                return True
            time.sleep(0)
        return False
    finally:
        stop.set()
        t.join(timeout=60)


LONG = np.arange(200_000, dtype=np.int64)


def long_tree():
    tree = cache.PrefixTree(budget_bytes=1 << 40)
    lock = tree.match(LONG[:1])

    def insert_and_clear():
        tree.insert(LONG, LONG, np.ones(LONG.size, np.uint64))
        tree.clear()

    return tree, lock, insert_and_clear


@pytest.mark.parametrize("probe", ["len", "bytes", "locked_bytes", "release", "__exit__", "handles", "__len__"])
def test_prefix_tree_reads_and_lock_release_take_the_busy_flag(probe):
    tree, lock, long_call = long_tree()
    probes = {"len": lambda: len(tree), "bytes": lambda: tree.bytes, "locked_bytes": lambda: tree.locked_bytes,
              "release": lock.release, "__exit__": lambda: lock.__exit__(None, None, None),
              "handles": lambda: lock.handles, "__len__": lambda: len(lock)}
    assert busy_is_seen(long_call, probes[probe])


def test_a_lock_freed_while_its_tree_is_busy_is_released_after():
    # Its deallocation can neither raise nor wait: the tree's next call releases it.
    tree = cache.PrefixTree(budget_bytes=1 << 40)
    tree.insert([-1], [7], np.array([8], np.uint64))
    lock = tree.match([-1])
    done = threading.Event()

    def insert():
        tree.insert(LONG, LONG, np.ones(LONG.size, np.uint64))
        done.set()

    t = threading.Thread(target=insert)
    t.start()
    while not done.is_set():
        try:
            len(tree)
        except frugal.RuntimeFailureError:
            break  # the insert runs
    del lock
    t.join(timeout=60)
    assert tree.locked_bytes == 0 and len(tree) == LONG.size + 1


def test_a_prefetch_loaded_on_another_thread_gives_match_the_pages_the_tier_holds(tmp_path):
    writer_pages = np.zeros((32, 256), np.uint8)
    writer = cache.TieredPrefixTree(cache.DiskTier(tmp_path, TIER_NS, byte_budget=1 << 20), writer_pages, TIER_NS)
    keys = writer.keys(np.arange(48, dtype=np.int32))  # 12 pages, written by another engine
    serve(writer, writer_pages, keys)
    pages = np.zeros((32, 256), np.uint8)
    tree = cache.TieredPrefixTree(cache.DiskTier(tmp_path, TIER_NS, byte_budget=1 << 20), pages, TIER_NS)
    serve(tree, pages, keys[:3])  # memory holds the first 3 (read from the tier)
    io_tier = cache.DiskTier(tmp_path, TIER_NS, byte_budget=1 << 20)
    ticket = tree.prefetch(keys)
    assert ticket.pages == 9 and tree.free_rows == 32 - 12
    io = threading.Thread(target=ticket.load, args=(io_tier,))
    io.start()
    other = tree.keys(np.arange(1000, 1024, dtype=np.int32))
    for _ in range(5):  # the engine goes on meanwhile
        serve(tree, pages, other)
    io.join()
    assert io_tier.stats.hits == 9
    with tree.match(ticket) as hit:
        assert len(hit) == 12 and hit.from_tier == 9
        np.testing.assert_array_equal(pages[hit.pages], pages_for(keys))
    assert ticket.pages == 0
    with pytest.raises(frugal.InvalidArgumentError, match="consumed"):
        tree.match(ticket)
    ticket.load(io_tier)  # after the match: nothing left to load
    assert io_tier.stats.hits == 9


def test_a_prefetch_dropped_while_another_thread_uses_the_tree_is_released_by_its_next_call(tmp_path):
    pages = np.zeros((16, 256), np.uint8)
    tree = cache.TieredPrefixTree(cache.DiskTier(tmp_path, TIER_NS, byte_budget=1 << 20), pages, TIER_NS)
    keys = tree.keys(np.arange(32, dtype=np.int32))
    serve(tree, pages, keys)  # memory holds all 8 pages: the ticket locks them and loads none
    ticket = tree.prefetch(keys)
    assert ticket.pages == 0 and tree.locked_bytes == 8 * 256
    stop = threading.Event()

    def busy():  # calls the tree until told to stop (each call holds it)
        while not stop.is_set():
            try:
                tree.evict(0)
            except frugal.RuntimeFailureError:
                pass  # the main thread was inside
    worker = threading.Thread(target=busy)
    worker.start()
    del ticket  # released now, or queued for the tree's next call
    stop.set()
    worker.join()
    assert tree.locked_bytes == 0 and tree.free_rows == 16 - 8


@pytest.mark.parametrize("probe", ["contains", "len"])
def test_speculator_membership_takes_the_busy_flag(probe):
    sp = draft.Speculator()
    prompt = np.random.default_rng(4).integers(0, 50, 300_000).astype(np.int32)

    def start_and_stop():
        sp.start(1, prompt)
        sp.stop(1)

    assert busy_is_seen(start_and_stop, {"contains": lambda: 1 in sp, "len": lambda: len(sp)}[probe])


@pytest.mark.parametrize("probe", ["tau", "len", "weight", "misses", "stats"])
def test_semantic_cache_tau_and_reads_take_the_busy_flag(probe):
    rng = np.random.default_rng(5)
    s = cache.SemanticCache(capacity=4000, dim=512, tau=0.99)
    embeddings = rng.standard_normal((4000, 512)).astype(np.float32)
    for i, e in enumerate(embeddings):
        s.insert(str(i), e)
    query = rng.standard_normal(512).astype(np.float32)
    probes = {"tau": lambda: setattr(s, "tau", 0.98), "len": lambda: len(s), "weight": lambda: s.weight,
              "misses": lambda: s.misses, "stats": lambda: s.stats}
    assert busy_is_seen(lambda: s.lookup("new", query), probes[probe])


def test_tiered_semantic_cache_holds_its_tier_while_it_reads_it(tmp_path):
    tier = cache.DiskTier(tmp_path, TIER_NS, byte_budget=1 << 24)
    bank = cache.TieredSemanticCache(tier, TIER_NS, capacity=4000, dim=64, tau=0.99)
    embeddings = np.random.default_rng(8).standard_normal((400, 64)).astype(np.float32)
    for i, e in enumerate(embeddings):
        bank.insert(str(i), e, "answer")
    assert busy_is_seen(bank.restore, lambda: tier.stats)  # 400 files read without the GIL
    assert busy_is_seen(bank.restore, lambda: len(bank))


@pytest.mark.parametrize("probe", ["k_max", "len"])
def test_kmeans_reads_take_the_busy_flag(probe):
    km = prune.KMeans1D()
    scores = np.random.default_rng(6).standard_normal(20_000)
    assert busy_is_seen(lambda: km.fit(scores, 16), {"k_max": lambda: km.k_max, "len": lambda: len(km)}[probe])


def long_timeline():
    t = sch.Timeline()
    for i in range(100_000):
        t.add(sch.Resource.io if i % 3 == 0 else sch.Resource.compute, 1.0, after=[i - 1] if i else [])
    return t


def test_timeline_add_and_len_take_the_busy_flag():
    t = long_timeline()
    assert busy_is_seen(t.simulate, lambda: len(t))
    assert busy_is_seen(t.simulate, lambda: t.add(sch.Resource.io, 1.0))


def test_timeline_add_during_simulate_never_corrupts_it(run_alone):
    # The crash: add() reallocating the tasks while simulate() reads them without the GIL.
    out = run_alone("""
        import threading, frugal
        from frugal import schedule as sch
        t = sch.Timeline()
        for i in range(200_000):
            t.add(sch.Resource.compute, 1.0, after=[i - 1] if i else [])
        done, busy = threading.Event(), 0
        def adder():
            global busy
            while not done.is_set():
                try:
                    t.add(sch.Resource.io, 1.0)
                except frugal.RuntimeFailureError as e:
                    assert "used from two threads at once" in str(e)
                    busy += 1
        a = threading.Thread(target=adder)
        a.start()
        for _ in range(5):
            r = t.simulate()
        done.set()
        a.join()
        print(busy > 0, len(r.finish) >= 200_000)
    """)
    assert out.split() == ["True", "True"]


def test_publisher_stop_from_two_threads_at_once(run_alone):
    # Both threads join the one writer thread: one does, the other waits for it (no double join).
    out = run_alone("""
        import threading
        from frugal import draft
        h = draft.History(1 << 12)
        for round in range(200):
            p = h.start_publisher()
            h.add([1, 2, 3], publish=False)
            barrier = threading.Barrier(2)
            def stop():
                barrier.wait()
                p.stop()
                assert not p.running
            threads = [threading.Thread(target=stop) for _ in range(2)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
        print("stopped", h.pending)
    """, timeout=60)
    assert out.split() == ["stopped", "0"]
