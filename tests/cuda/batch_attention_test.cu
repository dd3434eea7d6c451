// The CUDA batch attention against the float64 oracle of the CPU tests: decode and mixed
// batches in every storage dtype and page layout, GQA ratios 1, 4 and 8, page sizes 1, 16
// and 64, split-KV, ragged lengths and masks; and bad input refused with the CPU's messages.
#include <frugal/backend/cuda/batch_attention.cuh>
#include <frugal/backend/cuda/batch_plan.cuh>

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "../attention/batch_fixture.hpp"
#include "device_test.hpp"

namespace {

using frugal::attention::attention_mask;
using frugal::attention::batch_options;
using frugal::attention::batch_plan;
using frugal::attention::bfloat16;
using frugal::attention::float16;
using frugal::attention::kv_layout;
using frugal::attention::storage_dtype;
using frugal::testing::batch_data;
using frugal::testing::batch_spec;
using frugal::testing::kv_pool;
using frugal::testing::ref_mask;
using frugal::testing::ref_mask_spec;

// An H100's multiprocessor count: the plan's split-KV then cuts the test's few thousand
// keys into 256-key chunks, so merges run too.
constexpr int test_multiprocessors = 132;

/// Runs `plan` over the batch on the device (outputs poisoned with NaN first) and returns
/// the result as floats.
template <class T>
frugal::testing::batch_result run_on_device(const batch_plan& plan, const batch_data<T>& b, const kv_pool<T>& pool) {
    const batch_spec& s = b.spec;
    auto dq = frugal::testing::upload(b.q);
    auto dk = frugal::testing::upload(pool.k);
    auto dv = frugal::testing::upload(s.interleaved ? std::vector<T>(1) : pool.v);
    auto dindptr = frugal::testing::upload(pool.indptr);
    auto dindices = frugal::testing::upload(pool.indices);
    auto dlast = frugal::testing::upload(pool.last);
    auto dout = frugal::testing::poisoned<T>(b.q.size());
    auto dlse = frugal::testing::poisoned<float>(s.q_heads * b.tokens());
    const frugal::cuda::device_batch_plan dplan(plan);
    auto ws = frugal::testing::poisoned<float>(dplan.workspace_floats());
    const auto kv = s.interleaved
                        ? frugal::attention::paged_kv<const T>::interleaved(dk.data(), pool.pages, s.kv_heads,
                                                                            s.head_dim, s.layout, pool.table())
                        : frugal::attention::paged_kv<const T>::separate(dk.data(), dv.data(), pool.pages, s.kv_heads,
                                                                         s.head_dim, s.layout, pool.table());
    frugal::cuda::run_batch_attention<T>(
        dplan, frugal::attention::heads_view<const T>::token_major(dq.data(), b.tokens(), s.q_heads, s.head_dim), kv,
        {dindptr.data(), dindices.data(), dlast.data(), pool.page_size},
        frugal::attention::heads_view<T>::token_major(dout.data(), b.tokens(), s.q_heads, s.head_dim),
        frugal::matrix_view<float>(dlse.data(), s.q_heads, b.tokens()), ws.data());
    FRUGAL_CUDA_CHECK(cudaDeviceSynchronize());
    return {frugal::testing::as_floats(frugal::testing::download(dout)), frugal::testing::download(dlse)};
}

template <class T>
double tolerance() {
    return std::is_same_v<T, float> ? 2e-5 : 4 * frugal::attention::unit_roundoff(frugal::attention::dtype_of<T>);
}

struct batch_case {
    batch_spec spec;
    attention_mask mask = attention_mask::causal();
    ref_mask_spec ref{ref_mask::bottom_right};
};

/// The batch on the device against float64, with the GPU's plan and (for decode batches)
/// the CPU's default plan that groups every KV head into one item.
template <class T>
void expect_matches_float64(const batch_case& c, const char* what) {
    SCOPED_TRACE(what);
    const batch_data<T> b(c.spec);
    const kv_pool<T> pool(b, false);
    const batch_options options{.mask = c.mask, .dtype = frugal::attention::dtype_of<T>};
    for (const bool gpu_plan : {true, false}) {
        SCOPED_TRACE(gpu_plan ? "cuda::plan_batch" : "batch::plan, KV heads grouped");
        const batch_plan plan = gpu_plan ? frugal::cuda::plan_batch(b.shape(), options, test_multiprocessors)
                                         : frugal::attention::batch::plan(b.shape(), {.mask = c.mask,
                                                                                      .dtype = options.dtype,
                                                                                      .threads = 4});
        const auto e = frugal::testing::compare(b, run_on_device(plan, b, pool), c.ref);
        EXPECT_LT(e.rel_out, tolerance<T>());
        EXPECT_LT(e.lse, 2e-5);
    }
}

template <class T>
void decode_matrix() {
    for (const kv_layout layout : {kv_layout::nhd, kv_layout::hnd})
        for (const std::size_t group : {1, 4, 8})
            for (const std::size_t page : {1, 16, 64}) {
                const std::string what = std::string(frugal::attention::dtype_name(frugal::attention::dtype_of<T>)) +
                                         (layout == kv_layout::nhd ? " NHD" : " HND") + ", group " +
                                         std::to_string(group) + ", page " + std::to_string(page);
                // Ragged lengths: a page boundary, a single key, and sequences split into several chunks.
                batch_spec s{.q_lens = {1, 1, 1, 1, 1}, .kv_lens = {1000, 1, 17, 700, 64}, .q_heads = 2 * group,
                             .kv_heads = 2, .head_dim = 128, .page_size = page, .layout = layout,
                             .seed = unsigned(group * 100 + page)};
                expect_matches_float64<T>({s}, what.c_str());
            }
}

TEST(CudaBatchAttention, DecodeF32MatchesFloat64) {
    FRUGAL_REQUIRE_GPU();
    decode_matrix<float>();
}

TEST(CudaBatchAttention, DecodeBf16MatchesFloat64) {
    FRUGAL_REQUIRE_GPU();
    decode_matrix<bfloat16>();
}

TEST(CudaBatchAttention, DecodeFp16MatchesFloat64) {
    FRUGAL_REQUIRE_GPU();
    decode_matrix<float16>();
}

template <class T>
void mixed_batches() {
    // Prefill chunks beside decodes (each prefill's rows after its cached keys), both layouts,
    // an interleaved pool, a sliding window, and head dimensions for each kernel width.
    const std::vector<std::size_t> q_lens{1, 20, 3, 1, 40}, kv_lens{300, 20, 45, 1300, 100};
    for (const kv_layout layout : {kv_layout::nhd, kv_layout::hnd}) {
        batch_spec s{.q_lens = q_lens, .kv_lens = kv_lens, .q_heads = 8, .kv_heads = 2, .head_dim = 72,
                     .page_size = 16, .layout = layout};
        expect_matches_float64<T>({s}, layout == kv_layout::nhd ? "mixed NHD d72" : "mixed HND d72");
    }
    batch_spec interleaved{.q_lens = q_lens, .kv_lens = kv_lens, .q_heads = 4, .kv_heads = 4, .head_dim = 64,
                           .page_size = 16, .layout = kv_layout::hnd, .interleaved = true};
    expect_matches_float64<T>({interleaved}, "mixed, interleaved pool, d64");
    batch_spec wide{.q_lens = {1, 5, 1}, .kv_lens = {900, 40, 33}, .q_heads = 8, .kv_heads = 1, .head_dim = 256,
                    .page_size = 16, .layout = kv_layout::nhd};
    expect_matches_float64<T>({wide}, "MQA d256");
    batch_spec windowed{.q_lens = q_lens, .kv_lens = kv_lens, .q_heads = 8, .kv_heads = 2, .head_dim = 128,
                        .page_size = 16, .layout = kv_layout::hnd};
    expect_matches_float64<T>({windowed, attention_mask::sliding_window(100), {ref_mask::bottom_right, 0, 100}},
                              "sliding window 100");
}

TEST(CudaBatchAttention, MixedBatchesF32MatchFloat64) {
    FRUGAL_REQUIRE_GPU();
    mixed_batches<float>();
}

TEST(CudaBatchAttention, MixedBatchesBf16MatchFloat64) {
    FRUGAL_REQUIRE_GPU();
    mixed_batches<bfloat16>();
}

TEST(CudaBatchAttention, MixedBatchesFp16MatchFloat64) {
    FRUGAL_REQUIRE_GPU();
    mixed_batches<float16>();
}

TEST(CudaBatchAttention, OneLongSequenceSplitsAcrossTheGpu) {
    FRUGAL_REQUIRE_GPU();
    const batch_spec s{.q_lens = {1}, .kv_lens = {20000}, .q_heads = 8, .kv_heads = 1, .head_dim = 128,
                       .page_size = 16, .layout = kv_layout::hnd};
    const auto plan = frugal::cuda::plan_batch(batch_data<bfloat16>(s).shape(), {.dtype = storage_dtype::bf16},
                                               test_multiprocessors);
    EXPECT_EQ(plan.merges().size(), 1u);
    EXPECT_GE(plan.items().size(), 20000u / plan.kv_chunk());  // chunks of at least 256 keys
    expect_matches_float64<bfloat16>({s}, "one sequence of 20000 keys, group 8");
}

TEST(CudaBatchPlan, FillsTheMultiprocessorsWithSplitKv) {
    // Runs without a GPU: the plan is host code.
    std::vector<std::size_t> qo{0}, kv;
    for (int s = 0; s < 8; ++s) {
        qo.push_back(qo.back() + 1);
        kv.push_back(4096);
    }
    const frugal::attention::batch_shape shape{.q_heads = 32, .kv_heads = 8, .head_dim = 128, .qo_indptr = qo,
                                               .kv_lens = kv};
    const auto plan = frugal::cuda::plan_batch(shape, {.dtype = storage_dtype::bf16}, 132);
    EXPECT_EQ(plan.decode_heads(), 1u);
    EXPECT_EQ(plan.kv_chunk() % plan.kv_block(), 0u);
    // 8 x 4096 keys x 8 KV heads over 8 blocks per SM: chunks of 256 keys, 1024 items.
    EXPECT_GE(plan.items().size(), std::size_t(8 * 132) * 9 / 10);
    EXPECT_EQ(plan.items().size(), std::size_t(8 * 8) * ((4096 + plan.kv_chunk() - 1) / plan.kv_chunk()));
    EXPECT_THROW((void)frugal::cuda::plan_batch(shape, {}, 0), frugal::invalid_argument);
}

/// The message of the CPU run's check and of the CUDA run's for the same bad call.
template <class T>
void expect_same_message(const batch_plan& plan, const frugal::attention::heads_view<const T>& q,
                         const frugal::attention::paged_kv<const T>& kv, const frugal::cuda::device_page_table& table,
                         const frugal::attention::heads_view<T>& out, const frugal::matrix_view<float>& lse) {
    std::string cpu, gpu;
    try {
        frugal::attention::detail::check_batch_views<T>(plan, q, kv, out, lse);
    } catch (const frugal::invalid_argument& e) {
        cpu = e.what();
    }
    try {
        frugal::cuda::detail::check_batch_call<T>(plan, q, kv, table, out, lse);
    } catch (const frugal::invalid_argument& e) {
        gpu = e.what();
    }
    EXPECT_FALSE(cpu.empty());
    EXPECT_EQ(cpu, gpu);
}

TEST(CudaBatchAttention, RejectsBadCallsWithTheCpuMessagesBeforeTouchingTheDevice) {
    // Runs without a GPU: the host-side checks come first (host pointers stand in).
    const batch_spec spec{.q_lens = {1, 20, 3, 1}, .kv_lens = {300, 20, 45, 130}, .q_heads = 8, .kv_heads = 2,
                          .head_dim = 72, .page_size = 16, .layout = kv_layout::hnd};
    const batch_data<float> b(spec);
    const kv_pool<float> pool(b, false);
    std::vector<float> out(b.q.size()), lse(8 * b.tokens());
    const frugal::cuda::device_page_table table{pool.indptr.data(), pool.indices.data(), pool.last.data(), 16};
    const auto ov = frugal::attention::heads_view<float>::token_major(out.data(), b.tokens(), 8, 72);
    const auto good = frugal::cuda::plan_batch(b.shape(), {}, test_multiprocessors);
    // A plan for another dtype, a q of the wrong width, an LSE of the wrong shape, a plan
    // for other KV lengths.
    expect_same_message<float>(frugal::cuda::plan_batch(b.shape(), {.dtype = storage_dtype::bf16}, 132), b.q_view(),
                               pool.view(), table, ov, {});
    expect_same_message<float>(good, frugal::attention::heads_view<const float>::token_major(b.q.data(), b.tokens(), 4, 72),
                               pool.view(), table, ov, {});
    expect_same_message<float>(good, b.q_view(), pool.view(), table, ov, frugal::matrix_view<float>(lse.data(), 4, 2));
    batch_spec longer = spec;
    longer.kv_lens[2] = 46;
    const batch_data<float> b2(longer);
    expect_same_message<float>(frugal::cuda::plan_batch(b2.shape(), {}, 132), b.q_view(), pool.view(), table, ov, {});

    // What only the GPU needs: head_dim a multiple of 8, the device table's page size.
    try {
        frugal::cuda::detail::check_batch_call<float>(good, b.q_view(), pool.view(), {pool.indptr.data(),
                                                      pool.indices.data(), pool.last.data(), 8}, ov, {});
        FAIL() << "a device page table of another page size was accepted";
    } catch (const frugal::invalid_argument& e) {
        EXPECT_NE(std::string(e.what()).find("pages of 8"), std::string::npos) << e.what();
    }
    const batch_spec odd{.q_lens = {1}, .kv_lens = {30}, .q_heads = 2, .kv_heads = 1, .head_dim = 36};
    const batch_data<float> bo(odd);
    const kv_pool<float> po(bo, false);
    std::vector<float> oo(bo.q.size());
    try {
        frugal::cuda::detail::check_batch_call<float>(
            frugal::cuda::plan_batch(bo.shape(), {}, 132), bo.q_view(), po.view(),
            {po.indptr.data(), po.indices.data(), po.last.data(), 16},
            frugal::attention::heads_view<float>::token_major(oo.data(), 1, 2, 36), {});
        FAIL() << "head_dim 36 was accepted";
    } catch (const frugal::invalid_argument& e) {
        EXPECT_NE(std::string(e.what()).find("head_dim 36 must be a multiple of 8"), std::string::npos) << e.what();
    }
}

}  // namespace
