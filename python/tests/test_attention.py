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
    result = att.run(p, q, k, v, out=out, layout=att.Layout.nhd)
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


def gather(pool, indptr, indices, kv_lens, layout):
    """Each sequence's K (or V) rows of a page pool as a dense [tokens, kv_heads, dim] array."""
    hk, d = (pool.shape[2], pool.shape[3]) if layout == att.Layout.nhd else (pool.shape[1], pool.shape[3])
    dense = []
    for s, n in enumerate(kv_lens):
        mine = indices[indptr[s]:indptr[s + 1]]
        if layout == att.Layout.nhd:
            dense.append(pool[mine].reshape(-1, hk, d)[:n])
        else:
            dense.append(pool[mine].transpose(1, 0, 2, 3).reshape(hk, -1, d)[:, :n].transpose(1, 0, 2))
    return dense


def paged_batch(rng, kv_lens, q_lens, hq, hk, d, page_size, layout, dtype):
    """A ragged batch over a shuffled page pool, and the same K/V per sequence as dense arrays."""
    pages_of = [-(-n // page_size) for n in kv_lens]
    pool = sum(pages_of) + 3  # a few pages nobody uses
    order = rng.permutation(pool)
    shape = (pool, page_size, hk, d) if layout == att.Layout.nhd else (pool, hk, page_size, d)
    k_pool = rng.standard_normal(shape).astype(dtype)
    v_pool = rng.standard_normal(shape).astype(dtype)
    indptr = np.concatenate([[0], np.cumsum(pages_of)]).astype(np.int32)
    indices = order[:indptr[-1]].astype(np.int32)
    last = np.array([n - (p - 1) * page_size for n, p in zip(kv_lens, pages_of)], np.int32)
    dense = list(zip(gather(k_pool, indptr, indices, kv_lens, layout), gather(v_pool, indptr, indices, kv_lens, layout)))
    qo = np.concatenate([[0], np.cumsum(q_lens)]).astype(np.int32)
    q = rng.standard_normal((qo[-1], hq, d)).astype(dtype)
    table = (indptr, indices, last, qo)
    return q, k_pool, v_pool, table, dense


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
@pytest.mark.parametrize("layout", [att.Layout.nhd, att.Layout.hnd])
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
    q, k_pool, v_pool, table, _ = paged_batch(rng, [20, 5], [1, 1], 4, 2, 16, 16, att.Layout.nhd, np.float32)
    indptr, indices, last, qo = table
    with pytest.raises(frugal.OutOfRangeError, match="page index"):
        att.batch_run(q, k_pool, v_pool, indptr, np.full_like(indices, 999), last, qo)
    with pytest.raises(frugal.InvalidArgumentError, match="last_page_len"):
        att.batch_run(q, k_pool, v_pool, indptr, indices, np.array([17, 5], np.int32), qo)
    with pytest.raises(TypeError, match="float32 \\(the plan.s dtype\\)"):
        att.batch_run(q, k_pool.astype(np.float16), v_pool, *table)
    with pytest.raises(frugal.InvalidArgumentError, match="qo_indptr"):
        att.batch_run(q, k_pool, v_pool, indptr, indices, last, np.array([0, 1, 3], np.int32))
    with pytest.raises(frugal.InvalidArgumentError, match=r"kv_indices\[0\] = 4294967296 does not fit the index dtype int32"):
        att.batch_run(q, k_pool, v_pool, indptr, indices.astype(np.int64) + 2**32, last, qo)


def test_index_arrays_are_int32_and_int64_is_converted(rng):
    q, k_pool, v_pool, table, _ = paged_batch(rng, [20, 5], [2, 1], 4, 2, 16, 16, att.Layout.nhd, np.float32)
    want = att.batch_run(q, k_pool, v_pool, *table)
    wide = [a.astype(np.int64) for a in table]  # FlashInfer's int32, or int64 as torch's default
    np.testing.assert_array_equal(att.batch_run(q, k_pool, v_pool, *wide), want)
    shape = dict(page_size=16, q_heads=4, kv_heads=2, head_dim=16)
    np.testing.assert_array_equal(att.BatchPlan(*wide, **shape).run(q, k_pool, v_pool), want)
    np.testing.assert_array_equal(att.BatchPlan(*[a.tolist() for a in table], **shape).run(q, k_pool, v_pool), want)


def bf16_bits(x):
    """float32 values rounded to the nearest bfloat16 (ties to even), as uint16 bits."""
    b = np.ascontiguousarray(x, np.float32).view(np.uint32).astype(np.uint64)
    return ((b + 0x7FFF + ((b >> 16) & 1)) >> 16).astype(np.uint16)


def bf16_values(bits):
    return (bits.astype(np.uint32) << 16).view(np.float32)


# How each storage dtype travels in numpy, and its unit roundoff.
STORAGE = {
    np.float32: (lambda x: x.astype(np.float32), lambda a: a.astype(np.float64), 2.0 ** -24),
    np.float16: (lambda x: x.astype(np.float16), lambda a: a.astype(np.float64), 2.0 ** -11),
    frugal.bfloat16: (bf16_bits, lambda a: bf16_values(a).astype(np.float64), 2.0 ** -8),
}


@pytest.mark.parametrize("dtype", list(STORAGE))
@pytest.mark.parametrize("layout", [att.Layout.nhd, att.Layout.hnd])
def test_batch_plan_runs_each_layer_against_float64(rng, dtype, layout):
    store, values, unit = STORAGE[dtype]
    hq, hk, d, page_size = 8, 2, 32, 16
    kv_lens, q_lens = [37, 1, 64, 700], [1, 1, 20, 1]  # decodes (one split), one prefill chunk
    _, k0, _, table, _ = paged_batch(rng, kv_lens, q_lens, hq, hk, d, page_size, layout, np.float32)
    indptr, indices, last, qo = table
    plan = att.BatchPlan(indptr, indices, last, qo, page_size=page_size, q_heads=hq, kv_heads=hk, head_dim=d,
                         dtype=dtype, threads=3)
    assert (plan.batch, plan.tokens, plan.kv_lens) == (4, qo[-1], kv_lens)
    assert plan.dtype == (dtype if dtype is frugal.bfloat16 else np.dtype(dtype))
    for layer in range(3):  # one plan, new q and pools per layer, the page table shared
        q = store(rng.standard_normal((qo[-1], hq, d)))
        k_pool, v_pool = store(rng.standard_normal(k0.shape)), store(rng.standard_normal(k0.shape))
        lse = np.empty((hq, qo[-1]), np.float32)
        out = plan.run(q, k_pool, v_pool, kv_layout=layout, lse=lse)
        assert out.dtype == q.dtype and out.shape == q.shape
        np.testing.assert_array_equal(plan.run(q, k_pool, v_pool, kv_layout=layout), out)
        np.testing.assert_array_equal(
            att.batch_run(q, k_pool, v_pool, indptr, indices, last, qo, kv_layout=layout, threads=3), out)
        ks, vs = gather(values(k_pool), indptr, indices, kv_lens, layout), gather(values(v_pool), indptr, indices,
                                                                                   kv_lens, layout)
        for s in range(len(kv_lens)):
            rows = slice(qo[s], qo[s + 1])
            lq, lk = q_lens[s], kv_lens[s]
            want, want_lse = reference(values(q[rows]).transpose(1, 0, 2), ks[s].transpose(1, 0, 2),
                                       vs[s].transpose(1, 0, 2), lambda i, j: j <= i + lk - lq, 1 / np.sqrt(d))
            got = values(out[rows]).transpose(1, 0, 2)
            # Computed in float32, rounded once to the storage format: 4 unit roundoffs of the
            # output's magnitude (float32: the float32 bound of the other tests).
            tol = 2e-5 if dtype is np.float32 else 4 * unit * max(1.0, np.abs(want).max())
            np.testing.assert_allclose(got, want, atol=tol, rtol=0)
            np.testing.assert_allclose(lse[:, rows], want_lse, atol=2e-5 * max(1.0, np.abs(want_lse).max()), rtol=0)


def test_batch_plan_names_bad_input(rng):
    q, k_pool, v_pool, table, _ = paged_batch(rng, [20, 5], [1, 1], 4, 2, 16, 16, att.Layout.nhd, np.float32)
    indptr, indices, last, qo = table
    shape = dict(page_size=16, q_heads=4, kv_heads=2, head_dim=16)
    with pytest.raises(TypeError, match="dtype must be numpy.float32, numpy.float16 or frugal.bfloat16, got int8"):
        att.BatchPlan(indptr, indices, last, qo, dtype=np.int8, **shape)
    with pytest.raises(TypeError, match='got the string "int8"'):
        att.BatchPlan(indptr, indices, last, qo, dtype="int8", **shape)
    with pytest.raises(TypeError, match="not a dtype: 3"):
        att.BatchPlan(indptr, indices, last, qo, dtype=3, **shape)
    with pytest.raises(frugal.InvalidArgumentError, match="last_page_len"):
        att.BatchPlan(indptr, indices, np.array([17, 5], np.int32), qo, **shape)
    plan = att.BatchPlan(indptr, indices, last, qo, **shape)
    with pytest.raises(TypeError, match=r"q must be float32 \(the plan's dtype\), got uint16"):
        plan.run(bf16_bits(q), k_pool, v_pool)
    with pytest.raises(frugal.InvalidArgumentError, match="k_pages holds pages of 8 tokens x 2 KV heads x 16, the plan 16"):
        plan.run(q, k_pool[:, :8].copy(), v_pool[:, :8].copy())
    with pytest.raises(frugal.InvalidArgumentError, match="q has 3 tokens, the plan's qo_indptr ends at 2"):
        plan.run(np.zeros((3, 4, 16), np.float32), k_pool, v_pool)
    with pytest.raises(frugal.InvalidArgumentError, match="lse is 4 x 3, expected q_heads x tokens = 4 x 2"):
        plan.run(q, k_pool, v_pool, lse=np.zeros((4, 3), np.float32))
    with pytest.raises(frugal.OutOfRangeError, match="page index"):
        plan.run(q, k_pool[:2].copy(), v_pool[:2].copy())  # the table names pages the pool lacks


@pytest.mark.parametrize("dtype", list(STORAGE))
def test_cascade_merge_of_a_shared_prefix_matches_float64(rng, dtype):
    store, values, unit = STORAGE[dtype]
    hq, hk, d, ps = 4, 2, 16, 16
    pool = store(rng.standard_normal((2, 12, ps, hk, d)))  # K and V pools of 12 pages
    prefix, own = [7, 2, 9], [[4, 0], [11]]  # pages: a shared prefix, then each request's own
    own_last = [5, 16]
    q = store(rng.standard_normal((2, hq, d)))  # one decode row per request
    qo = np.array([0, 1, 2], np.int32)

    def plan_for(pages, last):
        indptr = np.concatenate([[0], np.cumsum([len(p) for p in pages])]).astype(np.int32)
        return att.BatchPlan(indptr, np.array(sum(pages, []), np.int32), np.array(last, np.int32), qo, page_size=ps,
                             q_heads=hq, kv_heads=hk, head_dim=d, dtype=dtype, threads=2)

    lse, lse_own = np.empty((hq, 2), np.float32), np.empty((hq, 2), np.float32)
    out = plan_for([prefix, prefix], [ps, ps]).run(q, pool[0], pool[1], lse=lse)
    out_own = plan_for(own, own_last).run(q, pool[0], pool[1], lse=lse_own)
    att.merge_state_in_place(out, lse, out_own, lse_own)
    for s in range(2):
        pages = prefix + own[s]
        n = (len(pages) - 1) * ps + own_last[s]
        k = values(pool[0][pages]).reshape(-1, hk, d)[:n].astype(np.float64)
        v = values(pool[1][pages]).reshape(-1, hk, d)[:n].astype(np.float64)
        want, want_lse = reference(values(q[s:s + 1]).transpose(1, 0, 2), k.transpose(1, 0, 2), v.transpose(1, 0, 2),
                                   lambda i, j: True, 1 / np.sqrt(d))
        # Each pass rounds to the storage format once and the merge once more.
        tol = 2e-5 if dtype is np.float32 else 8 * unit * max(1.0, np.abs(want).max())
        np.testing.assert_allclose(values(out[s:s + 1]).transpose(1, 0, 2), want, atol=tol, rtol=0)
        np.testing.assert_allclose(lse[:, s], want_lse[:, 0], atol=2e-5 * max(1.0, np.abs(want_lse).max()), rtol=0)


def test_merge_names_bad_input():
    out, lse = np.zeros((2, 4, 8), np.float32), np.zeros((4, 2), np.float32)
    with pytest.raises(TypeError, match=r"other must be float32 \(out's dtype\), got float16"):
        att.merge_state_in_place(out, lse, out.astype(np.float16), lse)
    with pytest.raises(frugal.InvalidArgumentError, match="other's shape differs from out's at axis 1: 3 != 4"):
        att.merge_state_in_place(out, lse, np.zeros((2, 3, 8), np.float32), lse)
    with pytest.raises(frugal.InvalidArgumentError, match="expected heads x tokens = 4 x 2"):
        att.merge_state_in_place(out, lse.T.copy(), out.copy(), lse)


def test_dtypes_are_numpy_dtypes_and_frugal_bfloat16(rng):
    q, k_pool, v_pool, table, _ = paged_batch(rng, [20, 5], [1, 1], 4, 2, 16, 16, att.Layout.nhd, np.float16)
    shape = dict(page_size=16, q_heads=4, kv_heads=2, head_dim=16)
    for spelling in (np.float16, np.dtype(np.float16), q.dtype):  # what numpy.dtype reads as float16
        plan = att.BatchPlan(*table, dtype=spelling, **shape)
        assert plan.dtype == np.float16 and isinstance(plan.dtype, np.dtype)
    assert att.BatchPlan(*table, **shape).dtype == np.float32  # the default
    plan = att.BatchPlan(*table, dtype=frugal.bfloat16, **shape)
    assert plan.dtype is frugal.bfloat16 and repr(frugal.bfloat16) == "frugal.bfloat16"
    assert (frugal.bfloat16.name, frugal.bfloat16.itemsize) == ("bfloat16", 2)
    out = plan.run(bf16_bits(q.astype(np.float32)), bf16_bits(k_pool.astype(np.float32)),
                   bf16_bits(v_pool.astype(np.float32)))
    assert out.dtype == np.uint16 and np.empty(3, frugal.bfloat16).dtype == np.uint16  # arrays of its bits


def test_deprecated_names_warn_and_still_work(rng):
    q, k_pool, v_pool, table, _ = paged_batch(rng, [20, 5], [1, 1], 4, 2, 16, 16, att.Layout.nhd, np.float16)
    shape = dict(page_size=16, q_heads=4, kv_heads=2, head_dim=16)
    want = att.BatchPlan(*table, dtype=np.float16, **shape).run(q, k_pool, v_pool)
    for old, new in (("float32", np.float32), ("float16", np.float16), ("bfloat16", frugal.bfloat16)):
        with pytest.deprecated_call(match=f'dtype="{old}" is deprecated'):
            plan = att.BatchPlan(*table, dtype=old, **shape)
        assert plan.dtype == (new if new is frugal.bfloat16 else np.dtype(new))
    with pytest.deprecated_call():
        np.testing.assert_array_equal(att.BatchPlan(*table, dtype="float16", **shape).run(q, k_pool, v_pool), want)
    with pytest.deprecated_call(match='comparing frugal.bfloat16 with the string "bfloat16"'):
        assert frugal.bfloat16 == "bfloat16"
    with pytest.deprecated_call(match="KVLayout is deprecated .* use frugal.attention.Layout"):
        assert att.KVLayout is att.Layout
    with pytest.deprecated_call(match="Layout.head_major is deprecated .* use frugal.attention.Layout.hnd"):
        assert att.Layout.head_major == att.Layout.hnd
    with pytest.deprecated_call(match="Layout.token_major is deprecated .* use frugal.attention.Layout.nhd"):
        assert att.Layout.token_major == att.Layout.nhd
    assert set(att.Layout.__members__) == {"nhd", "hnd"}
