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


# ---- 8-bit K/V: FP8 E4M3 and E5M2, int8, written by quantize_into --------------------------

def fp8_values(exponent_bits, mantissa_bits):
    """The value of each of the 256 codes of an OCP FP8 format, from its definition: sign,
    exponent of bias 2^(e-1) - 1 (0: subnormal), mantissa; E4M3 has no infinities and its NaN
    is S.1111.111, E5M2 is IEEE-like (exponent 11111: infinity or NaN)."""
    bias, top, mantissas = 2 ** (exponent_bits - 1) - 1, 2 ** exponent_bits - 1, 2 ** mantissa_bits
    values = np.empty(256)
    for code in range(256):
        e, m = (code >> mantissa_bits) & top, code % mantissas
        if exponent_bits == 4 and e == top and m == mantissas - 1:
            value = np.nan
        elif exponent_bits == 5 and e == top:
            value = np.inf if m == 0 else np.nan
        elif e == 0:
            value = m / mantissas * 2.0 ** (1 - bias)
        else:
            value = (1 + m / mantissas) * 2.0 ** (e - bias)
        values[code] = -value if code & 0x80 else value
    return values


E4M3, E5M2, INT8 = fp8_values(4, 3), fp8_values(5, 2), np.arange(-128, 128, dtype=np.float64)

# Each 8-bit dtype: how its codes travel in numpy, every code's value, the largest finite one
# (what quantize_into maps a per-token row's max|x| to) and the values a code may take.
KV8 = {
    "float8_e4m3": (frugal.float8_e4m3, np.uint8, lambda c: E4M3[c], 448.0, E4M3[np.isfinite(E4M3)]),
    "float8_e5m2": (frugal.float8_e5m2, np.uint8, lambda c: E5M2[c], 57344.0, E5M2[np.isfinite(E5M2)]),
    "int8": (np.int8, np.int8, lambda c: c.astype(np.float64), 127.0, INT8[1:]),  # symmetric: -128 unused
}


def test_fp8_tables_follow_the_format_definitions():
    assert np.nanmax(E4M3) == 448 and E4M3[0x01] == 2.0 ** -9 and np.isnan(E4M3[[0x7F, 0xFF]]).all()
    assert np.isnan(E4M3).sum() == 2 and not np.isinf(E4M3).any()
    assert E5M2[0x7B] == 57344 and E5M2[0x01] == 2.0 ** -16 and E5M2[0x7C] == np.inf and E5M2[0xFC] == -np.inf
    assert np.isnan(E5M2).sum() == 6
    # E5M2 is binary16's top byte: numpy's float16 decodes it independently.
    np.testing.assert_array_equal(E5M2, (np.arange(256, dtype=np.uint16) << 8).view(np.float16).astype(np.float64))


def kv_scales(granularity, x, qmax, pool_shape, layout):
    """Scales for K (or V) values `x` (a list of [tokens, kv_heads, dim] per sequence), as an
    engine calibrates them: the largest magnitude maps to the format's largest value (per
    tensor or per head); per token, a zero pool that quantize_into fills."""
    if granularity == "tensor":
        return np.array([max(np.abs(a).max() for a in x) / qmax], np.float32)
    if granularity == "head":
        return (np.max([np.abs(a).max(axis=(0, 2)) for a in x], axis=0) / qmax).astype(np.float32)
    pages, heads = pool_shape[0], pool_shape[2] if layout == att.Layout.nhd else pool_shape[1]
    page_size = pool_shape[1] if layout == att.Layout.nhd else pool_shape[2]
    return np.zeros((pages, page_size, heads) if layout == att.Layout.nhd else (pages, heads, page_size), np.float32)


def row_scales(scale, granularity, indptr, indices, kv_lens, layout):
    """Each sequence's scales per [token, kv_head, 1], broadcast from any granularity."""
    if granularity == "token":
        return gather(scale[..., None], indptr, indices, kv_lens, layout)
    return [np.broadcast_to(scale.reshape(1, -1, 1), (n, scale.size if granularity == "head" else 1, 1))
            for n in kv_lens]


