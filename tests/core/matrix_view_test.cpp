#include <frugal/core/matrix_view.hpp>

#include <gtest/gtest.h>

#include <numeric>
#include <string>
#include <vector>

namespace {

using frugal::matrix_view;

TEST(MatrixView, ContiguousViewAddressesRowMajor) {
    std::vector<int> data(12);
    std::iota(data.begin(), data.end(), 0);
    matrix_view<int> v(data.data(), 3, 4);
    EXPECT_EQ(v.rows(), 3u);
    EXPECT_EQ(v.cols(), 4u);
    EXPECT_EQ(v.row_stride(), 4u);
    EXPECT_TRUE(v.is_contiguous());
    for (std::size_t r = 0; r < 3; ++r)
        for (std::size_t c = 0; c < 4; ++c) EXPECT_EQ(v(r, c), static_cast<int>(r * 4 + c));
    v(1, 2) = -1;
    EXPECT_EQ(data[6], -1);
}

TEST(MatrixView, StridedViewSelectsOneHeadOfAnInterleavedTensor) {
    // [tokens = 5, heads = 3, dim = 2]: value = 100 * token + 10 * head + feature.
    const std::size_t tokens = 5, heads = 3, dim = 2;
    std::vector<float> t(tokens * heads * dim);
    for (std::size_t s = 0; s < tokens; ++s)
        for (std::size_t h = 0; h < heads; ++h)
            for (std::size_t d = 0; d < dim; ++d) t[(s * heads + h) * dim + d] = float(100 * s + 10 * h + d);
    matrix_view<const float> head1(t.data() + 1 * dim, tokens, dim, heads * dim);
    EXPECT_FALSE(head1.is_contiguous());
    for (std::size_t s = 0; s < tokens; ++s) {
        EXPECT_EQ(head1(s, 0), float(100 * s + 10));
        EXPECT_EQ(head1.row(s)[1], float(100 * s + 11));
        EXPECT_EQ(head1.row(s).size(), dim);
    }
}

TEST(MatrixView, MutableConvertsToConstButNotBack) {
    std::vector<double> d(6, 1.0);
    matrix_view<double> m(d.data(), 2, 3);
    matrix_view<const double> c = m;
    EXPECT_EQ(c.data(), d.data());
    static_assert(std::is_convertible_v<matrix_view<double>, matrix_view<const double>>);
    static_assert(!std::is_convertible_v<matrix_view<const double>, matrix_view<double>>);
    static_assert(!std::is_convertible_v<matrix_view<float>, matrix_view<const double>>);
}

TEST(MatrixView, StrideSmallerThanColsIsAClearError) {
    std::vector<float> d(32);
    try {
        matrix_view<float> bad(d.data(), 3, 8, 4);
        FAIL() << "expected frugal::error";
    } catch (const frugal::error& e) {
        const std::string what = e.what();
        EXPECT_NE(what.find("row stride 4 is smaller than cols 8"), std::string::npos) << what;
    }
}

TEST(MatrixView, NullDataWithAShapeIsAnError) {
    EXPECT_THROW(matrix_view<float>(nullptr, 2, 2), frugal::invalid_argument);
    EXPECT_NO_THROW(matrix_view<float>(nullptr, 0, 5));
    EXPECT_NO_THROW(matrix_view<float>(nullptr, 5, 0));
}

TEST(MatrixView, OverflowingShapeIsAnError) {
    float x = 0;
    EXPECT_THROW(matrix_view<float>(&x, std::size_t(1) << 40, std::size_t(1) << 30), frugal::invalid_argument);
}

TEST(MatrixView, BlocksKeepTheParentStride) {
    std::vector<int> data(5 * 7);
    std::iota(data.begin(), data.end(), 0);
    matrix_view<int> v(data.data(), 5, 6, 7);  // stride > cols
    auto b = v.block(1, 2, 3, 4);
    EXPECT_EQ(b.rows(), 3u);
    EXPECT_EQ(b.cols(), 4u);
    EXPECT_EQ(b.row_stride(), 7u);
    for (std::size_t r = 0; r < 3; ++r)
        for (std::size_t c = 0; c < 4; ++c) EXPECT_EQ(b(r, c), static_cast<int>((r + 1) * 7 + c + 2));
    auto rows = v.row_block(4, 1);
    EXPECT_EQ(rows(0, 5), 4 * 7 + 5);
    auto empty = v.block(5, 6, 0, 0);
    EXPECT_TRUE(empty.empty());
}

TEST(MatrixView, OutOfRangeBlockIsAnErrorNamingTheRange) {
    std::vector<int> data(20);
    matrix_view<int> v(data.data(), 4, 5);
    try {
        (void)v.block(2, 1, 3, 2);
        FAIL() << "expected frugal::error";
    } catch (const frugal::error& e) {
        const std::string what = e.what();
        EXPECT_NE(what.find("rows [2, 5)"), std::string::npos) << what;
        EXPECT_NE(what.find("4 x 5"), std::string::npos) << what;
    }
    EXPECT_THROW((void)v.block(0, 4, 1, 2), frugal::invalid_argument);
}

TEST(MatrixView, CheckShapeNamesTheOperand) {
    std::vector<float> d(6);
    matrix_view<float> v(d.data(), 2, 3);
    EXPECT_NO_THROW(frugal::check_shape(v, 2, 3, "q"));
    try {
        frugal::check_shape(v, 3, 2, "keys");
        FAIL();
    } catch (const frugal::error& e) {
        EXPECT_NE(std::string(e.what()).find("keys is 2 x 3, expected 3 x 2"), std::string::npos) << e.what();
    }
}

}  // namespace
