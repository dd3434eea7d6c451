#pragma once
/// @file
/// Serving attention over a paged KV cache: a ragged batch of prefill, decode and mixed
/// sequences in one call, planned once per step (`batch::plan`) and run per layer
/// (`batch::run`) on the caller's executor, with fp32, bf16 or fp16 storage.

#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <span>
#include <type_traits>
#include <utility>
#include <vector>

#include "frugal/attention/batch_plan.hpp"
#include "frugal/attention/dtype.hpp"
#include "frugal/attention/heads_view.hpp"
#include "frugal/attention/masks.hpp"
#include "frugal/attention/online_softmax.hpp"
#include "frugal/attention/paged_kv.hpp"
#include "frugal/attention/tiled_attention.hpp"
#include "frugal/core/concepts.hpp"
#include "frugal/core/error.hpp"
#include "frugal/core/executor.hpp"
#include "frugal/core/matrix_view.hpp"
#include "frugal/core/thread_pool.hpp"

namespace frugal::attention {

/// The K/V rows of one decode block as a backend's `decode_tile` receives them: `heads` KV
/// heads x `n` keys, head-major (`k[h * n + j]` is key j of the block's head h), each row
/// `d` elements of `T` wherever its page puts it; for 8-bit K/V each row's scale, in the
/// same order (a K row's values are its elements times `k_scale`).
/// @code
/// frugal::attention::decode_block<frugal::attention::bfloat16> block{k_rows, v_rows, /*heads=*/8};
/// std::size_t keys = block.keys();
/// @endcode
template <class T>
struct decode_block {
    std::span<const T* const> k;
    std::span<const T* const> v;
    std::size_t heads = 1;
    std::span<const float> k_scale{};  ///< empty unless T is an 8-bit type
    std::span<const float> v_scale{};
    bool token_major = false;  ///< a key's heads lie side by side (NHD pages): best read together

