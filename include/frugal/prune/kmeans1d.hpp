#pragma once
/// @file
/// Exact optimal 1-D k-means (dynamic programming, as Ckmeans.1d.dp) and Lloyd's algorithm
/// with k-means++ restarts, the heuristic GRATING's clustering step (section 4.1) uses.

#include <algorithm>
#include <atomic>
#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <numbers>
#include <numeric>
#include <random>
#include <span>
#include <type_traits>
#include <utility>
#include <vector>

#include <boost/container/small_vector.hpp>
#include <boost/sort/pdqsort/pdqsort.hpp>

#include "frugal/core/assert.hpp"
#include "frugal/core/cpu_features.hpp"
#include "frugal/core/error.hpp"

namespace frugal::prune {

/// A partition of scores into k clusters numbered by ascending centroid.
struct kmeans1d_result {
    std::vector<std::uint32_t> labels;  ///< cluster of each input score, by input position
    std::vector<double> centroids;      ///< cluster means, ascending
    std::vector<std::size_t> sizes;     ///< points per cluster
    std::vector<double> withinss;       ///< within-cluster sum of squared deviations
    double sse = 0.0;                   ///< total within-cluster sum of squares
};

namespace detail {
template <class T>
void check_kmeans_input(std::span<const T> scores, const char* who) {
    FRUGAL_CHECK(!scores.empty(), who, ": empty score pool");
    if constexpr (!std::is_floating_point_v<T>) {
        return;  // integers are finite
    } else {
        // a branch-free pass first, which the compiler vectorises; the one that names the
        // bad score runs only when there is one
        int bad = 0;
        for (const T x : scores) bad |= !(std::abs(x) <= std::numeric_limits<T>::max());
        if (bad == 0) return;
    }
    for (std::size_t i = 0; i < scores.size(); ++i) {
        FRUGAL_CHECK(std::isfinite(static_cast<double>(scores[i])), who, ": score ", i, " is ",
                     static_cast<double>(scores[i]));
    }
}

// The row searches of kmeans1d's dynamic programme, one version per instruction set
// (scalar, AVX2), each given the whole row's tables. Every version returns the same bits:
// each lane operation is one IEEE operation, as in the scalar loop, and the searches pick
// among the candidates by rules that do not depend on the order they are visited in. (The
// scalar loops keep each product in a statement of its own, so that a compiler that fuses
// a multiply and an add only within one expression, as Clang does by default, treats them
// as it treats the vector kernels; where the unit's flags allow FMA, GCC fuses both alike.)
// kmeans1d_kernels_in_use() picks, on the first fit of the process, the widest version the
// CPU runs, whatever the unit's -m flags.

/// Candidates of a row minimum are ranked from this value down in the low mantissa bits of
/// their costs (kmeans1d::row_minimum).
inline constexpr std::int64_t kmeans1d_rank_bits = (std::int64_t{1} << 12) - 1;
/// Ends per sweep group, one lane per end (kmeans1d::sweep_row).
inline constexpr std::size_t kmeans1d_sweep_lanes = 8;

/// The tables one row of the DP over n scores reads and writes. PRECONDITION: sum and sumsq
/// readable at [0, n + 9), gain at [0, n + 8), recip at [-n - 8, 8) with recip[-m] = 1 / m
/// for m in 1..n and NaN elsewhere (lanes past the last score, or whose cluster would be
/// empty, read the padding and never win).
struct kmeans1d_row {
    const double* sum;    ///< prefix sums of the sorted scores in the DP's scale
    const double* sumsq;  ///< prefix sums of their squares
    const double* gain;   ///< gain[j] = D[k-1][j-1] - sumsq[j]
    const double* recip;  ///< recip[-m] = 1 / m
    double* cost;         ///< D[k][.], written
    std::uint32_t* split; ///< start of the last cluster of D[k][.], written
};

inline namespace FRUGAL_SIMD_ABI {

/// The row searches of one instruction set.
struct kmeans1d_kernels {
    const char* isa;  ///< "avx2" or "scalar"
    /// The lowest of the keys of candidates t = 0..last: the cost (qi + g[t]) - d d r[t],
    /// d = si - s[t], with its lowest 12 mantissa bits replaced by kmeans1d_rank_bits - t.
    /// PRECONDITION: last < kmeans1d_rank_bits; s, g and r readable up to max(last, 3).
    double (*packed_minimum)(const double* s, const double* g, const double* r, double si, double qi,
                             std::size_t last) noexcept;
    /// Row costs and splits of the ends imin..imax from the starts jmin..jmax, in groups of
    /// kmeans1d_sweep_lanes ends (kmeans1d::sweep_row).
    void (*sweep)(const kmeans1d_row& row, std::size_t imin, std::size_t imax, std::size_t jmin,
                  std::size_t jmax) noexcept;
};

/// The key of kmeans1d_kernels::packed_minimum for candidate t.
[[nodiscard]] inline double kmeans1d_packed_key(const double* s, const double* g, const double* r, double si, double qi,
                                                std::size_t t) noexcept {
    const double d = si - s[t];
    const double spread = d * d * r[t];
    const double v = (qi + g[t]) - spread;
    const std::int64_t rank = kmeans1d_rank_bits - static_cast<std::int64_t>(t);
    return std::bit_cast<double>((std::bit_cast<std::int64_t>(v) & ~kmeans1d_rank_bits) | rank);
}

// Four running minima, so that the comparisons of consecutive candidates do not wait for
// each other (and a compiler may vectorise them).
inline double kmeans1d_packed_minimum_scalar(const double* s, const double* g, const double* r, double si, double qi,
                                             std::size_t last) noexcept {
    constexpr std::size_t ways = 4;
    double low[ways];
    std::fill_n(low, ways, std::numeric_limits<double>::infinity());
    std::size_t t = 0;
    for (; t + ways <= last + 1; t += ways) {
        for (std::size_t w = 0; w < ways; ++w) {
            const double key = kmeans1d_packed_key(s, g, r, si, qi, t + w);
            low[w] = key < low[w] ? key : low[w];
        }
    }
    for (; t <= last; ++t) {
        const double key = kmeans1d_packed_key(s, g, r, si, qi, t);
        low[0] = key < low[0] ? key : low[0];
    }
    double lowest = low[0];
    for (std::size_t w = 1; w < ways; ++w) lowest = low[w] < lowest ? low[w] : lowest;
    return lowest;
}

/// Writes the ends first..first + ends - 1 of a sweep group from its lanes (lane l: end
/// first + kmeans1d_sweep_lanes - 1 - l) and returns the split of its last end, where the
/// next group's starts begin.
inline std::size_t kmeans1d_store_sweep_group(const kmeans1d_row& row, std::size_t first, std::size_t ends,
                                              const double* best, const std::int64_t* arg) noexcept {
    const std::size_t last = first + kmeans1d_sweep_lanes - 1;
    for (std::size_t l = kmeans1d_sweep_lanes - ends; l < kmeans1d_sweep_lanes; ++l) {
        const double c = row.sumsq[last - l + 1] + best[l];
        row.cost[last - l] = c > 0.0 ? c : 0.0;
        row.split[last - l] = static_cast<std::uint32_t>(arg[l]);
    }
    return row.split[first + ends - 1];
}

// Start by start, all lanes of a group at a time, as the vector kernels do: the lanes'
// comparisons do not wait for each other (and a compiler may vectorise them).
inline void kmeans1d_sweep_scalar(const kmeans1d_row& row, std::size_t imin, std::size_t imax, std::size_t jmin,
                                  std::size_t jmax) noexcept {
    constexpr std::size_t lanes = kmeans1d_sweep_lanes;
    std::size_t lo = jmin;
    for (std::size_t first = imin; first <= imax; first += lanes) {
        const std::size_t last = first + lanes - 1, hi = std::min(jmax, last);
        double s_end[lanes], best[lanes];
        std::int64_t arg[lanes];
        for (std::size_t l = 0; l < lanes; ++l) {  // lane l: end last - l
            s_end[l] = row.sum[last - l + 1];
            best[l] = std::numeric_limits<double>::max();
            arg[l] = static_cast<std::int64_t>(lo);
        }
        for (std::size_t j = lo; j <= hi; ++j) {
            const double s_start = row.sum[j], g = row.gain[j];
            const double* inv = row.recip + (static_cast<std::ptrdiff_t>(j) - static_cast<std::ptrdiff_t>(last) - 1);
            for (std::size_t l = 0; l < lanes; ++l) {
                const double d = s_end[l] - s_start;
                const double spread = d * d * inv[l];  // inv[l] = 1 / (last - l - j + 1)
                const double c = g - spread;
                const bool better = c <= best[l];  // ties: the later start
                best[l] = better ? c : best[l];
                arg[l] = better ? static_cast<std::int64_t>(j) : arg[l];
            }
        }
        lo = kmeans1d_store_sweep_group(row, first, std::min(lanes, imax - first + 1), best, arg);
    }
}

inline constexpr kmeans1d_kernels kmeans1d_scalar{"scalar", kmeans1d_packed_minimum_scalar, kmeans1d_sweep_scalar};

#if FRUGAL_X86_KERNELS
/// `low` with the keys of candidates t..t + 3 taken in (kmeans1d_kernels::packed_minimum),
/// their ranks `rank`, the lanes where `past` is set made all ones (a NaN, never lowest).
[[nodiscard, gnu::target("avx2"), gnu::always_inline]] inline __m256d kmeans1d_take_avx2(
    __m256d low, const double* s, const double* g, const double* r, __m256d si, __m256d qi, __m256i rank,
    __m256i past) noexcept {
    const __m256d d = _mm256_sub_pd(si, _mm256_loadu_pd(s));
    const __m256d v = _mm256_sub_pd(_mm256_add_pd(qi, _mm256_loadu_pd(g)),
                                    _mm256_mul_pd(_mm256_mul_pd(d, d), _mm256_loadu_pd(r)));
    const __m256i key = _mm256_or_si256(
        _mm256_or_si256(_mm256_andnot_si256(_mm256_set1_epi64x(kmeans1d_rank_bits), _mm256_castpd_si256(v)), rank),
        past);
    return _mm256_min_pd(_mm256_castsi256_pd(key), low);  // key < low ? key : low
}

// Four candidates a step and no scalar remainder (a remainder's data-dependent branches
// mispredict on fresh pools): the last step takes the range's last four candidates again,
// a repeat that leaves a minimum as it is, or on a range shorter than four, the range with
// the lanes past it masked.
[[gnu::target("avx2")]] inline double kmeans1d_packed_minimum_avx2(const double* s, const double* g, const double* r,
                                                                   double si, double qi, std::size_t last) noexcept {
    constexpr std::int64_t top = kmeans1d_rank_bits;
    const __m256d vsi = _mm256_set1_pd(si), vqi = _mm256_set1_pd(qi);
    const __m256i base = _mm256_set_epi64x(top - 3, top - 2, top - 1, top);
    __m256d low = _mm256_set1_pd(std::numeric_limits<double>::infinity());
    __m256i rank = base;
    const std::size_t whole = (last + 1) / 4 * 4;
    for (std::size_t t = 0; t < whole; t += 4, rank = _mm256_sub_epi64(rank, _mm256_set1_epi64x(4)))
        low = kmeans1d_take_avx2(low, s + t, g + t, r + t, vsi, vqi, rank, _mm256_setzero_si256());
    const std::size_t tail = last + 1 >= 4 ? last + 1 - 4 : 0;
    rank = _mm256_sub_epi64(base, _mm256_set1_epi64x(static_cast<std::int64_t>(tail)));
    const __m256i past = _mm256_cmpgt_epi64(_mm256_set1_epi64x(top - static_cast<std::int64_t>(last)), rank);
    low = kmeans1d_take_avx2(low, s + tail, g + tail, r + tail, vsi, vqi, rank, past);
    alignas(32) double lanes[4];
    _mm256_store_pd(lanes, low);
    double lowest = lanes[0];
    for (std::size_t t = 1; t < 4; ++t) lowest = lanes[t] < lowest ? lanes[t] : lowest;
    return lowest;
}

// Two vectors of four ends; lane t of vector v is end last - 4v - t, so that consecutive
// lanes read consecutive entries of recip.
[[gnu::target("avx2")]] inline void kmeans1d_sweep_avx2(const kmeans1d_row& row, std::size_t imin, std::size_t imax,
                                                        std::size_t jmin, std::size_t jmax) noexcept {
    constexpr std::size_t lanes = kmeans1d_sweep_lanes, vectors = lanes / 4;
    std::size_t lo = jmin;
    for (std::size_t first = imin; first <= imax; first += lanes) {
        const std::size_t last = first + lanes - 1, hi = std::min(jmax, last);
        __m256d s_end[vectors], best[vectors];
        __m256d arg[vectors];  // the starts, as 64-bit integers
        for (std::size_t v = 0; v < vectors; ++v) {
            s_end[v] = _mm256_permute4x64_pd(_mm256_loadu_pd(row.sum + last - 4 * v - 2), 0x1b);  // reversed
            best[v] = _mm256_set1_pd(std::numeric_limits<double>::max());
            arg[v] = _mm256_castsi256_pd(_mm256_set1_epi64x(static_cast<std::int64_t>(lo)));
        }
        for (std::size_t j = lo; j <= hi; ++j) {
            const __m256d s_start = _mm256_set1_pd(row.sum[j]), g = _mm256_set1_pd(row.gain[j]);
            const __m256d start = _mm256_castsi256_pd(_mm256_set1_epi64x(static_cast<std::int64_t>(j)));
            for (std::size_t v = 0; v < vectors; ++v) {
                // lane t: 1 / (last - 4v - t - j + 1)
                const __m256d inv = _mm256_loadu_pd(row.recip + (static_cast<std::ptrdiff_t>(j + 4 * v) -
                                                                 static_cast<std::ptrdiff_t>(last) - 1));
                const __m256d d = _mm256_sub_pd(s_end[v], s_start);
                const __m256d c = _mm256_sub_pd(g, _mm256_mul_pd(_mm256_mul_pd(d, d), inv));
                const __m256d better = _mm256_cmp_pd(c, best[v], _CMP_LE_OQ);  // ties: the later start
                // c <= best ? c : best (a NaN never wins) but for the sign of a zero best on a
                // tie, which no cost keeps (kmeans1d_store_sweep_group adds sumsq and clamps)
                best[v] = _mm256_min_pd(c, best[v]);
                arg[v] = _mm256_blendv_pd(arg[v], start, better);
            }
        }
        alignas(32) double best_lanes[lanes];
        alignas(32) std::int64_t arg_lanes[lanes];
        for (std::size_t v = 0; v < vectors; ++v) {
            _mm256_store_pd(best_lanes + 4 * v, best[v]);
            _mm256_store_si256(reinterpret_cast<__m256i*>(arg_lanes + 4 * v), _mm256_castpd_si256(arg[v]));
        }
        lo = kmeans1d_store_sweep_group(row, first, std::min(lanes, imax - first + 1), best_lanes, arg_lanes);
    }
}

inline constexpr kmeans1d_kernels kmeans1d_avx2{"avx2", kmeans1d_packed_minimum_avx2, kmeans1d_sweep_avx2};
#endif  // FRUGAL_X86_KERNELS

/// The kernels of `isa` ("avx2", "scalar") when this build has them and the CPU runs them,
/// else null: for tests that compare every path with the scalar one.
[[nodiscard]] inline const kmeans1d_kernels* kmeans1d_kernels_for(const char* isa) noexcept {
    if (std::strcmp(isa, "scalar") == 0) return &kmeans1d_scalar;
#if FRUGAL_X86_KERNELS
    __builtin_cpu_init();  // in case this runs before the runtime's own initialisation
    if (std::strcmp(isa, "avx2") == 0 && __builtin_cpu_supports("avx2")) return &kmeans1d_avx2;
#endif
    return nullptr;
}

/// The kernels every fit runs: the widest the CPU runs, chosen on the first call. A test
/// may store others (kmeans1d_kernels_for) before it fits.
[[nodiscard]] inline std::atomic<const kmeans1d_kernels*>& kmeans1d_kernels_in_use() noexcept {
    static std::atomic<const kmeans1d_kernels*> chosen{[] {
        const kmeans1d_kernels* k = kmeans1d_kernels_for("avx2");
        return k != nullptr ? k : &kmeans1d_scalar;
    }()};
    return chosen;
}

}  // namespace FRUGAL_SIMD_ABI
}  // namespace detail

/// Exact optimal 1-D k-means for every k in 1..k_max from one dynamic programme over the
/// sorted scores (Ckmeans.1d.dp: Wang and Song, The R Journal 2011):
/// D[k][i] = min_j D[k-1][j-1] + SSE(j..i), row minima by divide and conquer over the
/// monotone argmin, O(k_max n log n). For any finite scores the partition is optimal up to
/// the DP's rounding: its SSE exceeds the minimum by at most about n 2^-52 R^2, R the
/// largest distance of a score from the median (the DP sums the scores shifted by the
/// median and scaled by a power of two, so large offsets do not cancel and no square
/// overflows); among splits whose costs agree to 2^-40 (relative) any may be chosen. The
/// figures reported (sse, centroids, within-cluster sums, BIC) are computed from each
/// cluster's own scores, accurate to a few units in the last place. The object is its own
/// workspace: refitting pools no larger (n and k_max) than an earlier one allocates nothing,
/// which the pruning hot path relies on.
/// @code
/// frugal::prune::kmeans1d km;
/// km.fit(std::span<const float>(scores), 8);
/// std::size_t k = km.select_k_bic();            // as Ckmeans.1d.dp's estimate.k = "BIC"
/// frugal::prune::kmeans1d_result r = km.clustering(k); // labels, centroids, withinss
/// @endcode
class kmeans1d {
public:
    /// Sorts `scores` and solves the DP for k = 1..min(k_max, n). Throws on an empty pool,
    /// non-finite scores or k_max == 0.
    template <class T>
    void fit(std::span<const T> scores, std::size_t k_max) {
        detail::check_kmeans_input(scores, "kmeans1d");
        FRUGAL_CHECK(k_max > 0, "kmeans1d: k_max must be at least 1");
        FRUGAL_CHECK(scores.size() < std::numeric_limits<std::uint32_t>::max() - table_pad, "kmeans1d: ",
                     scores.size(), " scores exceed the 32-bit index range");
        n_ = scores.size();
        k_max_ = std::min(k_max, n_);
        sort_scores(scores);
        prepare_tables();
        cost_.resize(k_max_ * n_);
        split_.resize(k_max_ * n_);
        for (std::size_t i = 0; i < n_; ++i) {
            cost_[i] = sse_of(0, i);
            split_[i] = 0;
        }
        const detail::kmeans1d_kernels& kernels = *detail::kmeans1d_kernels_in_use().load(std::memory_order_relaxed);
        for (std::size_t k = 1; k < k_max_; ++k) {
            // gain[j] = D[k-1][j-1] - sumsq[j]: D[k-1][j-1] + SSE(j..i) = sumsq[i+1] + gain[j] - ...
            const double* prev = cost_.data() + (k - 1) * n_;
            for (std::size_t j = k; j < n_; ++j) gain_[j] = prev[j - 1] - sumsq_[j];
            // rows below the last are needed at every end i (backtracking); the last only at n - 1
            if (k + 1 < k_max_) fill_row(kernels, k, k, n_ - 1, k, n_ - 1);
            else row_minimum(kernels, k, n_ - 1, k, n_ - 1);
        }
    }

