#include <frugal/core/concepts.hpp>

#include <gtest/gtest.h>

#include "minimal_backend.hpp"

namespace {

// A backend with the right member but the wrong operand types must not satisfy the concept.
struct takes_pointers {
    void gemm(const float*, frugal::transpose, const float*, frugal::transpose, float*, float, float);
};
// Right signature, wrong return type.
struct returns_status {
    int gemm(frugal::matrix_view<const float>, frugal::transpose, frugal::matrix_view<const float>,
             frugal::transpose, frugal::matrix_view<float>, float, float);
};
struct no_gemm {};

TEST(Concepts, MinimalExampleBackendSatisfiesTensorBackend) {
    static_assert(frugal::tensor_backend<example::minimal_backend, float>);
    static_assert(frugal::tensor_backend<example::minimal_backend, double>);
    static_assert(frugal::gemm_backend<example::minimal_backend, float>);
}

TEST(Concepts, WrongShapesOfBackendAreRejected) {
    static_assert(!frugal::gemm_backend<takes_pointers, float>);
    static_assert(!frugal::gemm_backend<returns_status, float>);
    static_assert(!frugal::tensor_backend<no_gemm, float>);
    static_assert(!frugal::tensor_backend<int, float>);
    // GEMM over integers is not a real-scalar backend.
    static_assert(!frugal::gemm_backend<example::minimal_backend, int>);
}

TEST(Concepts, MinimalBackendComputesAProduct) {
    // [[1,2],[3,4]] * [[5,6],[7,8]]^T = [[17,23],[39,53]]
    const float a[] = {1, 2, 3, 4}, b[] = {5, 6, 7, 8};
    float c[4] = {};
    example::minimal_backend be;
    be.gemm(frugal::matrix_view<const float>(a, 2, 2), frugal::transpose::no,
            frugal::matrix_view<const float>(b, 2, 2), frugal::transpose::yes,
            frugal::matrix_view<float>(c, 2, 2), 1.0f, 0.0f);
    EXPECT_FLOAT_EQ(c[0], 17);
    EXPECT_FLOAT_EQ(c[1], 23);
    EXPECT_FLOAT_EQ(c[2], 39);
    EXPECT_FLOAT_EQ(c[3], 53);
}

}  // namespace
