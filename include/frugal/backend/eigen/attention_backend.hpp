#pragma once
/// @file
/// The reference backend's tiled-attention kernels: per-tile GEMMs through Eigen, the
/// online-softmax row step (max, exp2, rescale, sum) and the decode step through xsimd,
/// for the instruction set the including unit is compiled for.

#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <span>
#include <type_traits>

#include "frugal/backend/eigen/diagnostics.hpp"
FRUGAL_EIGEN_DIAGNOSTICS_PUSH
#include <xsimd/xsimd.hpp>
FRUGAL_EIGEN_DIAGNOSTICS_POP

#include "frugal/attention/batch_attention.hpp"
#include "frugal/attention/dtype.hpp"
#include "frugal/attention/online_softmax.hpp"
#include "frugal/attention/tiled_attention.hpp"
#include "frugal/backend/eigen/eigen_backend.hpp"
#include "frugal/core/cpu_features.hpp"
#include "frugal/core/matrix_view.hpp"

// (GCC 12.0-12.2: see diagnostics.hpp.)
FRUGAL_EIGEN_DIAGNOSTICS_PUSH
namespace frugal::eigen {

// Unrolls the register-blocking loops of the decode kernels fully: GCC at -O2 (CMake's
// RelWithDebInfo) leaves them rolled and then keeps their accumulator arrays in memory
// instead of registers; unrolled, they stay in registers at -O2 as at -O3.
#define FRUGAL_UNROLL _Pragma("GCC unroll 16")

/// The reference backend plus the fused online-softmax row step of tiled attention
/// (`frugal::attention::online_softmax_backend`) and the fused decode step of batch
/// attention (`frugal::attention::decode_tile_backend`), with their vector loops written
/// for the xsimd architecture `Arch` (one the unit is compiled for, as xsimd requires). Use
/// `attention_backend`, the one for the unit's instruction set (`xsimd::default_arch`, the
/// set Eigen's own kernels use too): units built with different -m flags then use different
/// classes, never two bodies of one.
/// Eigen runs single-threaded inside each tile; the attention driver spreads (head, query
/// tile) items over threads instead, so results do not depend on the thread count. Safe to
/// call from several threads at once.
/// @code
/// frugal::eigen::attention_backend cpu;
/// auto plan = frugal::attention::tiled::plan(shape, {.threads = 2}, frugal::memory_budget::mib(16));
/// frugal::attention::tiled::run(plan, cpu, q, k, v, out);
/// @endcode
template <class Arch>
class basic_attention_backend : public backend {
    using batch = xsimd::batch<float, Arch>;
    static constexpr std::size_t lanes = batch::size;

public:
    /// The online-softmax row step on one base-2 score tile (see `frugal::attention::online_softmax_backend`).
    void online_softmax_tile(matrix_view<float> s, std::span<float> m, std::span<float> l,
                             std::span<float> alpha) const {
        FRUGAL_ASSERT(m.size() == s.rows() && l.size() == s.rows() && alpha.size() == s.rows());
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

    /// The decode step on one unmasked block of keys (see `frugal::attention::decode_tile_backend`)
    /// with fp32, bf16, fp16, FP8 or int8 rows (converted in registers; 8-bit scales applied
    /// to each key's scores and probabilities): scores for four rows (two on
    /// AVX2) x `lanes / 4` keys at a time reduced by one `haddp`, the online-softmax row
    /// step on all rows, then P V with each value vector loaded once for four rows. Over a
    /// token-major block the score passes go key by key across heads (see `scores`), so
    /// that each page streams in address order, once, for all the heads it holds; over a
    /// head-major one, head by head (each head's rows are then one run).
    /// @code
    /// frugal::eigen::attention_backend{}.decode_tile<frugal::attention::bfloat16>(q, {k_rows, v_rows, 1}, s, o, m, l);
    /// @endcode
    template <attention::kv_storage_type T>
    void decode_tile(matrix_view<const float> q, const attention::decode_block<T>& block, matrix_view<float> s,
                     matrix_view<float> o, std::span<float> m, std::span<float> l) const {
        const std::size_t rows = q.rows(), heads = block.heads, n = block.keys(), rph = rows / heads;
        FRUGAL_ASSERT(heads > 0 && rows % heads == 0 && block.k.size() == heads * n && block.v.size() == heads * n &&
                      s.rows() == rows && s.cols() == n && o.rows() == rows && o.cols() == q.cols());
        scores(q, block.k, block.v, heads, block.token_major, s);
        if (!block.k_scale.empty()) scale_columns(s, block.k_scale, heads, load_factor<T>);
        std::array<float, 64> alpha;
        for (std::size_t r0 = 0; r0 < rows; r0 += alpha.size()) {
            const std::size_t nr = std::min(alpha.size(), rows - r0);
            online_softmax_tile(s.row_block(r0, nr), m.subspan(r0, nr), l.subspan(r0, nr), std::span<float>(alpha.data(), nr));
            for (std::size_t r = 0; r < nr; ++r)
                if (alpha[r] != 1.0f) scale_row(o.row(r0 + r), alpha[r]);
        }
        if (!block.v_scale.empty()) scale_columns(s, block.v_scale, heads, load_factor<T>);  // after l took p_j
        for (std::size_t h = 0; h < heads; ++h) {
            const auto v = block.v.subspan(h * n, n);
            std::size_t r = h * rph;
            for (; r + 4 <= (h + 1) * rph; r += 4) accumulate_rows<4>(s.row_block(r, 4), v, o.row_block(r, 4));
            for (; r < (h + 1) * rph; ++r) accumulate_rows<1>(s.row_block(r, 1), v, o.row_block(r, 1));
        }
    }

private:
    /// E4M3 elements load as their value / 256 on AVX2 and AVX-512 (four operations fewer;
    /// see `attention::detail::load_e4m3_over_256_avx2`): `decode_tile` folds the 256 into the
    /// keys' scales, exactly.
    template <class T>
    static constexpr bool e4m3_over_256 = std::is_same_v<T, attention::float8_e4m3> && FRUGAL_X86_KERNELS &&
                                          ((lanes == 16 && std::is_base_of_v<xsimd::avx512f, Arch>) ||
                                           (lanes == 8 && std::is_base_of_v<xsimd::avx2, Arch>));
    /// What `load` and `element` leave out of a `T` element's value.
    template <class T>
    static constexpr float load_factor = e4m3_over_256<T> ? 256.0f : 1.0f;

    /// One element as `load` gives it (its value / `load_factor`).
    template <attention::kv_storage_type T>
    [[nodiscard]] static float element(T x) noexcept {
        return attention::to_float(x) * (1.0f / load_factor<T>);
    }

    /// `lanes` elements at `p` as fp32: the conversions of `frugal::attention`'s AVX-512,
    /// AVX2 + F16C or SSE2 path, whichever `Arch` is, in registers; a scalar loop elsewhere.
    template <attention::kv_storage_type T>
    [[nodiscard]] static batch load(const T* p) noexcept {
        if constexpr (std::is_same_v<T, float>) {
            return batch::load_unaligned(p);
#if FRUGAL_X86_KERNELS
        } else if constexpr (e4m3_over_256<T> && lanes == 16) {
            return batch(attention::detail::load_e4m3_over_256_avx512(p));
        } else if constexpr (e4m3_over_256<T>) {
            return batch(attention::detail::load_e4m3_over_256_avx2(p));
        } else if constexpr (lanes == 16 && std::is_base_of_v<xsimd::avx512f, Arch>) {
            return batch(attention::detail::load_floats_avx512(p));
        } else if constexpr (lanes == 8 && std::is_base_of_v<xsimd::avx2, Arch>) {
            return batch(attention::detail::load_floats_avx2(p));
        } else if constexpr (lanes == 8 && std::is_base_of_v<xsimd::avx, Arch>) {
            const __m256 lo = _mm256_castps128_ps256(attention::detail::load_floats_sse2(p));
            return batch(_mm256_insertf128_ps(lo, attention::detail::load_floats_sse2(p + 4), 1));
        } else if constexpr (lanes == 4 && std::is_base_of_v<xsimd::sse2, Arch>) {
            return batch(attention::detail::load_floats_sse2(p));
#endif
        } else {
            alignas(64) std::array<float, lanes> f;
            for (std::size_t i = 0; i < lanes; ++i) f[i] = element(p[i]);
            return batch::load_aligned(f.data());
        }
    }

    /// The lane of `xsimd::haddp`'s result that holds the sum of each accumulator. Probed
    /// once: xsimd 8's AVX-512 `haddp` returns lanes 2-5 and 10-13 permuted, other
    /// versions and ISAs in order.
    [[nodiscard]] static const std::array<std::size_t, lanes>& haddp_lanes() {
        static const std::array<std::size_t, lanes> lane_of = [] {
            std::array<batch, lanes> probe;
            for (std::size_t u = 0; u < lanes; ++u) probe[u] = batch(static_cast<float>(u));
            alignas(64) std::array<float, lanes> sums{};
            xsimd::haddp(probe.data()).store_aligned(sums.data());
            std::array<std::size_t, lanes> lanes_of{};
            for (std::size_t i = 0; i < lanes; ++i) lanes_of[static_cast<std::size_t>(sums[i]) / lanes] = i;
            return lanes_of;
        }();
        return lane_of;
    }

    /// s = q k^T, each head's `q.rows() / heads` rows against its own keys (`k[h * n + j]`):
    /// rows in groups of four (two on AVX2) when every head's rows divide into them, else
    /// two or one, each pass over `lanes` accumulators reduced by one `haddp`. With
    /// `across_heads`, pass i of every group (every head) before pass i + 1, so that the
    /// rows of a token's heads are read together: a token-major page then streams in
    /// address order, where one head at a time reads rows a power-of-two stride apart
    /// (every load in flight in the same few cache sets and memory channel). Else every
    /// pass of a group before the next group: a head-major page's rows are one run.
    template <attention::kv_storage_type T>
    static void scores(matrix_view<const float> q, std::span<const T* const> k, std::span<const T* const> v,
                       std::size_t heads, bool across_heads, matrix_view<float> s) {
        constexpr std::size_t group = lanes >= 16 ? 4 : lanes >= 8 ? 2 : 1;
        const std::size_t rows = q.rows(), d = q.cols(), rph = rows / heads, n = s.cols();
        if (d % lanes != 0) {
            for (std::size_t r = 0; r < rows; ++r)
                for (std::size_t j = 0; j < n; ++j) {
                    const T* kj = k[r / rph * n + j];
                    float acc = 0.0f;
                    for (std::size_t c = 0; c < d; ++c) acc += q(r, c) * element(kj[c]);
                    s(r, j) = acc;
                }
        } else if (rph % group == 0) {
            grouped_scores<group>(q, k, v, heads, across_heads, s);
        } else if (group >= 2 && rph % 2 == 0) {
            grouped_scores<2>(q, k, v, heads, across_heads, s);
        } else {
            grouped_scores<1>(q, k, v, heads, across_heads, s);
        }
    }

    /// `scores` with rows in groups of `Rows`, pass by pass across groups (each pass on
    /// adjacent keys, so that a token-major block streams in address order, once) or group
    /// by group (each pass on keys a run apart, see `score_passes`). The first group of each
    /// head prefetches.
    template <std::size_t Rows, attention::kv_storage_type T>
    static void grouped_scores(matrix_view<const float> q, std::span<const T* const> k, std::span<const T* const> v,
                               std::size_t heads, bool across_heads, matrix_view<float> s) {
        constexpr std::size_t keys_per_pass = lanes / Rows;
        const std::size_t n = s.cols(), rph = q.rows() / heads, groups = q.rows() / Rows;
        const std::size_t run = (n + keys_per_pass - 1) / keys_per_pass;
        const auto& lane_of = haddp_lanes();
        const auto passes = [&](std::size_t g, std::size_t i0, std::size_t i1) {
            const std::size_t r = g * Rows, h = r / rph;
            score_passes<Rows>(q.row_block(r, Rows), k.subspan(h * n, n),
                               r % rph == 0 ? v.subspan(h * n, n) : std::span<const T* const>{}, s.row_block(r, Rows),
                               i0, i1, run, across_heads, lane_of);
        };
        if (across_heads) {
            // Every group's query rows are in use in each pass while the K/V rows stream
            // by: the next group's are asked for ahead, lest they wait behind the stream.
            for (std::size_t i = 0; i < run; ++i)
                for (std::size_t g = 0; g < groups; ++g) {
                    for (std::size_t r = (g + 1) % groups * Rows, e = r + Rows; r < e; ++r)
                        prefetch_row(q.row(r).data(), q.cols());
                    passes(g, i, i + 1);
                }
        } else {
            for (std::size_t g = 0; g < groups; ++g) passes(g, 0, run);
        }
    }

    /// Keys ahead whose rows the score pass asks for (see `prefetch_row`): in the same run
    /// four passes later, or over adjacent keys the next pass (four keys on AVX-512 and AVX2).
    static constexpr std::size_t prefetch_ahead = 4;

    /// Asks for the cache lines of one `d`-element row. Decode reads each K/V row once,
    /// from pages in the page table's order, and its arithmetic leaves too few loads in
    /// flight to keep memory busy: the first score pass over a block asks for the key rows
    /// `prefetch_ahead` keys ahead and for the value rows the P V pass will read, spread
    /// over the pass rather than in one burst.
    template <attention::kv_storage_type T>
    static void prefetch_row(const T* row, std::size_t d) noexcept {
#if defined(__GNUC__)
        const char* p = reinterpret_cast<const char*>(row);
        for (std::size_t b = 0; b < d * sizeof(T); b += 64) __builtin_prefetch(p + b);
#else
        (void)row, (void)d;
#endif
    }

    /// Passes [i0, i1) of `run` over `Rows` rows; pass i takes `lanes / Rows` keys against every
    /// row, sharing every K and Q load (head_dim a multiple of `lanes`): the keys `u * run + i`,
    /// one from each run of the block, which the hardware prefetcher then follows as that many
    /// streams, or with `adjacent` the keys `i * lanes / Rows + u`. A pass short of keys
    /// repeats its last one. With `v`, it asks for those keys' value rows and for the key rows
    /// `prefetch_ahead` keys ahead.
    template <std::size_t Rows, attention::kv_storage_type T>
    static void score_passes(matrix_view<const float> q, std::span<const T* const> k, std::span<const T* const> v,
                             matrix_view<float> s, std::size_t i0, std::size_t i1, std::size_t run, bool adjacent,
                             const std::array<std::size_t, lanes>& lane_of) {
        constexpr std::size_t keys_per_pass = lanes / Rows;
        const std::size_t n = k.size(), d = q.cols();
        std::array<const float*, Rows> qr;
        FRUGAL_UNROLL
        for (std::size_t g = 0; g < Rows; ++g) qr[g] = q.row(g).data();
        for (std::size_t i = i0; i < i1; ++i) {
            std::array<std::size_t, keys_per_pass> at{};
            std::size_t keys = 0;
            FRUGAL_UNROLL
            for (std::size_t u = 0; u < keys_per_pass; ++u) {
                const std::size_t j = adjacent ? i * keys_per_pass + u : u * run + i;
                if (j < n) at[keys++] = j;
            }
            std::array<const T*, keys_per_pass> kr;
            FRUGAL_UNROLL
            for (std::size_t u = 0; u < keys_per_pass; ++u) kr[u] = k[at[std::min(u, keys - 1)]];
            if (!v.empty()) {
                for (std::size_t u = 0; u < keys; ++u) {
                    prefetch_row(v[at[u]], d);
                    if (at[u] + prefetch_ahead < n) prefetch_row(k[at[u] + prefetch_ahead], d);
                }
            }
            std::array<batch, lanes> acc;
            FRUGAL_UNROLL
            for (batch& a : acc) a = batch(0.0f);
            for (std::size_t c = 0; c < d; c += lanes) {
                std::array<batch, keys_per_pass> kc;
                FRUGAL_UNROLL
                for (std::size_t u = 0; u < keys_per_pass; ++u) kc[u] = load(kr[u] + c);
                FRUGAL_UNROLL
                for (std::size_t g = 0; g < Rows; ++g) {
                    const batch qc = batch::load_unaligned(qr[g] + c);
                    FRUGAL_UNROLL
                    for (std::size_t u = 0; u < keys_per_pass; ++u)
                        acc[g * keys_per_pass + u] = xsimd::fma(qc, kc[u], acc[g * keys_per_pass + u]);
                }
            }
            alignas(64) std::array<float, lanes> sums;
            xsimd::haddp(acc.data()).store_aligned(sums.data());
            FRUGAL_UNROLL
            for (std::size_t g = 0; g < Rows; ++g)
                for (std::size_t u = 0; u < keys; ++u) s(g, at[u]) = sums[lane_of[g * keys_per_pass + u]];
        }
    }

    /// s(r, j) *= scale[h * n + j] x `factor` (a power of two: exact) for the rows of each head
    /// h (`heads` heads of equal rows).
    static void scale_columns(matrix_view<float> s, std::span<const float> scale, std::size_t heads, float factor) {
        const std::size_t n = s.cols(), rph = s.rows() / heads, vec_end = n - n % lanes;
        for (std::size_t r = 0; r < s.rows(); ++r) {
            float* row = s.row(r).data();
            const float* f = scale.data() + r / rph * n;
            std::size_t j = 0;
            for (; j < vec_end; j += lanes)
                (batch::load_unaligned(row + j) * (batch::load_unaligned(f + j) * factor)).store_unaligned(row + j);
            for (; j < n; ++j) row[j] *= f[j] * factor;
        }
    }

    static void scale_row(std::span<float> row, float alpha) {
        std::size_t c = 0;
        for (; c + lanes <= row.size(); c += lanes) (batch::load_unaligned(row.data() + c) * alpha).store_unaligned(row.data() + c);
        for (; c < row.size(); ++c) row[c] *= alpha;
    }

    /// o[r] += sum_j p[r, j] v_j for `Rows` rows, `cols` vectors of each row's output in
    /// registers while the block's value rows stream by (each converted once).
    template <std::size_t Rows, attention::kv_storage_type T>
    static void accumulate_rows(matrix_view<const float> p, std::span<const T* const> v, matrix_view<float> o) {
        constexpr std::size_t cols = lanes >= 16 ? 4 : 2;  // 16 accumulators fit AVX-512's 32 registers
        const std::size_t n = v.size(), d = o.cols();
        std::size_t c = 0;
        for (; c + cols * lanes <= d; c += cols * lanes) {
            std::array<std::array<batch, cols>, Rows> acc;
            FRUGAL_UNROLL
            for (std::size_t r = 0; r < Rows; ++r)
                FRUGAL_UNROLL
                for (std::size_t x = 0; x < cols; ++x) acc[r][x] = batch::load_unaligned(o.row(r).data() + c + x * lanes);
            for (std::size_t j = 0; j < n; ++j) {
                const T* vj = v[j] + c;
                std::array<batch, cols> vc;
                FRUGAL_UNROLL
                for (std::size_t x = 0; x < cols; ++x) vc[x] = load(vj + x * lanes);
                FRUGAL_UNROLL
                for (std::size_t r = 0; r < Rows; ++r) {
                    const batch pr(p(r, j));
                    FRUGAL_UNROLL
                    for (std::size_t x = 0; x < cols; ++x) acc[r][x] = xsimd::fma(pr, vc[x], acc[r][x]);
                }
            }
            FRUGAL_UNROLL
            for (std::size_t r = 0; r < Rows; ++r)
                FRUGAL_UNROLL
                for (std::size_t x = 0; x < cols; ++x) acc[r][x].store_unaligned(o.row(r).data() + c + x * lanes);
        }
        for (; c < d; ++c)
            for (std::size_t r = 0; r < Rows; ++r)
                for (std::size_t j = 0; j < n; ++j) o(r, c) += p(r, j) * element(v[j][c]);
    }
};

/// The reference attention backend for the instruction set the unit is compiled for.
using attention_backend = basic_attention_backend<xsimd::default_arch>;

static_assert(tensor_backend<attention_backend, float>);
static_assert(attention::online_softmax_backend<attention_backend>);
static_assert(attention::decode_tile_backend<attention_backend, float>);
static_assert(attention::decode_tile_backend<attention_backend, attention::bfloat16>);
static_assert(attention::decode_tile_backend<attention_backend, attention::float16>);
static_assert(attention::decode_tile_backend<attention_backend, attention::float8_e4m3>);
static_assert(attention::decode_tile_backend<attention_backend, attention::float8_e5m2>);
static_assert(attention::decode_tile_backend<attention_backend, std::int8_t>);

}  // namespace frugal::eigen
FRUGAL_EIGEN_DIAGNOSTICS_POP

#undef FRUGAL_UNROLL
