"""The cache tiers from Python: the disk tier in a temporary folder and the Redis tier against a
real redis-server started on a free loopback port. Oracles: the bytes put, a damaged file read as
a miss, another namespace seeing nothing, a stopped server costing misses (never an exception)."""
import os
import shutil
import socket
import subprocess
import sys
import time

import numpy as np
import pytest

import frugal
from frugal import cache, draft
from tiered_serving import pages_for, serve

NS = cache.TierNamespace("test-1b", "bf16", "nhd", page_tokens=4)


def test_chunk_keys_chain_over_the_prefix_and_the_namespace():
    a = cache.chunk_keys(np.arange(10, dtype=np.int32), NS)
    b = cache.chunk_keys(np.array([0, 1, 2, 3, 4, 5, 6, 9], np.int32), NS)
    assert a.shape == (2, 2) and a.dtype == np.uint64
    assert (a[0] == b[0]).all() and not (a[1] == b[1]).all()
    other = cache.chunk_keys(np.arange(10, dtype=np.int32), cache.TierNamespace("test-1b", "fp16", "nhd", 4))
    assert not (other[0] == a[0]).all()
    with pytest.raises(frugal.InvalidArgumentError, match="page_tokens must be > 0"):
        cache.TierNamespace("m", "bf16", "nhd", 0)


def test_disk_tier_round_trip_damage_and_namespaces(tmp_path):
    tier = cache.DiskTier(tmp_path, NS, byte_budget=1 << 20)
    keys = cache.chunk_keys(np.arange(40, dtype=np.int32), NS)  # 10 chunks
    want = pages_for(keys)
    tier.put(keys[:6], want[:6])
    assert tier.exists_prefix(keys) == 6
    out = np.zeros_like(want)
    assert tier.get(keys, out) == 6
    np.testing.assert_array_equal(out[:6], want[:6])
    assert tier.stats.hits == 6 and tier.stats.puts == 6
    # A damaged file is a miss (and counted), never wrong data.
    victim = next(p for p in tmp_path.rglob("*.kv"))
    data = bytearray(victim.read_bytes())
    data[60] ^= 1
    victim.write_bytes(bytes(data))
    before = tier.stats.refused
    n = tier.get(keys, np.zeros_like(want))
    assert n < 6 and tier.stats.refused == before + 1
    other = cache.DiskTier(tmp_path, cache.TierNamespace("test-8b", "bf16", "nhd", 4), byte_budget=1 << 20)
    assert other.exists_prefix(keys) == 0
    with pytest.raises(frugal.InvalidArgumentError, match="10 keys but 3 page rows"):
        tier.get(keys, np.zeros((3, 256), np.uint8))
    with pytest.raises(ValueError, match="read-only"):
        ro = np.zeros_like(want)
        ro.flags.writeable = False
        tier.get(keys, ro)
    with pytest.raises(frugal.InvalidArgumentError, match=r"keys must have shape \(n, 2\)"):
        tier.exists_prefix(np.zeros((3, 3), np.uint64))


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def redis_port():
    if not hasattr(cache, "RedisTier"):
        if os.environ.get("CI"):
            pytest.fail("frugal was built without hiredis (CI must run the Redis tests)")
        pytest.skip("frugal was built without hiredis (libhiredis-dev)")
    if shutil.which("redis-server") is None:
        if os.environ.get("CI"):
            pytest.fail("no redis-server (CI must run the Redis tests)")
        pytest.skip("no redis-server (Debian's redis-server: scripts/setup.sh)")
    port = free_port()
    server = subprocess.Popen(["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "",
                               "--appendonly", "no", "--loglevel", "warning"], stdout=subprocess.DEVNULL)
    try:
        for _ in range(200):
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=0.1):
                    break
            except OSError:
                time.sleep(0.01)
        yield port, server
    finally:
        server.kill()
        server.wait()


