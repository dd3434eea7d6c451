#include <frugal/backend/cuda/device.cuh>
#include <frugal/backend/cuda/device_buffer.cuh>
#include <frugal/backend/cuda/tiled_attention.cuh>

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "../attention/attention_reference.hpp"

namespace {

using frugal::attention::attention_mask;
using frugal::attention::heads_view;
using frugal::testing::ref_mask;

struct gpu_case {
    std::size_t hq, hkv, sq, skv, d;
    attention_mask mask;
    frugal::testing::ref_mask_spec ref;
};

TEST(CudaTiledAttention, MatchesFloat64OnTheDevice) {
    if (frugal::cuda::device_count() == 0) {
        GTEST_SKIP() << "no CUDA device on this machine: device test skipped (compiled only)";
    }
    for (const gpu_case& c : {gpu_case{2, 1, 100, 130, 72, attention_mask::causal(), {ref_mask::bottom_right}},
                              gpu_case{4, 2, 65, 65, 128, attention_mask::none(), {ref_mask::none}},
                              gpu_case{2, 2, 70, 90, 32, attention_mask::sliding_window(17), {ref_mask::bottom_right, 0, 17}}}) {
        // Head-major tensors on the device.
        const auto q = frugal::testing::normal_floats(c.hq * c.sq * c.d, 1);
        const auto k = frugal::testing::normal_floats(c.hkv * c.skv * c.d, 2);
        const auto v = frugal::testing::normal_floats(c.hkv * c.skv * c.d, 3);
        frugal::cuda::device_buffer<float> dq(q.size()), dk(k.size()), dv(v.size()), dout(q.size()), dlse(c.hq * c.sq);
        dq.copy_from_host(q);
        dk.copy_from_host(k);
        dv.copy_from_host(v);
        const frugal::attention::attention_shape sh{.q_heads = c.hq, .kv_heads = c.hkv, .q_len = c.sq, .kv_len = c.skv,
                                         .head_dim = c.d};
        const auto plan = frugal::attention::tiled::plan(sh, {.mask = c.mask}, frugal::memory_budget::mib(1));
        frugal::cuda::run_tiled_attention(
            plan, heads_view<const float>::head_major(dq.data(), c.hq, c.sq, c.d),
            heads_view<const float>::head_major(dk.data(), c.hkv, c.skv, c.d),
            heads_view<const float>::head_major(dv.data(), c.hkv, c.skv, c.d),
            heads_view<float>::head_major(dout.data(), c.hq, c.sq, c.d), frugal::matrix_view<float>(dlse.data(), c.hq, c.sq));
        FRUGAL_CUDA_CHECK(cudaDeviceSynchronize());
        std::vector<float> out(q.size()), lse(c.hq * c.sq);
        dout.copy_to_host(out);
        dlse.copy_to_host(lse);
        const auto at = [&](const std::vector<float>& t, std::size_t s) {
            return [&t, s, d = c.d](std::size_t h, std::size_t i, std::size_t x) { return t[(h * s + i) * d + x]; };
        };
        const auto want = frugal::testing::ref_attention(c.hq, c.hkv, c.sq, c.skv, c.d, 1.0 / std::sqrt(double(c.d)),
                                                         c.ref, at(q, c.sq), at(k, c.skv), at(v, c.skv));
        for (std::size_t i = 0; i < out.size(); ++i) ASSERT_NEAR(out[i], want.out[i], 2e-5) << i;
        for (std::size_t i = 0; i < lse.size(); ++i) ASSERT_NEAR(lse[i], want.lse[i], 2e-5) << i;
    }
}

TEST(CudaTiledAttention, RejectsBadViewsBeforeLaunching) {
    // Runs without a GPU: validation happens on the host before any CUDA call.
    const frugal::attention::attention_shape sh{.q_heads = 2, .kv_heads = 1, .q_len = 8, .kv_len = 8, .head_dim = 300};
    const auto plan = frugal::attention::tiled::plan(sh, {}, frugal::memory_budget::mib(1));
    std::vector<float> buf(2 * 8 * 300);
    const auto q = heads_view<const float>::head_major(buf.data(), 2, 8, 300);
    const auto kv = heads_view<const float>::head_major(buf.data(), 1, 8, 300);
    const auto out = heads_view<float>::head_major(buf.data(), 2, 8, 300);
    EXPECT_THROW(frugal::cuda::run_tiled_attention(plan, q, kv, kv, out), frugal::invalid_argument);  // d > 256
    EXPECT_THROW(frugal::cuda::run_tiled_attention(plan, q, q, kv, out), frugal::invalid_argument);   // k heads
}

}  // namespace
