"""frugal.attention against a float64 numpy reference, in place on strided float32 views."""
import numpy as np
import pytest

import frugal
from frugal import attention as att


def reference(q, k, v, mask_fn, scale):
    """softmax(scale q k^T + mask) v per head in float64, head-major [heads, tokens, dim]; rows
    without a visible key are 0 with lse -inf."""
    hq, lq, _ = q.shape
    group = hq // k.shape[0]
    out = np.zeros(q.shape)
    lse = np.full((hq, lq), -np.inf)
    for h in range(hq):
        s = scale * q[h].astype(np.float64) @ k[h // group].astype(np.float64).T
        visible = np.array([[mask_fn(i, j) for j in range(k.shape[1])] for i in range(lq)], bool)
        s = np.where(visible, s, -np.inf)
        m = s.max(axis=1, keepdims=True)
        ok = np.isfinite(m[:, 0])
        p = np.exp(s - np.where(ok[:, None], m, 0))
        total = p.sum(axis=1)
        out[h][ok] = (p[ok] @ v[h // group].astype(np.float64))[:] / total[ok, None]
        lse[h][ok] = np.log(total[ok]) + m[ok, 0]
    return out, lse


MASKS = {
    "none": (att.Mask.none(), lambda lq, lk: lambda i, j: True),
    "causal": (att.Mask.causal(), lambda lq, lk: lambda i, j: j <= i + lk - lq),
    "top_left": (att.Mask.causal(att.CausalAlignment.top_left), lambda lq, lk: lambda i, j: j <= i),
    "window": (att.Mask.sliding_window(5), lambda lq, lk: lambda i, j: i + lk - lq - 5 < j <= i + lk - lq),
}


@pytest.mark.parametrize("mask", list(MASKS))
@pytest.mark.parametrize("heads", [(4, 4), (4, 2), (3, 1)])
def test_run_matches_float64(rng, mask, heads):
    hq, hk = heads
    lq, lk, d = 19, 37, 24
    q = rng.normal(size=(hq, lq, d)).astype(np.float32)
    k = rng.normal(size=(hk, lk, d)).astype(np.float32)
    v = rng.normal(size=(hk, lk, d)).astype(np.float32)
    m, fn = MASKS[mask]
    p = att.plan(q_heads=hq, kv_heads=hk, q_len=lq, kv_len=lk, head_dim=d, mask=m, threads=2, q_tile=8, kv_tile=8)
    lse = np.empty((hq, lq), np.float32)
    out = att.run(p, q, k, v, lse=lse)
    want, want_lse = reference(q, k, v, fn(lq, lk), 1 / np.sqrt(d))
    np.testing.assert_allclose(out, want, atol=2e-5)
    np.testing.assert_allclose(lse, want_lse, atol=2e-5)


def test_token_major_views_of_a_fused_qkv_without_copies(rng):
    tokens, hq, hk, d = 33, 4, 2, 16
    qkv = rng.normal(size=(tokens, hq + 2 * hk, d)).astype(np.float32)  # one fused projection
    q, k, v = qkv[:, :hq], qkv[:, hq:hq + hk], qkv[:, hq + hk:]
    assert not q.flags.c_contiguous
    out_buffer = np.zeros((tokens, hq + 1, d), np.float32)
    out = out_buffer[:, 1:]  # a strided destination
    p = att.plan(q_heads=hq, kv_heads=hk, q_len=tokens, kv_len=tokens, head_dim=d, mask=att.Mask.causal(), scale=0.3)
    result = att.run(p, q, k, v, out=out, layout=att.Layout.token_major)
    assert result is out and np.shares_memory(out_buffer, result)
    hm = lambda a: np.ascontiguousarray(a.transpose(1, 0, 2))
    want, _ = reference(hm(q), hm(k), hm(v), lambda i, j: j <= i, 0.3)
    np.testing.assert_allclose(hm(out_buffer[:, 1:]), want, atol=2e-5)
    assert not out_buffer[:, 0].any()


def test_plan_fits_the_budget():
    p = att.plan(q_heads=8, kv_heads=8, q_len=4096, kv_len=4096, head_dim=128, threads=4, budget_bytes=1 << 20)
    assert p.workspace_bytes <= 1 << 20 and p.workers >= 1
    assert p.workspace_bytes == p.workers * ((p.q_tile * p.kv_tile + 3 * p.q_tile + 15) // 16 * 16) * 4


def test_errors():
    p = att.plan(q_heads=2, kv_heads=1, q_len=4, kv_len=4, head_dim=8)
    q = np.zeros((2, 4, 8), np.float32)
    kv = np.zeros((1, 4, 8), np.float32)
    with pytest.raises(TypeError, match="float16.*float32"):
        att.run(p, q.astype(np.float16), kv, kv)
    with pytest.raises(frugal.InvalidArgumentError, match="k is 1 heads x 3 x 8, the plan expects 1 x 4 x 8"):
        att.run(p, q, kv[:, :3], kv)
    with pytest.raises(ValueError, match="contiguous along its last axis"):
        att.run(p, q, kv, np.zeros((1, 4, 16), np.float32)[:, :, ::2])
    with pytest.raises(frugal.InvalidArgumentError, match="kv_heads 3 does not divide q_heads 2"):
        att.plan(q_heads=2, kv_heads=3, q_len=4, kv_len=4, head_dim=8)
    with pytest.raises(frugal.InvalidArgumentError, match="below the minimum workspace"):
        att.plan(q_heads=2, kv_heads=1, q_len=4, kv_len=4, head_dim=8, budget_bytes=16)


def paged_batch(rng, kv_lens, q_lens, hq, hk, d, page_size, layout, dtype):
    """A ragged batch over a shuffled page pool, and the same K/V per sequence as dense arrays."""
    pages_of = [-(-n // page_size) for n in kv_lens]
    pool = sum(pages_of) + 3  # a few pages nobody uses
    order = rng.permutation(pool)
    shape = (pool, page_size, hk, d) if layout == att.KVLayout.nhd else (pool, hk, page_size, d)
    k_pool = rng.standard_normal(shape).astype(dtype)
    v_pool = rng.standard_normal(shape).astype(dtype)
    indptr, indices, last, dense = [0], [], [], []
    for n, p in zip(kv_lens, pages_of):
        mine = order[len(indices):len(indices) + p]
        indices += mine.tolist()
        indptr.append(len(indices))
        last.append(n - (p - 1) * page_size)
        if layout == att.KVLayout.nhd:
            k, v = k_pool[mine].reshape(-1, hk, d)[:n], v_pool[mine].reshape(-1, hk, d)[:n]
        else:
            k = k_pool[mine].transpose(1, 0, 2, 3).reshape(hk, -1, d)[:, :n].transpose(1, 0, 2)
            v = v_pool[mine].transpose(1, 0, 2, 3).reshape(hk, -1, d)[:, :n].transpose(1, 0, 2)
        dense.append((k, v))
    qo = np.concatenate([[0], np.cumsum(q_lens)])
    q = rng.standard_normal((qo[-1], hq, d)).astype(dtype)
    table = (np.array(indptr, np.int32), np.array(indices, np.int32), np.array(last, np.int32), qo.astype(np.int64))
    return q, k_pool, v_pool, table, dense


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
@pytest.mark.parametrize("layout", [att.KVLayout.nhd, att.KVLayout.hnd])
def test_batch_run_over_pages_matches_float64(rng, dtype, layout):
    hq, hk, d, page_size = 8, 2, 32, 16
    kv_lens, q_lens = [37, 1, 64, 130], [1, 1, 20, 1]  # decodes and one prefill chunk
    q, k_pool, v_pool, table, dense = paged_batch(rng, kv_lens, q_lens, hq, hk, d, page_size, layout, dtype)
    out = att.batch_run(q, k_pool, v_pool, *table, kv_layout=layout, threads=2)
    assert out.dtype == dtype and out.shape == q.shape
    qo = table[3]
    for s, (k, v) in enumerate(dense):
        rows = slice(qo[s], qo[s + 1])
        lq, lk = q_lens[s], kv_lens[s]
        want, _ = reference(q[rows].transpose(1, 0, 2), k.transpose(1, 0, 2), v.transpose(1, 0, 2),
                            lambda i, j: j <= i + lk - lq, 1 / np.sqrt(d))
        got = out[rows].transpose(1, 0, 2).astype(np.float64)
        # float16: computed in float32, rounded once; 4 unit roundoffs of the output's magnitude.
        tol = 2e-5 if dtype == np.float32 else 4 * 2.0 ** -11 * max(1.0, np.abs(want).max())
        np.testing.assert_allclose(got, want, atol=tol, rtol=0)


def test_batch_run_names_bad_input(rng):
    q, k_pool, v_pool, table, _ = paged_batch(rng, [20, 5], [1, 1], 4, 2, 16, 16, att.KVLayout.nhd, np.float32)
    indptr, indices, last, qo = table
    with pytest.raises(frugal.OutOfRangeError, match="page index"):
        att.batch_run(q, k_pool, v_pool, indptr, np.full_like(indices, 999), last, qo)
    with pytest.raises(frugal.InvalidArgumentError, match="last_page_len"):
        att.batch_run(q, k_pool, v_pool, indptr, indices, np.array([17, 5], np.int32), qo)
    with pytest.raises(TypeError, match="float32 like q"):
        att.batch_run(q, k_pool.astype(np.float16), v_pool, *table)
    with pytest.raises(frugal.InvalidArgumentError, match="qo_indptr"):
        att.batch_run(q, k_pool, v_pool, indptr, indices, last, np.array([0, 1, 3]))
