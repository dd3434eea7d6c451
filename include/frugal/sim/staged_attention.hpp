#pragma once
/// @file
/// HyperGen's staged attention under a device memory limit (hypergen.txt 3.2, severe
/// pressure, Figure 3b), the baseline tiled attention is measured against.

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <span>
#include <type_traits>
#include <vector>

#include "frugal/attention/heads_view.hpp"
#include "frugal/core/thread_pool.hpp"
#include "frugal/attention/tiled_attention.hpp"
#include "frugal/core/concepts.hpp"
#include "frugal/core/error.hpp"
#include "frugal/core/memory_budget.hpp"
#include "frugal/attention/attention_plan.hpp"

namespace frugal::sim {

/// HyperGen's staged attention, faithfully: the full score matrix is materialized in host
/// memory, built from row groups computed in a device buffer sized to the limit;
/// softmax runs group by group (input and output of a group in device memory, result
/// written back to host); the output multiplies P sub-matrices copied back to the
/// device with V and concatenates the results in host memory.
namespace staged_attention {

/// Group sizes of the three staged steps for one device memory limit, and the bytes
/// the run allocates (`host_bytes` for the concatenated scores of all heads,
/// `device_bytes` for the per-worker device buffers).
/// @code
/// auto plan = frugal::sim::staged_attention::plan(shape, {}, frugal::memory_budget::mib(64));
/// std::size_t host = plan.host_bytes();   // q_heads * q_len * kv_len * 4
/// @endcode
struct staged_plan {
    attention::attention_shape shape;
    attention::attention_options options;
    std::size_t score_rows = 0;    ///< rows of Q K^T per device sub-matrix
    std::size_t softmax_rows = 0;  ///< rows per softmax group (input and output on the device)
    std::size_t output_rows = 0;   ///< rows of P per P V sub-multiplication (P rows and result on the device)
    std::size_t workers = 1;