    /// Number of scores of the last fit.
    [[nodiscard]] std::size_t size() const noexcept { return n_; }
    /// Largest k solved: min(k_max, n).
    [[nodiscard]] std::size_t k_max() const noexcept { return k_max_; }
    /// Input positions in ascending score order (ties by position).
    [[nodiscard]] std::span<const std::uint32_t> order() const noexcept { return {order_.data(), n_}; }

    /// Total within-cluster sum of squares of the optimal k clusters, each cluster's summed
    /// from its own scores (see cluster_moments), so it is accurate to a few units in the last
    /// place whatever the rest of the pool holds; +infinity only where the true sum exceeds
    /// the largest double (scores spread wider than about 1.3e154). O(n).
    [[nodiscard]] double sse(std::size_t k) const {
        const auto bounds = small_boundaries(k);
        double total = 0.0;
        for (std::size_t c = 0; c < k; ++c) total += cluster_moments(bounds[c], bounds[c + 1] - 1).sse();
        return total;
    }

    /// The k + 1 cluster boundaries in sorted order: cluster c holds sorted positions
    /// [bounds[c], bounds[c + 1]). Allocation-free; `bounds.size()` must be k + 1.
    void boundaries(std::size_t k, std::span<std::size_t> bounds) const {
        check_k(k);
        FRUGAL_CHECK(bounds.size() == k + 1, "kmeans1d::boundaries: span of ", bounds.size(),
                     " for k = ", k, " needs k + 1 entries");
        bounds[k] = n_;
        std::size_t end = n_ - 1;
        for (std::size_t c = k; c-- > 0;) {
            const std::size_t start = split_[c * n_ + end];
            FRUGAL_ASSERT(start >= c && start <= end);  // every split the DP stored is in range
            bounds[c] = start;
            if (c > 0) end = start - 1;
        }
    }

