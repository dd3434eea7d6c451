#include <frugal/backend/cuda/batch_attention.cuh>
#include <frugal/backend/cuda/device.cuh>
#include <frugal/backend/cuda/device_buffer.cuh>

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "../attention/batch_fixture.hpp"

namespace {

using frugal::attention::attention_mask;
using frugal::attention::bfloat16;
using frugal::attention::storage_dtype;
using frugal::testing::batch_data;
using frugal::testing::batch_spec;
using frugal::testing::kv_pool;
using frugal::testing::ref_mask;

batch_spec mixed() {
    return {.q_lens = {1, 20, 3, 1}, .kv_lens = {300, 20, 45, 130}, .q_heads = 8, .kv_heads = 2, .head_dim = 72,
            .page_size = 16, .layout = frugal::attention::kv_layout::hnd};
}

template <class T>
void run_on_device(storage_dtype dtype, double tolerance) {
    const batch_data<T> b(mixed());
    const kv_pool<T> pool(b, false);
    // A small chunk makes split-KV work items and merges on the device too.
    const auto plan = frugal::attention::batch::plan(b.shape(), {.mask = attention_mask::causal(), .dtype = dtype,
                                                                 .threads = 4, .kv_chunk = 64,
                                                                 .group_decode_heads = false});
    ASSERT_FALSE(plan.merges().empty());
    frugal::cuda::device_buffer<T> dq(b.q.size()), dk(pool.k.size()), dv(pool.v.size()), dout(b.q.size());
    frugal::cuda::device_buffer<std::int32_t> dindptr(pool.indptr.size()), dindices(pool.indices.size()),
        dlast(pool.last.size());
    frugal::cuda::device_buffer<float> dlse(b.spec.q_heads * b.tokens());
    dq.copy_from_host(b.q);
    dk.copy_from_host(pool.k);
    dv.copy_from_host(pool.v);
    dindptr.copy_from_host(pool.indptr);
    dindices.copy_from_host(pool.indices);
    dlast.copy_from_host(pool.last);
    const frugal::cuda::device_batch_plan dplan(plan);
    frugal::cuda::device_buffer<float> ws(dplan.workspace_floats());
    const auto kv = frugal::attention::paged_kv<const T>::separate(dk.data(), dv.data(), pool.pages, 2, 72,
                                                                   frugal::attention::kv_layout::hnd, pool.table());
    frugal::cuda::run_batch_attention<T>(
        dplan, frugal::attention::heads_view<const T>::token_major(dq.data(), b.tokens(), 8, 72), kv,
        {dindptr.data(), dindices.data(), dlast.data(), 16},
        frugal::attention::heads_view<T>::token_major(dout.data(), b.tokens(), 8, 72),
        frugal::matrix_view<float>(dlse.data(), 8, b.tokens()), ws.data());
    FRUGAL_CUDA_CHECK(cudaDeviceSynchronize());
    std::vector<T> out(b.q.size());
    frugal::testing::batch_result r;
    r.lse.resize(dlse.size());
    dout.copy_to_host(out);
    dlse.copy_to_host(r.lse);
    for (const T& x : out) r.out.push_back(frugal::attention::to_float(x));
    const auto e = frugal::testing::compare(b, r, {ref_mask::bottom_right});
    EXPECT_LT(e.rel_out, tolerance);
    EXPECT_LT(e.lse, 2e-5);
}

TEST(CudaBatchAttention, PagedDecodeAndPrefillMatchFloat64OnTheDevice) {
    if (frugal::cuda::device_count() == 0) {
        GTEST_SKIP() << "no CUDA device on this machine: device test skipped (compiled only)";
    }
    run_on_device<float>(storage_dtype::f32, 2e-5);
    run_on_device<bfloat16>(storage_dtype::bf16, 4 * frugal::attention::unit_roundoff(storage_dtype::bf16));
}

TEST(CudaBatchAttention, RejectsBadCallsBeforeTouchingTheDevice) {
    // Runs without a GPU: the host-side checks come first.
    const batch_data<float> b(mixed());
    const kv_pool<float> pool(b, false);
    const auto plan = frugal::attention::batch::plan(b.shape(), {.dtype = storage_dtype::bf16});
    std::vector<float> out(b.q.size());
    const frugal::cuda::device_page_table table{pool.indptr.data(), pool.indices.data(), pool.last.data(), 16};
    try {
        frugal::cuda::detail::check_batch_call<float>(plan, b.q_view(), pool.view(), table,
                                                      frugal::attention::heads_view<float>::token_major(out.data(), b.tokens(), 8, 72),
                                                      {});
        FAIL() << "a dtype mismatch was accepted";
    } catch (const frugal::invalid_argument& e) {
        EXPECT_NE(std::string(e.what()).find("made for bf16 storage"), std::string::npos) << e.what();
    }
    try {  // the host's default plan groups the KV heads of a decode item
        frugal::cuda::detail::check_batch_call<float>(
            frugal::attention::batch::plan(b.shape(), {}), b.q_view(), pool.view(), table,
            frugal::attention::heads_view<float>::token_major(out.data(), b.tokens(), 8, 72), {});
        FAIL() << "a plan grouping KV heads was accepted";
    } catch (const frugal::invalid_argument& e) {
        EXPECT_NE(std::string(e.what()).find("group_decode_heads = false"), std::string::npos) << e.what();
    }
}

}  // namespace