def quantized_cache(rng, kv, granularity, layout, kv_lens, hk, d, page_size):
    """An 8-bit paged cache filled by quantize_into from random float32 K/V whose magnitude varies
    by head and token (one call per sequence, its tokens as an array); returns the pages, the
    scales, the page table and, per sequence, the K/V put in and the K/V the cache holds
    (decoded from the stored codes in numpy, times their scales) as float64 [tokens, kv_heads, d]."""
    kv_dtype, codes, decode, qmax, _ = KV8[kv]
    pages_of = [-(-n // page_size) for n in kv_lens]
    pool = sum(pages_of) + 3
    indptr = np.concatenate([[0], np.cumsum(pages_of)]).astype(np.int32)
    indices = rng.permutation(pool)[:indptr[-1]].astype(np.int32)
    last = np.array([n - (p - 1) * page_size for n, p in zip(kv_lens, pages_of)], np.int32)
    shape = (pool, page_size, hk, d) if layout == att.Layout.nhd else (pool, hk, page_size, d)
    k_pages, v_pages = np.zeros(shape, codes), np.zeros(shape, codes)

    def values(n):
        return (rng.standard_normal((n, hk, d)) * np.exp(rng.normal(0, 1, (n, hk, 1))) *
                np.geomspace(0.5, 4.0, hk)[:, None]).astype(np.float32)

    k_in, v_in = [values(n) for n in kv_lens], [values(n) for n in kv_lens]
    k_scale, v_scale = (kv_scales(granularity, x, qmax, shape, layout) for x in (k_in, v_in))
    for s, n in enumerate(kv_lens):
        att.quantize_into(k_pages, v_pages, indptr, indices, last, s, np.arange(n), k_in[s], v_in[s],
                          kv_dtype=kv_dtype, k_scale=k_scale, v_scale=v_scale, kv_layout=layout)
    held = []
    for pages, scale in ((k_pages, k_scale), (v_pages, v_scale)):
        stored = gather(pages, indptr, indices, kv_lens, layout)
        scales = row_scales(scale, granularity, indptr, indices, kv_lens, layout)
        held.append([decode(c) * sc.astype(np.float64) for c, sc in zip(stored, scales)])
    return (k_pages, v_pages, k_scale, v_scale, (indptr, indices, last), list(zip(k_in, v_in)),
            list(zip(*held)))


@pytest.mark.parametrize("kv", list(KV8))
@pytest.mark.parametrize("granularity", ["tensor", "head", "token"])
def test_quantize_into_stores_the_nearest_code_of_each_value_over_its_scale(rng, kv, granularity):
    _, codes, decode, qmax, finite = KV8[kv]
    kv_lens, hk, d, ps = [37, 1, 20], 2, 16, 16
    k_pages, v_pages, k_scale, v_scale, (indptr, indices, last), given, _ = quantized_cache(
        rng, kv, granularity, att.Layout.nhd, kv_lens, hk, d, ps)
    for pages, scale, which in ((k_pages, k_scale, 0), (v_pages, v_scale, 1)):
        stored = gather(pages, indptr, indices, kv_lens, att.Layout.nhd)
        scales = row_scales(scale, granularity, indptr, indices, kv_lens, att.Layout.nhd)
        for s in range(len(kv_lens)):
            x = given[s][which]
            if granularity == "token":  # set by quantize_into: the row's max|x| is the largest value
                np.testing.assert_array_equal(scales[s][..., 0], np.abs(x).max(axis=2) / np.float32(qmax))
            y = (x / scales[s]).astype(np.float64)  # the value over its scale, in float32 as stored
            # Brute force over every code of the format: the stored one is a nearest.
            nearest = np.abs(y[..., None] - finite).min(axis=-1)
            np.testing.assert_array_equal(np.abs(decode(stored[s]) - y), nearest)


def check_quantized_run(rng, kv, granularity, layout, dtype, threads=3):
    """BatchPlan.run over a cache quantize_into filled, against float64 attention on the K/V the
    cache holds, within the tolerance of Q's and the output's dtype (4 unit roundoffs)."""
    store, values, unit = STORAGE[dtype]
    hq, hk, d, ps = 8, 2, 32, 16
    kv_lens, q_lens = [37, 1, 64, 300], [1, 1, 20, 1]  # decodes (one split), one prefill chunk
    k_pages, v_pages, k_scale, v_scale, (indptr, indices, last), _, held = quantized_cache(
        rng, kv, granularity, layout, kv_lens, hk, d, ps)
    qo = np.concatenate([[0], np.cumsum(q_lens)]).astype(np.int32)
    plan = att.BatchPlan(indptr, indices, last, qo, page_size=ps, q_heads=hq, kv_heads=hk, head_dim=d, dtype=dtype,
                         kv_dtype=KV8[kv][0], threads=threads)
    q = store(rng.standard_normal((qo[-1], hq, d)))
    lse = np.empty((hq, qo[-1]), np.float32)
    out = plan.run(q, k_pages, v_pages, kv_layout=layout, lse=lse, k_scale=k_scale, v_scale=v_scale)
    assert out.dtype == q.dtype and out.shape == q.shape
    np.testing.assert_array_equal(att.batch_run(q, k_pages, v_pages, indptr, indices, last, qo, kv_layout=layout,
                                                threads=threads, kv_dtype=KV8[kv][0], k_scale=k_scale,
                                                v_scale=v_scale), out)
    for s in range(len(kv_lens)):
        rows = slice(qo[s], qo[s + 1])
        lq, lk = q_lens[s], kv_lens[s]
        k, v = held[s]
        want, want_lse = reference(values(q[rows]).transpose(1, 0, 2), k.transpose(1, 0, 2), v.transpose(1, 0, 2),
                                   lambda i, j: j <= i + lk - lq, 1 / np.sqrt(d))
        tol = 2e-5 * max(1.0, np.abs(want).max()) if dtype is np.float32 else 4 * unit * max(1.0, np.abs(want).max())
        np.testing.assert_allclose(values(out[rows]).transpose(1, 0, 2), want, atol=tol, rtol=0)
        np.testing.assert_allclose(lse[:, rows], want_lse, atol=2e-5 * max(1.0, np.abs(want_lse).max()), rtol=0)
    return plan


@pytest.mark.parametrize("kv", list(KV8))
@pytest.mark.parametrize("granularity", ["tensor", "head", "token"])
@pytest.mark.parametrize("layout", [att.Layout.nhd, att.Layout.hnd])
def test_8bit_pages_match_float64_on_what_the_cache_holds(rng, kv, granularity, layout):
    plan = check_quantized_run(rng, kv, granularity, layout, frugal.bfloat16)
    assert plan.dtype is frugal.bfloat16
    assert plan.kv_dtype == (np.dtype(np.int8) if kv == "int8" else KV8[kv][0])


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
@pytest.mark.parametrize("kv", list(KV8))
def test_8bit_pages_under_float32_and_float16_queries(rng, dtype, kv):
    check_quantized_run(rng, kv, "head", att.Layout.nhd, dtype, threads=2)


def test_a_scale_per_tensor_may_be_a_number_or_a_0d_array(rng):
    k_pages, v_pages, k_scale, v_scale, (indptr, indices, last), _, _ = quantized_cache(
        rng, "float8_e4m3", "tensor", att.Layout.nhd, [20, 5], 2, 16, 16)
    plan = att.BatchPlan(indptr, indices, last, np.array([0, 1, 2], np.int32), page_size=16, q_heads=4, kv_heads=2,
                         head_dim=16, kv_dtype=frugal.float8_e4m3)
    q = rng.standard_normal((2, 4, 16)).astype(np.float32)
    want = plan.run(q, k_pages, v_pages, k_scale=k_scale, v_scale=v_scale)
    np.testing.assert_array_equal(plan.run(q, k_pages, v_pages, k_scale=float(k_scale[0]), v_scale=v_scale[0]), want)
    np.testing.assert_array_equal(plan.run(q, k_pages, v_pages, k_scale=k_scale.reshape(()), v_scale=[v_scale[0]]),
                                  want)


@pytest.mark.parametrize("kv_dtype", [np.float32, np.float16, frugal.bfloat16])
@pytest.mark.parametrize("source", [np.float32, np.float16, frugal.bfloat16])
def test_quantize_into_rounds_into_16_and_32_bit_pages(rng, kv_dtype, source):
    (to_pool, pool_values, _), (to_rows, row_values, _) = STORAGE[kv_dtype], STORAGE[source]
    indptr, indices, last = np.array([0, 2], np.int32), np.array([1, 0], np.int32), np.array([3], np.int32)
    k_pages, v_pages = (np.zeros((2, 4, 2, 8), np.dtype(kv_dtype)) for _ in range(2))
    k, v = (to_rows(rng.standard_normal((2, 2, 8))) for _ in range(2))
    att.quantize_into(k_pages, v_pages, indptr, indices, last, 0, [3, 6], k, v, kv_dtype=kv_dtype)
    # token 3: page 1, slot 3; token 6: page 0, slot 2; rounded once from the rows' values
    for pages, rows in ((k_pages, k), (v_pages, v)):
        np.testing.assert_array_equal(pages[1, 3], to_pool(row_values(rows[0])))
        np.testing.assert_array_equal(pages[0, 2], to_pool(row_values(rows[1])))
        assert np.count_nonzero(pages) == np.count_nonzero(rows)


def test_8bit_dtypes_are_frugal_objects_and_numpy_int8():
    for marker, name in ((frugal.float8_e4m3, "float8_e4m3"), (frugal.float8_e5m2, "float8_e5m2")):
        assert repr(marker) == f"frugal.{name}" and (marker.name, marker.itemsize) == (name, 1)
        assert marker == marker and marker != frugal.bfloat16 and marker != name and hash(marker) == hash(name)
        assert np.empty(3, marker).dtype == np.uint8 and marker.dtype == np.uint8  # arrays of its bits
    assert frugal.float8_e4m3 != frugal.float8_e5m2
    assert {frugal.float8_e4m3, frugal.float8_e5m2, frugal.bfloat16} == {frugal.float8_e4m3, frugal.float8_e5m2,
                                                                          frugal.bfloat16}
    table = (np.array([0, 1], np.int32), np.array([0], np.int32), np.array([4], np.int32), np.array([0, 1], np.int32))
    shape = dict(page_size=4, q_heads=2, kv_heads=1, head_dim=8)
    assert att.BatchPlan(*table, dtype=np.float16, **shape).kv_dtype == np.float16  # None: the plan's dtype
    assert att.BatchPlan(*table, dtype=np.float16, kv_dtype=np.float16, **shape).kv_dtype == np.float16
    assert att.BatchPlan(*table, kv_dtype=frugal.float8_e5m2, **shape).kv_dtype is frugal.float8_e5m2
    plan = att.BatchPlan(*table, kv_dtype=np.dtype("int8"), **shape)
    assert plan.kv_dtype == np.int8 and isinstance(plan.kv_dtype, np.dtype)
    assert frugal.cache.TierNamespace("m", frugal.float8_e4m3, att.Layout.nhd, 16).dtype == "float8_e4m3"


def test_8bit_pages_name_bad_input(rng):
    k_pages, v_pages, k_scale, v_scale, (indptr, indices, last), _, _ = quantized_cache(
        rng, "int8", "token", att.Layout.nhd, [20, 5], 2, 16, 16)
    table = (indptr, indices, last, np.array([0, 1, 2], np.int32))
    shape = dict(page_size=16, q_heads=4, kv_heads=2, head_dim=16)
    q = rng.standard_normal((2, 4, 16)).astype(np.float32)
    with pytest.raises(TypeError, match="kv_dtype=uint8 is ambiguous: FP8 arrays are uint8, name their format with "
                                        "frugal.float8_e4m3 or frugal.float8_e5m2"):
        att.BatchPlan(*table, kv_dtype=np.uint8, **shape)
    with pytest.raises(TypeError, match=r"kv_dtype must be None \(the plan's dtype\), frugal.float8_e4m3, "
                                        "frugal.float8_e5m2 or numpy.int8, got float16"):
        att.BatchPlan(*table, kv_dtype=np.float16, **shape)
    with pytest.raises(TypeError, match=r"dtype must be .* got float8_e4m3 \(a K/V format: pass it as kv_dtype\)"):
        att.BatchPlan(*table, dtype=frugal.float8_e4m3, **shape)
    plan = att.BatchPlan(*table, kv_dtype=np.int8, **shape)
    run = dict(k_scale=k_scale, v_scale=v_scale)
    with pytest.raises(TypeError, match=r"k_pages must be int8 \(the plan's kv_dtype\), got float32"):
        plan.run(q, k_pages.astype(np.float32), v_pages, **run)
    with pytest.raises(TypeError, match=r"v_pages must be int8 \(the plan's kv_dtype\), got uint8"):
        plan.run(q, k_pages, v_pages.view(np.uint8), **run)
    e4m3 = att.BatchPlan(*table, kv_dtype=frugal.float8_e4m3, **shape)
    with pytest.raises(TypeError, match=r"k_pages must be uint8 \(float8_e4m3 bits\) \(the plan's kv_dtype\), got int8"):
        e4m3.run(q, k_pages, v_pages, **run)
    with pytest.raises(TypeError, match=r"got int8 \(8-bit K/V: give the plan kv_dtype=frugal.float8_e4m3, "
                                        "frugal.float8_e5m2 or numpy.int8\\)"):
        att.BatchPlan(*table, **shape).run(q, k_pages, v_pages)
    with pytest.raises(frugal.InvalidArgumentError, match=r"int8 K/V needs k_scale and v_scale \(float32: 1 value per "
                       r"tensor, kv_heads = 2 per head, or per token \(6, 16, 2\) = \(pages, page_size, kv_heads\)"):
        plan.run(q, k_pages, v_pages)
    with pytest.raises(frugal.InvalidArgumentError, match="int8 K/V needs k_scale and v_scale"):
        plan.run(q, k_pages, v_pages, k_scale=k_scale)
    with pytest.raises(frugal.InvalidArgumentError, match="v_scale given for K/V of float32: scales are for 8-bit K/V"):
        att.BatchPlan(*table, **shape).run(q, k_pages.astype(np.float32), v_pages.astype(np.float32), v_scale=v_scale)
    with pytest.raises(frugal.InvalidArgumentError, match=r"k_scale has 3 values: give 1 \(per tensor\), kv_heads = 2 "
                       r"\(per head\) or a per-token pool \(6, 16, 2\)"):
        plan.run(q, k_pages, v_pages, k_scale=np.ones(3, np.float32), v_scale=v_scale)
    with pytest.raises(frugal.InvalidArgumentError, match=r"v_scale is a per-token pool of shape \(6, 2, 16\), expected "
                       r"\(6, 16, 2\) = \(pages, page_size, kv_heads\) for Layout.nhd"):
        plan.run(q, k_pages, v_pages, k_scale=k_scale, v_scale=np.ascontiguousarray(v_scale.transpose(0, 2, 1)))
    with pytest.raises(frugal.InvalidArgumentError, match="k_scale has 2 dimensions"):
        plan.run(q, k_pages, v_pages, k_scale=np.ones((2, 2), np.float32), v_scale=v_scale)
    with pytest.raises(TypeError, match="k_scale must be a numpy array of float32, got float64"):
        plan.run(q, k_pages, v_pages, k_scale=k_scale.astype(np.float64), v_scale=v_scale)
    with pytest.raises(frugal.InvalidArgumentError, match="k_scale is per head but v_scale per tensor: give both at one "
                                                          "granularity"):
        plan.run(q, k_pages, v_pages, k_scale=np.ones(2, np.float32), v_scale=np.ones(1, np.float32))


def test_quantize_into_names_bad_input(rng):
    k_pages, v_pages = np.zeros((3, 16, 2, 16), np.int8), np.zeros((3, 16, 2, 16), np.int8)
    page_table = (np.array([0, 2, 3], np.int32), np.array([2, 0, 1], np.int32), np.array([4, 5], np.int32))
    k_scale, v_scale = np.zeros((3, 16, 2), np.float32), np.zeros((3, 16, 2), np.float32)
    row = np.full((2, 16), 0.5, np.float32)
    scales = dict(kv_dtype=np.int8, k_scale=k_scale, v_scale=v_scale)

    def write(seq, token, k=row, v=row, **kw):
        att.quantize_into(k_pages, v_pages, *page_table, seq, token, k, v, **{**scales, **kw})

    bad = row.copy()
    bad[1, 5] = np.nan
    with pytest.raises(frugal.InvalidArgumentError, match=r"value 21 \(head 1, element 5\) is nan"):
        write(0, 0, k=bad)
    with pytest.raises(frugal.InvalidArgumentError, match="token 40 of sequence 1 is outside its 1 pages of 16"):
        write(1, 40)
    with pytest.raises(frugal.InvalidArgumentError, match="sequence 2 is outside the batch of 2"):
        write(2, 0)
    with pytest.raises(frugal.InvalidArgumentError, match="seq = -1 is outside"):
        write(-1, 0)
    with pytest.raises(frugal.InvalidArgumentError, match=r"token\[1\] = -3 is negative"):
        write(0, np.array([1, -3]), k=np.stack([row, row]), v=np.stack([row, row]))
    with pytest.raises(frugal.InvalidArgumentError, match="seq has 3 values but token 2"):
        write([0, 0, 1], [0, 1], k=np.stack([row, row]), v=np.stack([row, row]))
    with pytest.raises(frugal.InvalidArgumentError, match=r"k has shape \(3, 16\), expected kv_heads x head_dim = 2 x "
                                                          r"16 \(the pages'\)"):
        write(0, 0, k=np.zeros((3, 16), np.float32), v=np.zeros((3, 16), np.float32))
    with pytest.raises(ValueError, match="k must have 3 dimensions, got 2"):
        write(0, [0, 1])  # two tokens take [2, kv_heads, head_dim] rows
    with pytest.raises(TypeError, match=r"v must be float32 \(k's dtype\), got float16"):
        write(0, 0, v=row.astype(np.float16))
    with pytest.raises(TypeError, match="kv_dtype=uint8 is ambiguous"):
        write(0, 0, kv_dtype=np.uint8)
    with pytest.raises(TypeError, match=r"k_pages must be uint8 \(float8_e5m2 bits\) \(kv_dtype\), got int8"):
        write(0, 0, kv_dtype=frugal.float8_e5m2)
    with pytest.raises(ValueError, match="k_scale is read-only"):
        k_scale.flags.writeable = False
        write(0, 0)
    k_scale.flags.writeable = True
    with pytest.raises(frugal.InvalidArgumentError, match="K scale 0 of head 0 must be finite and positive"):
        write(0, 0, k_scale=np.zeros(1, np.float32), v_scale=np.ones(1, np.float32))
    with pytest.raises(frugal.OutOfRangeError, match="page index"):
        att.quantize_into(k_pages[:2], v_pages[:2], *page_table, 0, 0, row, row, kv_dtype=np.int8, k_scale=k_scale[:2],
                          v_scale=v_scale[:2])
    with pytest.raises(TypeError, match="required keyword-only argument|kv_dtype"):
        att.quantize_into(k_pages, v_pages, *page_table, 0, 0, row, row)  # the pages' format is named
    assert not k_pages.any() and not k_scale.any()  # nothing was written by a call that raised before its rows
