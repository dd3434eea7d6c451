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

#include "frugal/attention/batch_attention.hpp"
#include "frugal/attention/online_softmax.hpp"
#include "frugal/attention/tiled_attention.hpp"
#include "frugal/backend/eigen/eigen_backend.hpp"
#include "frugal/backend/eigen/simd.hpp"
#include "frugal/core/matrix_view.hpp"

namespace frugal::eigen {

/// The reference backend plus the fused online-softmax row step of tiled attention
/// (`frugal::attention::online_softmax_backend`) and the fused decode step of batch
/// attention (`frugal::attention::decode_tile_backend`). Eigen runs single-threaded inside each tile; the
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

    /// The decode step on one unmasked block of keys (see `frugal::attention::decode_tile_backend`):
    /// scores as `batch::size` dot products at a time reduced with `haddp`, the row step as
    /// in `online_softmax_tile`, then P V accumulated four vectors of `o` at a time.
    void decode_tile(matrix_view<const float> q, matrix_view<const float> k, matrix_view<const float> v,
                     matrix_view<float> s, matrix_view<float> o, std::span<float> m, std::span<float> l) const {
        using batch = xsimd::batch<float>;
        constexpr std::size_t lanes = batch::size;
        const std::size_t rows = q.rows(), n = k.rows(), d = q.cols(), dv = d - d % lanes;
        FRUGAL_ASSERT(s.rows() == rows && s.cols() == n && o.rows() == rows && o.cols() == d && v.rows() == n);
        // s = q k^T
        for (std::size_t r = 0; r < rows; ++r) {
            const float* qr = q.row(r).data();
            float* sr = s.row(r).data();
            std::size_t j = 0;
            for (; j + lanes <= n; j += lanes) {
                std::array<batch, lanes> acc;
                acc.fill(batch(0.0f));
                for (std::size_t c = 0; c < dv; c += lanes) {
                    const batch qc = batch::load_unaligned(qr + c);
                    for (std::size_t u = 0; u < lanes; ++u)
                        acc[u] = xsimd::fma(qc, batch::load_unaligned(k.row(j + u).data() + c), acc[u]);
                }
                batch dots = xsimd::haddp(acc.data());
                if (dv < d) {
                    alignas(64) std::array<float, lanes> tail{};
                    for (std::size_t u = 0; u < lanes; ++u)
                        for (std::size_t c = dv; c < d; ++c) tail[u] += qr[c] * k.row(j + u)[c];
                    dots += batch::load_aligned(tail.data());
                }
                dots.store_unaligned(sr + j);
            }
            for (; j < n; ++j) sr[j] = dot(std::span<const float>(qr, d), k.row(j));
        }
        // The online-softmax row step; o is rescaled by alpha.
        for (std::size_t r = 0; r < rows; ++r) {
            float alpha = 0.0f;
            online_softmax_tile(s.row_block(r, 1), m.subspan(r, 1), l.subspan(r, 1), std::span<float>(&alpha, 1));
            if (alpha != 1.0f) {
                float* orow = o.row(r).data();
                std::size_t c = 0;
                for (; c < dv; c += lanes) (batch::load_unaligned(orow + c) * alpha).store_unaligned(orow + c);
                for (; c < d; ++c) orow[c] *= alpha;
            }
        }
        // o += P v, four vectors of a row's output held in registers across the block's keys.
        for (std::size_t r = 0; r < rows; ++r) {
            const float* sr = s.row(r).data();
            float* orow = o.row(r).data();
            std::size_t c = 0;
            for (; c + 4 * lanes <= d; c += 4 * lanes) {
                batch a0 = batch::load_unaligned(orow + c), a1 = batch::load_unaligned(orow + c + lanes);
                batch a2 = batch::load_unaligned(orow + c + 2 * lanes), a3 = batch::load_unaligned(orow + c + 3 * lanes);
                for (std::size_t j = 0; j < n; ++j) {
                    const batch p(sr[j]);
                    const float* vj = v.row(j).data() + c;
                    a0 = xsimd::fma(p, batch::load_unaligned(vj), a0);
                    a1 = xsimd::fma(p, batch::load_unaligned(vj + lanes), a1);
                    a2 = xsimd::fma(p, batch::load_unaligned(vj + 2 * lanes), a2);
                    a3 = xsimd::fma(p, batch::load_unaligned(vj + 3 * lanes), a3);
                }
                a0.store_unaligned(orow + c);
                a1.store_unaligned(orow + c + lanes);
                a2.store_unaligned(orow + c + 2 * lanes);
                a3.store_unaligned(orow + c + 3 * lanes);
            }
            for (; c + lanes <= d; c += lanes) {
                batch a = batch::load_unaligned(orow + c);
                for (std::size_t j = 0; j < n; ++j) a = xsimd::fma(batch(sr[j]), batch::load_unaligned(v.row(j).data() + c), a);
                a.store_unaligned(orow + c);
            }
            for (; c < d; ++c)
                for (std::size_t j = 0; j < n; ++j) orow[c] += sr[j] * v(j, c);
        }
    }
};

static_assert(tensor_backend<attention_backend, float>);
static_assert(attention::online_softmax_backend<attention_backend>);
static_assert(attention::decode_tile_backend<attention_backend>);

}  // namespace frugal::eigen
