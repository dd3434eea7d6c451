#include <frugal/attention/batch_attention.hpp>
#include <frugal/attention/kv_quantization.hpp>
#include <frugal/backend/eigen/attention_backend.hpp>

#include <gtest/gtest.h>

#include "frugal_test_errors.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

#include "batch_fixture.hpp"
#include "minimal_backend.hpp"

// 8-bit K/V (FP8 E4M3, E5M2, int8) written by quantize_into and read by batch attention,
// against float64 attention on the dequantized K/V (what the cache holds) and on the
// original K/V (what quantization costs); and token-major pages against head-major ones.

namespace {

namespace fa = frugal::attention;
using fa::attention_mask;
using fa::bfloat16;
using fa::kv_layout;
using fa::scale_granularity;
using fa::storage_dtype;
using frugal::testing::batch_data;
using frugal::testing::batch_spec;
using frugal::testing::ref_mask;

const frugal::eigen::attention_backend cpu;

// Decodes, a speculative-verify step and prefill chunks, ragged, GQA 2.
batch_spec mixed(kv_layout layout) {
    return {.q_lens = {1, 40, 3, 1, 17}, .kv_lens = {300, 70, 45, 1, 200}, .q_heads = 4, .kv_heads = 2,
            .head_dim = 32, .page_size = 16, .layout = layout};
}

// An 8-bit page pool of a batch, filled through quantize_into token by token (as an engine
// appends), with its scales; `dequantized` gives back what the cache holds, as the batch's
// [kv_heads][kv_len][d] layout.
template <class KV>
struct quantized_pool {
    std::vector<std::int32_t> indptr{0}, indices, last;
    std::vector<KV> k, v;
    std::vector<float> k_scale, v_scale;
    std::size_t pages = 0;
    batch_spec spec;
    scale_granularity granularity;