    /// The optimal clustering with k clusters; centroids and within-cluster sums computed from
    /// each cluster's own scores, as in sse().
    [[nodiscard]] kmeans1d_result clustering(std::size_t k) const {
        std::vector<std::size_t> bounds(k + 1);
        boundaries(k, bounds);
        kmeans1d_result r;
        r.labels.resize(n_);
        for (std::size_t c = 0; c < k; ++c)
            for (std::size_t p = bounds[c]; p < bounds[c + 1]; ++p) r.labels[order_[p]] = static_cast<std::uint32_t>(c);
        r.centroids.resize(k);
        r.sizes.resize(k);
        r.withinss.resize(k);
        for (std::size_t c = 0; c < k; ++c) {
            r.sizes[c] = bounds[c + 1] - bounds[c];
            const moments m = cluster_moments(bounds[c], bounds[c + 1] - 1);
            r.centroids[c] = m.mean;
            r.withinss[c] = m.sse();
        }
        r.sse = std::accumulate(r.withinss.begin(), r.withinss.end(), 0.0);
        return r;
    }

    /// Bayesian information criterion of the k-cluster solution as Ckmeans.1d.dp computes it:
    /// a Gaussian mixture with one variance per cluster (unbiased, n_c - 1 denominator) and
    /// weights n_c / n; BIC = 2 log L - (3k - 1) log n. Larger is better. Finite for every
    /// finite pool: variances enter as logarithms of scaled sums, never as squares that
    /// could overflow. Each cluster's variance comes from the prefix sums when their
    /// worst-case rounding (n 2^-52 of the sum of squares) is below 2^-19 of it, else from
    /// the cluster's own scores.
    [[nodiscard]] double bic(std::size_t k) const {
        const auto bounds = small_boundaries(k);
        const double n = static_cast<double>(n_);
        double loglik = 0.0;
        for (std::size_t c = 0; c < k; ++c) {
            const std::size_t m = bounds[c + 1] - bounds[c];
            const double dm = static_cast<double>(m);
            const moments spread = m > 1 ? cluster_spread(bounds[c], bounds[c + 1] - 1) : moments{};
            if (spread.sse_scaled > 0.0) {
                // sum of -(x - mean)^2 / (2 variance) over the cluster is -(m - 1) / 2; the
                // variance is sse_scaled / (m - 1) * 2^sse_exponent.
                const double log_variance = std::log(spread.sse_scaled) - std::log(dm - 1.0) +
                                            spread.sse_exponent * std::numbers::ln2;
                loglik += -0.5 * (dm - 1.0) +
                          dm * (std::log(dm / n) - 0.5 * (std::log(2.0 * std::numbers::pi) + log_variance));
            } else {
                loglik += dm * std::log(dm / n);
            }
        }
        return 2.0 * loglik - (3.0 * static_cast<double>(k) - 1.0) * std::log(n);
    }

