#include <frugal/core/stats.hpp>

#include <gtest/gtest.h>

#include <random>
#include <vector>

namespace {

TEST(Stats, QuantileMatchesNumpyType7) {
    // numpy.quantile([1, 2, 3, 4, 10], q) for q = 0, 0.25, 0.5, 0.9, 1.
    const std::vector<int> v = {10, 2, 4, 1, 3};
    EXPECT_DOUBLE_EQ(frugal::quantile(v, 0.0), 1.0);
    EXPECT_DOUBLE_EQ(frugal::quantile(v, 0.25), 2.0);
    EXPECT_DOUBLE_EQ(frugal::quantile(v, 0.5), 3.0);
    EXPECT_DOUBLE_EQ(frugal::quantile(v, 0.9), 7.6);
    EXPECT_DOUBLE_EQ(frugal::quantile(v, 1.0), 10.0);
}

TEST(Stats, QuantileRejectsEmptyAndOutOfRange) {
    EXPECT_THROW((void)frugal::quantile(std::vector<double>{}, 0.5), frugal::invalid_argument);
    EXPECT_THROW((void)frugal::quantile(std::vector<double>{1.0}, 1.5), frugal::invalid_argument);
}

TEST(Stats, RunningStatsMatchesTwoPassReference) {
    std::mt19937 rng(7);
    std::normal_distribution<double> dist(1e6, 3.0);  // large offset: naive sum-of-squares fails
    std::vector<double> xs(10000);
    for (auto& x : xs) x = dist(rng);
    frugal::running_stats s;
    for (double x : xs) s.add(x);
    long double mean = 0;
    for (double x : xs) mean += x;
    mean /= xs.size();
    long double var = 0;
    for (double x : xs) var += (x - mean) * (x - mean);
    var /= xs.size();
    EXPECT_EQ(s.count(), xs.size());
    EXPECT_NEAR(s.mean(), static_cast<double>(mean), 1e-7);  // 1e-13 relative
    EXPECT_NEAR(s.variance(), static_cast<double>(var), 1e-6);
}

}  // namespace
