// Tiled and batch (paged, ragged, mixed prefill/decode) attention against the float64
// oracle over random shapes, masks, dtypes, page sizes and layouts, splits and worker
// counts; and corrupted page tables and plans, which must get a frugal::error.
#include <frugal/attention/batch_attention.hpp>
#include <frugal/attention/tiled_attention.hpp>

#include <cmath>
#include <cstdint>
#include <exception>
#include <vector>

#include "../../examples/minimal_backend/minimal_backend.hpp"
#include "../attention/batch_fixture.hpp"
#include "fuzz.hpp"

namespace {

using namespace frugal::attention;
using frugal::testing::ref_mask;
using frugal::testing::ref_mask_spec;

struct mask_pick {
    attention_mask mask;
    ref_mask_spec ref;
};

mask_pick pick_mask(frugal::fuzz::input& in) {
    const auto window = static_cast<std::int64_t>(in.below(12));
    const auto offset = static_cast<std::int64_t>(in.below(41)) - 20;
    switch (in.below(4)) {
    case 0: return {attention_mask::none(), {ref_mask::none}};
    case 1:
        return window == 0 ? mask_pick{attention_mask::causal(), {ref_mask::bottom_right}}
                           : mask_pick{attention_mask::sliding_window(window), {ref_mask::bottom_right, 0, window}};
    case 2:
        return window == 0 ? mask_pick{attention_mask::causal(causal_alignment::top_left), {ref_mask::top_left}}
                           : mask_pick{attention_mask::sliding_window(window, causal_alignment::top_left),
                                       {ref_mask::top_left, 0, window}};
    default:
        return window == 0
                   ? mask_pick{attention_mask::causal(causal_alignment::offset, offset), {ref_mask::offset, offset}}
                   : mask_pick{attention_mask::sliding_window(window, causal_alignment::offset, offset),
                               {ref_mask::offset, offset, window}};
    }
}

template <class T>
void fuzz_batch(frugal::fuzz::input& in, storage_dtype dtype) {
    frugal::testing::batch_spec spec;
    spec.kv_heads = 1 + in.below(2);
    spec.q_heads = spec.kv_heads * (1 + in.below(3));
    spec.head_dim = 1 + in.below(20);
    spec.page_size = 1 + in.below(9);
    spec.layout = in.below(2) ? kv_layout::nhd : kv_layout::hnd;
    spec.interleaved = in.below(2) == 1;
    spec.seed = static_cast<unsigned>(in.below(1000));
    const std::size_t batch = 1 + in.below(3);
    for (std::size_t s = 0; s < batch; ++s) {
        spec.kv_lens.push_back(1 + in.below(60));
        spec.q_lens.push_back(1 + in.below(in.below(2) ? 3 : 12));
    }
    const auto [mask, ref] = pick_mask(in);
    batch_options opt{.mask = mask, .lse_base = in.below(2) ? softmax_base::e : softmax_base::two, .dtype = dtype,
                      .threads = 1 + in.below(3), .q_tile = 1 + in.below(16), .kv_tile = 1 + in.below(24),
                      .kv_block = in.below(20), .kv_chunk = in.below(3) ? 0 : 1 + in.below(40),
                      .decode_rows = in.below(30)};
    const frugal::testing::batch_data<T> b(spec);
    const frugal::testing::kv_pool<T> pool(b, in.below(4) == 0);
    const auto plan = batch::plan(b.shape(), opt);
    const std::size_t workers = in.below(3) == 0 ? opt.threads : 0;
    auto r = frugal::testing::run_batch(plan, b, pool, example::minimal_backend{}, workers);
    if (opt.lse_base == softmax_base::two)
        for (float& x : r.lse) x *= 0.6931471805599453f;
    const auto e = frugal::testing::compare(b, r, ref);
    const double u = unit_roundoff(dtype);
    // fp32: absolute (outputs are O(1)); bf16/fp16: the output's rounding, 4u of its row's magnitude.
    FRUGAL_FUZZ_CHECK(dtype == storage_dtype::f32 ? e.out < 1e-4 : e.rel_out < 4 * u + 1e-4,
                      "%s batch: max error %g (relative %g), lse %g; batch %zu, heads %zu/%zu, d %zu, page %zu, window %lld, "
                      "decode_rows %zu, chunk %zu, block %zu, q_tile %zu, kv_tile %zu", dtype_name(dtype), e.out,
                      e.rel_out, e.lse, batch, spec.q_heads, spec.kv_heads, spec.head_dim, spec.page_size,
                      static_cast<long long>(mask.window), opt.decode_rows, opt.kv_chunk, opt.kv_block, opt.q_tile,
                      opt.kv_tile);
    FRUGAL_FUZZ_CHECK(e.lse < 1e-4, "%s batch: LSE error %g", dtype_name(dtype), e.lse);
}

void fuzz_tiled(frugal::fuzz::input& in) {
    const std::size_t kvh = 1 + in.below(2), hq = kvh * (1 + in.below(3)), d = 1 + in.below(16);
    const std::size_t sq = 1 + in.below(40), skv = 1 + in.below(40);
    const auto [mask, ref] = pick_mask(in);
    const auto q = frugal::testing::normal_floats(hq * sq * d, 1), k = frugal::testing::normal_floats(kvh * skv * d, 2),
               v = frugal::testing::normal_floats(kvh * skv * d, 3);
    std::vector<float> out(q.size()), lse(hq * sq);
    const attention_shape shape{.q_heads = hq, .kv_heads = kvh, .q_len = sq, .kv_len = skv, .head_dim = d};
    const auto plan = tiled::plan(shape, {.mask = mask, .threads = 1, .q_tile = 1 + in.below(20), .kv_tile = 1 + in.below(20)},
                                  frugal::memory_budget(64 + in.below(20000)));
    tiled::run(plan, example::minimal_backend{}, heads_view<const float>::head_major(q.data(), hq, sq, d),
               heads_view<const float>::head_major(k.data(), kvh, skv, d),
               heads_view<const float>::head_major(v.data(), kvh, skv, d), heads_view<float>::head_major(out.data(), hq, sq, d),
               frugal::matrix_view<float>(lse.data(), hq, sq));
    const auto at = [d](const std::vector<float>& t, std::size_t n) {
        return [&t, n, d](std::size_t h, std::size_t i, std::size_t c) { return t[(h * n + i) * d + c]; };
    };
    const auto want = frugal::testing::ref_attention(hq, kvh, sq, skv, d, 1.0 / std::sqrt(double(d)), ref, at(q, sq),
                                                     at(k, skv), at(v, skv));
    for (std::size_t i = 0; i < out.size(); ++i)
        FRUGAL_FUZZ_CHECK(std::abs(out[i] - want.out[i]) < 1e-4, "tiled: element %zu is %g, float64 %g", i,
                          double(out[i]), want.out[i]);
    for (std::size_t i = 0; i < lse.size(); ++i)
        FRUGAL_FUZZ_CHECK(std::isinf(want.lse[i]) ? lse[i] == -INFINITY : std::abs(lse[i] - want.lse[i]) < 1e-4,
                          "tiled: LSE %zu is %g, float64 %g", i, double(lse[i]), want.lse[i]);
}

// A page table or batch shape with one entry corrupted: every corruption is an error.
void fuzz_bad_input(frugal::fuzz::input& in) {
    std::vector<std::int32_t> indptr{0, 2, 3}, indices{4, 1, 0}, last{16, 5};
    std::vector<std::size_t> qo{0, 1, 3}, kv_lens{32, 5};
    std::vector<float> pool(5 * 16 * 2 * 8);
    const auto poke = [&in](auto& v) {
        auto& x = v[in.below(v.size())];
        x = static_cast<std::remove_reference_t<decltype(x)>>(in.take<std::int64_t>());
    };
    const std::size_t what = in.below(3);
    if (what == 0) poke(indices);
    if (what == 1) poke(last);
    if (what == 2) poke(qo);
    bool threw = false;
    try {
        const auto kv = paged_kv<const float>::separate(pool.data(), pool.data(), 5, 2, 8, kv_layout::nhd,
                                                        {indptr, indices, last, 16});
        (void)batch::plan({.q_heads = 4, .kv_heads = 2, .head_dim = 8, .qo_indptr = qo, .kv_lens = kv_lens}, {});
        for (std::size_t s = 0; s < 2; ++s) (void)kv.kv_len(s);
    } catch (const frugal::error&) {
        threw = true;
    }
    bool valid = indices[0] >= 0 && indices[0] < 5 && indices[1] >= 0 && indices[1] < 5 && indices[2] >= 0 &&
                 indices[2] < 5 && last[0] >= 1 && last[0] <= 16 && last[1] >= 1 && last[1] <= 16 && qo[0] == 0 &&
                 qo[1] > qo[0] && qo[2] > qo[1] && qo[2] <= (std::size_t(1) << 40);
    if (valid) {  // the plan's bound on its work items: 2 KV heads x (1 decode item, or one per query tile)
        const std::size_t l0 = qo[1] - qo[0], l1 = qo[2] - qo[1];
        const auto prefill = [](std::size_t l) { return 2 * l > 32; };
        const std::size_t tile = std::min<std::size_t>(128, std::max(prefill(l0) ? l0 : 1, prefill(l1) ? l1 : 1));
        std::size_t items = 0;
        for (std::size_t l : {l0, l1}) items += 2 * (prefill(l) ? (l + tile - 1) / tile : 1);
        valid = items <= (std::size_t(1) << 26);
    }
    FRUGAL_FUZZ_CHECK(threw == !valid, "bad input %zu: threw %d, valid %d", what, int(threw), int(valid));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    frugal::fuzz::input in(data, size);
    try {
        switch (in.below(5)) {
        case 0: fuzz_batch<float>(in, storage_dtype::f32); break;
        case 1: fuzz_batch<bfloat16>(in, storage_dtype::bf16); break;
        case 2: fuzz_batch<float16>(in, storage_dtype::f16); break;
        case 3: fuzz_tiled(in); break;
        default: fuzz_bad_input(in); break;
        }
    } catch (const frugal::error& e) {
        // Shapes the fuzzer picks are valid, and bad input is checked above: any other
        // frugal::error is a finding too.
        FRUGAL_FUZZ_CHECK(false, "unexpected frugal::error: %s", e.what());
    } catch (const std::exception& e) {
        FRUGAL_FUZZ_CHECK(false, "not a frugal::error: %s", e.what());
    }
    return 0;
}
