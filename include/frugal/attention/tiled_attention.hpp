#pragma once
/// @file
/// Tiled attention with an online softmax (FlashAttention-2 style) under a workspace
/// budget: plan(shape, options, budget) then run(plan, backend, q, k, v, out, lse).

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <span>
#include <type_traits>
#include <utility>
#include <vector>

#include "frugal/attention/dtype.hpp"
#include "frugal/attention/heads_view.hpp"
#include "frugal/attention/masks.hpp"
#include "frugal/attention/online_softmax.hpp"
#include "frugal/core/thread_pool.hpp"
#include "frugal/core/concepts.hpp"
#include "frugal/core/error.hpp"
#include "frugal/core/executor.hpp"
#include "frugal/core/matrix_view.hpp"
#include "frugal/core/memory_budget.hpp"
#include "frugal/attention/attention_plan.hpp"

namespace frugal::attention {

/// A backend's optional fused row step of the online softmax on one score tile `s`
/// (already in base-2 units, masked keys at -inf): per row r, the new running max
/// m' = max(m[r], max_j s[r, j]), alpha[r] = 2^(m[r] - m'), s[r, j] := 2^(s[r, j] - m'),
/// l[r] := alpha[r] * l[r] + sum_j s[r, j], m[r] := m'. Backends without it get a
/// portable loop.
/// @code
/// void online_softmax_tile(frugal::matrix_view<float> s, std::span<float> m, std::span<float> l,
///                          std::span<float> alpha) const;
/// @endcode
template <class B>
concept online_softmax_backend = requires(const B& b, matrix_view<float> s, std::span<float> v) {
    { b.online_softmax_tile(s, v, v, v) } -> std::same_as<void>;
};

namespace detail {

/// The portable online-softmax row step (see online_softmax_backend).
inline void online_softmax_tile(matrix_view<float> s, std::span<float> m, std::span<float> l,
                                std::span<float> alpha) {
    for (std::size_t r = 0; r < s.rows(); ++r) {
        const std::span<float> row = s.row(r);
        float tile_max = softmax_math::minus_infinity();
        for (float x : row) tile_max = x > tile_max ? x : tile_max;
        const auto step = softmax_math::online_rescale<softmax_base::two>(m[r], tile_max);
        float sum = 0.0f;
        for (float& x : row) {
            x = std::exp2(x - step.shift);
            sum += x;
        }
        l[r] = step.alpha * l[r] + sum;
        m[r] = step.max;
        alpha[r] = step.alpha;
    }
}

/// Sets the scores of the tile at (q0, k0) that `mask` hides to -inf.
inline void apply_mask(matrix_view<float> s, const attention_mask& mask, std::int64_t q0, std::int64_t k0,
                       std::int64_t q_len, std::int64_t kv_len) {
    const auto cols = static_cast<std::int64_t>(s.cols());
    for (std::size_t r = 0; r < s.rows(); ++r) {
        const std::int64_t i = q0 + static_cast<std::int64_t>(r);
        const std::int64_t lo = std::clamp<std::int64_t>(mask.key_begin(i, q_len, kv_len) - k0, 0, cols);
        const std::int64_t hi = std::clamp<std::int64_t>(mask.key_end(i, q_len, kv_len) - k0, lo, cols);
        const std::span<float> row = s.row(r);
        std::fill(row.begin(), row.begin() + lo, softmax_math::minus_infinity());
        std::fill(row.begin() + hi, row.end(), softmax_math::minus_infinity());
    }
}

/// The operands of one query tile: its Q rows, the K/V rows it reads (row 0 is key
/// `key_base`), its output rows (the unnormalized accumulator) and its score tile buffer.
struct tile_operands {
    matrix_view<const float> q, k, v;
    matrix_view<float> o, s;
};

/// The running online-softmax state of one query tile's rows.
struct tile_state {
    std::span<float> m, l, alpha;
    bool& any_key;  ///< whether `o` holds accumulated rows yet (else the first P V overwrites it)
};

/// Folds keys [k_begin, k_end) (global indices; `ops.k` row 0 is key `key_base`) into the
/// tile state, KV tile by KV tile: skipped tiles cost nothing, diagonal tiles are masked.
template <class Backend>
void attend_keys(Backend& backend, const tile_operands& ops, tile_state st, const attention_mask& mask,
                 std::int64_t q0, std::int64_t q_len, std::int64_t kv_len, std::size_t key_base, std::size_t k_begin,
                 std::size_t k_end, float scale) {
    const std::size_t rows = ops.q.rows(), kt = ops.s.cols();
    const std::int64_t q1 = q0 + static_cast<std::int64_t>(rows);
    for (std::size_t k0 = k_begin; k0 < k_end; k0 += kt) {
        const std::size_t cols = std::min(kt, k_end - k0);
        const auto cover = mask.classify(q0, q1, static_cast<std::int64_t>(k0), static_cast<std::int64_t>(k0 + cols),
                                         q_len, kv_len);
        if (cover == tile_coverage::skip) continue;
        const matrix_view<float> s(ops.s.data(), rows, cols, kt);
        backend.gemm(ops.q, transpose::no, ops.k.row_block(k0 - key_base, cols), transpose::yes, s, scale, 0.0f);
        if (cover == tile_coverage::partial) apply_mask(s, mask, q0, static_cast<std::int64_t>(k0), q_len, kv_len);
        if constexpr (online_softmax_backend<std::remove_cvref_t<Backend>>) {
            backend.online_softmax_tile(s, st.m, st.l, st.alpha);
        } else {
            online_softmax_tile(s, st.m, st.l, st.alpha);
        }
        if (st.any_key) {
            for (std::size_t r = 0; r < rows; ++r) {
                if (st.alpha[r] != 1.0f) for (float& x : ops.o.row(r)) x *= st.alpha[r];
            }
        }
        backend.gemm(matrix_view<const float>(s), transpose::no, ops.v.row_block(k0 - key_base, cols), transpose::no,
                     ops.o, 1.0f, st.any_key ? 1.0f : 0.0f);
        st.any_key = true;
    }
}

/// Normalizes one output row (o / l; zeros when the row saw no key, whatever `o` held),
/// stores it as `T` (in place when `out` is `o`) and, when wanted, its log-sum-exp in `base`.
template <class T>
void finish_row(float* o, std::size_t d, float m, float l, T* out, float* lse, softmax_base base) {
    if (l > 0.0f) {
        const float inv = 1.0f / l;
        for (std::size_t c = 0; c < d; ++c) o[c] *= inv;
    } else {
        std::fill(o, o + d, 0.0f);
    }
    if (static_cast<const void*>(out) != static_cast<const void*>(o)) from_floats(o, out, d);
    if (lse != nullptr) *lse = softmax_math::lse_from_base_two(m, l, base);
}

/// Writes the normalized output rows in place and, when wanted, their log-sum-exp.
inline void finish_rows(matrix_view<float> o, std::span<const float> m, std::span<const float> l, bool any_key,
                        std::span<float> lse, softmax_base base) {
    for (std::size_t r = 0; r < o.rows(); ++r) {
        float* row = o.row(r).data();
        finish_row(row, o.cols(), m[r], any_key ? l[r] : 0.0f, row, lse.empty() ? nullptr : &lse[r], base);
    }
}

/// Checks that the query-side views match the plan's shape.
template <class T>
void check_query_views(const attention_shape& sh, const heads_view<const T>& q, const heads_view<T>& out,
                       const matrix_view<float>& lse, const char* who) {
    FRUGAL_CHECK(q.heads() == sh.q_heads && q.tokens() == sh.q_len && q.dim() == sh.head_dim, who, ": q is ",
                 q.heads(), " heads x ", q.tokens(), " x ", q.dim(), ", the plan expects ", sh.q_heads, " x ",
                 sh.q_len, " x ", sh.head_dim);
    FRUGAL_CHECK(out.heads() == sh.q_heads && out.tokens() == sh.q_len && out.dim() == sh.head_dim, who,
                 ": out is ", out.heads(), " heads x ", out.tokens(), " x ", out.dim(), ", the plan expects ",
                 sh.q_heads, " x ", sh.q_len, " x ", sh.head_dim);
    FRUGAL_CHECK(lse.empty() || (lse.rows() == sh.q_heads && lse.cols() == sh.q_len), who, ": lse is ", lse.rows(),
                 " x ", lse.cols(), ", expected empty or ", sh.q_heads, " x ", sh.q_len);
}

/// Checks that all views match the plan's shape (any element type: the GPU's 16-bit path too).
template <class T>
void check_attention_views(const attention_shape& sh, const heads_view<const T>& q, const heads_view<const T>& k,
                           const heads_view<const T>& v, const heads_view<T>& out, const matrix_view<float>& lse,
                           const char* who) {
    check_query_views(sh, q, out, lse, who);
    for (const auto* kv : {&k, &v}) {
        FRUGAL_CHECK(kv->heads() == sh.kv_heads && kv->tokens() == sh.kv_len && kv->dim() == sh.head_dim, who,
                     ": ", kv == &k ? "k" : "v", " is ", kv->heads(), " heads x ", kv->tokens(), " x ", kv->dim(),
                     ", the plan expects ", sh.kv_heads, " x ", sh.kv_len, " x ", sh.head_dim);
    }
}

}  // namespace detail

/// FlashAttention-2 style attention: out = softmax(scale * Q K^T + mask) V per head,
/// computed tile by tile with an online softmax so the `q_len x kv_len` score matrix is
/// never materialized. The answer to HyperGen's staged attention (hypergen.txt 3.2).
namespace tiled {

/// Picks the query tile, KV tile and number of concurrent workers so the workspace
/// fits `budget` (see `plan_attention_tiles`); `workspace_bytes()` is exact.
/// @code
/// auto plan = frugal::attention::tiled::plan(shape, {.mask = frugal::attention::attention_mask::causal(), .threads = 2},
///                                           frugal::memory_budget::mib(16));
/// @endcode
[[nodiscard]] inline attention_plan plan(const attention_shape& shape, const attention_options& options,
                                         memory_budget budget) {
    return plan_attention_tiles(shape, options, budget);
}

/// Runs `plan` on `backend` on the executor `ex` using the caller's `workspace` (at least
/// `plan.workspace_bytes()` bytes). `q`/`out` have `q_heads` heads, `k`/`v` have
/// `kv_heads`; query head h reads KV head h / (q_heads / kv_heads). `lse` is empty or
/// `q_heads x q_len` and receives log-sum-exp in `options.lse_base` (-inf for a row the
/// mask leaves without keys; its output row is 0). Deterministic for any thread count;
/// with `plan.workers() > 1` the backend is called from several threads at once.
/// @code
/// std::vector<float> ws(plan.workspace_bytes() / sizeof(float));
/// frugal::attention::tiled::run(plan, cpu, q, k, v, out, {}, std::span<float>(ws), frugal::default_thread_pool());
/// @endcode
template <class Backend, executor Executor>
    requires gemm_backend<std::remove_reference_t<Backend>, float>
void run(const attention_plan& plan, Backend&& backend, heads_view<const float> q, heads_view<const float> k,
         heads_view<const float> v, heads_view<float> out, matrix_view<float> lse, std::span<float> workspace,
         Executor& ex) {
    const attention_shape& sh = plan.shape();
    detail::check_attention_views(sh, q, k, v, out, lse, "tiled_attention::run");
    FRUGAL_CHECK(workspace.size() * sizeof(float) >= plan.workspace_bytes(), "tiled_attention::run: workspace of ",
                 workspace.size() * sizeof(float), " bytes, the plan needs ", plan.workspace_bytes());
    const attention_mask mask = plan.options().mask;
    const auto q_len = static_cast<std::int64_t>(sh.q_len), kv_len = static_cast<std::int64_t>(sh.kv_len);
    const std::size_t qt = plan.q_tile(), kt = plan.kv_tile(), n_tiles = plan.q_tiles();
    const float scale = plan.score_scale_log2();
    // Later query tiles see more keys under a causal mask: hand them out first.
    parallel_for(ex, sh.q_heads * n_tiles, plan.workers(), [&](std::size_t item, std::size_t worker) {
        const std::size_t h = item % sh.q_heads;
        const std::size_t tile = n_tiles - 1 - item / sh.q_heads;
        const std::size_t q0 = tile * qt, rows = std::min(qt, sh.q_len - q0);
        float* ws = workspace.data() + worker * plan.worker_floats();
        const std::span<float> m(ws + qt * kt, rows), l(ws + qt * kt + qt, rows), alpha(ws + qt * kt + 2 * qt, rows);
        std::fill(m.begin(), m.end(), softmax_math::minus_infinity());
        std::fill(l.begin(), l.end(), 0.0f);
        const matrix_view<const float> qh = q.head(h).row_block(q0, rows);
        const matrix_view<const float> kh = k.head(h / sh.group()), vh = v.head(h / sh.group());
        const matrix_view<float> o = out.head(h).row_block(q0, rows);
        const auto iq0 = static_cast<std::int64_t>(q0), iq1 = iq0 + static_cast<std::int64_t>(rows);
        const auto k_begin = static_cast<std::size_t>(mask.key_begin(iq0, q_len, kv_len));
        const auto k_end = static_cast<std::size_t>(mask.key_end(iq1 - 1, q_len, kv_len));
        bool any_key = false;
        detail::attend_keys(backend, {qh, kh, vh, o, matrix_view<float>(ws, rows, kt)}, {m, l, alpha, any_key},
                            mask, iq0, q_len, kv_len, 0, k_begin, k_end, scale);
        detail::finish_rows(o, m, l, any_key, lse.empty() ? std::span<float>{} : lse.row(h).subspan(q0, rows),
                            plan.options().lse_base);
    });
}

/// `run` on `default_thread_pool()` with the caller's workspace.
/// @code
/// frugal::attention::tiled::run(plan, cpu, q, k, v, out, {}, std::span<float>(ws));
/// @endcode
template <class Backend>
    requires gemm_backend<std::remove_reference_t<Backend>, float>
void run(const attention_plan& plan, Backend&& backend, heads_view<const float> q, heads_view<const float> k,
         heads_view<const float> v, heads_view<float> out, matrix_view<float> lse, std::span<float> workspace) {
    run(plan, std::forward<Backend>(backend), q, k, v, out, lse, workspace, default_thread_pool());
}

/// `run` on `default_thread_pool()` with a workspace it allocates (exactly `plan.workspace_bytes()`).
/// @code
/// auto plan = frugal::attention::tiled::plan(shape, {}, frugal::memory_budget::mib(16));
/// frugal::attention::tiled::run(plan, frugal::eigen::attention_backend{}, q, k, v, out);
/// @endcode
template <class Backend>
    requires gemm_backend<std::remove_reference_t<Backend>, float>
void run(const attention_plan& plan, Backend&& backend, heads_view<const float> q, heads_view<const float> k,
         heads_view<const float> v, heads_view<float> out, matrix_view<float> lse = {}) {
    std::vector<float> workspace(plan.workspace_bytes() / sizeof(float));
    run(plan, std::forward<Backend>(backend), q, k, v, out, lse, std::span<float>(workspace), default_thread_pool());
}

}  // namespace tiled
}  // namespace frugal::attention
