#pragma once
/// @file
/// The reference backend's tiled-attention kernels: per-tile GEMMs through Eigen, the
/// online-softmax row step (max, exp2, rescale, sum) through xsimd.

#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <span>

#include <xsimd/xsimd.hpp>

#include "frugal/attention/online_softmax.hpp"
#include "frugal/attention/tiled_attention.hpp"
#include "frugal/backend/eigen/eigen_backend.hpp"
#include "frugal/core/matrix_view.hpp"

namespace frugal::eigen {

/// The reference backend plus the fused online-softmax row step of tiled attention
/// (`frugal::attention::online_softmax_backend`). Eigen runs single-threaded inside each tile; the
/// attention driver spreads (head, query tile) items over threads instead, so results do
/// not depend on the thread count. Safe to call from several threads at once.
/// @code
/// frugal::eigen::attention_backend cpu;
/// auto plan = frugal::attention::tiled::plan(shape, {.threads = 2}, frugal::memory_budget::mib(16));
/// frugal::attention::tiled::run(plan, cpu, q, k, v, out);
/// @endcode
class attention_backend : public backend {
public:
    /// The online-softmax row step on one base-2 score tile (see `frugal::attention::online_softmax_backend`).
    void online_softmax_tile(matrix_view<float> s, std::span<float> m, std::span<float> l,
                             std::span<float> alpha) const {
        FRUGAL_ASSERT(m.size() == s.rows() && l.size() == s.rows() && alpha.size() == s.rows());
        using batch = xsimd::batch<float>;
        constexpr std::size_t lanes = batch::size;
        const std::size_t n = s.cols(), vec_end = n - n % lanes;
        for (std::size_t r = 0; r < s.rows(); ++r) {
            float* row = s.row(r).data();
            batch vmax(attention::softmax_math::minus_infinity());
            for (std::size_t j = 0; j < vec_end; j += lanes) vmax = xsimd::max(vmax, batch::load_unaligned(row + j));
            alignas(64) std::array<float, lanes> lane_max{};
            vmax.store_aligned(lane_max.data());
            float tile_max = *std::max_element(lane_max.begin(), lane_max.end());
            for (std::size_t j = vec_end; j < n; ++j) tile_max = std::max(tile_max, row[j]);
            const auto step = attention::softmax_math::online_rescale<attention::softmax_base::two>(m[r], tile_max);
            const batch shift(step.shift);
            batch vsum(0.0f);
            for (std::size_t j = 0; j < vec_end; j += lanes) {
                const batch p = xsimd::exp2(batch::load_unaligned(row + j) - shift);
                p.store_unaligned(row + j);
                vsum += p;
            }
            float sum = xsimd::hadd(vsum);
            for (std::size_t j = vec_end; j < n; ++j) {
                row[j] = std::exp2(row[j] - step.shift);
                sum += row[j];
            }
            l[r] = step.alpha * l[r] + sum;
            m[r] = step.max;
            alpha[r] = step.alpha;
        }
    }
};

static_assert(tensor_backend<attention_backend, float>);
static_assert(attention::online_softmax_backend<attention_backend>);

}  // namespace frugal::eigen
