#include <frugal/attention/out_of_core.hpp>
#include <frugal/sim/staged_attention.hpp>
#include <frugal/attention/tiled_attention.hpp>
#include <frugal/backend/eigen/attention_backend.hpp>

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <limits>
#include <string>
#include <vector>

#include "attention_reference.hpp"
#include "minimal_backend.hpp"

namespace {

using frugal::attention::attention_mask;
using frugal::attention::attention_options;
using frugal::attention::attention_shape;
using frugal::attention::causal_alignment;
using frugal::attention::heads_view;
using frugal::memory_budget;
using frugal::testing::ref_mask;
using frugal::testing::ref_mask_spec;

// A [tokens, heads, dim] tensor with `pad` NaN floats after each token's heads: a strided
// layout where reading outside the views would poison the result.
struct padded_tensor {
    std::size_t heads, tokens, dim, pad;
    std::vector<float> data;
    padded_tensor(std::size_t h, std::size_t t, std::size_t d, std::size_t p, unsigned seed)
        : heads(h), tokens(t), dim(d), pad(p), data(t * (h * d + p), std::numeric_limits<float>::quiet_NaN()) {
        const auto values = frugal::testing::normal_floats(h * t * d, seed);
        for (std::size_t i = 0; i < values.size(); ++i) at(i / (t * d), i / d % t, i % d) = values[i];
    }
    float& at(std::size_t h, std::size_t t, std::size_t c) { return data[t * (heads * dim + pad) + h * dim + c]; }
    [[nodiscard]] float get(std::size_t h, std::size_t t, std::size_t c) const {
        return data[t * (heads * dim + pad) + h * dim + c];
    }
    heads_view<float> view() { return {data.data(), heads, tokens, dim, dim, heads * dim + pad}; }
};

struct case_spec {
    attention_shape shape{};
    attention_mask mask{};
    ref_mask_spec ref{};
    std::size_t pad = 0;
    std::size_t threads = 1;
    std::size_t budget = 16u << 20;
    std::size_t q_tile = 16, kv_tile = 32;
    frugal::attention::softmax_base base = frugal::attention::softmax_base::e;
    bool staged = false;  // run HyperGen's staged baseline (budget = device limit) instead
    int streamed = 0;     // 1: out-of-core from host memory, 2: from a file (budget = whole workspace)
};

template <class Backend = frugal::eigen::attention_backend>
double max_error(const case_spec& c, double* lse_error = nullptr, Backend backend = {}) {
    const auto& sh = c.shape;
    padded_tensor q(sh.q_heads, sh.q_len, sh.head_dim, c.pad, 1), k(sh.kv_heads, sh.kv_len, sh.head_dim, c.pad, 2),
        v(sh.kv_heads, sh.kv_len, sh.head_dim, c.pad, 3), out(sh.q_heads, sh.q_len, sh.head_dim, c.pad, 4);
    std::vector<float> lse(sh.q_heads * sh.q_len, std::numeric_limits<float>::quiet_NaN());
    attention_options opt{.mask = c.mask, .lse_base = c.base, .threads = c.threads, .q_tile = c.q_tile,
                          .kv_tile = c.kv_tile};
    if (c.streamed != 0) {
        const auto plan = frugal::attention::out_of_core::plan(sh, opt, memory_budget(c.budget));
        EXPECT_LE(plan.workspace_bytes(), c.budget);
        EXPECT_LT(plan.kv_block, sh.kv_len);  // the test budgets really force streaming
        const auto lv = frugal::matrix_view<float>(lse.data(), sh.q_heads, sh.q_len);
        if (c.streamed == 1) {
            frugal::attention::memory_kv_source src(k.view(), v.view());
            frugal::attention::out_of_core::run(plan, backend, q.view(), src, out.view(), lv);
        } else {
            const auto path = std::filesystem::path(::testing::TempDir()) / "frugal_attention_stream.kv";
            frugal::attention::write_kv_file(path, k.view(), v.view());
            frugal::attention::file_kv_source src(path, sh.kv_heads, sh.kv_len, sh.head_dim);
            frugal::attention::out_of_core::run(plan, backend, q.view(), src, out.view(), lv);
            std::filesystem::remove(path);
        }
    } else if (c.staged) {
        const auto plan = frugal::sim::staged_attention::plan(sh, opt, memory_budget(c.budget));
        EXPECT_LE(plan.device_bytes(), c.budget);
        frugal::sim::staged_attention::run(plan, backend, q.view(), k.view(), v.view(), out.view());
    } else {
        const auto plan = frugal::attention::tiled::plan(sh, opt, memory_budget(c.budget));
        EXPECT_LE(plan.workspace_bytes(), c.budget);
        frugal::attention::tiled::run(plan, backend, q.view(), k.view(), v.view(), out.view(),
                                     frugal::matrix_view<float>(lse.data(), sh.q_heads, sh.q_len));
    }
    const auto want = frugal::testing::ref_attention(
        sh.q_heads, sh.kv_heads, sh.q_len, sh.kv_len, sh.head_dim, 1.0 / std::sqrt(double(sh.head_dim)), c.ref,
        [&](auto h, auto t, auto x) { return q.get(h, t, x); }, [&](auto h, auto t, auto x) { return k.get(h, t, x); },
        [&](auto h, auto t, auto x) { return v.get(h, t, x); });
    double err = 0, lerr = 0;
    for (std::size_t h = 0; h < sh.q_heads; ++h)
        for (std::size_t i = 0; i < sh.q_len; ++i) {
            for (std::size_t x = 0; x < sh.head_dim; ++x) {
                const double d = std::abs(out.get(h, i, x) - want.out[(h * sh.q_len + i) * sh.head_dim + x]);
                err = std::isnan(d) ? INFINITY : std::max(err, d);
            }
            const double wl = want.lse[h * sh.q_len + i];
            const double got = lse[h * sh.q_len + i];
            const double conv = c.base == frugal::attention::softmax_base::two ? std::log(2.0) : 1.0;
            if (c.staged) continue;  // the staged baseline has no LSE output
            if (std::isinf(wl)) {
                if (got != -INFINITY) lerr = INFINITY;
            } else {
                lerr = std::max(lerr, std::isnan(got) ? INFINITY : std::abs(got * conv - wl));
            }
        }
    // The padding between tokens is never written.
    for (std::size_t t = 0; t < sh.q_len; ++t)
        for (std::size_t p = 0; p < c.pad; ++p) EXPECT_TRUE(std::isnan(out.data[t * (sh.q_heads * sh.head_dim + c.pad) + sh.q_heads * sh.head_dim + p]));
    if (lse_error != nullptr) *lse_error = lerr;
    return err;
}

attention_shape shape(std::size_t hq, std::size_t hkv, std::size_t sq, std::size_t skv, std::size_t d) {
    return {.q_heads = hq, .kv_heads = hkv, .q_len = sq, .kv_len = skv, .head_dim = d};
}

TEST(TiledAttention, MatchesFloat64ForEveryMaskAlignmentAndWindow) {
    struct m {
        attention_mask mask;
        ref_mask_spec ref;
    };
    const std::vector<m> masks = {
        {attention_mask::none(), {ref_mask::none}},
        {attention_mask::causal(causal_alignment::top_left), {ref_mask::top_left}},
        {attention_mask::causal(causal_alignment::bottom_right), {ref_mask::bottom_right}},
        {attention_mask::causal(causal_alignment::offset, 40), {ref_mask::offset, 40}},
        {attention_mask::sliding_window(23, causal_alignment::bottom_right), {ref_mask::bottom_right, 0, 23}},
        {attention_mask::sliding_window(5, causal_alignment::top_left), {ref_mask::top_left, 0, 5}},
    };
    for (const auto& mk : masks)
        for (auto [sq, skv] : {std::pair<std::size_t, std::size_t>{70, 70}, {37, 101}, {101, 37}}) {
            double lse_err = 0;
            const double err = max_error({.shape = shape(2, 1, sq, skv, 32), .mask = mk.mask, .ref = mk.ref},
                                         &lse_err);
            EXPECT_LT(err, 2e-5) << "sq " << sq << " skv " << skv << " window " << mk.mask.window;
            EXPECT_LT(lse_err, 2e-5) << "sq " << sq << " skv " << skv;
        }
}

TEST(TiledAttention, OddHeadDimsAndGroupedQueryHeads) {
    for (std::size_t d : {72, 80, 96, 112, 1, 7}) {
        EXPECT_LT(max_error({.shape = shape(4, 2, 45, 77, d), .mask = attention_mask::causal(),
                             .ref = {ref_mask::bottom_right}}),
                  2e-5)
            << "d " << d;
    }
    EXPECT_LT(max_error({.shape = shape(6, 1, 33, 50, 16)}), 2e-5);  // MQA
    EXPECT_LT(max_error({.shape = shape(6, 3, 33, 50, 16)}), 2e-5);  // GQA, 2 per group
}

TEST(TiledAttention, StridedViewsWithPaddingAndLseInBothBases) {
    double lse_err = 0;
    EXPECT_LT(max_error({.shape = shape(3, 3, 29, 64, 24), .mask = attention_mask::causal(causal_alignment::top_left),
                         .ref = {ref_mask::top_left}, .pad = 5, .base = frugal::attention::softmax_base::two},
                        &lse_err),
              2e-5);
    EXPECT_LT(lse_err, 2e-5);
}

TEST(TiledAttention, ThreadsAndBudgetsDoNotChangeTheAnswer) {
    // Tiny budgets force 1-row tiles; several threads share the work.
    for (std::size_t threads : {1, 3})
        for (std::size_t budget : {std::size_t(16u << 20), std::size_t(700), frugal::attention::attention_plan::minimum_bytes()}) {
            EXPECT_LT(max_error({.shape = shape(2, 2, 19, 40, 8), .mask = attention_mask::causal(),
                                 .ref = {ref_mask::bottom_right}, .threads = threads, .budget = budget}),
                      2e-5)
                << threads << " threads, budget " << budget;
        }
}

TEST(TiledAttention, ResultIsBitwiseIdenticalForAnyThreadCount) {
    const auto sh = shape(4, 2, 150, 150, 40);
    std::vector<std::vector<float>> results;
    for (std::size_t threads : {1, 2, 4}) {
        padded_tensor q(4, 150, 40, 0, 1), k(2, 150, 40, 0, 2), v(2, 150, 40, 0, 3), out(4, 150, 40, 0, 4);
        const auto plan = frugal::attention::tiled::plan(
            sh, {.mask = attention_mask::causal(), .threads = threads, .q_tile = 32, .kv_tile = 64},
            memory_budget::mib(1));
        EXPECT_EQ(plan.workers(), threads);
        frugal::attention::tiled::run(plan, frugal::eigen::attention_backend{}, q.view(), k.view(), v.view(),
                                     out.view());
        results.push_back(out.data);
    }
    EXPECT_EQ(results[0], results[1]);
    EXPECT_EQ(results[0], results[2]);
    // The caller's executor: the calling thread alone, or a pool of its own.
    padded_tensor q(4, 150, 40, 0, 1), k(2, 150, 40, 0, 2), v(2, 150, 40, 0, 3), out(4, 150, 40, 0, 4);
    const auto plan = frugal::attention::tiled::plan(
        sh, {.mask = attention_mask::causal(), .threads = 3, .q_tile = 32, .kv_tile = 64}, memory_budget::mib(1));
    std::vector<float> ws(plan.workspace_bytes() / sizeof(float));
    frugal::inline_executor serial;
    frugal::attention::tiled::run(plan, frugal::eigen::attention_backend{}, q.view(), k.view(), v.view(), out.view(), {},
                                  std::span<float>(ws), serial);
    EXPECT_EQ(out.data, results[0]);
    frugal::thread_pool pool(3);
    frugal::attention::tiled::run(plan, frugal::eigen::attention_backend{}, q.view(), k.view(), v.view(), out.view(), {},
                                  std::span<float>(ws), pool);
    EXPECT_EQ(out.data, results[0]);
}

TEST(TiledAttention, RunsOnAMinimalGemmOnlyBackend) {
    EXPECT_LT(max_error<example::minimal_backend>({.shape = shape(2, 1, 21, 33, 12),
                                                   .mask = attention_mask::sliding_window(9),
                                                   .ref = {ref_mask::bottom_right, 0, 9}}),
              2e-5);
}

TEST(TiledAttention, PlanFitsTheBudgetAndReportsTheExactWorkspace) {
    const auto sh = shape(8, 8, 4096, 4096, 128);
    const auto plan = frugal::attention::tiled::plan(sh, {.threads = 2, .q_tile = 128, .kv_tile = 512},
                                                    memory_budget::mib(16));
    EXPECT_EQ(plan.q_tile(), 128u);
    EXPECT_EQ(plan.kv_tile(), 512u);
    EXPECT_EQ(plan.workers(), 2u);
    EXPECT_EQ(plan.workspace_bytes(), 2u * (128u * 512u + 3u * 128u) * 4u);  // 128*515 is a multiple of 16
    const auto small = frugal::attention::tiled::plan(sh, {.threads = 2}, memory_budget(64 * 1024));
    EXPECT_LE(small.workspace_bytes(), 64u * 1024u);
    EXPECT_LT(small.kv_tile(), frugal::attention::attention_options{}.kv_tile);
}

TEST(TiledAttention, BadInputGetsAClearError) {
    const auto sh = shape(4, 2, 8, 8, 4);
    EXPECT_THROW((void)frugal::attention::tiled::plan(shape(4, 3, 8, 8, 4), {}, memory_budget::mib(1)),
                 frugal::invalid_argument);
    EXPECT_THROW((void)frugal::attention::tiled::plan(shape(4, 2, 0, 8, 4), {}, memory_budget::mib(1)),
                 frugal::invalid_argument);
    try {
        (void)frugal::attention::tiled::plan(sh, {}, memory_budget(32));
        FAIL() << "a 32-byte budget was accepted";
    } catch (const frugal::invalid_argument& e) {
        EXPECT_NE(std::string(e.what()).find(std::to_string(frugal::attention::attention_plan::minimum_bytes())),
                  std::string::npos)
            << e.what();
    }
    const auto plan = frugal::attention::tiled::plan(sh, {}, memory_budget::mib(1));
    padded_tensor q(4, 8, 4, 0, 1), k(2, 8, 4, 0, 2), v(2, 8, 4, 0, 3), out(4, 8, 4, 0, 4), wrong(4, 9, 4, 0, 5);
    const frugal::eigen::attention_backend cpu;
    EXPECT_THROW(frugal::attention::tiled::run(plan, cpu, q.view(), k.view(), v.view(), wrong.view()),
                 frugal::invalid_argument);
    EXPECT_THROW(frugal::attention::tiled::run(plan, cpu, q.view(), q.view(), v.view(), out.view()),
                 frugal::invalid_argument);
    std::vector<float> lse(3);
    EXPECT_THROW(frugal::attention::tiled::run(plan, cpu, q.view(), k.view(), v.view(), out.view(),
                                              frugal::matrix_view<float>(lse.data(), 1, 3)),
                 frugal::invalid_argument);
    std::vector<float> ws(1);
    EXPECT_THROW(frugal::attention::tiled::run(plan, cpu, q.view(), k.view(), v.view(), out.view(), {},
                                              std::span<float>(ws)),
                 frugal::invalid_argument);
    EXPECT_THROW((void)heads_view<float>(q.data.data(), 4, 8, 4, 4, 3), frugal::invalid_argument);
}

TEST(TiledAttention, PlanSizesThatWouldWrapAreRejected) {
    // Issue 23 item 4: the public constructor computed q_tile * kv_tile and the workspace
    // unchecked, so a 2^60 head dimension or tile reported a tiny workspace and run overran it.
    const std::size_t huge = std::size_t(1) << 60;
    try {
        (void)frugal::attention::attention_plan(shape(1, 1, 15, 4, huge), {}, 4, 4, 1);
        FAIL() << "a 2^60 head dimension was accepted";
    } catch (const frugal::invalid_argument& e) {
        EXPECT_NE(std::string(e.what()).find("head_dim"), std::string::npos) << e.what();
        EXPECT_NE(std::string(e.what()).find(std::to_string(huge)), std::string::npos) << e.what();
    }
    try {
        (void)frugal::attention::attention_plan(shape(1, 1, 15, 4, 4), {}, huge, 4, 1);
        FAIL() << "a 2^60 query tile was accepted";
    } catch (const frugal::invalid_argument& e) {
        EXPECT_NE(std::string(e.what()).find(std::to_string(huge)), std::string::npos) << e.what();
    }
    const auto ok = frugal::attention::attention_plan(shape(1, 1, 15, 4, 4), {}, 15, 4, 3);
    EXPECT_EQ(ok.workspace_bytes(), 3u * 112u * 4u);  // 15 * 4 + 3 * 15 = 105 floats, padded to 112
}

TEST(StagedAttention, MatchesFloat64UnderSmallDeviceLimits) {
    // Limits that force 1-row and few-row groups; causal with more keys than queries.
    for (std::size_t limit : {std::size_t(2 * 90 * 4), std::size_t(4000), std::size_t(1u << 20)})
        for (std::size_t threads : {1, 2}) {
            EXPECT_LT(max_error({.shape = shape(4, 2, 31, 90, 24), .mask = attention_mask::causal(),
                                 .ref = {ref_mask::bottom_right}, .pad = 3, .threads = threads,
                                 .budget = limit * threads, .staged = true}),
                      2e-5)
                << "limit " << limit << " threads " << threads;
        }
    EXPECT_LT(max_error({.shape = shape(2, 2, 20, 20, 8), .staged = true}), 2e-5);
}

TEST(StagedAttention, PlanSizesGroupsToTheLimitAndNamesTheMinimum) {
    const auto sh = shape(2, 2, 100, 50, 10);
    const auto p = frugal::sim::staged_attention::plan(sh, {}, memory_budget(4000));
    EXPECT_EQ(p.score_rows, 4000u / 4 / 50);
    EXPECT_EQ(p.softmax_rows, 4000u / 4 / 100);
    EXPECT_EQ(p.output_rows, 4000u / 4 / 60);
    EXPECT_EQ(p.host_bytes(), 2u * 100 * 50 * 4);
    try {
        (void)frugal::sim::staged_attention::plan(sh, {}, memory_budget(399));
        FAIL();
    } catch (const frugal::invalid_argument& e) {
        EXPECT_NE(std::string(e.what()).find("400"), std::string::npos) << e.what();
    }
}

TEST(OutOfCoreAttention, StreamedKvBlocksMatchFloat64FromMemoryAndFromAFile) {
    for (int streamed : {1, 2}) {
        double lse_err = 0;
        // Budget: row states (2 * group * q_len floats) + a small tile workspace + a few KV rows.
        EXPECT_LT(max_error({.shape = shape(4, 2, 40, 150, 16), .mask = attention_mask::causal(),
                             .ref = {ref_mask::bottom_right}, .pad = 2, .threads = 2, .budget = 6000,
                             .streamed = streamed},
                            &lse_err),
                  2e-5)
            << "source " << streamed;
        EXPECT_LT(lse_err, 2e-5);
        EXPECT_LT(max_error({.shape = shape(2, 2, 60, 60, 8), .mask = attention_mask::sliding_window(7),
                             .ref = {ref_mask::bottom_right, 0, 7}, .budget = 3000, .streamed = streamed}),
                  2e-5);
    }
}

TEST(OutOfCoreAttention, PrefixPlusSuffixMergedEqualsFullCausalAttention) {
    // A cached prefix (on disk) and a new suffix: suffix queries see every prefix key and
    // their own keys causally. Two partial results merged == causal attention over both.
    const std::size_t heads = 2, prefix = 70, suffix = 25, d = 16;
    padded_tensor q(heads, suffix, d, 0, 1), k(heads, prefix + suffix, d, 0, 2), v(heads, prefix + suffix, d, 0, 3);
    const auto kv_part = [&](padded_tensor& t, std::size_t b, std::size_t n) {
        return heads_view<const float>(t.data.data() + b * heads * d, heads, n, d, d, heads * d);
    };
    const auto path = std::filesystem::path(::testing::TempDir()) / "frugal_attention_prefix.kv";
    frugal::attention::write_kv_file(path, kv_part(k, 0, prefix), kv_part(v, 0, prefix));
    frugal::attention::file_kv_source cached(path, heads, prefix, d);

    std::vector<float> out(heads * suffix * d), lse(heads * suffix), own(heads * suffix * d), own_lse(heads * suffix);
    const auto ov = heads_view<float>::head_major(out.data(), heads, suffix, d);
    const auto own_v = heads_view<float>::head_major(own.data(), heads, suffix, d);
    const frugal::eigen::attention_backend cpu;
    const attention_shape prefix_shape = shape(heads, heads, suffix, prefix, d);
    frugal::attention::out_of_core::run(frugal::attention::out_of_core::plan(prefix_shape, {}, memory_budget(4000)), cpu,
                                       q.view(), cached, ov, frugal::matrix_view<float>(lse.data(), heads, suffix));
    const attention_shape suffix_shape = shape(heads, heads, suffix, suffix, d);
    frugal::attention::tiled::run(
        frugal::attention::tiled::plan(suffix_shape, {.mask = attention_mask::causal(causal_alignment::top_left)},
                                      memory_budget::mib(1)),
        cpu, q.view(), kv_part(k, prefix, suffix), kv_part(v, prefix, suffix), own_v,
        frugal::matrix_view<float>(own_lse.data(), heads, suffix));
    frugal::attention::out_of_core::merge_partial<frugal::attention::softmax_base::e>(
        ov, frugal::matrix_view<float>(lse.data(), heads, suffix), own_v,
        frugal::matrix_view<const float>(own_lse.data(), heads, suffix));
    std::filesystem::remove(path);

    const auto want = frugal::testing::ref_attention(
        heads, heads, suffix, prefix + suffix, d, 1.0 / std::sqrt(double(d)), {ref_mask::bottom_right},
        [&](auto h, auto t, auto x) { return q.get(h, t, x); }, [&](auto h, auto t, auto x) { return k.get(h, t, x); },
        [&](auto h, auto t, auto x) { return v.get(h, t, x); });
    for (std::size_t i = 0; i < out.size(); ++i) ASSERT_NEAR(out[i], want.out[i], 2e-5) << i;
    for (std::size_t i = 0; i < lse.size(); ++i) ASSERT_NEAR(lse[i], want.lse[i], 2e-5) << i;
}

TEST(OutOfCoreAttention, BadInputGetsAClearError) {
    const auto sh = shape(2, 1, 10, 30, 4);
    try {
        (void)frugal::attention::out_of_core::plan(sh, {}, memory_budget(100));
        FAIL();
    } catch (const frugal::invalid_argument& e) {
        const std::size_t minimum = 2 * 2 * 10 * 4 + frugal::attention::attention_plan::minimum_bytes() + 2 * 4 * 4;
        EXPECT_NE(std::string(e.what()).find(std::to_string(minimum)), std::string::npos) << e.what();
    }
    padded_tensor k(1, 30, 4, 0, 2), v(1, 30, 4, 0, 3), q(2, 10, 4, 0, 1), out(2, 10, 4, 0, 4);
    const auto path = std::filesystem::path(::testing::TempDir()) / "frugal_attention_bad.kv";
    frugal::attention::write_kv_file(path, k.view(), v.view());
    EXPECT_THROW(frugal::attention::file_kv_source(path, 1, 31, 4), frugal::runtime_error);  // the file is too short
    frugal::attention::file_kv_source wrong(path, 2, 15, 4);
    {
        // Issue 23 item 6: an empty file was accepted as 2^31 x 2^31 (the expected size wrapped to 0).
        const auto empty = std::filesystem::path(::testing::TempDir()) / "frugal_attention_empty.kv";
        std::fclose(std::fopen(empty.string().c_str(), "wb"));
        try {
            frugal::attention::file_kv_source src(empty, 1, std::size_t(1) << 31, std::size_t(1) << 31);
            FAIL() << "an empty file was accepted as 2^31 x 2^31";
        } catch (const frugal::error& e) {
            EXPECT_NE(std::string(e.what()).find("2147483648"), std::string::npos) << e.what();
        }
        std::filesystem::remove(empty);
    }
    const auto plan = frugal::attention::out_of_core::plan(sh, {}, memory_budget::mib(1));
    EXPECT_THROW(frugal::attention::out_of_core::run(plan, frugal::eigen::attention_backend{}, q.view(), wrong,
                                                    out.view()),
                 frugal::invalid_argument);
    std::filesystem::remove(path);
    EXPECT_THROW(frugal::attention::file_kv_source(path, 1, 30, 4), frugal::runtime_error);  // gone
}

}  // namespace
