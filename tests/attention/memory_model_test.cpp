#include <frugal/sim/staged_attention.hpp>
#include <frugal/attention/tiled_attention.hpp>
#include <frugal/backend/eigen/attention_backend.hpp>
#include <frugal/attention/memory_model.hpp>

#include "batch_fixture.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <new>
#include <vector>

#include "attention_reference.hpp"

// Counting the bytes frugal really allocates: operator new records the live total and
// its peak (Eigen's own GEMM blocks go through malloc and are not counted).
namespace {
std::atomic<std::size_t> live_bytes{0}, peak_bytes{0};
constexpr std::size_t header = alignof(std::max_align_t);
}  // namespace

void* operator new(std::size_t n) {
    auto* p = static_cast<unsigned char*>(std::malloc(n + header));
    if (p == nullptr) throw std::bad_alloc();
    *reinterpret_cast<std::size_t*>(p) = n;
    const std::size_t now = live_bytes += n;
    for (std::size_t peak = peak_bytes; now > peak && !peak_bytes.compare_exchange_weak(peak, now);) {
    }
    return p + header;
}
void operator delete(void* p) noexcept {
    if (p == nullptr) return;
    auto* base = static_cast<unsigned char*>(p) - header;
    live_bytes -= *reinterpret_cast<std::size_t*>(base);
    std::free(base);
}
void operator delete(void* p, std::size_t) noexcept { operator delete(p); }
// The nothrow forms go through the counted ones (sanitizers would otherwise pair their own
// nothrow new with the delete above).
void* operator new(std::size_t n, const std::nothrow_t&) noexcept {
    try {
        return operator new(n);
    } catch (...) {
        return nullptr;
    }
}
void operator delete(void* p, const std::nothrow_t&) noexcept { operator delete(p); }

