// The CUDA tiled attention against the float64 oracle: fp32 on the CUDA cores, bf16 and
// fp16 on the tensor cores; causal, non-causal and sliding-window masks, GQA, ragged tiles.
#include <frugal/backend/cuda/tiled_attention.cuh>

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "../attention/attention_reference.hpp"
#include "device_test.hpp"

namespace {

using frugal::attention::attention_mask;
using frugal::attention::bfloat16;
using frugal::attention::float16;
using frugal::attention::heads_view;
using frugal::testing::ref_mask;

struct gpu_case {
    std::size_t hq, hkv, sq, skv, d;
    attention_mask mask;
    frugal::testing::ref_mask_spec ref;
};

/// Values drawn in fp32 and rounded to T once, so the oracle sees what the kernel reads.
template <class T>
std::vector<T> rounded(std::vector<float>& x) {
    std::vector<T> t;
    for (float& v : x) {
        t.push_back(frugal::attention::from_float<T>(v));
        v = frugal::attention::to_float(t.back());
    }
    return t;
}

/// Head-major tensors on the device; the worst error of any row relative to that row's
/// largest |output| (at least 1e-3), and the worst LSE error.
template <class T>
std::pair<double, double> run_case(const gpu_case& c) {
    auto qf = frugal::testing::normal_floats(c.hq * c.sq * c.d, 1);
    auto kf = frugal::testing::normal_floats(c.hkv * c.skv * c.d, 2);
    auto vf = frugal::testing::normal_floats(c.hkv * c.skv * c.d, 3);
    auto dq = frugal::testing::upload(rounded<T>(qf));
    auto dk = frugal::testing::upload(rounded<T>(kf));
    auto dv = frugal::testing::upload(rounded<T>(vf));
    auto dout = frugal::testing::poisoned<T>(qf.size());
    auto dlse = frugal::testing::poisoned<float>(c.hq * c.sq);
    const frugal::attention::attention_shape sh{.q_heads = c.hq, .kv_heads = c.hkv, .q_len = c.sq, .kv_len = c.skv,
                                                .head_dim = c.d};
    const auto plan = frugal::attention::tiled::plan(sh, {.mask = c.mask}, frugal::memory_budget::mib(1));
    frugal::cuda::run_tiled_attention<T>(plan, heads_view<const T>::head_major(dq.data(), c.hq, c.sq, c.d),
                                         heads_view<const T>::head_major(dk.data(), c.hkv, c.skv, c.d),
                                         heads_view<const T>::head_major(dv.data(), c.hkv, c.skv, c.d),
                                         heads_view<T>::head_major(dout.data(), c.hq, c.sq, c.d),
                                         frugal::matrix_view<float>(dlse.data(), c.hq, c.sq));
    FRUGAL_CUDA_CHECK(cudaDeviceSynchronize());
    const auto out = frugal::testing::as_floats(frugal::testing::download(dout));
    const auto lse = frugal::testing::download(dlse);
    const auto at = [&](const std::vector<float>& t, std::size_t s) {
        return [&t, s, d = c.d](std::size_t h, std::size_t i, std::size_t x) { return t[(h * s + i) * d + x]; };
    };
    const auto want = frugal::testing::ref_attention(c.hq, c.hkv, c.sq, c.skv, c.d, 1.0 / std::sqrt(double(c.d)), c.ref,
                                                     at(qf, c.sq), at(kf, c.skv), at(vf, c.skv));
    double rel = 0, lse_err = 0;
    for (std::size_t r = 0; r < c.hq * c.sq; ++r) {
        double worst = 0, mag = 0;
        for (std::size_t x = 0; x < c.d; ++x) {
            const double diff = std::abs(double(out[r * c.d + x]) - want.out[r * c.d + x]);
            worst = std::isnan(diff) ? INFINITY : std::max(worst, diff);
            mag = std::max(mag, std::abs(want.out[r * c.d + x]));
        }
        rel = std::max(rel, worst / std::max(mag, 1e-3));
        const double wl = want.lse[r], gl = lse[r];
        lse_err = std::max(lse_err, std::isinf(wl) ? (gl == wl ? 0.0 : INFINITY)
                                                   : (std::isnan(gl) ? INFINITY : std::abs(gl - wl)));
    }
    return {rel, lse_err};
}

const std::vector<gpu_case>& cases() {
    static const std::vector<gpu_case> all{
        {2, 1, 100, 130, 72, attention_mask::causal(), {ref_mask::bottom_right}},
        {4, 2, 65, 65, 128, attention_mask::none(), {ref_mask::none}},
        {2, 2, 70, 90, 32, attention_mask::sliding_window(17), {ref_mask::bottom_right, 0, 17}},
        {8, 1, 300, 300, 128, attention_mask::causal(), {ref_mask::bottom_right}},  // MQA, several query blocks
        {8, 2, 200, 777, 64, attention_mask::causal(frugal::attention::causal_alignment::top_left),
         {ref_mask::top_left}},  // top-left: row i sees keys 0..i of 777
        {4, 4, 130, 1000, 128, attention_mask::sliding_window(150), {ref_mask::bottom_right, 0, 150}},
    };
    return all;
}

template <class T>
void expect_cases_match(double tolerance) {
    for (std::size_t i = 0; i < cases().size(); ++i) {
        SCOPED_TRACE("case " + std::to_string(i));
        const auto [rel, lse] = run_case<T>(cases()[i]);
        EXPECT_LT(rel, tolerance);
        EXPECT_LT(lse, 2e-5);
    }
}

TEST(CudaTiledAttention, F32MatchesFloat64OnTheDevice) {
    FRUGAL_REQUIRE_GPU();
    expect_cases_match<float>(2e-5);
}

TEST(CudaTiledAttention, Bf16TensorCoresMatchFloat64OnTheDevice) {
    FRUGAL_REQUIRE_GPU();
    expect_cases_match<bfloat16>(4 * frugal::attention::unit_roundoff(frugal::attention::storage_dtype::bf16));
}

TEST(CudaTiledAttention, Fp16TensorCoresMatchFloat64OnTheDevice) {
    FRUGAL_REQUIRE_GPU();
    expect_cases_match<float16>(4 * frugal::attention::unit_roundoff(frugal::attention::storage_dtype::f16));
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

    // The tensor-core path: head_dim at most 128 and a multiple of 8, rows of 16 bytes.
    const frugal::attention::attention_shape wide{.q_heads = 1, .kv_heads = 1, .q_len = 8, .kv_len = 8, .head_dim = 136};
    std::vector<bfloat16> h(8 * 136);
    const auto wq = heads_view<const bfloat16>::head_major(h.data(), 1, 8, 136);
    try {
        frugal::cuda::run_tiled_attention<bfloat16>(frugal::attention::tiled::plan(wide, {}, frugal::memory_budget::mib(1)),
                                                    wq, wq, wq, heads_view<bfloat16>::head_major(h.data(), 1, 8, 136));
        FAIL() << "head_dim 136 was accepted";
    } catch (const frugal::invalid_argument& e) {
        EXPECT_NE(std::string(e.what()).find("head_dim 136 of bf16"), std::string::npos) << e.what();
    }
    const frugal::attention::attention_shape narrow{.q_heads = 1, .kv_heads = 1, .q_len = 4, .kv_len = 4, .head_dim = 64};
    const auto strided = heads_view<const bfloat16>(h.data(), 1, 4, 64, 4 * 68, 68);  // rows of 68 elements
    try {
        frugal::cuda::run_tiled_attention<bfloat16>(
            frugal::attention::tiled::plan(narrow, {}, frugal::memory_budget::mib(1)), strided, strided, strided,
            heads_view<bfloat16>::head_major(h.data(), 1, 4, 64));
        FAIL() << "a stride of 68 elements was accepted";
    } catch (const frugal::invalid_argument& e) {
        EXPECT_NE(std::string(e.what()).find("stride 68"), std::string::npos) << e.what();
    }
}

}  // namespace