    /// The k in 1..k_max() with the largest BIC (the smallest k on ties); 1 when all scores
    /// are equal.
    [[nodiscard]] std::size_t select_k_bic() const {
        FRUGAL_CHECK(n_ > 0, "kmeans1d::select_k_bic: fit() has not been called");
        if (sorted_[0] == sorted_[n_ - 1]) return 1;
        std::size_t best = 1;
        double best_bic = bic(1);
        for (std::size_t k = 2; k <= k_max_; ++k) {
            const double b = bic(k);
            if (b > best_bic) {
                best_bic = b;
                best = k;
            }
        }
        return best;
    }

private:
    /// Entries past the end of the prefix sums, and on both sides of the reciprocal table,
    /// that the row searches may read (masked or discarded lanes; see detail::kmeans1d_row).
    static constexpr std::size_t table_pad = detail::kmeans1d_sweep_lanes;
    /// Stretches of at most this many ends, whose candidate starts number at most
    /// sweep_max_span per end, are swept instead of bisected (a tuning choice: any values
    /// give the same result; dev/notes/pruning.md has the measurements behind them).
    static constexpr std::size_t sweep_max_ends = 16;
    static constexpr std::size_t sweep_max_span = 4;

    /// boundaries(k) without allocating for k <= 16 (checks k).
    [[nodiscard]] boost::container::small_vector<std::size_t, 17> small_boundaries(std::size_t k) const {
        check_k(k);
        boost::container::small_vector<std::size_t, 17> bounds(k + 1);
        boundaries(k, std::span<std::size_t>(bounds.data(), bounds.size()));
        return bounds;
    }