def test_redis_tier_round_trip_and_a_server_that_goes_away(redis_port):
    port, server = redis_port
    tier = cache.RedisTier(NS, port=port, timeout_ms=300)
    assert tier.connected()
    keys = cache.chunk_keys(np.arange(400, dtype=np.int32), NS)  # 100 chunks: two pipelines
    want = pages_for(keys, 4096)
    tier.put(keys, want)
    out = np.zeros_like(want)
    assert tier.exists_prefix(keys) == 100
    assert tier.get(keys, out) == 100
    np.testing.assert_array_equal(out, want)
    reader = cache.RedisTier(NS, port=port)  # a second client (as another process would be)
    assert reader.get(keys[:10], np.zeros((10, 4096), np.uint8)) == 10
    server.kill()
    server.wait()
    t0 = time.monotonic()
    assert tier.get(keys, out) == 0
    assert tier.exists_prefix(keys) == 0
    assert time.monotonic() - t0 < 3
    assert tier.stats.errors > 0


def test_tiered_prefix_trees_share_pages_through_a_disk_tier(tmp_path):
    pages_a = np.zeros((32, 256), np.uint8)
    pages_b = np.zeros((32, 256), np.uint8)
    a = cache.TieredPrefixTree(cache.DiskTier(tmp_path, NS, byte_budget=1 << 20), pages_a, NS)
    b = cache.TieredPrefixTree(cache.DiskTier(tmp_path, NS, byte_budget=1 << 20), pages_b, NS, write="back")
    keys = a.keys(np.arange(40, dtype=np.int32))
    assert keys.shape == (10, 2)
    assert serve(a, pages_a, keys)[0] == 0
    from_tier, r = serve(b, pages_b, keys)  # every page from a's writes
    assert from_tier == 10 and (r.existing, r.cached) == (10, 10)
    assert b.stats.pages_from_tier == 10 and "pages_from_tier=10" in repr(b.stats)
    longer = b.keys(np.arange(60, dtype=np.int32))
    assert serve(b, pages_b, longer)[0] == 0  # 10 in memory, 5 computed
    assert b.unwritten == 5
    assert b.flush() == 5 and b.unwritten == 0
    assert serve(a, pages_a, longer)[0] == 5  # b's write-back reached the tier
    assert len(a) == 15 and a.free_rows == 32 - 15


def test_tiered_prefix_tree_refuses_bad_rows_and_keeps_locked_pages(tmp_path):
    pages = np.zeros((8, 256), np.uint8)
    tree = cache.TieredPrefixTree(cache.DiskTier(tmp_path, NS, byte_budget=1 << 20), pages, NS, budget_bytes=4 * 256)
    keys = tree.keys(np.arange(16, dtype=np.int32))
    with tree.match(keys) as hit:
        rows = tree.allocate(4)
        with pytest.raises(frugal.OutOfRangeError, match="row 7 is not a row from allocate"):
            tree.insert(hit, keys, np.array([rows[0], rows[1], rows[2], 7]))
        with pytest.raises(frugal.InvalidArgumentError, match="is given twice"):
            tree.insert(hit, keys, np.array([rows[0], rows[0], rows[1], rows[2]]))
        with pytest.raises(frugal.InvalidArgumentError, match="3 rows for 4 keys"):
            tree.insert(hit, keys, rows[:3])
        pages[rows] = pages_for(keys)
        assert tree.insert(hit, keys, rows).cached == 4
        assert tree.locked_bytes == 4 * 256
        other = tree.keys(np.arange(100, 116, dtype=np.int32))
        more = tree.allocate(2)  # every page in the budget is locked: rows are free, room is not
        assert len(more) == 2
        with tree.match(other) as second:
            assert tree.insert(second, other, np.concatenate([more, tree.allocate(2)])).cached == 0  # refused: no room
    assert tree.free_rows == 4  # the refused rows went back
    with pytest.raises(TypeError, match="DiskTier or RedisTier"):
        cache.TieredPrefixTree(object(), pages, NS)
    with pytest.raises(frugal.InvalidArgumentError, match="write must be"):
        cache.TieredPrefixTree(cache.DiskTier(tmp_path, NS, byte_budget=1 << 20), pages, NS, write="sometimes")


