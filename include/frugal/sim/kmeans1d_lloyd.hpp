#pragma once
/// @file
/// kmeans1d_lloyd: Lloyd's k-means with k-means++ seeding, the heuristic GRATING uses; the
/// baseline the exact `frugal::prune::kmeans1d` is measured against.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <numeric>
#include <random>
#include <span>
#include <vector>

#include "frugal/core/error.hpp"
#include "frugal/prune/kmeans1d.hpp"

namespace frugal::sim {

namespace detail {
/// Fills the per-cluster statistics of `r` from `labels` (double accumulation, two passes).
template <class T>
void finish_kmeans_result(std::span<const T> scores, std::size_t k, prune::kmeans1d_result& r) {
    r.centroids.assign(k, 0.0);
    r.sizes.assign(k, 0);
    r.withinss.assign(k, 0.0);
    for (std::size_t i = 0; i < scores.size(); ++i) {
        r.centroids[r.labels[i]] += static_cast<double>(scores[i]);
        ++r.sizes[r.labels[i]];
    }
    for (std::size_t c = 0; c < k; ++c)
        if (r.sizes[c] > 0) r.centroids[c] /= static_cast<double>(r.sizes[c]);
    for (std::size_t i = 0; i < scores.size(); ++i) {
        const double d = static_cast<double>(scores[i]) - r.centroids[r.labels[i]];
        r.withinss[r.labels[i]] += d * d;
    }
    r.sse = std::accumulate(r.withinss.begin(), r.withinss.end(), 0.0);
}
}  // namespace detail

/// Lloyd's algorithm with k-means++ seeding, best of `restarts` runs by SSE: the heuristic
/// GRATING (and scikit-learn's KMeans, n_init = restarts) uses, kept as the baseline the
/// exact kmeans1d is compared with. Empty clusters keep their centroid; clusters are
/// renumbered by ascending centroid. Deterministic for a given seed.
/// @code
/// auto r = frugal::sim::kmeans1d_lloyd(std::span<const float>(scores), 3, 10, 42);
/// @endcode
template <class T>
[[nodiscard]] prune::kmeans1d_result kmeans1d_lloyd(std::span<const T> scores, std::size_t k, std::size_t restarts,
                                             std::uint64_t seed, std::size_t max_iterations = 300) {
    prune::detail::check_kmeans_input(scores, "kmeans1d_lloyd");
    FRUGAL_CHECK(k >= 1 && k <= scores.size(), "kmeans1d_lloyd: k = ", k, " is outside 1..",
                 scores.size(), " (the pool size)");
    FRUGAL_CHECK(restarts >= 1, "kmeans1d_lloyd: restarts must be at least 1");
    const std::size_t n = scores.size();
    std::vector<double> x(scores.begin(), scores.end());
    std::mt19937_64 rng(seed);
    prune::kmeans1d_result best;
    best.sse = std::numeric_limits<double>::infinity();
    std::vector<double> centers(k), d2(n), sums(k);
    std::vector<std::size_t> counts(k);
    std::vector<std::uint32_t> labels(n);
    for (std::size_t run = 0; run < restarts; ++run) {
        // k-means++ seeding: each next centre drawn with probability proportional to D(x)^2.
        centers[0] = x[std::uniform_int_distribution<std::size_t>(0, n - 1)(rng)];
        for (std::size_t c = 1; c < k; ++c) {
            double total = 0.0;
            for (std::size_t i = 0; i < n; ++i) {
                double m = std::numeric_limits<double>::infinity();
                for (std::size_t e = 0; e < c; ++e) m = std::min(m, (x[i] - centers[e]) * (x[i] - centers[e]));
                d2[i] = m;
                total += m;
            }
            std::size_t pick = std::uniform_int_distribution<std::size_t>(0, n - 1)(rng);
            if (total > 0.0) {
                double u = std::uniform_real_distribution<double>(0.0, total)(rng);
                for (std::size_t i = 0; i < n; ++i) {
                    pick = i;
                    if ((u -= d2[i]) < 0.0) break;
                }
            }
            centers[c] = x[pick];
        }
        for (std::size_t it = 0; it < max_iterations; ++it) {
            bool changed = it == 0;
            for (std::size_t i = 0; i < n; ++i) {
                std::uint32_t arg = 0;
                double m = std::numeric_limits<double>::infinity();
                for (std::size_t c = 0; c < k; ++c) {
                    const double d = (x[i] - centers[c]) * (x[i] - centers[c]);
                    if (d < m) {
                        m = d;
                        arg = static_cast<std::uint32_t>(c);
                    }
                }
                changed = changed || labels[i] != arg;
                labels[i] = arg;
            }
            if (!changed) break;
            std::fill(sums.begin(), sums.end(), 0.0);
            std::fill(counts.begin(), counts.end(), 0);
            for (std::size_t i = 0; i < n; ++i) {
                sums[labels[i]] += x[i];
                ++counts[labels[i]];
            }
            for (std::size_t c = 0; c < k; ++c)
                if (counts[c] > 0) centers[c] = sums[c] / static_cast<double>(counts[c]);
        }
        // Renumber by ascending centroid so results compare with kmeans1d's.
        std::vector<std::uint32_t> rank(k);
        std::iota(rank.begin(), rank.end(), std::uint32_t{0});
        std::sort(rank.begin(), rank.end(), [&](std::uint32_t a, std::uint32_t b) { return centers[a] < centers[b]; });
        std::vector<std::uint32_t> relabel(k);
        for (std::size_t r = 0; r < k; ++r) relabel[rank[r]] = static_cast<std::uint32_t>(r);
        prune::kmeans1d_result r;
        r.labels.resize(n);
        for (std::size_t i = 0; i < n; ++i) r.labels[i] = relabel[labels[i]];
        detail::finish_kmeans_result(scores, k, r);
        for (std::size_t c = 0; c < k; ++c)
            if (r.sizes[c] == 0) r.centroids[c] = centers[rank[c]];
        if (r.sse < best.sse) best = std::move(r);
    }
    return best;
}

}  // namespace frugal::sim