    void check_k(std::size_t k) const {
        FRUGAL_CHECK(n_ > 0, "kmeans1d: fit() has not been called");
        FRUGAL_CHECK(k >= 1 && k <= k_max_, "kmeans1d: k = ", k, " is outside 1..", k_max_,
                     " (k_max of the last fit, capped at the pool size)");
    }

    /// Grows a buffer to at least `size` entries (never shrinks, so refits of smaller pools
    /// reuse it).
    template <class V>
    static void reserve_size(V& v, std::size_t size) {
        if (v.size() < size) v.resize(size);
    }

    /// Fills order_ and sorted_ (ties stay in position order). Float scores sort as 64-bit
    /// keys (order-preserving bits of the score, then the position) by sort_keys(); wider
    /// types sort (value, position) pairs with Boost's pdqsort.
    template <class T>
    void sort_scores(std::span<const T> scores) {
        reserve_size(order_, n_);
        reserve_size(sorted_, n_);
        if constexpr (std::is_same_v<T, float>) {
            sort_keys(scores);
            for (std::size_t p = 0; p < n_; ++p) order_[p] = static_cast<std::uint32_t>(keys_[p] & 0xffffffffu);
        } else {
            reserve_size(pairs_, n_);
            for (std::size_t i = 0; i < n_; ++i) pairs_[i] = {static_cast<double>(scores[i]), static_cast<std::uint32_t>(i)};
            boost::sort::pdqsort(pairs_.begin(), pairs_.begin() + static_cast<std::ptrdiff_t>(n_));
            for (std::size_t p = 0; p < n_; ++p) order_[p] = pairs_[p].second;
        }
        for (std::size_t p = 0; p < n_; ++p) sorted_[p] = static_cast<double>(scores[order_[p]]);
    }

    /// The bits of a float, made to order as unsigned integers like the floats (-0 as +0).
    [[nodiscard]] static std::uint32_t ordered_bits(float x) noexcept {
        const std::uint32_t bits = std::bit_cast<std::uint32_t>(x + 0.0f);
        return (bits & 0x80000000u) != 0 ? ~bits : bits | 0x80000000u;
    }