def test_a_prefetch_no_thread_loaded_loads_at_match_and_a_dropped_one_gives_its_rows_back(tmp_path):
    writer_pages = np.zeros((16, 256), np.uint8)
    writer = cache.TieredPrefixTree(cache.DiskTier(tmp_path, NS, byte_budget=1 << 20), writer_pages, NS)
    keys = writer.keys(np.arange(32, dtype=np.int32))
    serve(writer, writer_pages, keys)
    pages = np.zeros((16, 256), np.uint8)
    tier = cache.DiskTier(tmp_path, NS, byte_budget=1 << 20)
    tree = cache.TieredPrefixTree(tier, pages, NS)
    other = cache.TieredPrefixTree(cache.DiskTier(tmp_path, NS, byte_budget=1 << 20), np.zeros((16, 256), np.uint8), NS)
    dropped = tree.prefetch(keys)
    assert dropped.pages == 8 and tree.free_rows == 8
    del dropped
    assert tree.free_rows == 16 and tree.locked_bytes == 0
    with pytest.raises(frugal.InvalidArgumentError, match="another tree"):
        tree.match(other.prefetch(keys))
    with pytest.raises(TypeError, match="DiskTier or RedisTier"):
        tree.prefetch(keys).load(object())
    ticket = tree.prefetch(keys)
    with tree.match(ticket) as hit:  # no thread loaded it: match loads it through the tree's tier
        assert hit.from_tier == 8 and tier.stats.hits == 8
        np.testing.assert_array_equal(pages[hit.pages], pages_for(keys))


def test_tiered_prefix_trees_in_two_processes_share_a_redis_server(redis_port):
    port, _ = redis_port
    code = f"""
import numpy as np
from frugal import cache
ns = cache.TierNamespace("test-1b", "bf16", "nhd", page_tokens=4)
pages = np.zeros((16, 1024), np.uint8)
tree = cache.TieredPrefixTree(cache.RedisTier(ns, port={port}), pages, ns)
keys = tree.keys(np.arange(48, dtype=np.int32))
with tree.match(keys) as hit:
    rows = tree.allocate(len(keys))
    for i, row in enumerate(rows):
        pages[row] = np.random.default_rng([int(keys[i][0]) & 0xFFFFFFFF, int(keys[i][1]) & 0xFFFFFFFF]).integers(0, 256, 1024, dtype=np.uint8)
    assert tree.insert(hit, keys, rows).cached == 12
"""
    subprocess.run([sys.executable, "-c", code], check=True, env=dict(os.environ))
    pages = np.zeros((16, 1024), np.uint8)
    tree = cache.TieredPrefixTree(cache.RedisTier(NS, port=port), pages, NS)
    keys = tree.keys(np.arange(48, dtype=np.int32))
    with tree.match(keys) as hit:
        assert len(hit) == 12 and hit.from_tier == 12
        np.testing.assert_array_equal(pages[hit.pages], pages_for(keys, 1024))


# ---- the QA bank over a tier ----------------------------------------------------------

ANSWERS = cache.TierNamespace("test-embed", "f32", "answers", page_tokens=1)


def answers_bank(tier, dim, **size):
    return cache.TieredSemanticCache(tier, ANSWERS, dim=dim, tau=0.9, **(size or {"capacity": 100}))


def nearest_answered(embeddings, answered, query, tau):
    """The oracle: the id of the answered embedding most similar to `query` (cosine in float64,
    brute force) when at least tau, else None; "borderline" within float32's rounding of tau."""
    ids = sorted(answered)
    e = embeddings[ids].astype(np.float64)
    q = query.astype(np.float64)
    sims = e @ q / (np.linalg.norm(e, axis=1) * np.linalg.norm(q))
    best = int(np.argmax(sims))
    if abs(sims[best] - tau) < 1e-5 or np.sort(sims)[-2] > sims[best] - 1e-5:
        return "borderline"
    return ids[best] if sims[best] >= tau else None


