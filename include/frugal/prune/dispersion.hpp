#pragma once
/// @file
/// Score dispersion: the trigger statistic of GRATING's progressive cluster pruning (section 4.1).

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <span>
#include <vector>

#include "frugal/core/error.hpp"

namespace frugal::prune {

/// Which dispersion statistic a pruning policy compares against its threshold.
enum class dispersion_measure {
    /// Coefficient of variation: population standard deviation over |mean| (GRATING 4.1).
    cv,
    /// Robust coefficient of variation: 1.4826 * median absolute deviation over |median|.
    /// One extreme score cannot trigger pruning on its own; half of the pool must spread.
    robust_cv,
};

/// Denominator floor of the dispersion statistics: |mean| (or |median|) below this is
/// replaced by it, so a pool centred on zero gives a large but finite dispersion.
inline constexpr double dispersion_mean_floor = 1e-12;

/// Coefficient of variation of `scores` (GRATING 4.1, the "dispersion"): stddev / |mean|
/// with the population standard deviation, accumulated in double.
///
/// Scores may be negative (logits). The denominator is `max(|mean|, mean_floor)`: a pool
/// whose mean is near zero therefore has a very large dispersion and triggers pruning at
/// any finite threshold; for logits, apply a monotone map to positive values (e.g. the
/// sigmoid, which is what reranker heads report) or choose `dispersion_measure::robust_cv`
/// with care, since it has the same property around a zero median. A pool of identical
/// scores has dispersion 0. Throws on an empty pool, a non-finite score or a negative floor.
/// @code
/// double cv = frugal::prune::coefficient_of_variation(std::span<const float>(scores));
/// bool trigger = cv > threshold;
/// @endcode
template <class T>
[[nodiscard]] double coefficient_of_variation(std::span<const T> scores,
                                              double mean_floor = dispersion_mean_floor) {
    FRUGAL_CHECK(!scores.empty(), "coefficient_of_variation: empty score pool");
    FRUGAL_CHECK(mean_floor >= 0.0, "coefficient_of_variation: mean_floor = ", mean_floor, " < 0");
    double sum = 0.0;
    for (std::size_t i = 0; i < scores.size(); ++i) {
        const double x = static_cast<double>(scores[i]);
        FRUGAL_CHECK(std::isfinite(x), "coefficient_of_variation: score ", i, " is ", x);
        sum += x;
    }
    const double n = static_cast<double>(scores.size());
    const double mean = sum / n;
    double m2 = 0.0;  // two-pass variance: exact for shifted data, unlike sum of squares
    for (const T& s : scores) {
        const double d = static_cast<double>(s) - mean;
        m2 += d * d;
    }
    return std::sqrt(m2 / n) / std::max(std::abs(mean), mean_floor);
}

/// Robust coefficient of variation: 1.4826 * MAD / |median| (the MAD scaled to estimate the
/// standard deviation of normal data), with the same zero-location floor as
/// `coefficient_of_variation`. The median of an even pool is the mean of the middle pair.
/// @code
/// double rcv = frugal::prune::robust_coefficient_of_variation(std::span<const float>(scores));
/// @endcode
template <class T>
[[nodiscard]] double robust_coefficient_of_variation(std::span<const T> scores,
                                                     double mean_floor = dispersion_mean_floor) {
    FRUGAL_CHECK(!scores.empty(), "robust_coefficient_of_variation: empty score pool");
    FRUGAL_CHECK(mean_floor >= 0.0, "robust_coefficient_of_variation: mean_floor = ", mean_floor, " < 0");
    std::vector<double> v(scores.size());
    for (std::size_t i = 0; i < scores.size(); ++i) {
        v[i] = static_cast<double>(scores[i]);
        FRUGAL_CHECK(std::isfinite(v[i]), "robust_coefficient_of_variation: score ", i, " is ", v[i]);
    }
    const auto median_of = [](std::vector<double>& w) {
        const std::size_t h = w.size() / 2;
        std::nth_element(w.begin(), w.begin() + static_cast<std::ptrdiff_t>(h), w.end());
        const double upper = w[h];
        if (w.size() % 2 == 1) return upper;
        return 0.5 * (upper + *std::max_element(w.begin(), w.begin() + static_cast<std::ptrdiff_t>(h)));
    };
    const double median = median_of(v);
    for (double& x : v) x = std::abs(x - median);
    const double mad = median_of(v);
    return 1.4826 * mad / std::max(std::abs(median), mean_floor);
}

/// The dispersion of `scores` under `measure`.
/// @code
/// double d = frugal::prune::dispersion(std::span<const float>(scores), frugal::prune::dispersion_measure::cv);
/// @endcode
template <class T>
[[nodiscard]] double dispersion(std::span<const T> scores, dispersion_measure measure,
                                double mean_floor = dispersion_mean_floor) {
    return measure == dispersion_measure::cv ? coefficient_of_variation(scores, mean_floor)
                                             : robust_coefficient_of_variation(scores, mean_floor);
}

}  // namespace frugal::prune
