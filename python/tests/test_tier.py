"""The cache tiers from Python: the disk tier in a temporary folder and the Redis tier against a
real redis-server started on a free loopback port. Oracles: the bytes put, a damaged file read as
a miss, another namespace seeing nothing, a stopped server costing misses (never an exception)."""
import os
import shutil
import socket
import subprocess
import time

import numpy as np
import pytest

import frugal
from frugal import cache

NS = cache.TierNamespace("test-1b", "bf16", "nhd", page_tokens=4)


def pages_for(keys, nbytes=256):
    """Row i: bytes derived from key i (what a loaded page must hold)."""
    rows = np.empty((len(keys), nbytes), np.uint8)
    for i, (high, low) in enumerate(keys.tolist()):
        rows[i] = np.random.default_rng([high & 0xFFFFFFFF, low & 0xFFFFFFFF]).integers(0, 256, nbytes, dtype=np.uint8)
    return rows


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