    quantized_pool(const batch_data<bfloat16>& b, scale_granularity g) : spec(b.spec), granularity(g) {
        for (std::size_t n : spec.kv_lens) {
            const std::size_t p = (n + spec.page_size - 1) / spec.page_size;
            indptr.push_back(indptr.back() + std::int32_t(p));
            last.push_back(std::int32_t(n - (p - 1) * spec.page_size));
        }
        pages = std::size_t(indptr.back());
        indices.resize(pages);
        std::iota(indices.begin(), indices.end(), 0);
        std::shuffle(indices.begin(), indices.end(), std::mt19937(spec.seed + 7));
        const std::size_t h = spec.kv_heads, d = spec.head_dim;
        k.resize(pages * spec.page_size * h * d);
        v.resize(k.size());
        const std::size_t scales = g == scale_granularity::tensor ? 1 : g == scale_granularity::head ? h : pages * spec.page_size * h;
        k_scale.assign(scales, 0.0f);
        v_scale.assign(scales, 0.0f);
        if (g != scale_granularity::token) {
            // Calibrated as an engine does: the largest magnitude over the batch maps to the
            // format's largest value.
            for (std::size_t s = 0; s < spec.kv_lens.size(); ++s)
                for (std::size_t i = 0; i < b.k[s].size(); ++i) {
                    const std::size_t head = g == scale_granularity::head ? i / (spec.kv_lens[s] * d) : 0;
                    k_scale[head] = std::max(k_scale[head], std::abs(b.k[s][i]) / fa::quantized_max<KV>);
                    v_scale[head] = std::max(v_scale[head], std::abs(b.v[s][i]) / fa::quantized_max<KV>);
                }
        }
        const auto kv = writable();
        std::vector<float> krow(h * d), vrow(h * d);
        for (std::size_t s = 0; s < spec.kv_lens.size(); ++s)
            for (std::size_t t = 0; t < spec.kv_lens[s]; ++t) {
                for (std::size_t hh = 0; hh < h; ++hh)
                    for (std::size_t c = 0; c < d; ++c) {
                        krow[hh * d + c] = b.k[s][(hh * spec.kv_lens[s] + t) * d + c];
                        vrow[hh * d + c] = b.v[s][(hh * spec.kv_lens[s] + t) * d + c];
                    }
                fa::quantize_into(kv, s, t, std::span<const float>(krow), std::span<const float>(vrow));
            }
    }
    [[nodiscard]] fa::page_table table() const { return {indptr, indices, last, spec.page_size}; }
    [[nodiscard]] fa::paged_kv<KV> writable() {
        return fa::paged_kv<KV>::separate(k.data(), v.data(), pages, spec.kv_heads, spec.head_dim, spec.layout, table())
            .with_scales({granularity, k_scale.data(), v_scale.data()});
    }
    [[nodiscard]] fa::paged_kv<const KV> view() const {
        return fa::paged_kv<const KV>::separate(k.data(), v.data(), pages, spec.kv_heads, spec.head_dim, spec.layout,
                                                table())
            .with_scales({granularity, k_scale.data(), v_scale.data()});
    }
    // The batch with its K/V replaced by what the cache holds.
    [[nodiscard]] batch_data<bfloat16> dequantized(batch_data<bfloat16> b) const {
        const auto kv = view();
        const std::size_t d = spec.head_dim;
        for (std::size_t s = 0; s < spec.kv_lens.size(); ++s)
            for (std::size_t hh = 0; hh < spec.kv_heads; ++hh)
                for (std::size_t t = 0; t < spec.kv_lens[s]; ++t) {
                    const std::size_t page = kv.table().page_of(s, t), r = t % spec.page_size;
                    const std::size_t at = kv.geometry().row_offset(page, hh, r);
                    for (std::size_t c = 0; c < d; ++c) {
                        const std::size_t i = (hh * spec.kv_lens[s] + t) * d + c;
                        b.k[s][i] = fa::to_float(k[at + c]) * kv.k_scale(page, hh, r);
                        b.v[s][i] = fa::to_float(v[at + c]) * kv.v_scale(page, hh, r);
                    }
                }
        return b;
    }
};

template <class KV, class Backend>
frugal::testing::batch_result run_quantized(const fa::batch_plan& plan, const batch_data<bfloat16>& b,
                                            const fa::paged_kv<const KV>& kv, const Backend& backend) {
    const std::size_t tokens = b.tokens(), hq = b.spec.q_heads, d = b.spec.head_dim;
    std::vector<bfloat16> out(tokens * hq * d);
    frugal::testing::batch_result r{{}, std::vector<float>(hq * tokens)};
    std::vector<float> ws(plan.workspace_bytes() / sizeof(float), std::numeric_limits<float>::quiet_NaN());
    frugal::thread_pool threads(2);
    fa::batch::run(plan, backend, b.q_view(), kv, fa::heads_view<bfloat16>::token_major(out.data(), tokens, hq, d),
                   frugal::matrix_view<float>(r.lse.data(), hq, tokens), std::span<float>(ws), threads);
    for (const bfloat16& x : out) r.out.push_back(x.to_float());
    return r;
}

// The bound quantization implies for a query row against the original K/V: with every
// score moved by at most D (= max |q . (k' - k)| x scale) the softmax weights move by a
// factor within e^(+-2D), so the output moves by at most max|v' - v| + (e^(2D) - 1) max|v|.
double implied_bound(const batch_data<bfloat16>& original, const batch_data<bfloat16>& held) {
    double worst = 0;
    const std::size_t hq = original.spec.q_heads, g = hq / original.spec.kv_heads, d = original.spec.head_dim;
    const double scale = 1.0 / std::sqrt(double(d));
    for (std::size_t s = 0; s < original.spec.kv_lens.size(); ++s) {
        const std::size_t n = original.spec.kv_lens[s];
        double dv = 0, vmax = 0, ds = 0;
        for (std::size_t i = 0; i < original.v[s].size(); ++i) {
            dv = std::max(dv, std::abs(double(held.v[s][i]) - original.v[s][i]));
            vmax = std::max(vmax, std::abs(double(original.v[s][i])));
        }
        for (std::size_t h = 0; h < hq; ++h)
            for (std::size_t i = 0; i < original.spec.q_lens[s]; ++i)
                for (std::size_t j = 0; j < n; ++j) {
                    double dot = 0;
                    for (std::size_t c = 0; c < d; ++c) {
                        const std::size_t at = ((h / g) * n + j) * d + c;
                        dot += double(original.qf[((original.qo_indptr[s] + i) * hq + h) * d + c]) *
                               (double(held.k[s][at]) - original.k[s][at]);
                    }
                    ds = std::max(ds, std::abs(dot) * scale);
                }
        worst = std::max(worst, dv + std::expm1(2 * ds) * vmax);
    }
    return worst;
}

template <class KV>
void expect_quantized_decode_matches_float64() {
    const double bf16_bound = 4 * fa::unit_roundoff(storage_dtype::bf16);  // the bf16 path's (batch_attention_test)
    for (kv_layout layout : {kv_layout::nhd, kv_layout::hnd})
        for (scale_granularity g : {scale_granularity::tensor, scale_granularity::head, scale_granularity::token}) {
            const batch_data<bfloat16> b(mixed(layout));
            const quantized_pool<KV> pool(b, g);
            const auto plan = fa::batch::plan(b.shape(), {.mask = attention_mask::causal(), .dtype = storage_dtype::bf16,
                                                          .kv_dtype = fa::dtype_of<KV>, .threads = 2, .q_tile = 16,
                                                          .kv_tile = 32, .kv_chunk = 64});
            ASSERT_FALSE(plan.merges().empty());
            const auto held = pool.dequantized(b);
            const std::string what = std::string(fa::dtype_name(fa::dtype_of<KV>)) + " layout " +
                                     std::to_string(int(layout)) + " scales " + std::to_string(int(g));
            for (const auto& got : {run_quantized<KV>(plan, b, pool.view(), cpu),
                                    run_quantized<KV>(plan, b, pool.view(), example::minimal_backend{})}) {
                // Against what the cache holds: the bf16 path's accuracy, within 2x its bound.
                const auto e = frugal::testing::compare(held, got, {ref_mask::bottom_right});
                EXPECT_LT(e.rel_out, 2 * bf16_bound) << what;
                EXPECT_LT(e.lse, 1e-4) << what;
                // Against the original K/V: what the format's rounding implies (plus bf16's
                // output rounding), and no better than bf16 could make it.
                const auto q = frugal::testing::compare(b, got, {ref_mask::bottom_right});
                const double implied = implied_bound(b, held);
                EXPECT_LT(q.out, implied + 2 * bf16_bound) << what;
                EXPECT_GT(q.out, 0.0) << what;
            }
        }
}

TEST(QuantizedKv, Fp8E4m3DecodeAndPrefillMatchFloat64OnWhatTheCacheHolds) {
    expect_quantized_decode_matches_float64<fa::float8_e4m3>();
}
TEST(QuantizedKv, Fp8E5m2DecodeAndPrefillMatchFloat64OnWhatTheCacheHolds) {
    expect_quantized_decode_matches_float64<fa::float8_e5m2>();
}
TEST(QuantizedKv, Int8DecodeAndPrefillMatchFloat64OnWhatTheCacheHolds) {
    expect_quantized_decode_matches_float64<std::int8_t>();
}

TEST(QuantizedKv, QuantizeIntoRoundsEachValueWithinHalfAStepOfItsScale) {
    const batch_data<bfloat16> b(mixed(kv_layout::nhd));
    const quantized_pool<std::int8_t> i8(b, scale_granularity::token);
    const quantized_pool<fa::float8_e4m3> e4(b, scale_granularity::head);
    const auto held8 = i8.dequantized(b), held4 = e4.dequantized(b);
    for (std::size_t s = 0; s < b.k.size(); ++s)
        for (std::size_t i = 0; i < b.k[s].size(); ++i) {
            const std::size_t row = i / b.spec.head_dim, d = b.spec.head_dim;
            float amax = 0;  // per token and head: the row's largest magnitude is 127 steps
            for (std::size_t c = 0; c < d; ++c) amax = std::max(amax, std::abs(b.k[s][row * d + c]));
            EXPECT_LE(std::abs(held8.k[s][i] - b.k[s][i]), 0.5 * amax / 127 * (1 + 1e-4)) << s << " " << i;
            // E4M3 at a calibrated scale: relative 2^-4 for normals, else half the smallest subnormal step.
            const double step = std::max(std::abs(double(b.k[s][i])) * 0x1p-4, 0x1p-10 * e4.k_scale[i / (b.spec.kv_lens[s] * d)]);
            EXPECT_LE(std::abs(double(held4.k[s][i]) - b.k[s][i]), step * (1 + 1e-4)) << s << " " << i;
        }
}

// Token-major pages read in the same order as head-major ones: the same bits for the same
// decode step, for the 16-bit formats and the 8-bit ones, decode items over all KV heads or
// one each.
template <class T>
void expect_layouts_give_the_same_bits() {
    for (bool grouped : {true, false}) {
        batch_spec spec = mixed(kv_layout::nhd);
        spec.q_heads = 16;
        spec.kv_heads = 4;  // GQA 4
        spec.head_dim = 64;
        const batch_data<T> nhd(spec);
        spec.layout = kv_layout::hnd;
        const batch_data<T> hnd(spec);
        const frugal::testing::kv_pool<T> pn(nhd, false), ph(hnd, false);
        const auto plan =
            fa::batch::plan(nhd.shape(), {.mask = attention_mask::causal(), .dtype = fa::dtype_of<T>, .threads = 2,
                                          .kv_block = 64, .kv_chunk = 128, .group_decode_heads = grouped});
        const auto a = frugal::testing::run_batch(plan, nhd, pn, cpu, 2), b = frugal::testing::run_batch(plan, hnd, ph, cpu, 2);
        EXPECT_EQ(a.out, b.out) << fa::dtype_name(fa::dtype_of<T>) << " grouped " << grouped;
        EXPECT_EQ(a.lse, b.lse);
    }
}

// With kv_block unset, decode over token-major pages of 16- or 32-bit rows read for several
// KV heads at once steps 64 keys (half the default); 8-bit rows, head-major pages and items
// of one KV head step 128: each gives the bits of a plan that sets that step. In fp32 the
// other step gives other bits (16-bit outputs may round the difference away).
template <class T>
void expect_default_step(kv_layout layout, bool grouped, std::size_t step) {
    batch_spec spec = mixed(layout);
    spec.q_heads = 16;
    spec.kv_heads = 4;
    const batch_data<T> b(spec);
    const frugal::testing::kv_pool<T> pool(b, false);
    fa::batch_options opt{.mask = attention_mask::causal(), .dtype = fa::dtype_of<T>, .threads = 2, .kv_chunk = 256,
                          .group_decode_heads = grouped};
    const auto by_default = frugal::testing::run_batch(fa::batch::plan(b.shape(), opt), b, pool, cpu, 2);
    opt.kv_block = step;
    const auto set = frugal::testing::run_batch(fa::batch::plan(b.shape(), opt), b, pool, cpu, 2);
    opt.kv_block = 192 - step;  // the other of 64 and 128: the steps differ in the bits
    const auto other = frugal::testing::run_batch(fa::batch::plan(b.shape(), opt), b, pool, cpu, 2);
    const std::string what = std::string(fa::dtype_name(fa::dtype_of<T>)) + (layout == kv_layout::nhd ? " nhd" : " hnd") +
                             (grouped ? " grouped" : " per head");
    EXPECT_EQ(by_default.out, set.out) << what;
    EXPECT_EQ(by_default.lse, set.lse) << what;
    if constexpr (std::is_same_v<T, float>) {
        EXPECT_NE(by_default.out, other.out) << what;
    }
}

TEST(QuantizedKv, DefaultDecodeStepIsHalvedOnlyForTokenMajorRowsOfSeveralHeads) {
    expect_default_step<float>(kv_layout::nhd, true, 64);
    expect_default_step<bfloat16>(kv_layout::nhd, true, 64);
    expect_default_step<fa::float16>(kv_layout::nhd, true, 64);
    expect_default_step<float>(kv_layout::hnd, true, 128);
    expect_default_step<float>(kv_layout::nhd, false, 128);
    // 8-bit rows keep 128 keys.
    batch_spec spec = mixed(kv_layout::nhd);
    spec.q_heads = 16;
    spec.kv_heads = 4;
    const batch_data<bfloat16> b(spec);
    const quantized_pool<fa::float8_e4m3> pool(b, scale_granularity::head);
    fa::batch_options opt{.mask = attention_mask::causal(), .dtype = storage_dtype::bf16,
                          .kv_dtype = storage_dtype::fp8_e4m3, .threads = 2, .kv_chunk = 256};
    const auto by_default = run_quantized(fa::batch::plan(b.shape(), opt), b, pool.view(), cpu);
    opt.kv_block = 128;
    const auto set = run_quantized(fa::batch::plan(b.shape(), opt), b, pool.view(), cpu);
    EXPECT_EQ(by_default.out, set.out);
    EXPECT_EQ(by_default.lse, set.lse);
}

TEST(QuantizedKv, TokenMajorPagesGiveTheBitsOfHeadMajorOnes) {
    expect_layouts_give_the_same_bits<float>();
    expect_layouts_give_the_same_bits<bfloat16>();
    expect_layouts_give_the_same_bits<fa::float16>();
    for (scale_granularity g : {scale_granularity::head, scale_granularity::token}) {
        batch_spec spec = mixed(kv_layout::nhd);
        const batch_data<bfloat16> nhd(spec);
        spec.layout = kv_layout::hnd;
        const batch_data<bfloat16> hnd(spec);
        const quantized_pool<fa::float8_e5m2> pn(nhd, g), ph(hnd, g);
        const auto plan = fa::batch::plan(nhd.shape(), {.mask = attention_mask::causal(), .dtype = storage_dtype::bf16,
                                                        .kv_dtype = storage_dtype::fp8_e5m2, .threads = 2});
        const auto a = run_quantized(plan, nhd, pn.view(), cpu), b = run_quantized(plan, hnd, ph.view(), cpu);
        EXPECT_EQ(a.out, b.out) << "scales " << int(g);
        EXPECT_EQ(a.lse, b.lse);
    }
}

using frugal::testing::error_of;

TEST(QuantizedKv, BadInputGetsAClearErrorNamingTheValue) {
    const batch_data<bfloat16> b(mixed(kv_layout::nhd));
    quantized_pool<std::int8_t> pool(b, scale_granularity::token);
    const auto kv = pool.writable();
    std::vector<float> row(b.spec.kv_heads * b.spec.head_dim, 0.5f);
    row[37] = NAN;
    const std::span<const float> bad(row), good(row.data(), row.size());
    auto msg = error_of([&] { fa::quantize_into(kv, 0, 0, bad, bad); });
    EXPECT_NE(msg.find("value 37 (head 1, element 5) is nan"), std::string::npos) << msg;
    row[37] = 0.5f;
    msg = error_of([&] { fa::quantize_into(kv, 1, 80, good, good); });
    EXPECT_NE(msg.find("token 80 of sequence 1 is outside its 5 pages of 16"), std::string::npos) << msg;
    msg = error_of([&] { fa::quantize_into(kv, 9, 0, good, good); });
    EXPECT_NE(msg.find("sequence 9 is outside the batch of 5"), std::string::npos) << msg;
    msg = error_of([&] { fa::quantize_into(kv, 0, 0, good.first(10), good); });
    EXPECT_NE(msg.find("rows of 10 and 64 values, expected kv_heads x head_dim = 64"), std::string::npos) << msg;
    // A calibrated scale of zero would divide by zero.
    float zero = 0.0f;
    const auto tensor = fa::paged_kv<std::int8_t>::separate(pool.k.data(), pool.v.data(), pool.pages, 2, 32,
                                                            kv_layout::nhd, pool.table())
                            .with_scales({scale_granularity::tensor, &zero, &zero});
    msg = error_of([&] { fa::quantize_into(tensor, 0, 0, good, good); });
    EXPECT_NE(msg.find("K scale 0 of head 0 must be finite and positive"), std::string::npos) << msg;
    // Scales belong to 8-bit pools; 8-bit pools need them; the plan names both dtypes.
    std::vector<bfloat16> wide(pool.k.size());
    msg = error_of([&] {
        (void)fa::paged_kv<bfloat16>::separate(wide.data(), wide.data(), pool.pages, 2, 32, kv_layout::nhd, pool.table())
            .with_scales({scale_granularity::tensor, &zero, &zero});
    });
    EXPECT_NE(msg.find("bf16 pages hold their values"), std::string::npos) << msg;
    const auto plan = fa::batch::plan(b.shape(), {.dtype = storage_dtype::bf16, .kv_dtype = storage_dtype::int8});
    const auto bare = fa::paged_kv<const std::int8_t>::separate(pool.k.data(), pool.v.data(), pool.pages, 2, 32,
                                                                kv_layout::nhd, pool.table());
    msg = error_of([&] { (void)run_quantized(plan, b, bare, cpu); });
    EXPECT_NE(msg.find("int8 K/V needs its scales"), std::string::npos) << msg;
    const auto e4_plan = fa::batch::plan(b.shape(), {.dtype = storage_dtype::bf16, .kv_dtype = storage_dtype::fp8_e4m3});
    msg = error_of([&] { (void)run_quantized(e4_plan, b, pool.view(), cpu); });
    EXPECT_NE(msg.find("made for fp8e4m3 K/V but the cache holds int8"), std::string::npos) << msg;
    msg = error_of([&] { (void)fa::batch::plan(b.shape(), {.dtype = storage_dtype::fp8_e4m3}); });
    EXPECT_NE(msg.find("dtype fp8e4m3 is a K/V format"), std::string::npos) << msg;
}

}  // namespace
