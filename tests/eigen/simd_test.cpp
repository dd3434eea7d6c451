#include <frugal/backend/eigen/simd.hpp>

#include <gtest/gtest.h>

#include <random>
#include <vector>

namespace {

TEST(Simd, DotMatchesDoubleReferenceAtEveryTailLength) {
    std::mt19937 rng(3);
    std::normal_distribution<float> d;
    for (std::size_t n = 0; n <= 67; ++n) {
        std::vector<float> x(n), y(n);
        for (auto& v : x) v = d(rng);
        for (auto& v : y) v = d(rng);
        double want = 0;
        for (std::size_t i = 0; i < n; ++i) want += double(x[i]) * double(y[i]);
        EXPECT_NEAR(frugal::eigen::dot(x, y), want, 1e-5 * (1 + double(n))) << "n = " << n;
    }
}

TEST(Simd, DotRejectsMismatchedLengths) {
    std::vector<float> x(3), y(4);
    EXPECT_THROW((void)frugal::eigen::dot(x, y), frugal::invalid_argument);
}

}  // namespace