    /// Leaves in keys_[0..n) the keys of `scores` (order-preserving bits of the score, then
    /// its position), sorted: two stable counting passes on a 16-bit bucket, then an
    /// insertion pass that orders the keys a bucket could not tell apart: no comparison
    /// branches to mispredict on new scores, as a comparison sort's do (Boost's spreadsort
    /// hands inputs this small to one). Pools of one sign bucket by the top 16 significant
    /// bits of ordered_bits - min, which spread skewed pools (most scores near 0, a long
    /// tail) as a logarithm would; pools spanning zero, whose bit range that way is mostly
    /// empty, bucket linearly in the value over [min, max]. When the insertion pass has to
    /// move keys far (scores packed into a few buckets, as around one huge outlier),
    /// pdqsort finishes the job.
    void sort_keys(std::span<const float> scores) {
        reserve_size(keys_, n_);
        reserve_size(sort_buffer_, n_);
        float lo = scores[0], hi = lo;
        for (std::size_t i = 1; i < n_; ++i) {
            lo = std::min(lo, scores[i]);
            hi = std::max(hi, scores[i]);
        }
        std::uint32_t count[2][256] = {};
        const auto take_buckets = [&](auto bucket_of) {  // bucket in the top 16 bits, then the position
            for (std::size_t i = 0; i < n_; ++i) {
                const std::uint64_t bucket = bucket_of(scores[i]);
                keys_[i] = bucket << 48 | i;
                ++count[0][bucket & 0xffu];
                ++count[1][bucket >> 8];
            }
        };
        if (lo < 0.0f && hi > 0.0f) {
            // in double, where neither hi - lo overflows nor the bucket can pass 65535
            const double scale = 65535.0 / (static_cast<double>(hi) - lo);
            take_buckets([&](float x) { return static_cast<std::uint64_t>((static_cast<double>(x) - lo) * scale); });
        } else {
            const std::uint32_t base = ordered_bits(lo);
            const int width = std::bit_width(ordered_bits(hi) - base);
            const int drop = width > 16 ? width - 16 : 0;
            take_buckets([&](float x) { return std::uint64_t{(ordered_bits(x) - base) >> drop}; });
        }
        for (auto& digit : count) {
            std::uint32_t start = 0;
            for (std::uint32_t& c : digit) start += std::exchange(c, start);
        }
        for (std::size_t i = 0; i < n_; ++i) sort_buffer_[count[0][(keys_[i] >> 48) & 0xffu]++] = keys_[i];
        for (std::size_t p = 0; p < n_; ++p) {  // the second pass writes the final keys
            const std::size_t i = sort_buffer_[p] & 0xffffffffu;
            keys_[count[1][sort_buffer_[p] >> 56]++] = (std::uint64_t{ordered_bits(scores[i])} << 32) | i;
        }
        std::size_t moved = 0;
        for (std::size_t i = 1; i < n_; ++i) {
            const std::uint64_t key = keys_[i];
            std::size_t j = i;
            for (; j > 0 && keys_[j - 1] > key; --j) keys_[j] = keys_[j - 1];
            keys_[j] = key;
            moved += i - j;
            if (moved > 8 * n_) {
                boost::sort::pdqsort_branchless(keys_.begin(), keys_.begin() + static_cast<std::ptrdiff_t>(n_));
                return;
            }
        }
    }

    /// Prefix sums of the sorted scores shifted by their median and scaled by 2^-scale_exp_ so
    /// that every shifted score lies in [-1, 1] (no square overflows, whatever the spread of
    /// finite scores; a power of two scales exactly), and the reciprocal table
    /// recip_[table_pad + p] = 1 / (n - p) (kept while n is unchanged). The sums are padded
    /// with zeros; the table on both sides with NaN: a sweep lane past the last score meets
    /// lengths over n, and one past its end non-positive lengths, whose candidates must never
    /// compare as a minimum.
    void prepare_tables() {
        shift_ = sorted_[n_ / 2];
        scale_exp_ = range_exponent(sorted_[0], shift_, sorted_[n_ - 1]);
        const double scale = std::ldexp(1.0, -scale_exp_), shift = shift_ * scale;
        reserve_size(sum_, n_ + 1 + table_pad);
        reserve_size(sumsq_, n_ + 1 + table_pad);
        reserve_size(gain_, n_ + table_pad);
        reserve_size(keys_scratch_, n_ + table_pad);
        double sum = 0.0, sumsq = 0.0;  // locals: the stores cannot alias them
        sum_[0] = sumsq_[0] = 0.0;
        for (std::size_t i = 0; i < n_; ++i) {
            const double x = sorted_[i] * scale - shift;
            sum += x;
            sumsq += x * x;
            sum_[i + 1] = sum;
            sumsq_[i + 1] = sumsq;
        }
        // the padding is read by masked or discarded lanes only; keep it finite
        std::fill_n(sum_.begin() + static_cast<std::ptrdiff_t>(n_ + 1), table_pad, 0.0);
        std::fill_n(sumsq_.begin() + static_cast<std::ptrdiff_t>(n_ + 1), table_pad, 0.0);
        std::fill_n(gain_.begin() + static_cast<std::ptrdiff_t>(n_), table_pad, 0.0);
        if (recip_n_ != n_) {
            recip_.assign(n_ + 2 * table_pad, std::numeric_limits<double>::quiet_NaN());
            for (std::size_t p = 0; p < n_; ++p) recip_[table_pad + p] = 1.0 / static_cast<double>(n_ - p);
            recip_n_ = n_;
        }
    }

    /// 1 / m for a cluster of m sorted scores.
    [[nodiscard]] double inv_len(std::size_t m) const noexcept { return recip_[table_pad + n_ - m]; }

