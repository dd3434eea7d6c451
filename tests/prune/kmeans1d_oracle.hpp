#pragma once
// Independent oracles for kmeans1d, shared by tests/prune and the kmeans1d fuzz target: the
// textbook O(k n^2) recurrence over the sorted scores with every interval's sum of squares
// taken in two passes in long double (x87's 64-bit mantissa and 15-bit exponent: the square
// of any finite double is finite), and a checker that holds one fit to it.

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>
#include <span>
#include <sstream>
#include <string>
#include <vector>

#include <frugal/prune/kmeans1d.hpp>

namespace frugal::testing {

using wide = long double;
/// The oracle needs a long double whose range holds the square of every double.
inline constexpr bool wide_oracle_available = std::numeric_limits<wide>::max_exponent > 2 * 1024;

struct wide_moments {
    wide mean = 0, sse = 0;
};

/// Mean and sum of squared deviations of `xs` in long double, two passes.
inline wide_moments wide_moments_of(std::span<const double> xs) {
    wide sum = 0;
    for (double x : xs) sum += x;
    wide_moments m;
    m.mean = sum / static_cast<wide>(xs.size());
    for (double x : xs) m.sse += (x - m.mean) * (x - m.mean);
    return m;
}

/// The minimal total within-cluster sum of squares for k = 0..k_max (entry 0 unused), from
/// the textbook O(k n^2) recurrence over contiguous intervals of the sorted scores (each
/// interval's sum summed anew: O(n^3), an oracle for pools of a few hundred).
inline std::vector<wide> optimal_sse(std::vector<double> x, std::size_t k_max) {
    std::sort(x.begin(), x.end());
    const std::size_t n = x.size();
    std::vector<std::vector<wide>> cost(n, std::vector<wide>(n, 0));
    for (std::size_t j = 0; j < n; ++j)
        for (std::size_t i = j; i < n; ++i)
            cost[j][i] = wide_moments_of(std::span<const double>(x).subspan(j, i - j + 1)).sse;
    std::vector<wide> d(n), best(k_max + 1, 0);
    for (std::size_t i = 0; i < n; ++i) d[i] = cost[0][i];
    best[1] = d[n - 1];
    for (std::size_t k = 2; k <= k_max; ++k) {
        std::vector<wide> next(n, std::numeric_limits<wide>::infinity());
        for (std::size_t i = k - 1; i < n; ++i)
            for (std::size_t j = k - 1; j <= i; ++j) next[i] = std::min(next[i], d[j - 1] + cost[j][i]);
        d = next;
        best[k] = d[n - 1];
    }
    return best;
}

/// Holds the fit `km` of `x` (k_max() clusters at most) to the oracle for every k; returns ""
/// or what disagreed. What it asks of kmeans1d, for any finite scores:
/// - each clustering is a partition into k intervals of the sorted scores, numbered upwards;
/// - its sum of squares (taken here in long double) exceeds the optimum by at most
///   n R^2 2^-39, R the largest distance of a score from the median: the DP's rounding
///   (n 2^-52 R^2) and its tie tolerance (2^-40 relative to costs of at most n R^2);
/// - each centroid and within-cluster sum is the cluster's own, to m 2^-50 of its largest
///   magnitude and 8 m 2^-52 of itself (m members) respectively; +infinity exactly where the
///   true sum passes the largest double; sse(k) is their total;
/// - bic(k) is finite and equals the BIC of the reported clusters taken in long double, to
///   1e-4 (1 + |BIC|) (variances may come from prefix sums resolved to 2^-19).
inline std::string check_kmeans1d(const std::vector<double>& x, const frugal::prune::kmeans1d& km) {
    std::ostringstream why;
    const std::size_t n = x.size();
    const auto best = optimal_sse(x, km.k_max());
    std::vector<double> sorted = x;
    std::sort(sorted.begin(), sorted.end());
    const wide median = sorted[n / 2];
    wide r = 0;
    for (double v : x) r = std::max(r, std::abs(v - median));
    const wide slack = static_cast<wide>(n) * r * r * std::ldexp(wide{1}, -39);
    const wide dbl_max = std::numeric_limits<double>::max();
    for (std::size_t k = 1; k <= km.k_max(); ++k) {
        const auto res = km.clustering(k);
        std::vector<std::vector<double>> members(k);
        for (std::size_t i = 0; i < n; ++i) {
            if (res.labels[i] >= k) return (why << "k " << k << ": label " << res.labels[i], why.str());
            members[res.labels[i]].push_back(x[i]);
        }
        wide total = 0, loglik = 0;
        for (std::size_t c = 0; c < k; ++c) {
            const auto& mc = members[c];
            if (mc.empty() || res.sizes[c] != mc.size())
                return (why << "k " << k << ": cluster " << c << " has " << mc.size() << " members, size " << res.sizes[c], why.str());
            if (c > 0 && *std::min_element(mc.begin(), mc.end()) < *std::max_element(members[c - 1].begin(), members[c - 1].end()))
                return (why << "k " << k << ": cluster " << c << " is not an interval above cluster " << c - 1, why.str());
            const wide_moments w = wide_moments_of(mc);
            total += w.sse;
            wide magnitude = 0;
            for (double v : mc) magnitude = std::max(magnitude, static_cast<wide>(std::abs(v)));
            if (std::abs(res.centroids[c] - w.mean) > static_cast<wide>(mc.size()) * magnitude * std::ldexp(wide{1}, -50) +
                                                              std::numeric_limits<double>::denorm_min())
                return (why.precision(20), why << "k " << k << ": centroid " << c << " is " << res.centroids[c]
                                               << ", its members' mean " << w.mean, why.str());
            const bool overflows = w.sse > dbl_max;
            const wide tol = 8 * static_cast<wide>(mc.size()) * std::ldexp(wide{1}, -52) * w.sse +
                             std::numeric_limits<double>::denorm_min();
            if (overflows ? !std::isinf(res.withinss[c]) && w.sse > dbl_max * (1 + 1e-12L)
                          : std::abs(res.withinss[c] - w.sse) > tol)
                return (why.precision(20), why << "k " << k << ": withinss " << c << " is " << res.withinss[c]
                                               << ", its members' " << w.sse, why.str());
            const wide m = static_cast<wide>(mc.size());
            loglik += m * std::log(m / static_cast<wide>(n));
            if (mc.size() > 1 && w.sse > 0)
                loglik += -0.5L * (m - 1) - 0.5L * m * std::log(2 * std::acos(wide{-1}) * w.sse / (m - 1));
        }
        if (total > best[k] + slack)
            return (why.precision(20), why << "k " << k << ": partition's SSE " << total << " exceeds the optimum "
                                           << best[k] << " by more than " << slack, why.str());
        const double sse = km.sse(k);
        if (total > dbl_max * (1 + 1e-12L) ? !std::isinf(sse)
                                             : std::abs(sse - total) > 4 * static_cast<wide>(n) * std::ldexp(wide{1}, -52) * total +
                                                                            std::numeric_limits<double>::denorm_min())
            return (why.precision(20), why << "k " << k << ": sse(k) " << sse << ", the clusters' total " << total, why.str());
        const double bic = km.bic(k);
        const wide expected = 2 * loglik - (3 * static_cast<wide>(k) - 1) * std::log(static_cast<wide>(n));
        if (!std::isfinite(bic) || std::abs(bic - expected) > 1e-4L * (1 + std::abs(expected)))
            return (why.precision(20), why << "k " << k << ": bic " << bic << ", expected " << expected, why.str());
    }
    const std::size_t chosen = km.select_k_bic();
    if (chosen < 1 || chosen > km.k_max()) return (why << "select_k_bic " << chosen, why.str());
    return "";
}

}  // namespace frugal::testing
