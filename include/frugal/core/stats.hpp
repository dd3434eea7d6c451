#pragma once
/// @file
/// Small descriptive statistics shared by the modules and the benchmarks.

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <span>
#include <vector>

#include "frugal/core/error.hpp"

namespace frugal {

/// The `q`-quantile (0 <= q <= 1) of `values` by linear interpolation between order
/// statistics (type 7, as numpy's default). Throws on an empty input or q outside [0, 1].
/// @code
/// double p99 = frugal::quantile(latencies_us, 0.99);
/// @endcode
template <class T>
[[nodiscard]] double quantile(std::span<const T> values, double q) {
    FRUGAL_CHECK(!values.empty(), "quantile: empty input");
    FRUGAL_CHECK(q >= 0.0 && q <= 1.0, "quantile: q = ", q, " is outside [0, 1]");
    std::vector<double> sorted(values.begin(), values.end());
    std::sort(sorted.begin(), sorted.end());
    const double pos = q * static_cast<double>(sorted.size() - 1);
    const auto lo = static_cast<std::size_t>(std::floor(pos));
    const std::size_t hi = std::min(lo + 1, sorted.size() - 1);
    return sorted[lo] + (pos - static_cast<double>(lo)) * (sorted[hi] - sorted[lo]);
}

template <class T>
[[nodiscard]] double quantile(const std::vector<T>& values, double q) {
    return quantile(std::span<const T>(values), q);
}

/// Running mean and variance (Welford), numerically stable in one pass.
/// @code
/// frugal::running_stats s; for (double x : xs) s.add(x);
/// double cv = s.stddev() / s.mean();
/// @endcode
class running_stats {
public:
    constexpr void add(double x) noexcept {
        ++count_;
        const double delta = x - mean_;
        mean_ += delta / static_cast<double>(count_);
        m2_ += delta * (x - mean_);
    }
    [[nodiscard]] constexpr std::size_t count() const noexcept { return count_; }
    [[nodiscard]] constexpr double mean() const noexcept { return mean_; }
    /// Population variance (divides by n); 0 for fewer than two samples.
    [[nodiscard]] constexpr double variance() const noexcept {
        return count_ < 2 ? 0.0 : m2_ / static_cast<double>(count_);
    }
    [[nodiscard]] double stddev() const noexcept { return std::sqrt(variance()); }

private:
    std::size_t count_ = 0;
    double mean_ = 0.0;
    double m2_ = 0.0;
};

}  // namespace frugal
