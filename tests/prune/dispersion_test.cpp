// The dispersion statistics against hand-computed values.
#include <gtest/gtest.h>

#include <cmath>
#include <span>
#include <vector>

#include <frugal/prune/dispersion.hpp>

namespace {

TEST(Dispersion, CoefficientOfVariationMatchesHandComputedValues) {
    const std::vector<float> x = {1, 2, 3, 4};
    EXPECT_NEAR(frugal::prune::coefficient_of_variation(std::span<const float>(x)), std::sqrt(1.25) / 2.5, 1e-12);
    const std::vector<double> neg = {-1, -2, -3, -4};  // |mean| in the denominator
    EXPECT_NEAR(frugal::prune::coefficient_of_variation(std::span<const double>(neg)), std::sqrt(1.25) / 2.5, 1e-12);
    const std::vector<double> centred = {-1, 1};  // mean 0: the floor applies
    EXPECT_NEAR(frugal::prune::coefficient_of_variation(std::span<const double>(centred), 1e-3), 1e3, 1e-9);
    EXPECT_GT(frugal::prune::coefficient_of_variation(std::span<const double>(centred)), 1e11);
    const std::vector<double> same = {0.3, 0.3, 0.3};
    EXPECT_EQ(frugal::prune::coefficient_of_variation(std::span<const double>(same)), 0.0);
}

TEST(Dispersion, RobustAlternativeIgnoresOneOutlier) {
    const std::vector<double> x = {1, 2, 3, 4, 100};  // median 3, |dev| {2,1,0,1,97}: MAD 1
    EXPECT_NEAR(frugal::prune::robust_coefficient_of_variation(std::span<const double>(x)), 1.4826 / 3.0, 1e-12);
    const std::vector<double> even = {1, 2, 4, 8};  // median 3, |dev| {2,1,1,5}: MAD 1.5
    EXPECT_NEAR(frugal::prune::dispersion(std::span<const double>(even), frugal::prune::dispersion_measure::robust_cv),
                1.4826 * 1.5 / 3.0, 1e-12);
    EXPECT_GT(frugal::prune::coefficient_of_variation(std::span<const double>(x)), 1.0);
}

TEST(Dispersion, RejectsBadInput) {
    const std::vector<float> empty;
    EXPECT_THROW((void)frugal::prune::coefficient_of_variation(std::span<const float>(empty)), frugal::invalid_argument);
    EXPECT_THROW((void)frugal::prune::robust_coefficient_of_variation(std::span<const float>(empty)), frugal::invalid_argument);
    const std::vector<float> nan = {1.0f, std::nanf("")};
    EXPECT_THROW((void)frugal::prune::coefficient_of_variation(std::span<const float>(nan)), frugal::invalid_argument);
    EXPECT_THROW((void)frugal::prune::robust_coefficient_of_variation(std::span<const float>(nan)), frugal::invalid_argument);
    const std::vector<float> ok = {1.0f, 2.0f};
    EXPECT_THROW((void)frugal::prune::coefficient_of_variation(std::span<const float>(ok), -1.0), frugal::invalid_argument);
}

}  // namespace
