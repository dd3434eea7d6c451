// The GPU merge of partial attention states (cascade attention) against float64 attention
// over the union of the keys.
#include <frugal/backend/cuda/merge_state.cuh>

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "../attention/attention_reference.hpp"
#include "device_test.hpp"

namespace {

using frugal::attention::bfloat16;
using frugal::attention::heads_view;
using frugal::testing::ref_mask;

template <class T>
double merged_error(double* lse_err) {
    // A shared prefix of 300 keys and each query's own 77 keys, attended separately in float64
    // (as two attention runs would return them), merged on the device.
    constexpr std::size_t heads = 4, tokens = 9, d = 64, prefix = 300, own = 77, all = prefix + own;
    const auto q = frugal::testing::normal_floats(heads * tokens * d, 11);
    const auto k = frugal::testing::normal_floats(heads * all * d, 12);
    const auto v = frugal::testing::normal_floats(heads * all * d, 13);
    const double scale = 1.0 / std::sqrt(double(d));
    const auto qa = [&](std::size_t h, std::size_t i, std::size_t c) { return q[(h * tokens + i) * d + c]; };
    const auto kv = [&](const std::vector<float>& t, std::size_t first) {
        return [&t, first](std::size_t h, std::size_t j, std::size_t c) { return t[(h * all + first + j) * d + c]; };
    };
    const auto a = frugal::testing::ref_attention(heads, heads, tokens, prefix, d, scale, {ref_mask::none}, qa, kv(k, 0),
                                                  kv(v, 0));
    const auto b = frugal::testing::ref_attention(heads, heads, tokens, own, d, scale, {ref_mask::none}, qa,
                                                  kv(k, prefix), kv(v, prefix));
    const auto want = frugal::testing::ref_attention(heads, heads, tokens, all, d, scale, {ref_mask::none}, qa,
                                                     kv(k, 0), kv(v, 0));
    std::vector<T> out_a, out_b;
    for (double x : a.out) out_a.push_back(frugal::attention::from_float<T>(float(x)));
    for (double x : b.out) out_b.push_back(frugal::attention::from_float<T>(float(x)));
    std::vector<float> lse_a(a.lse.begin(), a.lse.end()), lse_b(b.lse.begin(), b.lse.end());
    // Row 0 of head 0 saw no prefix key: zeros and -inf, as an attention run writes them.
    std::fill(out_a.begin(), out_a.begin() + d, frugal::attention::from_float<T>(0.0f));
    lse_a[0] = -std::numeric_limits<float>::infinity();
    auto da = frugal::testing::upload(out_a);
    auto db = frugal::testing::upload(out_b);
    auto dla = frugal::testing::upload(lse_a);
    auto dlb = frugal::testing::upload(lse_b);
    frugal::cuda::merge_state_in_place<T>(heads_view<T>::head_major(da.data(), heads, tokens, d),
                                          frugal::matrix_view<float>(dla.data(), heads, tokens),
                                          heads_view<const T>::head_major(db.data(), heads, tokens, d),
                                          frugal::matrix_view<const float>(dlb.data(), heads, tokens));
    FRUGAL_CUDA_CHECK(cudaDeviceSynchronize());
    const auto got = frugal::testing::as_floats(frugal::testing::download(da));
    const auto got_lse = frugal::testing::download(dla);
    double err = 0;
    *lse_err = 0;
    for (std::size_t r = 0; r < heads * tokens; ++r) {
        // Row 0 merges nothing into the own keys' result.
        const double* w = r == 0 ? &b.out[0] : &want.out[r * d];
        const double wl = r == 0 ? b.lse[0] : want.lse[r];
        double mag = 1e-3, worst = 0;
        for (std::size_t c = 0; c < d; ++c) {
            mag = std::max(mag, std::abs(w[c]));
            const double diff = std::abs(double(got[r * d + c]) - w[c]);
            worst = std::isnan(diff) ? INFINITY : std::max(worst, diff);
        }
        err = std::max(err, worst / mag);
        *lse_err = std::max(*lse_err, std::isnan(got_lse[r]) ? INFINITY : std::abs(double(got_lse[r]) - wl));
    }
    return err;
}

TEST(CudaMergeState, MergesAPrefixAndOwnKeysLikeAttentionOverBoth) {
    FRUGAL_REQUIRE_GPU();
    double lse_err = 0;
    EXPECT_LT(merged_error<float>(&lse_err), 1e-5);
    EXPECT_LT(lse_err, 1e-5);
    // Inputs rounded to bf16 once, the result once more.
    EXPECT_LT(merged_error<bfloat16>(&lse_err), 4 * frugal::attention::unit_roundoff(frugal::attention::storage_dtype::bf16));
    EXPECT_LT(lse_err, 1e-5);
}

TEST(CudaMergeState, RejectsMismatchedShapesBeforeLaunching) {
    std::vector<float> x(2 * 3 * 8), l(6);
    EXPECT_THROW(frugal::cuda::merge_state_in_place<float>(heads_view<float>::head_major(x.data(), 2, 3, 8),
                                                           frugal::matrix_view<float>(l.data(), 2, 3),
                                                           heads_view<const float>::head_major(x.data(), 2, 3, 8),
                                                           frugal::matrix_view<const float>(l.data(), 3, 2)),
                 frugal::invalid_argument);
}

}  // namespace