    /// Sum of squared deviations from the mean of sorted positions j..i (inclusive), in the
    /// DP's scale (times 2^(-2 scale_exp_)).
    [[nodiscard]] double sse_of(std::size_t j, std::size_t i) const noexcept {
        const double s = sum_[i + 1] - sum_[j];
        const double v = (sumsq_[i + 1] - sumsq_[j]) - s * s * inv_len(i - j + 1);
        return v > 0.0 ? v : 0.0;
    }

    /// A cluster's mean and within-cluster sum of squares, the latter as
    /// sse_scaled * 2^sse_exponent, so that it is exact in range where the double is not.
    struct moments {
        double mean = 0.0;
        double sse_scaled = 0.0;
        int sse_exponent = 0;
        /// The sum of squares as a double: +infinity past the double range.
        [[nodiscard]] double sse() const noexcept { return std::ldexp(sse_scaled, sse_exponent); }
    };

    /// E such that every x in [lo, hi] lies within 2^E of mid (lo <= mid <= hi); where the
    /// distance overflows (finite scores of opposite signs past 9e307) it is taken in
    /// halves. Clamped to [-1000, 1024] so that 2^E and 2^-E are both doubles.
    [[nodiscard]] static int range_exponent(double lo, double mid, double hi) noexcept {
        double span = std::max(hi - mid, mid - lo);
        int halved = 0;
        if (std::isinf(span)) {
            span = std::max(0.5 * hi - 0.5 * mid, 0.5 * mid - 0.5 * lo);
            halved = 1;
        }
        if (!(span > 0.0)) return 0;
        int e = 0;
        (void)std::frexp(span, &e);  // span < 2^e
        return std::clamp(e + halved, -1000, 1024);
    }

    /// Mean and sum of squares of sorted positions j..i from their scores: scaled by a power
    /// of two to the cluster's own range (no square overflows, none underflows for want of
    /// scale) and shifted by the cluster's median before summing, so no offset cancels: the
    /// median lies within one standard deviation of the mean, so the shifted sum of squares
    /// is at most twice the sum of squared deviations that is subtracted from it, and the
    /// result keeps all but about a bit of the summation's precision. The mean is clamped
    /// to [lo, hi], where the true mean lies. O(i - j).
    [[nodiscard]] moments cluster_moments(std::size_t j, std::size_t i) const noexcept {
        const double lo = sorted_[j], hi = sorted_[i];
        if (lo == hi) return {lo, 0.0, 0};
        const double mid = sorted_[j + (i - j) / 2];
        const int e = range_exponent(lo, mid, hi);
        const double scale = std::ldexp(1.0, -e), centre = mid * scale;
        double sum = 0.0, sumsq = 0.0;
        for (std::size_t p = j; p <= i; ++p) {
            const double d = sorted_[p] * scale - centre;
            sum += d;
            sumsq += d * d;
        }
        const double m = static_cast<double>(i - j + 1);
        const double mean = std::clamp(mid + std::ldexp(sum / m, e), lo, hi);
        return {mean, std::max(0.0, sumsq - sum * (sum / m)), 2 * e};
    }

    /// The sum of squares of sorted positions j..i for the BIC: from the prefix sums, in the
    /// DP's scale, when their worst-case rounding (n 2^-52 of the prefix sum of squares) is
    /// below 2^-19 of the result and the result is far from subnormal; else cluster_moments.
    /// The mean is not filled in.
    [[nodiscard]] moments cluster_spread(std::size_t j, std::size_t i) const noexcept {
        const double v = sse_of(j, i);
        if (v >= 0x1p-960 && v >= static_cast<double>(n_) * 0x1p-33 * sumsq_[i + 1]) return {0.0, v, 2 * scale_exp_};
        return cluster_moments(j, i);
    }

    /// D[k][i] and its optimal split over last-cluster starts lo..hi (hi <= i), the largest
    /// one on ties. Ranges of up to 4092 candidates pack the candidate's rank from the end
    /// into the lowest 12 mantissa bits of its cost, so that one minimum over doubles yields
    /// cost and position, whatever order the kernel visits the candidates in (no two keys are
    /// equal); the winner's cost is then recomputed in full. A candidate within 2^-40
    /// (relative) of the best may win instead of it, as may, among costs that rounding made
    /// negative, a smaller rank: far below the rounding of the prefix-sum costs themselves.
    /// Longer ranges compare costs as integers (the bits of a non-negative double order like
    /// its value).
    void row_minimum(const detail::kmeans1d_kernels& kernels, std::size_t k, std::size_t i, std::size_t lo,
                     std::size_t hi) {
        FRUGAL_ASSERT(k <= lo && lo <= hi && hi <= i);
        const double si = sum_[i + 1], qi = sumsq_[i + 1];
        const double* s = sum_.data() + lo;
        const double* g = gain_.data() + lo;
        const double* r = recip_.data() + table_pad + (n_ - 1 - i) + lo;  // r[t] = 1 / (i - lo - t + 1)
        const std::size_t last = hi - lo;
        constexpr std::int64_t none = std::numeric_limits<std::int64_t>::max();
        constexpr std::int64_t rank_bits = detail::kmeans1d_rank_bits;
        std::int64_t best = none;
        std::size_t arg = 0;
        // (the limit: ranges rounded up to whole packs of four have ranks below rank_bits)
        if (const std::size_t count = (last + 4) / 4 * 4; count <= static_cast<std::size_t>(rank_bits)) {
            const double lowest = kernels.packed_minimum(s, g, r, si, qi, last);
            arg = static_cast<std::size_t>(rank_bits - (std::bit_cast<std::int64_t>(lowest) & rank_bits));
            FRUGAL_ASSERT(arg <= last);  // the costs are finite: a masked (NaN) lane never wins
            const double d = si - s[arg];
            const double v = (qi + g[arg]) - d * d * r[arg];
            best = std::bit_cast<std::int64_t>(v > 0.0 ? v : 0.0);
        } else {  // very long ranges: the costs, then the last position of their minimum
            std::int64_t* keys = keys_scratch_.data();
            for (std::size_t t = 0; t < count; ++t) {
                const double d = si - s[t];
                const double v = (qi + g[t]) - d * d * r[t];
                const std::int64_t past = -static_cast<std::int64_t>(t > last);
                keys[t] = std::bit_cast<std::int64_t>(v > 0.0 ? v : 0.0) | (past & none);
                best = keys[t] < best ? keys[t] : best;
            }
            for (std::size_t t = 0; t < count; ++t) arg = keys[t] == best ? t : arg;
        }
        cost_[k * n_ + i] = std::bit_cast<double>(best);
        split_[k * n_ + i] = static_cast<std::uint32_t>(lo + arg);
    }