    /// Keys of the block.
    [[nodiscard]] std::size_t keys() const noexcept { return k.size() / heads; }
};

/// A backend's optional fused decode step on one block of keys that every query row
/// sees (no mask inside the block): with `q` the `R x d` query rows already multiplied
/// by the base-2 score scale, `R / block.heads` rows per KV head (head-major), `block` the
/// rows of the block's `n` keys and `s` an `R x n` scratch tile, it folds the block into
/// each row's online-softmax state, against its own head's keys:
/// s = q k^T, per row m' = max(m, max_j s), l = 2^(m - m') l + sum_j 2^(s_j - m'),
/// o = 2^(m - m') o + sum_j 2^(s_j - m') v_j, m = m'. A backend converts 16- and 8-bit
/// rows itself (applying the block's scales), and may visit the keys in any order across
/// heads (each row's sums run in key order). Backends without it get a portable loop (and masked blocks always do).
/// @code
/// template <class T>
/// void decode_tile(frugal::matrix_view<const float> q, const frugal::attention::decode_block<T>& block,
///                  frugal::matrix_view<float> s, frugal::matrix_view<float> o,
///                  std::span<float> m, std::span<float> l) const;
/// @endcode
template <class B, class T = float>
concept decode_tile_backend = requires(const B& b, matrix_view<const float> q, const decode_block<T>& block,
                                       matrix_view<float> w, std::span<float> v) {
    { b.decode_tile(q, block, w, w, v, v) } -> std::same_as<void>;
};

/// The most keys a decode step folds at once (`batch_options::kv_block`).
inline constexpr std::size_t max_decode_block = 256;

namespace detail {

/// The portable decode step (see decode_tile_backend) on fp32 K/V views: scores the
/// entries the caller set to 0 in `s` and leaves the masked ones (-inf) out.
template <class Backend>
void decode_step(const Backend& backend, matrix_view<const float> q, matrix_view<const float> k,
                 matrix_view<const float> v, matrix_view<float> s, matrix_view<float> o, std::span<float> m,
                 std::span<float> l, std::span<float> alpha) {
    const std::size_t rows = q.rows(), n = k.rows(), d = q.cols();
    for (std::size_t r = 0; r < rows; ++r) {
        const float* qr = q.row(r).data();
        float* sr = s.row(r).data();
        for (std::size_t j = 0; j < n; ++j) {
            if (sr[j] == softmax_math::minus_infinity()) continue;  // masked by the caller
            const float* kj = k.row(j).data();
            float acc = 0.0f;
            for (std::size_t c = 0; c < d; ++c) acc += qr[c] * kj[c];
            sr[j] = acc;
        }
    }
    if constexpr (online_softmax_backend<Backend>) {
        backend.online_softmax_tile(s, m, l, alpha);
    } else {
        online_softmax_tile(s, m, l, alpha);
    }
    for (std::size_t r = 0; r < rows; ++r) {
        float* orow = o.row(r).data();
        const float* sr = s.row(r).data();
        if (alpha[r] != 1.0f) for (std::size_t c = 0; c < d; ++c) orow[c] *= alpha[r];
        for (std::size_t j = 0; j < n; ++j) {
            const float p = sr[j];
            if (p == 0.0f) continue;
            const float* vj = v.row(j).data();
            for (std::size_t c = 0; c < d; ++c) orow[c] += p * vj[c];
        }
    }
}

/// Rows [t0, t1) of KV head `h` of sequence `s` as fp32 views: the pool's own rows when
/// they are fp32 and lie in one page, else converted (8-bit ones times their scales) or
/// gathered into `kbuf`/`vbuf`.
template <class T>
std::pair<matrix_view<const float>, matrix_view<const float>> kv_block_views(const paged_kv<const T>& kv,
                                                                             std::size_t s, std::size_t h,
                                                                             std::size_t t0, std::size_t t1,
                                                                             float* kbuf, float* vbuf) {
    const std::size_t n = t1 - t0, ps = kv.page_size(), d = kv.head_dim();
    if constexpr (std::is_same_v<T, float>) {
        if (t0 / ps == (t1 - 1) / ps) return {kv.k_rows(s, h, t0, n), kv.v_rows(s, h, t0, n)};
    }
    const page_geometry& g = kv.geometry();
    for (std::size_t t = t0; t < t1;) {
        const std::size_t page = kv.table().page_of(s, t), r0 = t % ps, m = std::min(ps - r0, t1 - t);
        for (std::size_t r = 0; r < m; ++r) {
            const std::size_t at = g.row_offset(page, h, r0 + r);
            float* krow = kbuf + (t - t0 + r) * d;
            float* vrow = vbuf + (t - t0 + r) * d;
            to_floats(kv.k_pool() + at, krow, d);
            to_floats(kv.v_pool() + at, vrow, d);
            if constexpr (quantized_kv_type<T>) {
                const float ks = kv.k_scale(page, h, r0 + r), vs = kv.v_scale(page, h, r0 + r);
                for (std::size_t c = 0; c < d; ++c) krow[c] *= ks;
                for (std::size_t c = 0; c < d; ++c) vrow[c] *= vs;
            }
        }
        t += m;
    }
    return {matrix_view<const float>(kbuf, n, d), matrix_view<const float>(vbuf, n, d)};
}

/// Checks the run's views against the plan.
template <class T, class KV>
void check_batch_views(const batch_plan& plan, const heads_view<const T>& q, const paged_kv<const KV>& kv,
                       const heads_view<T>& out, const matrix_view<float>& lse) {
    FRUGAL_CHECK(plan.dtype() == dtype_of<T>, "batch::run: the plan was made for ", dtype_name(plan.dtype()),
                 " storage but the tensors hold ", dtype_name(dtype_of<T>));
    FRUGAL_CHECK(plan.kv_dtype() == dtype_of<KV>, "batch::run: the plan was made for ", dtype_name(plan.kv_dtype()),
                 " K/V but the cache holds ", dtype_name(dtype_of<KV>));
    FRUGAL_CHECK(!quantized_kv_type<KV> || kv.scales().k != nullptr, "batch::run: ", dtype_name(dtype_of<KV>),
                 " K/V needs its scales (paged_kv::with_scales)");
    const std::size_t tokens = plan.q_tokens();
    FRUGAL_CHECK(q.heads() == plan.q_heads() && q.tokens() == tokens && q.dim() == plan.head_dim(), "batch::run: q is ",
                 q.heads(), " heads x ", q.tokens(), " x ", q.dim(), ", the plan expects ", plan.q_heads(), " x ",
                 tokens, " x ", plan.head_dim());
    FRUGAL_CHECK(out.heads() == plan.q_heads() && out.tokens() == tokens && out.dim() == plan.head_dim(),
                 "batch::run: out is ", out.heads(), " heads x ", out.tokens(), " x ", out.dim(), ", the plan expects ",
                 plan.q_heads(), " x ", tokens, " x ", plan.head_dim());
    FRUGAL_CHECK(lse.empty() || (lse.rows() == plan.q_heads() && lse.cols() == tokens), "batch::run: lse is ",
                 lse.rows(), " x ", lse.cols(), ", expected empty or ", plan.q_heads(), " x ", tokens);
    FRUGAL_CHECK(kv.kv_heads() == plan.kv_heads() && kv.head_dim() == plan.head_dim() && kv.batch() == plan.batch(),
                 "batch::run: the KV cache holds ", kv.batch(), " sequences of ", kv.kv_heads(), " heads x ",
                 kv.head_dim(), ", the plan expects ", plan.batch(), " of ", plan.kv_heads(), " x ", plan.head_dim());
    for (std::size_t s = 0; s < plan.batch(); ++s) {
        FRUGAL_CHECK(kv.kv_len(s) == plan.kv_lens()[s], "batch::run: sequence ", s, " has ", kv.kv_len(s),
                     " keys in the page table, the plan expects ", plan.kv_lens()[s]);
    }
}

/// The keys a decode step of `plan` folds over `kv`: `kv_block()`, or where the options
/// leave kv_block unset and items read several KV heads of token-major pages with 16- or
/// 32-bit rows, half of it. Such a step streams every head's rows of each key together
/// (see the Eigen backend's `decode_tile`): measured on an AVX-512 CPU, 64 keys decode up
/// to a quarter faster than 128 there (a tenth on average; one long sequence on 2 threads
/// gains least), while 8-bit rows (half as long) and head-major pages gain nothing. Either
/// way a multiple of it divides every split chunk.
template <class KV>
std::size_t decode_step(const batch_plan& plan, const paged_kv<const KV>& kv) noexcept {
    const bool halve = plan.options().kv_block == 0 && plan.decode_heads() > 1 && kv.layout() == kv_layout::nhd &&
                       sizeof(KV) > 1;
    return halve ? plan.kv_block() / 2 : plan.kv_block();
}

/// One decode item: the q_len x group query rows of each of its KV heads against one chunk
/// of keys, block by block (`decode_step` keys), the heads of a block one after another
/// (rows head-major).
template <class Backend, class T, class KV>
void run_decode_item(const batch_plan& plan, const Backend& backend, const batch_work_item& it,
                     const heads_view<const T>& q, const paged_kv<const KV>& kv, const heads_view<T>& out,
                     const matrix_view<float>& lse, float* ws, float* slot) {
    const std::size_t g = plan.group(), d = plan.head_dim(), rph = it.rows * g, rows = rph * it.heads;
    const std::size_t blk = decode_step(plan, kv), rmax = plan.decode_rows(), qbegin = plan.qo_indptr()[it.seq];
    const std::size_t head_rmax = rmax / plan.decode_heads();
    using P = batch_plan;
    float* qbuf = ws;
    float* m = qbuf + P::padded(rmax * d);
    float* l = m + P::padded(rmax);
    float* alpha = l + P::padded(rmax);
    float* sbuf = alpha + P::padded(head_rmax);
    float* kbuf = sbuf + P::padded(head_rmax * std::min(plan.decode_heads(), max_decode_tile_heads) * blk);
    float* vbuf = kbuf + P::padded(blk * d);
    float* obuf = vbuf + P::padded(blk * d);
    if (slot != nullptr) {  // a chunk of a split sequence keeps its state in its slot
        obuf = slot;
        m = slot + rows * d;
        l = m + rows;
    }
    const float scale = plan.score_scale_log2();
    for (std::size_t hh = 0; hh < it.heads; ++hh)
        for (std::size_t t = 0; t < it.rows; ++t)
            for (std::size_t j = 0; j < g; ++j) {
                float* qr = qbuf + (hh * rph + t * g + j) * d;
                to_floats(q.head((it.kv_head + hh) * g + j).row(qbegin + t).data(), qr, d);
                for (std::size_t c = 0; c < d; ++c) qr[c] *= scale;
            }
    std::fill(m, m + rows, softmax_math::minus_infinity());
    std::fill(l, l + rows, 0.0f);
    std::fill(obuf, obuf + rows * d, 0.0f);
    const attention_mask& mask = plan.options().mask;
    const auto ql = static_cast<std::int64_t>(it.rows), kl = static_cast<std::int64_t>(plan.kv_lens()[it.seq]);
    for (std::size_t b = it.k_begin / blk * blk; b < it.k_end; b += blk) {
        const std::size_t t0 = std::max(b, it.k_begin), t1 = std::min(b + blk, it.k_end), n = t1 - t0;
        const auto cover = mask.classify(0, ql, static_cast<std::int64_t>(t0), static_cast<std::int64_t>(t1), ql, kl);
        if (cover == tile_coverage::skip) continue;
        if constexpr (decode_tile_backend<Backend, KV>) {
            if (cover == tile_coverage::full) {
                // The block's rows where their pages hold them (no copy, whatever the page
                // size or layout), up to `max_decode_tile_heads` heads per call so that the
                // backend can walk a token-major page once for all of them.
                std::array<const KV*, max_decode_tile_heads * max_decode_block> krows, vrows;
                std::array<float, quantized_kv_type<KV> ? max_decode_tile_heads * max_decode_block : 0> kscale, vscale;
                const page_geometry& geo = kv.geometry();
                for (std::size_t h0 = 0; h0 < it.heads; h0 += max_decode_tile_heads) {
                    const std::size_t heads = std::min(max_decode_tile_heads, it.heads - h0);
                    for (std::size_t j = t0; j < t1; ++j) {
                        const std::size_t page = kv.table().page_of(it.seq, j), r = j % kv.page_size();
                        for (std::size_t hh = 0; hh < heads; ++hh) {
                            const std::size_t h = it.kv_head + h0 + hh, at = geo.row_offset(page, h, r);
                            krows[hh * n + j - t0] = kv.k_pool() + at;
                            vrows[hh * n + j - t0] = kv.v_pool() + at;
                            if constexpr (quantized_kv_type<KV>) {
                                if (kv.scales().granularity == scale_granularity::token) {
                                    kscale[hh * n + j - t0] = kv.k_scale(page, h, r);
                                    vscale[hh * n + j - t0] = kv.v_scale(page, h, r);
                                }
                            }
                        }
                    }
                    if constexpr (quantized_kv_type<KV>) {
                        if (kv.scales().granularity != scale_granularity::token) {
                            for (std::size_t hh = 0; hh < heads; ++hh) {
                                std::fill_n(kscale.data() + hh * n, n, kv.k_scale(0, it.kv_head + h0 + hh, 0));
                                std::fill_n(vscale.data() + hh * n, n, kv.v_scale(0, it.kv_head + h0 + hh, 0));
                            }
                        }
                    }
                    decode_block<KV> block{.k = std::span<const KV* const>(krows.data(), heads * n),
                                           .v = std::span<const KV* const>(vrows.data(), heads * n),
                                           .heads = heads,
                                           .token_major = kv.layout() == kv_layout::nhd};
                    if constexpr (quantized_kv_type<KV>) {
                        block.k_scale = std::span<const float>(kscale.data(), heads * n);
                        block.v_scale = std::span<const float>(vscale.data(), heads * n);
                    }
                    const std::size_t r0 = h0 * rph, nr = heads * rph;
                    backend.decode_tile(matrix_view<const float>(qbuf + r0 * d, nr, d), block,
                                        matrix_view<float>(sbuf, nr, n), matrix_view<float>(obuf + r0 * d, nr, d),
                                        std::span<float>(m + r0, nr), std::span<float>(l + r0, nr));
                }
                continue;
            }
        }
        for (std::size_t hh = 0; hh < it.heads; ++hh) {
            const std::size_t h = it.kv_head + hh, r0 = hh * rph;
            const matrix_view<const float> qv(qbuf + r0 * d, rph, d);
            const matrix_view<float> ov(obuf + r0 * d, rph, d), s(sbuf, rph, n);
            const std::span<float> ms(m + r0, rph), ls(l + r0, rph);
            const auto [kb, vb] = kv_block_views(kv, it.seq, h, t0, t1, kbuf, vbuf);
            for (std::size_t r = 0; r < rph; ++r) {
                const auto i = static_cast<std::int64_t>(r / g);
                const auto lo = std::clamp<std::int64_t>(mask.key_begin(i, ql, kl) - std::int64_t(t0), 0, std::int64_t(n));
                const auto hi = std::clamp<std::int64_t>(mask.key_end(i, ql, kl) - std::int64_t(t0), lo, std::int64_t(n));
                for (std::int64_t j = 0; j < std::int64_t(n); ++j)
                    s(r, std::size_t(j)) = j >= lo && j < hi ? 0.0f : softmax_math::minus_infinity();
            }
            decode_step(backend, qv, kb, vb, s, ov, ms, ls, std::span<float>(alpha, rph));
        }
    }
    if (slot != nullptr) return;
    for (std::size_t hh = 0; hh < it.heads; ++hh)
        for (std::size_t t = 0; t < it.rows; ++t)
            for (std::size_t j = 0; j < g; ++j) {
                const std::size_t r = hh * rph + t * g + j, h = (it.kv_head + hh) * g + j;
                finish_row(obuf + r * d, d, m[r], l[r], out.head(h).row(qbegin + t).data(),
                           lse.empty() ? nullptr : &lse(h, qbegin + t), plan.options().lse_base);
            }
}

/// Merges the chunk states of one split decode sequence's KV heads, in chunk order, and
/// writes their output rows.
template <class T>
void run_merge(const batch_plan& plan, const batch_merge& mg, float* slots, const heads_view<T>& out,
               const matrix_view<float>& lse) {
    const std::size_t g = plan.group(), d = plan.head_dim(), qlen = plan.q_len(mg.seq), rows = qlen * g * mg.heads;
    const std::size_t qbegin = plan.qo_indptr()[mg.seq];
    float* first = slots + mg.first_slot * plan.slot_floats();
    float* o = first;
    float* m = first + rows * d;
    float* l = m + rows;
    for (std::size_t c = 1; c < mg.chunks; ++c) {
        const float* other = first + c * plan.slot_floats();
        const float* om = other + rows * d;
        const float* ol = om + rows;
        for (std::size_t r = 0; r < rows; ++r) {
            const auto w = softmax_math::merge_scales<softmax_base::two>(m[r], om[r]);
            for (std::size_t x = 0; x < d; ++x) o[r * d + x] = w.a * o[r * d + x] + w.b * other[r * d + x];
            l[r] = w.a * l[r] + w.b * ol[r];
            m[r] = w.max;
        }
    }
    for (std::size_t hh = 0; hh < mg.heads; ++hh)
        for (std::size_t t = 0; t < qlen; ++t)
            for (std::size_t j = 0; j < g; ++j) {
                const std::size_t r = (hh * qlen + t) * g + j, h = (mg.kv_head + hh) * g + j;
                finish_row(o + r * d, d, m[r], l[r], out.head(h).row(qbegin + t).data(),
                           lse.empty() ? nullptr : &lse(h, qbegin + t), plan.options().lse_base);
            }
}

/// One prefill item: a query tile of every head of one KV head's group, KV tile by KV
/// tile (each tile gathered once for the whole group), GEMMs on the backend.
template <class Backend, class T, class KV>
void run_prefill_item(const batch_plan& plan, Backend& backend, const batch_work_item& it,
                      const heads_view<const T>& q, const paged_kv<const KV>& kv, const heads_view<T>& out,
                      const matrix_view<float>& lse, float* ws) {
    using P = batch_plan;
    const std::size_t g = plan.group(), d = plan.head_dim(), qt = plan.q_tile(), kt = plan.kv_tile();
    const std::size_t rows = it.rows, qbegin = plan.qo_indptr()[it.seq] + it.q0;
    float* sbuf = ws;
    float* kbuf = sbuf + P::padded(qt * kt);
    float* vbuf = kbuf + P::padded(kt * d);
    float* heads = vbuf + P::padded(kt * d);
    const std::size_t head_floats = 2 * P::padded(qt * d) + 3 * P::padded(qt);
    const auto q_of = [&](std::size_t j) { return heads + j * head_floats; };
    const auto o_of = [&](std::size_t j) { return q_of(j) + P::padded(qt * d); };
    const auto m_of = [&](std::size_t j) { return o_of(j) + P::padded(qt * d); };
    // Up to 64 heads per group keep their "accumulated yet" flag here; more take a second pass.
    bool any_key[64];
    const float scale = plan.score_scale_log2();
    const attention_mask& mask = plan.options().mask;
    const auto ql = static_cast<std::int64_t>(plan.q_len(it.seq)), kl = static_cast<std::int64_t>(plan.kv_lens()[it.seq]);
    const auto i0 = static_cast<std::int64_t>(it.q0), i1 = i0 + static_cast<std::int64_t>(rows);
    for (std::size_t j0 = 0; j0 < g; j0 += 64) {
        const std::size_t j1 = std::min(g, j0 + 64);
        for (std::size_t j = j0; j < j1; ++j) {
            const auto qh = q.head(it.kv_head * g + j);
            for (std::size_t r = 0; r < rows; ++r) to_floats(qh.row(qbegin + r).data(), q_of(j) + r * d, d);
            std::fill(m_of(j), m_of(j) + rows, softmax_math::minus_infinity());
            std::fill(m_of(j) + P::padded(qt), m_of(j) + P::padded(qt) + rows, 0.0f);
            any_key[j - j0] = false;
        }
        for (std::size_t b = it.k_begin / kt * kt; b < it.k_end; b += kt) {
            const std::size_t t0 = std::max(b, it.k_begin), t1 = std::min(b + kt, it.k_end);
            if (mask.classify(i0, i1, std::int64_t(t0), std::int64_t(t1), ql, kl) == tile_coverage::skip) continue;
            const auto [kb, vb] = kv_block_views(kv, it.seq, it.kv_head, t0, t1, kbuf, vbuf);
            for (std::size_t j = j0; j < j1; ++j) {
                float* mj = m_of(j);
                const tile_operands ops{matrix_view<const float>(q_of(j), rows, d), kb, vb,
                                        matrix_view<float>(o_of(j), rows, d), matrix_view<float>(sbuf, rows, kt)};
                attend_keys(backend, ops,
                            {std::span<float>(mj, rows), std::span<float>(mj + P::padded(qt), rows),
                             std::span<float>(mj + 2 * P::padded(qt), rows), any_key[j - j0]},
                            mask, i0, ql, kl, t0, t0, t1, scale);
            }
        }
        for (std::size_t j = j0; j < j1; ++j) {
            const std::size_t h = it.kv_head * g + j;
            float* mj = m_of(j);
            for (std::size_t r = 0; r < rows; ++r) {
                float* o = o_of(j) + r * d;
                finish_row(o, d, mj[r], any_key[j - j0] ? mj[P::padded(qt) + r] : 0.0f,
                           out.head(h).row(qbegin + r).data(), lse.empty() ? nullptr : &lse(h, qbegin + r),
                           plan.options().lse_base);
            }
        }
    }
}

}  // namespace detail

/// Batched serving attention (FlashInfer's BatchPrefill / BatchDecode with a paged KV
/// cache): a ragged batch of sequences, each attending to its own pages, prefill and
/// decode sequences mixed in one call. Decode sequences are processed per KV head with
/// all the query heads that share it (GQA), so each page is read once per KV head, and
/// long sequences are split into chunks whose partial states are merged (split-KV /
/// Flash-Decoding); prefill sequences go through the tiled GEMM driver.
namespace batch {

/// Plans a batch: the work split and the exact workspace (see `batch_plan`). Make it once
/// per engine step and reuse it for every layer.
/// @code
/// auto plan = frugal::attention::batch::plan(shape, {.mask = frugal::attention::attention_mask::causal(), .threads = 2});
/// @endcode
[[nodiscard]] inline batch_plan plan(const batch_shape& shape, const batch_options& options) {
    return batch_plan(shape, options);
}

/// Runs `plan` for one layer on `ex`: `q` and `out` are ragged `[tokens, q_heads, d]`
/// (any strides; sequence s owns rows `qo_indptr[s] ..`), `kv` the layer's paged cache
/// in the plan's `kv_dtype` (8-bit pools with their scales; its page table must give the
/// plan's KV lengths), `lse` empty or `q_heads x tokens`
/// (base `options.lse_base`, -inf for a row without keys), `workspace` at least
/// `plan.workspace_bytes()`. Host backends plug in per tile: GEMMs (`gemm_backend`), and
/// optionally `online_softmax_tile` and `decode_tile`; device backends run the whole plan
/// instead (see backend/cuda/batch_attention.cuh). Allocates nothing; the output does not
/// depend on the executor or the worker count, and depends on the split only through
/// the merge's fp32 rounding; token-major and head-major pages give the same bits for the
/// same decode step (`batch_options::kv_block` set: by default NHD pages may take a
/// shorter one).
/// @code
/// std::vector<float> ws(plan.workspace_bytes() / sizeof(float));
/// for (auto& layer : layers)
///     frugal::attention::batch::run(plan, cpu, layer.q, layer.kv, layer.out, {}, std::span<float>(ws),
///                                   frugal::default_thread_pool());
/// @endcode
template <class Backend, storage_type T, kv_storage_type KV, executor Executor>
    requires gemm_backend<std::remove_reference_t<Backend>, float>
void run(const batch_plan& plan, Backend&& backend, heads_view<const T> q, const paged_kv<const KV>& kv,
         heads_view<T> out, matrix_view<float> lse, std::span<float> workspace, Executor& ex) {
    detail::check_batch_views(plan, q, kv, out, lse);
    FRUGAL_CHECK(workspace.size() * sizeof(float) >= plan.workspace_bytes(), "batch::run: workspace of ",
                 workspace.size() * sizeof(float), " bytes, the plan needs ", plan.workspace_bytes());
    float* slots = workspace.data() + plan.workers() * plan.worker_floats();
    const auto items = plan.items();
    parallel_for(ex, items.size(), plan.workers(), [&](std::size_t i, std::size_t worker) {
        const batch_work_item& it = items[i];
        float* ws = workspace.data() + worker * plan.worker_floats();
        if (it.prefill) {
            detail::run_prefill_item(plan, backend, it, q, kv, out, lse, ws);
        } else {
            detail::run_decode_item(plan, std::as_const(backend), it, q, kv, out, lse, ws,
                                    it.slot == batch_work_item::no_slot ? nullptr : slots + it.slot * plan.slot_floats());
        }
    });
    const auto merges = plan.merges();
    parallel_for(ex, merges.size(), plan.workers(),
                 [&](std::size_t i, std::size_t) { detail::run_merge(plan, merges[i], slots, out, lse); });
}

/// `run` on `default_thread_pool()` with a workspace it allocates (exactly `plan.workspace_bytes()`).
/// @code
/// frugal::attention::batch::run(plan, frugal::eigen::attention_backend{}, q, kv, out);
/// @endcode
template <class Backend, storage_type T, kv_storage_type KV>
    requires gemm_backend<std::remove_reference_t<Backend>, float>
void run(const batch_plan& plan, Backend&& backend, heads_view<const T> q, const paged_kv<const KV>& kv,
         heads_view<T> out, matrix_view<float> lse = {}) {
    std::vector<float> workspace(plan.workspace_bytes() / sizeof(float));
    run(plan, std::forward<Backend>(backend), q, kv, out, lse, std::span<float>(workspace), default_thread_pool());
}

}  // namespace batch
}  // namespace frugal::attention
