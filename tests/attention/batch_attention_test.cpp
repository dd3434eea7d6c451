#include <frugal/attention/batch_attention.hpp>
#include <frugal/backend/eigen/attention_backend.hpp>

#include <gtest/gtest.h>

#include "frugal_test_errors.hpp"

#include <algorithm>
#include <bit>
#include <string>
#include <vector>

#include "batch_fixture.hpp"
#include "minimal_backend.hpp"

namespace {

using frugal::attention::attention_mask;
using frugal::attention::batch_options;
using frugal::attention::bfloat16;
using frugal::attention::float16;
using frugal::attention::kv_layout;
using frugal::attention::storage_dtype;
using frugal::testing::batch_data;
using frugal::testing::batch_spec;
using frugal::testing::kv_pool;
using frugal::testing::ref_mask;
using frugal::testing::run_batch;

const frugal::eigen::attention_backend cpu;

// The fused decode step is an optional refinement: the reference backend has it for every
// storage type, a GEMM-only backend does not (and gets the portable loop).
static_assert(frugal::attention::decode_tile_backend<frugal::eigen::attention_backend, float>);
static_assert(frugal::attention::decode_tile_backend<frugal::eigen::attention_backend, bfloat16>);
static_assert(!frugal::attention::decode_tile_backend<example::minimal_backend, float>);

// Decodes (1 token), a speculative-verify step (3 tokens) and prefill chunks, ragged.
batch_spec mixed(kv_layout layout = kv_layout::nhd, bool interleaved = false) {
    return {.q_lens = {1, 70, 3, 1, 33}, .kv_lens = {300, 70, 45, 1, 200}, .q_heads = 4, .kv_heads = 2,
            .head_dim = 24, .page_size = 16, .layout = layout, .interleaved = interleaved};
}

TEST(BatchAttention, MixedRaggedBatchOverPagesMatchesFloat64ForEveryLayout) {
    for (kv_layout layout : {kv_layout::nhd, kv_layout::hnd})
        for (bool interleaved : {false, true})
            for (const auto& [mask, ref] : {std::pair{attention_mask::causal(), frugal::testing::ref_mask_spec{ref_mask::bottom_right}},
                                            std::pair{attention_mask::none(), frugal::testing::ref_mask_spec{ref_mask::none}},
                                            std::pair{attention_mask::sliding_window(20), frugal::testing::ref_mask_spec{ref_mask::bottom_right, 0, 20}}}) {
                const batch_data<float> b(mixed(layout, interleaved));
                const kv_pool<float> pool(b, false);
                // A small chunk forces split-KV on the 300- and 200-key decodes.
                const auto plan = frugal::attention::batch::plan(b.shape(), {.mask = mask, .threads = 2, .q_tile = 32,
                                                                             .kv_tile = 48, .kv_chunk = 64});
                if (mask.window == 0) {
                    EXPECT_FALSE(plan.merges().empty());  // (a 20-key window never splits)
                }
                const auto e = frugal::testing::compare(b, run_batch(plan, b, pool, cpu, 2), ref);
                EXPECT_LT(e.out, 2e-5) << "layout " << int(layout) << " interleaved " << interleaved << " window "
                                       << mask.window;
                EXPECT_LT(e.lse, 2e-5);
            }
}

TEST(BatchAttention, PortablePathsOnAGemmOnlyBackendMatchFloat64) {
    const batch_data<float> b(mixed());
    const kv_pool<float> pool(b, false);
    const auto plan = frugal::attention::batch::plan(b.shape(), {.mask = attention_mask::causal(), .kv_chunk = 128});
    const auto e = frugal::testing::compare(b, run_batch(plan, b, pool, example::minimal_backend{}),
                                            {ref_mask::bottom_right});
    EXPECT_LT(e.out, 2e-5);
    EXPECT_LT(e.lse, 2e-5);
}

TEST(BatchAttention, PagedEqualsContiguousBitwise) {
    for (std::size_t page : {16, 5}) {  // 5: blocks straddle pages
        auto spec = mixed(kv_layout::hnd);
        spec.page_size = page;
        const batch_data<float> b(spec);
        const auto plan = frugal::attention::batch::plan(b.shape(), {.mask = attention_mask::causal(), .threads = 2,
                                                                     .kv_block = 16, .kv_chunk = 96});
        const auto paged = run_batch(plan, b, kv_pool<float>(b, false), cpu, 2);
        const auto contiguous = run_batch(plan, b, kv_pool<float>(b, true), cpu, 2);
        EXPECT_EQ(paged.out, contiguous.out) << "page " << page;
        EXPECT_EQ(paged.lse, contiguous.lse);
    }
}

TEST(BatchAttention, RaggedBatchEqualsPerSequenceCallsBitwise) {
    const batch_spec spec = mixed();
    const batch_data<float> b(spec);
    const batch_options opt{.mask = attention_mask::causal(), .threads = 2, .q_tile = 32, .kv_tile = 48, .kv_chunk = 64};
    const auto whole = run_batch(frugal::attention::batch::plan(b.shape(), opt), b, kv_pool<float>(b, false), cpu, 2);
    std::size_t row = 0;
    for (std::size_t s = 0; s < spec.q_lens.size(); ++s) {
        batch_spec one = spec;
        one.q_lens = {spec.q_lens[s]};
        one.kv_lens = {spec.kv_lens[s]};
        batch_data<float> single(one);
        // The same values as sequence s of the batch.
        single.k = {b.k[s]};
        single.v = {b.v[s]};
        const std::size_t width = spec.q_heads * spec.head_dim;
        single.q.assign(b.q.begin() + std::ptrdiff_t(row * width), b.q.begin() + std::ptrdiff_t((row + spec.q_lens[s]) * width));
        const auto r = run_batch(frugal::attention::batch::plan(single.shape(), opt), single,
                                 kv_pool<float>(single, false), cpu, 2);
        const std::vector<float> part(whole.out.begin() + std::ptrdiff_t(row * width),
                                      whole.out.begin() + std::ptrdiff_t((row + spec.q_lens[s]) * width));
        EXPECT_EQ(r.out, part) << "sequence " << s;
        for (std::size_t h = 0; h < spec.q_heads; ++h)
            for (std::size_t i = 0; i < spec.q_lens[s]; ++i)
                EXPECT_EQ(r.lse[h * spec.q_lens[s] + i], whole.lse[h * b.tokens() + row + i]);
        row += spec.q_lens[s];
    }
}

TEST(BatchAttention, ThreadCountDoesNotChangeTheResultAndSplitsOnlyRoundTheMerge) {
    auto spec = mixed();
    spec.kv_lens = {3000, 70, 1500, 1, 700};
    const batch_data<float> b(spec);
    const kv_pool<float> pool(b, false);
    // A fixed split: bitwise equal for any number of workers and executors.
    std::vector<frugal::testing::batch_result> fixed;
    for (std::size_t threads : {1, 2, 4}) {
        const auto plan = frugal::attention::batch::plan(b.shape(), {.mask = attention_mask::causal(),
                                                                     .threads = threads, .kv_chunk = 256});
        fixed.push_back(run_batch(plan, b, pool, cpu, threads == 1 ? 0 : threads));
    }
    EXPECT_EQ(fixed[0].out, fixed[1].out);
    EXPECT_EQ(fixed[0].out, fixed[2].out);
    EXPECT_EQ(fixed[0].lse, fixed[2].lse);
    // Splits chosen from the thread count, or forced: the merge's fp32 rounding only
    // (each merge rescales by at most one rounding per chunk; documented bound 1e-6 here).
    for (std::size_t threads : {1, 2, 8})
        for (std::size_t chunk : {std::size_t(0), std::size_t(64), std::size_t(512)}) {
            const auto plan = frugal::attention::batch::plan(b.shape(), {.mask = attention_mask::causal(),
                                                                         .threads = threads, .kv_chunk = chunk});
            const auto r = run_batch(plan, b, pool, cpu, threads == 1 ? 0 : threads);
            double worst = 0;
            for (std::size_t i = 0; i < r.out.size(); ++i)
                worst = std::max(worst, double(std::abs(r.out[i] - fixed[0].out[i])));
            EXPECT_LT(worst, 1e-6) << threads << " threads, chunk " << chunk << " (" << plan.kv_chunk() << ")";
            EXPECT_LT(frugal::testing::compare(b, r, {ref_mask::bottom_right}).out, 2e-5);
        }
    const auto auto_plan = frugal::attention::batch::plan(b.shape(), {.mask = attention_mask::causal(), .threads = 8});
    EXPECT_FALSE(auto_plan.merges().empty()) << "8 workers split the 3000-key decode";
    const auto one = frugal::attention::batch::plan(b.shape(), {.mask = attention_mask::causal(), .threads = 1});
    EXPECT_TRUE(one.merges().empty()) << "one worker never splits";
}

TEST(BatchAttention, GroupedQueryHeadsEqualPerHeadComputationBitwise) {
    // 8 query heads over 2 KV heads, against the same problem with every KV head repeated
    // for its 4 query heads (plain multi-head attention).
    batch_spec gqa = mixed(kv_layout::hnd);
    gqa.q_heads = 8;
    gqa.kv_heads = 2;
    const batch_data<float> b(gqa);
    batch_spec mha = gqa;
    mha.kv_heads = 8;
    batch_data<float> expanded(mha);
    expanded.q = b.q;
    expanded.qf = b.qf;
    for (std::size_t s = 0; s < gqa.kv_lens.size(); ++s) {
        const std::size_t n = gqa.kv_lens[s] * gqa.head_dim;
        for (auto [src, dst] : {std::pair{&b.k[s], &expanded.k[s]}, std::pair{&b.v[s], &expanded.v[s]}}) {
            dst->clear();
            for (std::size_t h = 0; h < 8; ++h) dst->insert(dst->end(), src->begin() + std::ptrdiff_t(h / 4 * n),
                                                            src->begin() + std::ptrdiff_t((h / 4 + 1) * n));
        }
    }
    const batch_options opt{.mask = attention_mask::causal(), .threads = 2, .kv_chunk = 64, .decode_rows = 12};
    const auto grouped = run_batch(frugal::attention::batch::plan(b.shape(), opt), b, kv_pool<float>(b, false), cpu, 2);
    const auto per_head = run_batch(frugal::attention::batch::plan(expanded.shape(), opt), expanded,
                                    kv_pool<float>(expanded, false), cpu, 2);
    EXPECT_EQ(grouped.out, per_head.out);
    EXPECT_EQ(grouped.lse, per_head.lse);
}

template <class T>
void expect_head_grouping_changes_nothing() {
    // Decode items over all KV heads (group_decode_heads) against one item per KV head, with
    // the same split: the same blocks per head in the same order, so the same bits, through
    // the fused step (causal) and the masked portable step (sliding window), split or not.
    for (kv_layout layout : {kv_layout::nhd, kv_layout::hnd})
        for (const auto& mask : {attention_mask::causal(), attention_mask::sliding_window(40)}) {
            auto spec = mixed(layout);
            spec.q_heads = 8;
            spec.kv_heads = 4;
            const batch_data<T> b(spec);
            const kv_pool<T> pool(b, false);
            batch_options opt{.mask = mask, .dtype = frugal::attention::dtype_of<T>, .threads = 2, .kv_block = 32,
                              .kv_chunk = 96, .group_decode_heads = false};
            const auto per_head = frugal::attention::batch::plan(b.shape(), opt);
            EXPECT_EQ(per_head.decode_heads(), 1u);
            opt.group_decode_heads = true;
            const auto grouped = frugal::attention::batch::plan(b.shape(), opt);
            EXPECT_EQ(grouped.decode_heads(), 4u);
            std::size_t decode_items = 0;
            for (const auto& it : grouped.items()) {
                if (it.prefill) continue;
                ++decode_items;
                EXPECT_EQ(it.kv_head, 0u);
                EXPECT_EQ(it.heads, 4u);
            }
            EXPECT_EQ(decode_items * 4, std::size_t(std::count_if(per_head.items().begin(), per_head.items().end(),
                                                                  [](const auto& it) { return !it.prefill; })));
            EXPECT_FALSE(grouped.merges().empty());
            const auto a = run_batch(per_head, b, pool, cpu, 2), g = run_batch(grouped, b, pool, cpu, 2);
            EXPECT_EQ(a.out, g.out) << "layout " << int(layout) << " window " << mask.window;
            EXPECT_EQ(a.lse, g.lse);
        }
}

TEST(BatchAttention, DecodeItemsOverAllKvHeadsEqualPerHeadItemsBitwise) {
    expect_head_grouping_changes_nothing<float>();
    expect_head_grouping_changes_nothing<bfloat16>();
}

template <class T>
void expect_within_format_rounding(storage_dtype dtype) {
    const batch_data<T> b(mixed());
    const kv_pool<T> pool(b, false);
    const auto plan = frugal::attention::batch::plan(b.shape(), {.mask = attention_mask::causal(), .dtype = dtype,
                                                                 .threads = 2, .kv_chunk = 64});
    const auto e = frugal::testing::compare(b, run_batch(plan, b, pool, cpu, 2), {ref_mask::bottom_right});
    // The oracle reads the same rounded Q/K/V; what remains is the output's rounding to
    // the format (u) plus fp32 accumulation: within 4u of the row's magnitude.
    EXPECT_LT(e.rel_out, 4 * frugal::attention::unit_roundoff(dtype)) << frugal::attention::dtype_name(dtype);
    EXPECT_GT(e.rel_out, 0.0);
    EXPECT_LT(e.lse, 2e-5);
}

TEST(BatchAttention, Bf16AndFp16StorageWithinTheFormatsRoundingOfFloat64) {
    expect_within_format_rounding<bfloat16>(storage_dtype::bf16);
    expect_within_format_rounding<float16>(storage_dtype::f16);
}

using frugal::testing::error_of;

TEST(BatchAttention, BadInputGetsAClearErrorNamingTheValue) {
    const batch_data<float> b(mixed());
    const kv_pool<float> pool(b, false);
    // Page index out of range.
    auto bad_indices = pool.indices;
    bad_indices[3] = 9999;
    const auto t = pool.table();
    const auto msg = error_of([&] {
        (void)frugal::attention::paged_kv<const float>::separate(pool.k.data(), pool.v.data(), pool.pages, 2, 24,
                                                                 kv_layout::nhd, {t.indptr, bad_indices, t.last_page_len, 16});
    });
    EXPECT_NE(msg.find("indices[3] = 9999"), std::string::npos) << msg;
    // Last-page length above the page size.
    auto bad_last = pool.last;
    bad_last[1] = 17;
    const auto last_msg = error_of([&] {
        (void)frugal::attention::paged_kv<const float>::separate(pool.k.data(), pool.v.data(), pool.pages, 2, 24,
                                                                 kv_layout::nhd, {t.indptr, t.indices, bad_last, 16});
    });
    EXPECT_NE(last_msg.find("last_page_len[1] = 17"), std::string::npos) << last_msg;
    // KV heads that do not divide the query heads.
    auto shape = b.shape();
    shape.kv_heads = 3;
    const auto heads_msg = error_of([&] { (void)frugal::attention::batch::plan(shape, {}); });
    EXPECT_NE(heads_msg.find("kv_heads 3 does not divide q_heads 4"), std::string::npos) << heads_msg;
    // Offsets that do not increase.
    std::vector<std::size_t> indptr = b.qo_indptr;
    indptr[2] = indptr[1];
    shape = b.shape();
    shape.qo_indptr = indptr;
    const auto indptr_msg = error_of([&] { (void)frugal::attention::batch::plan(shape, {}); });
    EXPECT_NE(indptr_msg.find("qo_indptr[2] = " + std::to_string(indptr[2])), std::string::npos) << indptr_msg;
    // Dtype mismatch between the plan and the tensors.
    const auto plan = frugal::attention::batch::plan(b.shape(), {.dtype = storage_dtype::bf16});
    const auto dtype_msg = error_of([&] { (void)run_batch(plan, b, pool, cpu); });
    EXPECT_NE(dtype_msg.find("made for bf16 storage but the tensors hold f32"), std::string::npos) << dtype_msg;
    // A page table whose lengths differ from the plan's.
    auto other = b.spec;
    other.kv_lens[4] = 199;
    const batch_data<float> shorter(other);
    const auto len_msg = error_of([&] {
        (void)run_batch(frugal::attention::batch::plan(shorter.shape(), {}), b, pool, cpu);
    });
    EXPECT_NE(len_msg.find("sequence 4 has 200 keys"), std::string::npos) << len_msg;
}

TEST(BatchAttention, PlanSizesThatWouldWrapAreRefusedByName) {
    // 2^60 query heads of head_dim 1 pass the shape check (one token is 2^62 bytes), but the
    // prefill workspace (per query head of a group) wraps 64 bits.
    const std::vector<std::size_t> one_token{0, 1}, one_key{1};
    const frugal::attention::batch_shape heads{.q_heads = std::size_t(1) << 60, .kv_heads = 1, .head_dim = 1,
                                               .qo_indptr = one_token, .kv_lens = one_key};
    const auto ws_msg = error_of([&] { (void)frugal::attention::batch::plan(heads, {}); });
    EXPECT_NE(ws_msg.find("workspace floats"), std::string::npos) << ws_msg;
    // 2^31 KV heads over 2^40 keys in 128-key chunks: 2^64 work items, which wrapped to 0.
    const std::vector<std::size_t> long_key{std::size_t(1) << 40};
    const frugal::attention::batch_shape items{.q_heads = std::size_t(1) << 31, .kv_heads = std::size_t(1) << 31,
                                               .head_dim = 1, .qo_indptr = one_token, .kv_lens = long_key};
    const auto items_msg = error_of([&] {
        (void)frugal::attention::batch::plan(items, {.threads = 2, .kv_chunk = 1, .group_decode_heads = false});
    });
    EXPECT_NE(items_msg.find("work items"), std::string::npos) << items_msg;
    // A head dimension whose workspace no machine holds (it failed as bad_alloc).
    const std::vector<std::size_t> one_kv{4};
    const frugal::attention::batch_shape wide{.q_heads = 1, .kv_heads = 1, .head_dim = std::size_t(1) << 40,
                                              .qo_indptr = one_token, .kv_lens = one_kv};
    const auto dim_msg = error_of([&] { (void)frugal::attention::batch::plan(wide, {}); });
    EXPECT_NE(dim_msg.find("head_dim 1099511627776 is outside [1, 65536]"), std::string::npos) << dim_msg;
    // A worker count whose workspace slices alone would take gigabytes.
    const auto threads_msg = error_of([&] { (void)frugal::attention::batch::plan(heads, {.threads = 1000000}); });
    EXPECT_NE(threads_msg.find("threads 1000000 is outside [1, 4096]"), std::string::npos) << threads_msg;
}

TEST(Dtype, ConversionsRoundToNearestEvenAgainstAWideOracle) {
    // Every bf16 and fp16 value converts to float exactly and back to itself; rounding of
    // midpoints goes to even (checked against the value computed in double).
    for (std::uint32_t bits = 0; bits < 65536; ++bits) {
        const bfloat16 b{std::uint16_t(bits)};
        const float16 h{std::uint16_t(bits)};
        const float fb = b.to_float(), fh = h.to_float();
        if (!std::isnan(fb)) {
            EXPECT_EQ(bfloat16::from_float(fb).bits, bits);
        }
        if (!std::isnan(fh)) {
            EXPECT_EQ(float16::from_float(fh).bits, bits) << bits;
        }
        if ((bits & 0x7c00u) != 0x7c00u) {  // finite fp16: value = (-1)^s * m * 2^(e - 25)
            const int e = int(bits >> 10 & 31), m = int(bits & 1023);
            const double want = (bits & 0x8000u ? -1 : 1) * (e == 0 ? std::ldexp(m, -24) : std::ldexp(m + 1024, e - 25));
            ASSERT_EQ(double(fh), want) << bits;
        }
    }
    EXPECT_EQ(bfloat16::from_float(1.0f + 0x1p-8f).bits, bfloat16::from_float(1.0f).bits);    // tie to even
    EXPECT_EQ(bfloat16::from_float(1.0f + 0x1p-7f + 0x1p-8f).bits, 0x3f82);                   // tie to even (up)
    EXPECT_EQ(float16::from_float(65520.0f).bits, 0x7c00);                                     // rounds to inf
    EXPECT_EQ(float16::from_float(65519.0f).bits, 0x7bff);
    EXPECT_EQ(float16::from_float(0x1p-25f).bits, 0x0000);                                     // tie to even (0)
    EXPECT_EQ(float16::from_float(0x1.8p-25f).bits, 0x0001);
    EXPECT_TRUE(std::isnan(float16::from_float(NAN).to_float()));
    EXPECT_TRUE(std::isnan(bfloat16::from_float(NAN).to_float()));
    // The block conversions (the vector path this CPU runs: SSE2, AVX2 + F16C or AVX-512)
    // agree with the scalar ones bit for bit on every bf16 and fp16 pattern, NaNs included
    // (conversions_test.cpp checks every path the CPU runs).
    std::vector<bfloat16> all_b(65536 + 3);
    std::vector<float16> all_h(65536 + 3);
    for (std::uint32_t bits = 0; bits < all_b.size(); ++bits) all_b[bits].bits = all_h[bits].bits = std::uint16_t(bits);
    std::vector<float> wide_b(all_b.size()), wide_h(all_h.size());
    frugal::attention::to_floats(all_b.data(), wide_b.data(), all_b.size());  // not a multiple of 8: the tail too
    frugal::attention::to_floats(all_h.data(), wide_h.data(), all_h.size());
    const auto same = [](float got, float want) {
        return std::bit_cast<std::uint32_t>(got) == std::bit_cast<std::uint32_t>(want);
    };
    for (std::size_t i = 0; i < all_b.size(); ++i) {
        ASSERT_TRUE(same(wide_b[i], all_b[i].to_float())) << i;
        ASSERT_TRUE(same(wide_h[i], all_h[i].to_float())) << i;
    }
    // The block conversions agree with the scalar ones.
    const auto x = frugal::testing::normal_floats(1000, 5);
    std::vector<bfloat16> xb(x.size());
    std::vector<float16> xh(x.size());
    frugal::attention::from_floats(x.data(), xb.data(), x.size());
    frugal::attention::from_floats(x.data(), xh.data(), x.size());
    std::vector<float> back_b(x.size()), back_h(x.size());
    frugal::attention::to_floats(xb.data(), back_b.data(), x.size());
    frugal::attention::to_floats(xh.data(), back_h.data(), x.size());
    for (std::size_t i = 0; i < x.size(); ++i) {
        ASSERT_EQ(xb[i].bits, bfloat16::from_float(x[i]).bits) << i;
        ASSERT_EQ(xh[i].bits, float16::from_float(x[i]).bits) << i;
        ASSERT_EQ(back_b[i], xb[i].to_float());
        ASSERT_EQ(back_h[i], xh[i].to_float());
    }
}

}  // namespace