namespace {

using frugal::memory_budget;
using frugal::attention::memory_pressure;
using frugal::attention::prefill_dims;
using frugal::attention::prefill_step;

// OPT-30B (h1 = 7168, h2 = 4 h1, 56 heads) at s = 4096, b = 1: Table 1 evaluated by hand.
const prefill_dims opt30b{.b = 1, .s = 4096, .h1 = 7168, .h2 = 28672, .n = 56, .element_bytes = 2};

TEST(MemoryModel, ReproducesHyperGenTable1) {
    struct row {
        prefill_step step;
        std::uint64_t peak, retained;
    };
    for (const auto& r : {row{prefill_step::qkv, 271581184, 117440512},
                          row{prefill_step::attention_score, 1056964608, 998244352},
                          row{prefill_step::softmax, 1937768448, 998244352},
                          row{prefill_step::attention_output, 1078984704, 29360128},
                          row{prefill_step::mlp, 587202560, 29360128}}) {
        const auto m = frugal::attention::estimate_step_memory(r.step, opt30b);
        EXPECT_EQ(m.peak_elements, r.peak) << int(r.step);
        EXPECT_EQ(m.retained_elements, r.retained) << int(r.step);
        EXPECT_EQ(m.peak_bytes(), 2 * r.peak);
    }
    // The paper's worked example: QKV peak 4bsh1 + 3h1^2 and retained X, Q, K, V.
    const prefill_dims tiny{.b = 2, .s = 3, .h1 = 5, .h2 = 7, .n = 1};
    EXPECT_EQ(frugal::attention::estimate_step_memory(prefill_step::qkv, tiny).peak_elements, 4u * 30 + 3 * 25);
    // Each step starts from what the one before retained.
    for (std::size_t i = 1; i < frugal::attention::prefill_steps.size(); ++i) {
        const auto prev = frugal::attention::estimate_step_memory(frugal::attention::prefill_steps[i - 1], opt30b);
        const auto cur = frugal::attention::estimate_step_memory(frugal::attention::prefill_steps[i], opt30b);
        EXPECT_GE(cur.peak_elements, prev.retained_elements) << i;
    }
}

TEST(MemoryModel, ClassifiesPressureBetweenTheStepPeaks) {
    const auto peak = [](prefill_step s) { return frugal::attention::estimate_step_memory(s, opt30b).peak_bytes(); };
    EXPECT_EQ(frugal::attention::classify_memory_pressure(opt30b, memory_budget(peak(prefill_step::softmax))),
              memory_pressure::none);
    // Between the output step's peak and softmax's: only softmax exceeds.
    EXPECT_EQ(frugal::attention::classify_memory_pressure(opt30b, memory_budget(peak(prefill_step::attention_output))),
              memory_pressure::moderate);
    EXPECT_EQ(frugal::attention::classify_memory_pressure(opt30b, memory_budget(peak(prefill_step::mlp) + 1)),
              memory_pressure::severe);
    EXPECT_THROW((void)frugal::attention::classify_memory_pressure(opt30b, memory_budget(peak(prefill_step::qkv))),
                 frugal::invalid_argument);
    const prefill_dims huge{.b = 1u << 20, .s = 1u << 30, .h1 = 1u << 20, .h2 = 1, .n = 1};
    EXPECT_THROW((void)frugal::attention::estimate_step_memory(prefill_step::softmax, huge), frugal::invalid_argument);
}

struct run_tensors {
    std::vector<float> q, k, v, out;
    explicit run_tensors(const frugal::attention::attention_shape& s)
        : q(frugal::testing::normal_floats(s.q_heads * s.q_len * s.head_dim, 1)),
          k(frugal::testing::normal_floats(s.kv_heads * s.kv_len * s.head_dim, 2)),
          v(frugal::testing::normal_floats(s.kv_heads * s.kv_len * s.head_dim, 3)),
          out(s.q_heads * s.q_len * s.head_dim) {}
};

// Allocations besides the workspace: thread handles and their shared state.
constexpr std::size_t slack = 4096;

TEST(MemoryModel, StagedBaselineAllocatesTheTableScoreTermPlusItsDeviceBuffers) {
    const frugal::attention::attention_shape sh{.q_heads = 4, .kv_heads = 4, .q_len = 96, .kv_len = 96, .head_dim = 16};
    run_tensors t(sh);
    // The scores the staged baseline concatenates in host memory are Table 1's n b s^2.
    const prefill_dims dims{.b = 1, .s = 96, .h1 = 4 * 16, .h2 = 1, .n = 4, .element_bytes = 4};
    const auto score = frugal::attention::estimate_step_memory(prefill_step::attention_score, dims);
    const std::uint64_t nbs2 = score.retained_bytes() - 2 * dims.b * dims.s * dims.h1 * dims.element_bytes;
    for (std::size_t threads : {1, 2}) {
        const auto plan = frugal::sim::staged_attention::plan(sh, {.threads = threads}, memory_budget(8192));
        EXPECT_EQ(plan.host_bytes(), nbs2);
        const std::size_t before = live_bytes;
        peak_bytes = before;
        frugal::sim::staged_attention::run(plan, frugal::eigen::backend{},
                                      frugal::attention::heads_view<const float>::head_major(t.q.data(), 4, 96, 16),
                                      frugal::attention::heads_view<const float>::head_major(t.k.data(), 4, 96, 16),
                                      frugal::attention::heads_view<const float>::head_major(t.v.data(), 4, 96, 16),
                                      frugal::attention::heads_view<float>::head_major(t.out.data(), 4, 96, 16));
        EXPECT_GE(peak_bytes - before, plan.workspace_bytes());
        EXPECT_LE(peak_bytes - before, plan.workspace_bytes() + slack);
    }
}

TEST(MemoryModel, TiledAttentionAllocatesExactlyItsPlannedWorkspace) {
    const frugal::attention::attention_shape sh{.q_heads = 4, .kv_heads = 2, .q_len = 200, .kv_len = 300, .head_dim = 24};
    run_tensors t(sh);
    for (std::size_t threads : {1, 3}) {
        const auto plan = frugal::attention::tiled::plan(sh, {.threads = threads}, memory_budget(100000));
        EXPECT_LE(plan.workspace_bytes(), 100000u);
        const std::size_t before = live_bytes;
        peak_bytes = before;
        frugal::attention::tiled::run(plan, frugal::eigen::attention_backend{},
                                     frugal::attention::heads_view<const float>::head_major(t.q.data(), 4, 200, 24),
                                     frugal::attention::heads_view<const float>::head_major(t.k.data(), 2, 300, 24),
                                     frugal::attention::heads_view<const float>::head_major(t.v.data(), 2, 300, 24),
                                     frugal::attention::heads_view<float>::head_major(t.out.data(), 4, 200, 24));
        EXPECT_GE(peak_bytes - before, plan.workspace_bytes());
        EXPECT_LE(peak_bytes - before, plan.workspace_bytes() + slack);
    }
}

TEST(MemoryModel, BatchAttentionAllocatesNothingBeyondItsPlannedWorkspace) {
    // A mixed batch with split-KV decodes, prefill tiles and gathered pages: run with the
    // caller's workspace and a pool allocates nothing; the allocating overload allocates
    // exactly workspace_bytes().
    const frugal::testing::batch_spec spec{.q_lens = {1, 40, 2, 1}, .kv_lens = {900, 40, 300, 64}, .q_heads = 4,
                                           .kv_heads = 2, .head_dim = 16, .page_size = 16};
    const frugal::testing::batch_data<frugal::attention::bfloat16> b(spec);
    const frugal::testing::kv_pool<frugal::attention::bfloat16> pool(b, false);
    const auto plan = frugal::attention::batch::plan(
        b.shape(), {.mask = frugal::attention::attention_mask::causal(), .dtype = frugal::attention::storage_dtype::bf16,
                    .threads = 2, .q_tile = 16, .kv_tile = 32, .kv_chunk = 128});
    EXPECT_FALSE(plan.merges().empty());
    EXPECT_EQ(plan.workspace_bytes(), (plan.workers() * plan.worker_floats() + plan.slots() * plan.slot_floats()) * 4);
    std::vector<frugal::attention::bfloat16> out(b.tokens() * 4 * 16);
    const auto ov = frugal::attention::heads_view<frugal::attention::bfloat16>::token_major(out.data(), b.tokens(), 4, 16);
    std::vector<float> ws(plan.workspace_bytes() / sizeof(float));
    frugal::thread_pool threads(2);
    const frugal::eigen::attention_backend cpu;
    const auto kv = pool.view();
    (void)frugal::default_thread_pool();  // started once per process, before the counting
    const std::size_t before = live_bytes;
    peak_bytes = before;
    frugal::attention::batch::run(plan, cpu, b.q_view(), kv, ov, {}, std::span<float>(ws), threads);
    EXPECT_EQ(peak_bytes - before, 0u);
    peak_bytes = live_bytes.load();
    frugal::attention::batch::run(plan, cpu, b.q_view(), kv, ov);
    EXPECT_EQ(peak_bytes - before, plan.workspace_bytes());
}

}  // namespace