    /// Floats of one worker's device buffer: the largest of the three steps.
    [[nodiscard]] constexpr std::size_t device_floats() const noexcept {
        return std::max({score_rows * shape.kv_len, 2 * softmax_rows * shape.kv_len,
                         output_rows * (shape.kv_len + shape.head_dim)});
    }
    [[nodiscard]] constexpr std::size_t device_bytes() const noexcept {
        return workers * device_floats() * sizeof(float);
    }
    [[nodiscard]] constexpr std::size_t host_bytes() const noexcept {
        return shape.q_heads * shape.q_len * shape.kv_len * sizeof(float);
    }
    /// Everything the run allocates.
    [[nodiscard]] constexpr std::size_t workspace_bytes() const noexcept { return device_bytes() + host_bytes(); }
};

/// Sizes the groups so each step of one worker fits `device_limit` (the paper's GPU
/// memory limit); `options.threads` workers split the limit. Throws naming the minimum
/// when one row of a step does not fit.
/// @code
/// auto plan = frugal::sim::staged_attention::plan(shape, {.threads = 2}, frugal::memory_budget::mib(64));
/// @endcode
[[nodiscard]] inline staged_plan plan(const attention::attention_shape& shape, const attention::attention_options& options,
                                      memory_budget device_limit) {
    shape.validate();
    FRUGAL_CHECK(options.threads > 0, "staged_attention::plan: threads must be positive");
    staged_plan p{shape, options};
    p.workers = std::min(options.threads, shape.q_heads);
    const std::size_t min_floats = std::max(2 * shape.kv_len, shape.kv_len + shape.head_dim);
    FRUGAL_CHECK(device_limit.bytes() >= p.workers * min_floats * sizeof(float),
                 "staged_attention::plan: a device limit of ", device_limit.bytes(),
                 " bytes is below the minimum of ", p.workers * min_floats * sizeof(float), " bytes (", p.workers,
                 " workers, one softmax row of ", shape.kv_len, " scores in and out)");
    const std::size_t per_worker = device_limit.bytes() / p.workers / sizeof(float);
    p.score_rows = std::min(shape.q_len, per_worker / shape.kv_len);
    p.softmax_rows = std::min(shape.q_len, per_worker / (2 * shape.kv_len));
    p.output_rows = std::min(shape.q_len, per_worker / (shape.kv_len + shape.head_dim));
    return p;
}

/// Runs the staged baseline; same views and mask semantics as `tiled_attention::run`.
/// @code
/// frugal::sim::staged_attention::run(plan, frugal::eigen::backend{}, q, k, v, out);
/// @endcode
template <class Backend>
    requires gemm_backend<std::remove_reference_t<Backend>, float>
void run(const staged_plan& p, Backend&& backend, attention::heads_view<const float> q, attention::heads_view<const float> k,
         attention::heads_view<const float> v, attention::heads_view<float> out) {
    const attention::attention_shape& sh = p.shape;
    attention::detail::check_attention_views(sh, q, k, v, out, {}, "staged_attention::run");
    const float scale = p.options.scale > 0.0f ? p.options.scale : 1.0f / std::sqrt(float(sh.head_dim));
    const attention::attention_mask mask = p.options.mask;
    const auto q_len = std::int64_t(sh.q_len), kv_len = std::int64_t(sh.kv_len);
    std::vector<float> host(p.host_bytes() / sizeof(float));  // concatenated scores, then probabilities
    std::vector<float> device(p.device_bytes() / sizeof(float));
    parallel_for(default_thread_pool(), sh.q_heads, p.workers, [&](std::size_t h, std::size_t worker) {
        float* dev = device.data() + worker * p.device_floats();
        const matrix_view<float> scores(host.data() + h * sh.q_len * sh.kv_len, sh.q_len, sh.kv_len);
        const auto kh = k.head(h / sh.group()), vh = v.head(h / sh.group());
        // Attention score calculation: sub-matrix on the device, offloaded to host.
        for (std::size_t r0 = 0; r0 < sh.q_len; r0 += p.score_rows) {
            const std::size_t rows = std::min(p.score_rows, sh.q_len - r0);
            const matrix_view<float> d(dev, rows, sh.kv_len);
            backend.gemm(q.head(h).row_block(r0, rows), transpose::no, kh, transpose::yes, d, scale, 0.0f);
            if (mask.is_causal) attention::detail::apply_mask(d, mask, std::int64_t(r0), 0, q_len, kv_len);
            std::copy_n(dev, rows * sh.kv_len, scores.row(r0).data());
        }
        // Softmax: group input copied to the device, output computed there, written back to host.
        for (std::size_t r0 = 0; r0 < sh.q_len; r0 += p.softmax_rows) {
            const std::size_t rows = std::min(p.softmax_rows, sh.q_len - r0), n = rows * sh.kv_len;
            float* in = dev;
            float* res = dev + n;
            std::copy_n(scores.row(r0).data(), n, in);
            for (std::size_t r = 0; r < rows; ++r) {
                const float* x = in + r * sh.kv_len;
                float* y = res + r * sh.kv_len;
                const float mx = *std::max_element(x, x + sh.kv_len);
                float sum = 0.0f;
                for (std::size_t j = 0; j < sh.kv_len; ++j) {
                    y[j] = mx == attention::softmax_math::minus_infinity() ? 0.0f : std::exp(x[j] - mx);
                    sum += y[j];
                }
                const float inv = sum > 0.0f ? 1.0f / sum : 0.0f;
                for (std::size_t j = 0; j < sh.kv_len; ++j) y[j] *= inv;
            }
            std::copy_n(res, n, scores.row(r0).data());
        }
        // Attention output: P rows copied to the device, multiplied by V, concatenated in host.
        for (std::size_t r0 = 0; r0 < sh.q_len; r0 += p.output_rows) {
            const std::size_t rows = std::min(p.output_rows, sh.q_len - r0);
            std::copy_n(scores.row(r0).data(), rows * sh.kv_len, dev);
            const matrix_view<float> result(dev + rows * sh.kv_len, rows, sh.head_dim);
            backend.gemm(matrix_view<const float>(dev, rows, sh.kv_len), transpose::no, vh, transpose::no, result,
                         1.0f, 0.0f);
            const auto o = out.head(h).row_block(r0, rows);
            for (std::size_t r = 0; r < rows; ++r) std::copy_n(result.row(r).data(), sh.head_dim, o.row(r).data());
        }
    });
}

}  // namespace staged_attention
}  // namespace frugal::sim