def test_tiered_semantic_caches_share_answers_through_a_disk_tier(tmp_path, rng):
    dim = 32
    embeddings = rng.standard_normal((40, dim)).astype(np.float32)
    writer = answers_bank(cache.DiskTier(tmp_path, ANSWERS, byte_budget=1 << 20), dim)
    for i in range(30):
        writer.insert(f"q{i}", embeddings[i], f"a{i}" if i < 24 else None)  # 6 wait for their answers
    assert writer.set_answer(writer.lookup("q25", embeddings[25]).id, "a25")
    answered = set(range(24)) | {25}
    assert writer.tiered_stats.writes == len(answered)

    reader = answers_bank(cache.DiskTier(tmp_path, ANSWERS, byte_budget=1 << 20), dim, budget_bytes=1 << 20)
    hit = reader.lookup("q7", embeddings[39])  # memory is empty: the tier answers the exact text
    assert (hit.query, hit.answer, hit.exact) == ("q7", "a7", True)
    assert reader.lookup("q26", embeddings[26]) is None  # never answered: never written
    assert reader.lookup("q8, rephrased", embeddings[8]) is None  # similar, not equal: memory's index only
    assert reader.tiered_stats.tier_hits == 1 and len(reader) == 1
    assert reader.restore() == len(answered) and len(reader) == len(answered)
    found = 0
    for _ in range(60):  # after restore the index finds what brute force finds
        i = int(rng.integers(0, 40))
        query = embeddings[i] + rng.normal(0, 0.25, dim).astype(np.float32)
        want = nearest_answered(embeddings, answered, query, reader.tau)
        if want == "borderline":
            continue
        hit = reader.lookup(f"new {i}", query)
        assert (None if hit is None else int(hit.query[1:])) == want, (i, hit)
        assert hit is None or hit.answer == f"a{want}"
        found += hit is not None
    assert found >= 20
    # erase() forgets memory's entry only: the exact text comes back from the tier.
    assert reader.erase(reader.lookup("q3", embeddings[3]).id)
    assert reader.lookup("q3", embeddings[3]).answer == "a3" and reader.tiered_stats.tier_hits == 2


def test_a_restarted_bank_keeps_its_size_and_refuses_records_of_another_dimension(tmp_path, rng):
    embeddings = rng.standard_normal((12, 16)).astype(np.float32)
    first = answers_bank(cache.DiskTier(tmp_path, ANSWERS, byte_budget=1 << 20), 16)
    for i in range(12):
        first.insert(f"q{i}", embeddings[i], f"a{i}")
    del first
    small = answers_bank(cache.DiskTier(tmp_path, ANSWERS, byte_budget=1 << 20), 16, capacity=5)
    assert small.restore() == 12 and len(small) == 5  # memory keeps what its size allows
    assert all(small.lookup(f"q{i}", embeddings[i]).answer == f"a{i}" for i in range(12))  # the tier the rest
    wide = answers_bank(cache.DiskTier(tmp_path, ANSWERS, byte_budget=1 << 20), 32)
    assert wide.restore() == 0 and wide.tiered_stats.refused == 12
    assert wide.lookup("q3", np.ones(32, np.float32)) is None and wide.tiered_stats.refused == 13
    tier = cache.DiskTier(tmp_path, ANSWERS, byte_budget=1 << 20)
    with pytest.raises(TypeError, match="TieredSemanticCache: tier must be a DiskTier or RedisTier"):
        cache.TieredSemanticCache(object(), ANSWERS, capacity=4, dim=16, tau=0.9)
    with pytest.raises(frugal.InvalidArgumentError, match="exactly one of capacity"):
        cache.TieredSemanticCache(tier, ANSWERS, capacity=4, budget_bytes=1 << 10, dim=16, tau=0.9)
    with pytest.raises(frugal.InvalidArgumentError, match="the embedding has 15 values, the bank's dimension is 16"):
        small.lookup("q1", embeddings[1][:15])  # found by its text, checked all the same
    with pytest.raises(frugal.InvalidArgumentError, match="no direction"):
        small.insert("q1", np.full(16, np.nan, np.float32), "a1")