    /// Row k for the ends imin..imax (a short stretch), whose optimal starts lie in jmin..jmax,
    /// in groups of detail::kmeans1d_sweep_lanes consecutive ends: each candidate start of a
    /// group is tried for all its ends at once, one lane per end, so the search has no
    /// per-end branches or calls, and each group starts at the argmin of the group before
    /// (the argmin is monotone). Lanes whose cluster would be empty read the NaN padding of
    /// recip_ and never win (IEEE comparisons: a -ffinite-math-only build may not keep
    /// this); ties go to the later start, as in row_minimum. The lane's constant
    /// sumsq[i + 1] is added after the search.
    void sweep_row(const detail::kmeans1d_kernels& kernels, std::size_t k, std::size_t imin, std::size_t imax,
                   std::size_t jmin, std::size_t jmax) {
        const detail::kmeans1d_row row{sum_.data(), sumsq_.data(), gain_.data(), recip_.data() + table_pad + n_,
                                       cost_.data() + k * n_, split_.data() + k * n_};
        kernels.sweep(row, imin, imax, jmin, jmax);
    }

    /// Row k of the DP for ends imin..imax, whose optimal last-cluster start lies in jmin..jmax.
    void fill_row(const detail::kmeans1d_kernels& kernels, std::size_t k, std::size_t imin, std::size_t imax,
                  std::size_t jmin, std::size_t jmax) {
        FRUGAL_ASSERT(imin <= imax);
        if (jmin == jmax) {  // the monotone argmin pins every end of the stretch to jmin
            const double g = gain_[jmin], s = sum_[jmin];
            for (std::size_t i = imin; i <= imax; ++i) {
                const double d = sum_[i + 1] - s;
                const double v = (sumsq_[i + 1] + g) - d * d * inv_len(i - jmin + 1);
                cost_[k * n_ + i] = v > 0.0 ? v : 0.0;
                split_[k * n_ + i] = static_cast<std::uint32_t>(jmin);
            }
            return;
        }
        if (imax - imin < sweep_max_ends && jmax - jmin <= sweep_max_span * (imax - imin + 1)) {
            sweep_row(kernels, k, imin, imax, jmin, jmax);
            return;
        }
        const std::size_t i = imin + (imax - imin) / 2;
        row_minimum(kernels, k, i, jmin, std::min(jmax, i));
        const std::size_t arg = split_[k * n_ + i];
        if (i > imin) fill_row(kernels, k, imin, i - 1, jmin, arg);
        if (i < imax) fill_row(kernels, k, i + 1, imax, arg, jmax);
    }

    std::size_t n_ = 0, k_max_ = 0, recip_n_ = 0;
    double shift_ = 0.0;  // the median: the DP's tables hold (score - shift_) * 2^-scale_exp_
    int scale_exp_ = 0;
    std::vector<std::uint32_t> order_;
    std::vector<std::uint64_t> keys_, sort_buffer_;
    std::vector<std::pair<double, std::uint32_t>> pairs_;
    std::vector<double> sorted_, sum_, sumsq_, recip_;
    std::vector<double> gain_;              // D[k-1][j-1] - sumsq[j] for the row being solved
    std::vector<std::int64_t> keys_scratch_;  // candidate costs of one row minimum
    std::vector<double> cost_;              // D[k][i], row-major k_max x n
    std::vector<std::uint32_t> split_;      // start of the last cluster of D[k][i]
};

inline namespace FRUGAL_SIMD_ABI {
/// The vector path of kmeans1d's row searches on this CPU: "avx2", or "scalar" (CPUs
/// without AVX2, other architectures, compilers other than GCC and Clang). Chosen once, at
/// the first fit, from the CPU and not from the compiler flags; every path gives the same
/// results.
/// @code
/// std::printf("kmeans1d: %s\n", frugal::prune::kmeans1d_isa());
/// @endcode
[[nodiscard]] inline const char* kmeans1d_isa() noexcept {
    return detail::kmeans1d_kernels_in_use().load(std::memory_order_relaxed)->isa;
}
}  // namespace FRUGAL_SIMD_ABI

/// The optimal k-cluster 1-D k-means of `scores` (one DP of kmeans1d).
/// @code
/// frugal::prune::kmeans1d_result r = frugal::prune::kmeans1d_optimal(std::span<const float>(scores), 3);
/// @endcode
template <class T>
[[nodiscard]] kmeans1d_result kmeans1d_optimal(std::span<const T> scores, std::size_t k) {
    FRUGAL_CHECK(k >= 1 && k <= scores.size(), "kmeans1d_optimal: k = ", k, " is outside 1..",
                 scores.size(), " (the pool size)");
    kmeans1d km;
    km.fit(scores, k);
    return km.clustering(k);
}

}  // namespace frugal::prune
