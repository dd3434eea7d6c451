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
    /// scores `batch::size` keys at a time with one transposed reduction (`haddp`), the
    /// row step on each row's scores, then P V with each value vector loaded once for four rows.
    void decode_tile(matrix_view<const float> q, matrix_view<const float> k, matrix_view<const float> v,
                     matrix_view<float> s, matrix_view<float> o, std::span<float> m, std::span<float> l) const {
        const std::size_t rows = q.rows(), n = k.rows();
        FRUGAL_ASSERT(s.rows() == rows && s.cols() == n && o.rows() == rows && o.cols() == q.cols() && v.rows() == n);
        scores(q, k, s);
        for (std::size_t r = 0; r < rows; ++r) {
            float alpha = 0.0f;
            online_softmax_tile(s.row_block(r, 1), m.subspan(r, 1), l.subspan(r, 1), std::span<float>(&alpha, 1));
            if (alpha != 1.0f) scale_row(o.row(r), alpha);
        }
        std::size_t r = 0;
        for (; r + 4 <= rows; r += 4) accumulate_rows<4>(s.row_block(r, 4), v, o.row_block(r, 4));
        for (; r < rows; ++r) accumulate_rows<1>(s.row_block(r, 1), v, o.row_block(r, 1));
    }

private:
    using batch = xsimd::batch<float>;
    static constexpr std::size_t lanes = batch::size;

    /// The order to hand `lanes` accumulators to `xsimd::haddp` so that lane i of the result
    /// is the sum of accumulator i. Probed once: xsimd 8's AVX-512 `haddp` returns lanes
    /// 2-5 and 10-13 permuted, other versions and ISAs in order.
    [[nodiscard]] static const std::array<std::size_t, lanes>& haddp_order() {
        static const std::array<std::size_t, lanes> order = [] {
            std::array<batch, lanes> probe;
            for (std::size_t u = 0; u < lanes; ++u) probe[u] = batch(static_cast<float>(u));
            alignas(64) std::array<float, lanes> sums{};
            xsimd::haddp(probe.data()).store_aligned(sums.data());
            std::array<std::size_t, lanes> inverse{};
            for (std::size_t i = 0; i < lanes; ++i) inverse[static_cast<std::size_t>(sums[i]) / lanes] = i;
            return inverse;
        }();
        return order;
    }

    /// s = q k^T. Blocks of `row_group` rows x `key_group` keys (one accumulator each,
    /// `lanes` in all) share every K and Q load and are reduced by one `haddp`.
    static void scores(matrix_view<const float> q, matrix_view<const float> k, matrix_view<float> s) {
        constexpr std::size_t key_group = lanes >= 4 ? 4 : lanes, row_group = lanes / key_group;
        const std::size_t rows = q.rows(), n = k.rows(), d = k.cols();
        std::size_t r = 0;
        if (d % lanes == 0) {
            const auto& order = haddp_order();
            for (; r + row_group <= rows; r += row_group) {
                std::size_t j = 0;
                for (; j + key_group <= n; j += key_group) {
                    std::array<batch, lanes> acc;
                    acc.fill(batch(0.0f));
                    for (std::size_t c = 0; c < d; c += lanes) {
                        std::array<batch, key_group> kc;
                        for (std::size_t u = 0; u < key_group; ++u) kc[u] = batch::load_unaligned(k.row(j + u).data() + c);
                        for (std::size_t g = 0; g < row_group; ++g) {
                            const batch qc = batch::load_unaligned(q.row(r + g).data() + c);
                            for (std::size_t u = 0; u < key_group; ++u)
                                acc[g * key_group + u] = xsimd::fma(qc, kc[u], acc[g * key_group + u]);
                        }
                    }
                    std::array<batch, lanes> ordered;
                    for (std::size_t u = 0; u < lanes; ++u) ordered[u] = acc[order[u]];
                    alignas(64) std::array<float, lanes> sums;
                    xsimd::haddp(ordered.data()).store_aligned(sums.data());
                    for (std::size_t g = 0; g < row_group; ++g)
                        for (std::size_t u = 0; u < key_group; ++u) s(r + g, j + u) = sums[g * key_group + u];
                }
                for (; j < n; ++j)
                    for (std::size_t g = 0; g < row_group; ++g) s(r + g, j) = dot(q.row(r + g), k.row(j));
            }
        }
        for (; r < rows; ++r)
            for (std::size_t j = 0; j < n; ++j) s(r, j) = dot(q.row(r), k.row(j));
    }

    static void scale_row(std::span<float> row, float alpha) {
        std::size_t c = 0;
        for (; c + lanes <= row.size(); c += lanes) (batch::load_unaligned(row.data() + c) * alpha).store_unaligned(row.data() + c);
        for (; c < row.size(); ++c) row[c] *= alpha;
    }

    /// o[r] += sum_j p[r, j] v_j for `Rows` rows, two vectors of each row's output in
    /// registers while the block's value rows stream by.
    template <std::size_t Rows>
    static void accumulate_rows(matrix_view<const float> p, matrix_view<const float> v, matrix_view<float> o) {
        const std::size_t n = v.rows(), d = v.cols();
        std::size_t c = 0;
        for (; c + 2 * lanes <= d; c += 2 * lanes) {
            std::array<batch, Rows> a0, a1;
            for (std::size_t r = 0; r < Rows; ++r) {
                a0[r] = batch::load_unaligned(o.row(r).data() + c);
                a1[r] = batch::load_unaligned(o.row(r).data() + c + lanes);
            }
            for (std::size_t j = 0; j < n; ++j) {
                const float* vj = v.row(j).data() + c;
                const batch v0 = batch::load_unaligned(vj), v1 = batch::load_unaligned(vj + lanes);
                for (std::size_t r = 0; r < Rows; ++r) {
                    const batch pr(p(r, j));
                    a0[r] = xsimd::fma(pr, v0, a0[r]);
                    a1[r] = xsimd::fma(pr, v1, a1[r]);
                }
            }
            for (std::size_t r = 0; r < Rows; ++r) {
                a0[r].store_unaligned(o.row(r).data() + c);
                a1[r].store_unaligned(o.row(r).data() + c + lanes);
            }
        }
        for (; c < d; ++c)
            for (std::size_t r = 0; r < Rows; ++r)
                for (std::size_t j = 0; j < n; ++j) o(r, c) += p(r, j) * v(j, c);
    }
};

static_assert(tensor_backend<attention_backend, float>);
static_assert(attention::online_softmax_backend<attention_backend>);
static_assert(attention::decode_tile_backend<attention_backend>);

}  // namespace frugal::eigen