def test_tiered_semantic_caches_in_two_processes_share_a_redis_server(redis_port):
    port, _ = redis_port
    code = f"""
import numpy as np
from frugal import cache
ns = cache.TierNamespace("test-embed", "f32", "answers", page_tokens=1)
bank = cache.TieredSemanticCache(cache.RedisTier(ns, port={port}), ns, capacity=100, dim=16, tau=0.9)
embeddings = np.random.default_rng(7).standard_normal((10, 16)).astype(np.float32)
for i in range(10):
    bank.insert(f"q{{i}}", embeddings[i], f"answer {{i}}")
assert bank.tiered_stats.writes == 10
"""
    subprocess.run([sys.executable, "-c", code], check=True, env=dict(os.environ))
    embeddings = np.random.default_rng(7).standard_normal((10, 16)).astype(np.float32)
    bank = cache.TieredSemanticCache(cache.RedisTier(ANSWERS, port=port), ANSWERS, capacity=100, dim=16, tau=0.9)
    assert bank.lookup("q4", embeddings[0]).answer == "answer 4"  # by its text, from the server
    assert bank.restore() == 10
    for i in range(10):
        hit = bank.lookup(f"q{i} again", embeddings[i] * 2)  # the same direction, another text
        assert (hit.query, hit.answer, hit.exact) == (f"q{i}", f"answer {i}", False)


# ---- token sequences shared between replicas ------------------------------------------

OUTPUTS = cache.TierNamespace("test-1b", "int32", "outputs", page_tokens=1)


def test_replicas_share_their_outputs_and_a_history_drafts_from_them(tmp_path, rng):
    replicas = [cache.SharedDocuments(cache.DiskTier(tmp_path, OUTPUTS, byte_budget=1 << 22), OUTPUTS) for _ in range(3)]
    own = [set(), set(), set()]
    for i in range(40):
        output = rng.integers(0, 30000, int(rng.integers(1, 300))).astype(np.int32)
        r = int(rng.integers(0, 3))
        replicas[r].publish(output)
        own[r].add(tuple(output.tolist()))
    for r, shared in enumerate(replicas):
        want = set().union(*(own[o] for o in range(3) if o != r)) - own[r]
        docs = shared.pull()
        assert all(d.dtype == np.int32 for d in docs)
        assert sorted(tuple(d.tolist()) for d in docs) == sorted(want)
        assert shared.pull() == [] and shared.stats.pulled == len(want)
    # What a replica pulled drafts its requests: a prompt ending inside another replica's output
    # gets that output's continuation.
    text = np.arange(1000, 1100, dtype=np.int32)
    replicas[0].publish(text)
    history = draft.History(1 << 16)
    for doc in replicas[1].pull():
        history.add(doc)
    sp = draft.Speculator(history, max_draft=8)
    sp.start(1, np.array([7, 7, 1040, 1041, 1042, 1043], np.int32))
    assert sp.propose([1], tree=False)[0].tokens.tolist()[:8] == list(range(1044, 1052))
    with pytest.raises(TypeError, match="SharedDocuments: tier must be a DiskTier or RedisTier"):
        cache.SharedDocuments(object(), OUTPUTS)


def test_replicas_in_two_processes_share_outputs_through_redis(redis_port):
    port, _ = redis_port
    code = f"""
import numpy as np
from frugal import cache
ns = cache.TierNamespace("test-1b", "int32", "outputs", page_tokens=1)
shared = cache.SharedDocuments(cache.RedisTier(ns, port={port}), ns)
for i in range(25):
    shared.publish(np.arange(i, i + 10 + i, dtype=np.int32))
assert shared.stats.published == 25
"""
    subprocess.run([sys.executable, "-c", code], check=True, env=dict(os.environ))
    shared = cache.SharedDocuments(cache.RedisTier(OUTPUTS, port=port), OUTPUTS)
    got = sorted(tuple(d.tolist()) for d in shared.pull())
    assert got == sorted(tuple(range(i, i + 10 + i)) for i in range(25))
