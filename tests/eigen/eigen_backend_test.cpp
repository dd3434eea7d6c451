#include <frugal/backend/eigen/eigen_backend.hpp>

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <tuple>
#include <vector>

namespace {

using frugal::matrix_view;
using frugal::transpose;

// An operand stored with a row stride larger than its columns; padding holds NaN so any
// read outside the view poisons the result.
struct strided {
    std::size_t rows, cols, stride;
    std::vector<float> data;
    strided(std::size_t r, std::size_t c, std::size_t pad, std::mt19937& rng)
        : rows(r), cols(c), stride(c + pad), data(r * (c + pad), std::numeric_limits<float>::quiet_NaN()) {
        std::normal_distribution<float> d;
        for (std::size_t i = 0; i < r; ++i)
            for (std::size_t j = 0; j < c; ++j) data[i * stride + j] = d(rng);
    }
    matrix_view<float> view() { return {data.data(), rows, cols, stride}; }
    double at(std::size_t i, std::size_t j) const { return data[i * stride + j]; }
};

// The oracle: a naive triple loop in double precision.
std::vector<double> reference(const strided& a, transpose ta, const strided& b, transpose tb,
                              const strided& c0, double alpha, double beta) {
    const bool at = ta == transpose::yes, bt = tb == transpose::yes;
    const std::size_t m = at ? a.cols : a.rows, k = at ? a.rows : a.cols, n = bt ? b.rows : b.cols;
    std::vector<double> out(m * n);
    for (std::size_t i = 0; i < m; ++i)
        for (std::size_t j = 0; j < n; ++j) {
            double s = 0;
            for (std::size_t p = 0; p < k; ++p) s += (at ? a.at(p, i) : a.at(i, p)) * (bt ? b.at(j, p) : b.at(p, j));
            out[i * n + j] = alpha * s + (beta == 0 ? 0.0 : beta * c0.at(i, j));
        }
    return out;
}

class GemmShapes : public ::testing::TestWithParam<std::tuple<int, int, int, bool, bool, int>> {};

TEST_P(GemmShapes, MatchesDoublePrecisionTripleLoop) {
    const auto [m, k, n, tra, trb, pad] = GetParam();
    std::mt19937 rng(static_cast<unsigned>(m * 131 + k * 17 + n * 7 + pad));
    const transpose ta = tra ? transpose::yes : transpose::no, tb = trb ? transpose::yes : transpose::no;
    strided a(tra ? k : m, tra ? m : k, pad, rng);
    strided b(trb ? n : k, trb ? k : n, pad + 1, rng);
    for (const auto& [alpha, beta] : {std::pair{1.0f, 0.0f}, std::pair{0.5f, -2.0f}}) {
        strided c(m, n, pad + 2, rng);
        const auto want = reference(a, ta, b, tb, c, alpha, beta);
        if (beta == 0.0f) {  // beta == 0 must not read c: poison it
            for (std::size_t i = 0; i < c.rows; ++i)
                for (std::size_t j = 0; j < c.cols; ++j) c.data[i * c.stride + j] = std::numeric_limits<float>::quiet_NaN();
        }
        frugal::eigen::backend{}.gemm<float>(a.view(), ta, b.view(), tb, c.view(), alpha, beta);
        for (int i = 0; i < m; ++i)
            for (int j = 0; j < n; ++j)
                EXPECT_NEAR(c.at(i, j), want[i * n + j], 1e-5 * (1 + std::sqrt(double(k))) * 4)
                    << "at (" << i << ", " << j << ") beta " << beta;
        // Padding outside the view is untouched.
        for (std::size_t i = 0; i < c.rows; ++i)
            for (std::size_t j = c.cols; j < c.stride; ++j) EXPECT_TRUE(std::isnan(c.data[i * c.stride + j]));
    }
}

INSTANTIATE_TEST_SUITE_P(OddShapes, GemmShapes,
                         ::testing::Values(std::tuple{1, 1, 1, false, false, 0}, std::tuple{3, 7, 5, false, false, 0},
                                           std::tuple{3, 7, 5, false, true, 3}, std::tuple{3, 7, 5, true, false, 1},
                                           std::tuple{3, 7, 5, true, true, 5}, std::tuple{1, 129, 1, false, true, 2},
                                           std::tuple{65, 33, 17, false, true, 7}, std::tuple{7, 3, 1, true, true, 0}));

TEST(EigenBackend, MismatchedShapesNameAllOperands) {
    std::vector<float> a(6), b(6), c(4);
    try {
        frugal::eigen::backend{}.gemm<float>(matrix_view<const float>(a.data(), 2, 3), transpose::no,
                                             matrix_view<const float>(b.data(), 2, 3), transpose::no,
                                             matrix_view<float>(c.data(), 2, 2), 1.0f, 0.0f);
        FAIL();
    } catch (const frugal::error& e) {
        EXPECT_NE(std::string(e.what()).find("op(a) is 2 x 3, op(b) is 2 x 3"), std::string::npos) << e.what();
    }
}

TEST(EigenBackend, EmptyInnerDimensionScalesC) {
    std::vector<float> c = {1, 2, 3, 4};
    frugal::eigen::backend{}.gemm<float>(matrix_view<const float>(nullptr, 2, 0), transpose::no,
                                         matrix_view<const float>(nullptr, 0, 2), transpose::no,
                                         matrix_view<float>(c.data(), 2, 2), 1.0f, 3.0f);
    EXPECT_EQ(c, (std::vector<float>{3, 6, 9, 12}));
}

TEST(EigenBackend, MapsRoundTripWithoutCopies) {
    frugal::eigen::row_major_matrix<float> m(3, 7);
    m.setRandom();
    auto v = frugal::eigen::to_view(m);
    EXPECT_EQ(v.data(), m.data());
    EXPECT_EQ(v.rows(), 3u);
    EXPECT_EQ(v.cols(), 7u);
    EXPECT_EQ(v.row_stride(), 7u);
    auto block = m.block(1, 2, 2, 4);
    auto bv = frugal::eigen::to_view(block);
    EXPECT_EQ(bv.row_stride(), 7u);
    EXPECT_EQ(bv(1, 3), m(2, 5));
    auto back = frugal::eigen::to_eigen(bv);
    EXPECT_EQ(back.data(), &m(1, 2));
    EXPECT_EQ(back(1, 3), m(2, 5));
}

}  // namespace
