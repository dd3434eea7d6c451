// `frugal-bench attention`: two benches in one command, each measured against baselines in
// the same run with the same threads.
//  - single sequence (--sq/--skv): tiled online-softmax attention against HyperGen's staged
//    attention, a naive materialized softmax(QK^T)V, and an Eigen GEMM of the same FLOP
//    count (the practical compute roofline);
//  - serving (--mode prefill|decode|mixed): batch attention over a paged KV cache against
//    the same batch over contiguous KV, a per-sequence loop over contiguous fp32 copies
//    (what an engine did before), a streaming read of the same K/V bytes (the decode
//    bandwidth roofline) and, for prefill, the GEMM roofline.
#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <ctime>
#include <functional>
#include <limits>
#include <numeric>
#include <optional>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include <frugal/attention/batch_attention.hpp>
#include <frugal/attention/kv_quantization.hpp>
#include <frugal/attention/tiled_attention.hpp>
#include <frugal/backend/eigen/attention_backend.hpp>
#include <frugal/core/huge_page_allocator.hpp>
#include <frugal/sim/staged_attention.hpp>

// After frugal's backend, which includes it inside its GCC 12 warning bracket
// (backend/eigen/diagnostics.hpp).
#include <xsimd/xsimd.hpp>

#include "harness.hpp"
#include "serve_batch.hpp"
#include "stream_read.hpp"
#ifdef FRUGAL_BENCH_HAVE_CUDA
#include "cuda/attention_gpu.hpp"
#endif

namespace frugal::bench {
namespace {

struct workload {
    std::size_t sq = 1024, skv = 1024, d = 128, heads = 8, kv_heads = 0, threads = 1;
    bool causal = false;
    double budget_mib = 16;
    std::size_t q_tile = attention::attention_options{}.q_tile, kv_tile = attention::attention_options{}.kv_tile;
};

// Inputs in the token-major [tokens, heads, dim] layout an engine's QKV projection writes.
struct tensors {
    std::vector<float> q, k, v, out;
    tensors(const workload& w, std::size_t kvh) {
        std::mt19937 rng(42);
        std::normal_distribution<float> dist;
        for (auto* t : {&q, &k, &v}) {
            t->resize((t == &q ? w.sq * w.heads : w.skv * kvh) * w.d);
            for (auto& x : *t) x = dist(rng);
        }
        out.assign(w.sq * w.heads * w.d, 0.0f);
    }
};

// One sequence's attention operands as token-major fp32 arrays ([tokens][heads][d]).
struct sequence_view {
    std::size_t sq, skv, d, heads, kv_heads;
    const float *q, *k, *v, *out;
};

// max |out - float64 reference| over every output element of one sequence.
double check(const sequence_view& x, std::size_t threads, const attention::attention_mask& mask) {
    std::vector<double> worst(threads, 0.0);
    const double scale = 1.0 / std::sqrt(double(x.d));
    const auto sq = std::int64_t(x.sq), skv = std::int64_t(x.skv);
    parallel_for(default_thread_pool(), x.heads * x.sq, threads, [&](std::size_t item, std::size_t worker) {
        const std::size_t h = item / x.sq, i = item % x.sq, g = h / (x.heads / x.kv_heads);
        std::vector<double> s(x.skv, -std::numeric_limits<double>::infinity()), o(x.d, 0.0);
        double mx = -std::numeric_limits<double>::infinity();
        const float* qi = &x.q[(i * x.heads + h) * x.d];
        for (std::size_t j = 0; j < x.skv; ++j) {
            if (!mask.visible(std::int64_t(i), std::int64_t(j), sq, skv)) continue;
            const float* kj = &x.k[(j * x.kv_heads + g) * x.d];
            double acc = 0;
            for (std::size_t c = 0; c < x.d; ++c) acc += double(qi[c]) * double(kj[c]);
            s[j] = acc * scale;
            mx = std::max(mx, s[j]);
        }
        double sum = 0;
        for (std::size_t j = 0; j < x.skv && mx > -std::numeric_limits<double>::infinity(); ++j) {
            const double p = std::exp(s[j] - mx);
            sum += p;
            if (p == 0.0) continue;
            const float* vj = &x.v[(j * x.kv_heads + g) * x.d];
            for (std::size_t c = 0; c < x.d; ++c) o[c] += p * double(vj[c]);
        }
        for (std::size_t c = 0; c < x.d; ++c) {
            const double want = sum > 0 ? o[c] / sum : 0.0;
            worst[worker] = std::max(worst[worker], std::abs(double(x.out[(i * x.heads + h) * x.d + c]) - want));
        }
    });
    return *std::max_element(worst.begin(), worst.end());
}

// Rows of Q per GEMM in the roofline: a multiple of the micro-kernel, small enough
// that the materialized product stays in a few MiB.
constexpr std::size_t roofline_rows = 256;

// The practical compute roofline of prefill: Eigen GEMMs of the same FLOP count as dense
// attention, per (sequence, head) (sq x d)(d x skv) then (sq x skv)(skv x d), in row
// blocks of `roofline_rows` spread over the same threads. `scratch` holds the products.
struct gemm_roofline {
    struct problem {
        attention::heads_view<const float> q, k, v;
        attention::heads_view<float> out;
    };
    std::function<void()> run;
    std::size_t bytes = 0;

    gemm_roofline(std::vector<problem> problems, std::size_t threads, std::vector<float>& scratch) {
        struct block {
            std::size_t problem, head, r0, n;
        };
        std::vector<block> blocks;
        std::size_t widest = 0;
        for (std::size_t p = 0; p < problems.size(); ++p) {
            const auto& x = problems[p];
            widest = std::max(widest, x.k.tokens());
            for (std::size_t h = 0; h < x.q.heads(); ++h)
                for (std::size_t r0 = 0; r0 < x.q.tokens(); r0 += roofline_rows)
                    blocks.push_back({p, h, r0, std::min(roofline_rows, x.q.tokens() - r0)});
        }
        const std::size_t workers = std::min(threads, blocks.size());
        scratch.resize(workers * roofline_rows * widest);
        bytes = scratch.size() * sizeof(float);
        run = [problems = std::move(problems), blocks = std::move(blocks), workers, widest, &scratch] {
            const frugal::eigen::backend cpu;
            parallel_for(default_thread_pool(), blocks.size(), workers, [&](std::size_t i, std::size_t worker) {
                const block& b = blocks[i];
                const problem& x = problems[b.problem];
                const std::size_t g = b.head / (x.q.heads() / x.k.heads()), skv = x.k.tokens();
                const matrix_view<float> s(scratch.data() + worker * roofline_rows * widest, b.n, skv);
                const float scale = 1.0f / std::sqrt(float(x.q.dim()));
                cpu.gemm(x.q.head(b.head).row_block(b.r0, b.n), transpose::no, x.k.head(g), transpose::yes, s, scale,
                         0.0f);
                cpu.gemm(matrix_view<const float>(s), transpose::no, x.v.head(g), transpose::no,
                         x.out.head(b.head).row_block(b.r0, b.n), 1.0f, 0.0f);
            });
        };
    }
};

std::vector<record> compare(const workload& w, const std::vector<std::string>& impls, bool with_check,
                            double min_seconds) {
    const std::size_t kvh = w.kv_heads == 0 ? w.heads : w.kv_heads;
    const attention::attention_shape shape{.q_heads = w.heads, .kv_heads = kvh, .q_len = w.sq, .kv_len = w.skv, .head_dim = w.d};
    const attention::attention_mask mask = w.causal ? attention::attention_mask::causal() : attention::attention_mask::none();
    const attention::attention_options options{.mask = mask, .threads = w.threads, .q_tile = w.q_tile, .kv_tile = w.kv_tile};
    const auto budget = memory_budget::mib(w.budget_mib);
    tensors t(w, kvh);
    const auto qv = attention::heads_view<const float>::token_major(t.q.data(), w.sq, w.heads, w.d);
    const auto kv = attention::heads_view<const float>::token_major(t.k.data(), w.skv, kvh, w.d);
    const auto vv = attention::heads_view<const float>::token_major(t.v.data(), w.skv, kvh, w.d);
    const auto ov = attention::heads_view<float>::token_major(t.out.data(), w.sq, w.heads, w.d);
    const frugal::eigen::attention_backend cpu;
    const float scale = 1.0f / std::sqrt(float(w.d));
    const double flops = 4.0 * double(w.sq) * double(w.skv) * double(w.d) * double(w.heads);
    const double useful = 4.0 * double(mask.visible_pairs(std::int64_t(w.sq), std::int64_t(w.skv))) *
                          double(w.d) * double(w.heads);

    struct result {
        std::string impl;
        std::function<void()> fn;
        std::size_t workspace;
        double impl_useful;
        double err = -1;
        double best_ms = std::numeric_limits<double>::infinity();
    };
    std::vector<result> results;
    const auto add = [&](const std::string& impl, std::function<void()> fn, std::size_t workspace,
                         double impl_useful) {
        results.push_back({impl, std::move(fn), workspace, impl_useful});
    };
    const auto want = [&](const char* name) {
        return std::find(impls.begin(), impls.end(), name) != impls.end() ||
               std::find(impls.begin(), impls.end(), "all") != impls.end();
    };
    // Buffers live here: the timed closures below run after the branches that set them up.
    std::vector<float> c, tiled_ws, s_all;
    const auto tiled_plan = attention::tiled::plan(shape, options, budget);
    const auto staged_plan = sim::staged_attention::plan(shape, options, budget);
    if (want("gemm")) {
        const gemm_roofline g({{qv, kv, vv, ov}}, w.threads, c);
        add("gemm", g.run, g.bytes, flops);
    }
    if (want("tiled")) {
        tiled_ws.resize(tiled_plan.workspace_bytes() / sizeof(float));
        add("tiled", [&] { attention::tiled::run(tiled_plan, cpu, qv, kv, vv, ov, {}, std::span<float>(tiled_ws)); },
            tiled_plan.workspace_bytes(), useful);
    }
    if (want("staged")) {
        add("staged", [&] { sim::staged_attention::run(staged_plan, cpu, qv, kv, vv, ov); }, staged_plan.workspace_bytes(),
            useful);
    }
    if (want("naive")) {
        // softmax(scale Q K^T + mask) V with the whole score matrix of a head materialized.
        s_all.resize(std::min(w.threads, w.heads) * w.sq * w.skv);
        add("naive", [&] {
            parallel_for(default_thread_pool(), w.heads, w.threads, [&](std::size_t h, std::size_t worker) {
                const std::size_t g = h / (w.heads / kvh);
                const matrix_view<float> s(s_all.data() + worker * w.sq * w.skv, w.sq, w.skv);
                cpu.gemm(qv.head(h), transpose::no, kv.head(g), transpose::yes, s, scale, 0.0f);
                auto sm = frugal::eigen::to_eigen(s);
                if (mask.is_causal) frugal::attention::detail::apply_mask(s, mask, 0, 0, std::int64_t(w.sq), std::int64_t(w.skv));
                // A row the mask leaves without keys (more queries than keys) becomes zeros.
                const Eigen::VectorXf mx = sm.rowwise().maxCoeff().unaryExpr([](float x) { return std::isinf(x) ? 0.0f : x; });
                sm = (sm.colwise() - mx).array().exp();
                sm.array().colwise() /= sm.rowwise().sum().array().max(std::numeric_limits<float>::min());
                cpu.gemm(matrix_view<const float>(s), transpose::no, vv.head(g), transpose::no, ov.head(h), 1.0f,
                         0.0f);
            });
        }, s_all.size() * sizeof(float), useful);
    }

    // Warm up and check each implementation, then time them in interleaved rounds and keep
    // each one's best round: on a shared machine the minimum is the least disturbed run,
    // and interleaving exposes every implementation to the same load.
    for (auto& r : results) {
        std::fill(t.out.begin(), t.out.end(), 0.0f);
        r.fn();
        if (with_check && r.impl != "gemm")
            r.err = check({w.sq, w.skv, w.d, w.heads, kvh, t.q.data(), t.k.data(), t.v.data(), t.out.data()}, w.threads,
                          mask);
    }
    const auto start = std::chrono::steady_clock::now();
    for (int round = 0; round < 3 || std::chrono::steady_clock::now() - start < std::chrono::duration<double>(min_seconds);
         ++round) {
        for (auto& r : results) {
            const auto t0 = std::chrono::steady_clock::now();
            r.fn();
            r.best_ms = std::min(r.best_ms, std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
        }
    }
    const auto gemm_it = std::find_if(results.begin(), results.end(), [](const result& r) { return r.impl == "gemm"; });
    std::vector<record> out;
    for (const auto& r : results) {
        record rec{{"impl", r.impl}, {"sq", w.sq}, {"skv", w.skv}, {"d", w.d}, {"heads", w.heads},
                   {"kv_heads", kvh}, {"causal", w.causal}, {"threads", w.threads}, {"ms", r.best_ms},
                   {"gflops", flops / (r.best_ms * 1e6)},
                   {"useful_gflops", r.impl_useful / (r.best_ms * 1e6)}};
        if (gemm_it != results.end()) {
            rec["ratio_to_gemm"] = (r.impl_useful / r.best_ms) / (flops / gemm_it->best_ms);
        }
        rec["workspace_bytes"] = r.workspace;
        if (r.err >= 0) rec["max_abs_err"] = r.err;
        out.push_back(std::move(rec));
    }
    return out;
}

// Serving: a batch over a paged KV cache.

struct serve_workload {
    std::string mode = "decode";  // prefill | decode | mixed
    std::size_t batch = 8, kv_len = 4096, heads = 32, kv_heads = 8, d = 128, page_size = 16, threads = 1;
    double spread = 0;            // kv lengths uniform in [kv_len (1 - spread), kv_len (1 + spread)]
    std::size_t chunk = 512;      // mixed: query tokens of each prefill chunk
    std::string dtype = "f32", layout = "hnd";
    bool per_head = false;
    std::size_t kv_block = 0;     // decode keys per step (0: the plan's default)
    bool causal = false;          // prefill: causal mask (decode and mixed are always causal)
};

// A page pool holding every sequence's K/V in storage type T: pages of `page_size`
// tokens handed out in a shuffled order (as a serving engine's allocator leaves them), or
// one page per sequence (contiguous KV). 8-bit pools carry their scales: one per KV head
// for FP8 (calibrated on the values, as vLLM's k_scale), one per token and head for int8.
template <class T>
struct serve_pool {
    std::vector<std::int32_t> indptr{0}, indices, last;
    // One block per pool, on huge pages where the system allows, as an engine preallocates
    // its KV pool: pages handed out in a shuffled order then cost no TLB miss per page.
    std::vector<T, huge_page_allocator<T>> k, v;
    std::vector<float> k_scale, v_scale;
    std::size_t pages = 0, page_size = 0, kv_heads = 0, d = 0;
    attention::kv_layout layout;
    attention::scale_granularity granularity = std::is_same_v<T, std::int8_t> ? attention::scale_granularity::token
                                                                             : attention::scale_granularity::head;
    serve_pool(const serve_batch& b, const serve_workload& w, bool contiguous)
        : kv_heads(w.kv_heads), d(w.d), layout(w.layout == "nhd" ? attention::kv_layout::nhd : attention::kv_layout::hnd) {
        page_size = contiguous ? *std::max_element(b.kv_lens.begin(), b.kv_lens.end()) : w.page_size;
        for (std::size_t n : b.kv_lens) {
            const std::size_t p = (n + page_size - 1) / page_size;
            indptr.push_back(indptr.back() + std::int32_t(p));
            last.push_back(std::int32_t(n - (p - 1) * page_size));
        }
        pages = std::size_t(indptr.back());
        indices.resize(pages);
        std::iota(indices.begin(), indices.end(), 0);
        if (!contiguous) std::shuffle(indices.begin(), indices.end(), std::mt19937(11));
        k.resize(pages * page_size * kv_heads * d);
        v.resize(k.size());
        if constexpr (attention::quantized_kv_type<T>) {
            const std::size_t n = granularity == attention::scale_granularity::token ? pages * page_size * kv_heads : kv_heads;
            k_scale.assign(n, 0.0f);
            v_scale.assign(n, 0.0f);
        }
    }
    [[nodiscard]] attention::paged_kv<T> writable() {
        auto kv = attention::paged_kv<T>::separate(k.data(), v.data(), pages, kv_heads, d, layout,
                                                   {indptr, indices, last, page_size});
        if constexpr (attention::quantized_kv_type<T>) return kv.with_scales({granularity, k_scale.data(), v_scale.data()});
        else return kv;
    }
    [[nodiscard]] attention::paged_kv<const T> view() { return writable(); }
    // Sets the per-head scales of an FP8 pool from the largest magnitudes of every
    // sequence's K/V ([len][kv_heads][d] each).
    void calibrate(const std::vector<std::vector<float>>& kf, const std::vector<std::vector<float>>& vf) {
        if constexpr (attention::quantized_kv_type<T>) {
            if (granularity != attention::scale_granularity::head) return;
            for (std::size_t s = 0; s < kf.size(); ++s)
                for (std::size_t i = 0; i < kf[s].size(); ++i) {
                    const std::size_t h = i / d % kv_heads;
                    k_scale[h] = std::max(k_scale[h], std::abs(kf[s][i]) / attention::quantized_max<T>);
                    v_scale[h] = std::max(v_scale[h], std::abs(vf[s][i]) / attention::quantized_max<T>);
                }
        } else {
            (void)kf, (void)vf;
        }
    }
    // Stored bytes: elements and scales.
    [[nodiscard]] std::size_t bytes() const { return (k.size() + v.size()) * sizeof(T) + (k_scale.size() + v_scale.size()) * sizeof(float); }
};

// The arithmetic roofline of a step: `macs` multiply-adds done in registers by `threads`
// workers (xsimd FMAs on the ISA the attention step is compiled for, 16 independent
// accumulators each, enough to hide the FMA latency). Decode's arithmetic is at least its
// multiply-adds, so a step can never beat this time, whatever its memory does.
struct fma_peak {
    using batch = xsimd::batch<float>;
    static constexpr std::size_t chains = 16;
    std::size_t passes;  // of `chains` FMAs, per worker
    mutable std::vector<float> sink;
    fma_peak(double macs, std::size_t threads)
        : passes(std::size_t(macs / double(batch::size * chains * threads)) + 1), sink(threads * 16, 0.0f) {}
    void operator()(std::size_t threads) const {
        parallel_for(default_thread_pool(), threads, threads, [&](std::size_t, std::size_t worker) {
            // Operands read from memory, so the compiler cannot fold the loop.
            const batch x(0.999f + sink[worker * 16] * 0.0f), y(1e-4f);
            std::array<batch, chains> acc;
            for (std::size_t c = 0; c < chains; ++c) acc[c] = batch(float(c));
            for (std::size_t i = 0; i < passes; ++i)
                for (std::size_t c = 0; c < chains; ++c) acc[c] = xsimd::fma(acc[c], x, y);
            batch sum(0.0f);
            for (const batch& a : acc) sum += a;
            sink[worker * 16] = xsimd::hadd(sum);
        });
    }
};

// CPU time of the whole process (every thread), in ms: what a run costs in core time,
// whatever share of the cores the scheduler gave it.
double process_cpu_ms() {
    timespec ts{};
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return double(ts.tv_sec) * 1e3 + double(ts.tv_nsec) / 1e6;
}

// T: Q and the output; KV: the cache (T, or an 8-bit type).
template <class T, class KV = T>
std::vector<record> serve_compare(const serve_workload& w, const std::vector<std::string>& impls, bool with_check,
                                  double min_seconds) {
    const serve_batch b(w.mode, w.batch, w.kv_len, w.spread, w.chunk, w.causal);
    const std::size_t hq = w.heads, hkv = w.kv_heads == 0 ? w.heads : w.kv_heads, d = w.d;
    const std::size_t tokens = b.qo_indptr.back();
    const auto want = [&](const char* name) {
        return std::find(impls.begin(), impls.end(), name) != impls.end() ||
               std::find(impls.begin(), impls.end(), "all") != impls.end();
    };
    // Inputs: fp32 values rounded to T once, so every implementation reads the same numbers.
    std::mt19937 rng(42);
    std::normal_distribution<float> dist;
    const auto round = [](float x) { return attention::to_float(attention::from_float<T>(x)); };
    std::vector<float> qf(tokens * hq * d);
    for (auto& x : qf) x = round(dist(rng));
    std::vector<T> q(qf.size()), out(qf.size());
    attention::from_floats(qf.data(), q.data(), q.size());
    const bool need_contiguous_pool = want("contiguous");
    serve_pool<KV> paged(b, w, false);
    std::optional<serve_pool<KV>> contiguous;
    if (need_contiguous_pool) contiguous.emplace(b, w, true);
    // Per sequence fp32 token-major K/V ([len][kv_heads][d]): the naive loop's input, the
    // GEMM roofline's and the checker's; then written into the pools as an engine appends
    // tokens (quantize_into), and for 8-bit pools replaced by what the cache holds.
    std::vector<std::vector<float>> kf(w.batch), vf(w.batch);
    for (std::size_t s = 0; s < w.batch; ++s) {
        kf[s].resize(b.kv_lens[s] * hkv * d);
        vf[s].resize(kf[s].size());
        for (std::size_t i = 0; i < kf[s].size(); ++i) {
            kf[s][i] = round(dist(rng));
            vf[s][i] = round(dist(rng));
        }
    }
    for (serve_pool<KV>* pool : {&paged, contiguous ? &*contiguous : nullptr}) {
        if (pool == nullptr) continue;
        pool->calibrate(kf, vf);
        const auto kv = pool->writable();
        for (std::size_t s = 0; s < w.batch; ++s)
            for (std::size_t t = 0; t < b.kv_lens[s]; ++t)
                attention::quantize_into(kv, s, t, std::span<const float>(kf[s]).subspan(t * hkv * d, hkv * d),
                                         std::span<const float>(vf[s]).subspan(t * hkv * d, hkv * d));
    }
    if constexpr (attention::quantized_kv_type<KV>) {
        const auto kv = paged.view();
        for (std::size_t s = 0; s < w.batch; ++s)
            for (std::size_t t = 0; t < b.kv_lens[s]; ++t)
                for (std::size_t h = 0; h < hkv; ++h) {
                    const std::size_t page = kv.table().page_of(s, t), r = t % kv.page_size();
                    const std::size_t at = kv.geometry().row_offset(page, h, r), i = (t * hkv + h) * d;
                    for (std::size_t c = 0; c < d; ++c) {
                        kf[s][i + c] = attention::to_float(kv.k_pool()[at + c]) * kv.k_scale(page, h, r);
                        vf[s][i + c] = attention::to_float(kv.v_pool()[at + c]) * kv.v_scale(page, h, r);
                    }
                }
    }
    // Stored bytes read, per pool: elements, and for int8 each row's scale.
    const bool row_scales = paged.granularity == attention::scale_granularity::token;
    std::size_t element_bytes = 0, scale_bytes = 0;
    double pairs = 0;
    for (std::size_t s = 0; s < w.batch; ++s) {
        element_bytes += b.kv_lens[s] * hkv * d * sizeof(KV);
        scale_bytes += row_scales ? b.kv_lens[s] * hkv * sizeof(float) : 0;
        pairs += double(b.mask.visible_pairs(std::int64_t(b.q_lens[s]), std::int64_t(b.kv_lens[s])));
    }
    const std::size_t kv_bytes = 2 * (element_bytes + scale_bytes);
    // Useful FLOPs (visible pairs only) and the dense count the GEMM roofline computes.
    const double flops = 4.0 * pairs * double(d) * double(hq);
    double dense_flops = 0;
    for (std::size_t s = 0; s < w.batch; ++s) dense_flops += 4.0 * double(b.q_lens[s] * b.kv_lens[s]) * double(d * hq);
    const attention::batch_shape shape{.q_heads = hq, .kv_heads = hkv, .head_dim = d, .qo_indptr = b.qo_indptr,
                                       .kv_lens = b.kv_lens};
    const auto plan = attention::batch::plan(shape, {.mask = b.mask, .dtype = attention::dtype_of<T>,
                                                     .kv_dtype = attention::dtype_of<KV>, .threads = w.threads,
                                                     .kv_block = w.kv_block, .group_decode_heads = !w.per_head});
    std::vector<float> ws(plan.workspace_bytes() / sizeof(float));
    const frugal::eigen::attention_backend cpu;
    const auto qv = attention::heads_view<const T>::token_major(q.data(), tokens, hq, d);
    const auto ov = attention::heads_view<T>::token_major(out.data(), tokens, hq, d);

    struct result {
        std::string impl;
        std::function<void()> fn;
        std::size_t workspace;
        double err = -1;
        std::vector<double> ms = {}, cpu_ms = {};
    };
    std::vector<result> results;
    // Buffers the closures use.
    std::vector<float> gemm_scratch, naive_k, naive_v, naive_q, naive_out, qf_out(qf.size()), naive_ws;
    const auto paged_view = paged.view();
    if (want("paged")) {
        results.push_back({"paged", [&] {
            attention::batch::run(plan, cpu, qv, paged_view, ov, {}, std::span<float>(ws), default_thread_pool());
        }, plan.workspace_bytes(), -1});
    }
    std::optional<attention::paged_kv<const KV>> contiguous_view;
    if (contiguous) {
        contiguous_view.emplace(contiguous->view());
        results.push_back({"contiguous", [&] {
            attention::batch::run(plan, cpu, qv, *contiguous_view, ov, {}, std::span<float>(ws), default_thread_pool());
        }, plan.workspace_bytes(), -1});
    }
    if (want("naive")) {
        // Before the batch API: per sequence, copy its pages into contiguous fp32 K/V and
        // its queries into fp32, then plan and run tiled attention, then convert back.
        std::size_t longest = *std::max_element(b.kv_lens.begin(), b.kv_lens.end());
        std::size_t longest_q = *std::max_element(b.q_lens.begin(), b.q_lens.end());
        naive_k.resize(longest * hkv * d);
        naive_v.resize(naive_k.size());
        naive_q.resize(longest_q * hq * d);
        naive_out.resize(naive_q.size());
        std::size_t most = 0;
        for (std::size_t s = 0; s < w.batch; ++s) {
            const attention::attention_shape sh{.q_heads = hq, .kv_heads = hkv, .q_len = b.q_lens[s],
                                                .kv_len = b.kv_lens[s], .head_dim = d};
            most = std::max(most, attention::tiled::plan(sh, {.mask = b.mask, .threads = w.threads},
                                                         memory_budget::mib(16)).workspace_bytes());
        }
        naive_ws.resize(most / sizeof(float));
        results.push_back({"naive", [&] {
            for (std::size_t s = 0; s < w.batch; ++s) {
                const std::size_t n = b.kv_lens[s], ql = b.q_lens[s];
                for (std::size_t t = 0; t < n; ++t)
                    for (std::size_t h = 0; h < hkv; ++h) {
                        const auto kr = paged_view.k_rows(s, h, t, 1), vr = paged_view.v_rows(s, h, t, 1);
                        float* krow = naive_k.data() + (t * hkv + h) * d;
                        float* vrow = naive_v.data() + (t * hkv + h) * d;
                        attention::to_floats(kr.data(), krow, d);
                        attention::to_floats(vr.data(), vrow, d);
                        if constexpr (attention::quantized_kv_type<KV>) {
                            const std::size_t page = paged_view.table().page_of(s, t), r = t % paged_view.page_size();
                            const float ks = paged_view.k_scale(page, h, r), vs = paged_view.v_scale(page, h, r);
                            for (std::size_t c = 0; c < d; ++c) krow[c] *= ks, vrow[c] *= vs;
                        }
                    }
                attention::to_floats(q.data() + b.qo_indptr[s] * hq * d, naive_q.data(), ql * hq * d);
                const attention::attention_shape sh{.q_heads = hq, .kv_heads = hkv, .q_len = ql, .kv_len = n, .head_dim = d};
                const auto p = attention::tiled::plan(sh, {.mask = b.mask, .threads = w.threads}, memory_budget::mib(16));
                attention::tiled::run(p, cpu, attention::heads_view<const float>::token_major(naive_q.data(), ql, hq, d),
                                      attention::heads_view<const float>::token_major(naive_k.data(), n, hkv, d),
                                      attention::heads_view<const float>::token_major(naive_v.data(), n, hkv, d),
                                      attention::heads_view<float>::token_major(naive_out.data(), ql, hq, d), {},
                                      std::span<float>(naive_ws));
                attention::from_floats(naive_out.data(), out.data() + b.qo_indptr[s] * hq * d, ql * hq * d);
            }
        }, (naive_k.size() * 2 + naive_q.size() * 2 + naive_ws.size()) * sizeof(float), -1});
    }
    const stream_read reader({{paged.k.data(), element_bytes},
                              {paged.v.data(), element_bytes},
                              {paged.k_scale.data(), scale_bytes},
                              {paged.v_scale.data(), scale_bytes}},
                             w.threads);
    if (want("membw")) results.push_back({"membw", [&] { reader(w.threads); }, 0, -1});
    const fma_peak arithmetic(flops / 2, w.threads);
    if (want("fma")) results.push_back({"fma", [&] { arithmetic(w.threads); }, 0, -1});
    std::vector<gemm_roofline::problem> problems;
    for (std::size_t s = 0; s < w.batch && w.mode != "decode"; ++s) {
        problems.push_back({attention::heads_view<const float>::token_major(qf.data() + b.qo_indptr[s] * hq * d,
                                                                            b.q_lens[s], hq, d),
                            attention::heads_view<const float>::token_major(kf[s].data(), b.kv_lens[s], hkv, d),
                            attention::heads_view<const float>::token_major(vf[s].data(), b.kv_lens[s], hkv, d),
                            attention::heads_view<float>::token_major(qf_out.data() + b.qo_indptr[s] * hq * d,
                                                                      b.q_lens[s], hq, d)});
    }
    std::optional<gemm_roofline> roofline;
    if (!problems.empty()) {
        roofline.emplace(std::move(problems), w.threads, gemm_scratch);
        results.push_back({"gemm", roofline->run, roofline->bytes, -1});
    }

    // Warm up (and check), then interleaved rounds, so every implementation sees the same
    // load; each reports its best round (the least disturbed on a shared machine, as in the
    // single-sequence bench) and its median.
    std::vector<float> got(out.size());
    for (auto& r : results) {
        std::fill(out.begin(), out.end(), attention::from_float<T>(0.0f));
        r.fn();
        if (!with_check || r.impl == "membw" || r.impl == "fma" || r.impl == "gemm") continue;
        attention::to_floats(out.data(), got.data(), out.size());
        r.err = 0;
        for (std::size_t s = 0; s < w.batch; ++s) {
            const std::size_t at = b.qo_indptr[s] * hq * d;
            r.err = std::max(r.err, check({b.q_lens[s], b.kv_lens[s], d, hq, hkv, qf.data() + at, kf[s].data(),
                                           vf[s].data(), got.data() + at}, w.threads, b.mask));
        }
    }
    const auto start = std::chrono::steady_clock::now();
    for (int round = 0; round < 5 || std::chrono::steady_clock::now() - start < std::chrono::duration<double>(min_seconds);
         ++round) {
        for (auto& r : results) {
            const double c0 = process_cpu_ms();
            const auto t0 = std::chrono::steady_clock::now();
            r.fn();
            r.ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
            r.cpu_ms.push_back(process_cpu_ms() - c0);
        }
    }
    const auto median = [](std::vector<double> v) {
        std::sort(v.begin(), v.end());
        return v[v.size() / 2];
    };
    const auto find = [&](const char* name) {
        return std::find_if(results.begin(), results.end(), [&](const result& r) { return r.impl == name; });
    };
    const auto membw = find("membw");
    const auto fma = find("fma");
    const auto gemm = find("gemm");
    const auto best = [](const std::vector<double>& v) { return *std::min_element(v.begin(), v.end()); };
    std::vector<record> records;
    for (const auto& r : results) {
        const double ms = best(r.ms);
        const double gbs = double(kv_bytes) / (ms * 1e6);
        record rec{{"impl", r.impl}, {"mode", w.mode}, {"batch", w.batch}, {"kv_len", w.kv_len},
                   {"kv_len_spread", w.spread}, {"dtype", w.dtype}, {"heads", hq}, {"kv_heads", hkv}, {"d", d},
                   {"page_size", w.page_size}, {"layout", w.layout}, {"threads", w.threads}, {"ms", ms},
                   {"median_ms", median(r.ms)}, {"kv_bytes", kv_bytes},
                   {"gbytes_per_s", gbs}};
        if (membw != results.end()) {
            rec["bandwidth_ratio"] = best(membw->ms) / ms;
            rec["cpu_ms"] = best(r.cpu_ms);
            rec["cpu_bandwidth_ratio"] = best(membw->cpu_ms) / best(r.cpu_ms);
        }
        // The step's own roofline: the slower of reading its bytes and doing its multiply-adds.
        if (membw != results.end() && fma != results.end())
            rec["roofline_ratio"] = std::max(best(membw->ms), best(fma->ms)) / ms;
        if (r.impl != "membw") rec["gflops"] = (r.impl == "gemm" ? dense_flops : flops) / (ms * 1e6);
        if (gemm != results.end() && r.impl != "membw" && r.impl != "gemm")
            rec["ratio_to_gemm"] = (flops / ms) / (dense_flops / best(gemm->ms));
        rec["workspace_bytes"] = r.workspace;
        if (r.err >= 0) rec["max_abs_err"] = r.err;
        records.push_back(std::move(rec));
    }
    return records;
}

class attention_command final : public subcommand {
public:
    std::string name() const override { return "attention"; }
    std::string summary() const override {
        return "tiled attention vs HyperGen staged, naive and a GEMM roofline; with --mode, batch attention over a "
               "paged KV cache vs contiguous KV, a per-sequence loop and the memory-bandwidth roofline";
    }
    int report_order() const override { return 30; }
    void configure(CLI::App& app) override {
        app.add_option("--sq", w_.sq, "query length")->check(CLI::PositiveNumber)->capture_default_str();
        app.add_option("--skv", w_.skv, "key/value length")->check(CLI::PositiveNumber)->capture_default_str();
        app.add_option("--d", w_.d, "head dimension")->check(CLI::PositiveNumber)->capture_default_str();
        app.add_option("--heads", w_.heads, "query heads")->check(CLI::PositiveNumber)->capture_default_str();
        app.add_option("--kv-heads", w_.kv_heads, "key/value heads (GQA/MQA; default = heads)");
        app.add_flag("--causal", w_.causal, "bottom-right causal mask");
        app.add_option("--threads", w_.threads, "threads for every implementation")
            ->check(CLI::PositiveNumber)->capture_default_str();
        app.add_option("--budget-mib", w_.budget_mib, "workspace budget (tiled) / device limit (staged)")
            ->check(CLI::PositiveNumber)->capture_default_str();
        app.add_option("--impl", impls_,
                       "single sequence: tiled|staged|naive|gemm|all; --mode: paged|contiguous|naive|membw|fma|all "
                       "(repeatable; prefill and mixed add the gemm roofline)")
            ->check(CLI::IsMember({"tiled", "staged", "naive", "gemm", "paged", "contiguous", "membw", "fma", "all"}))
            ->capture_default_str();
        app.add_option("--q-tile", w_.q_tile, "preferred query tile of the tiled plan")->capture_default_str();
        app.add_option("--kv-tile", w_.kv_tile, "preferred KV tile of the tiled plan")->capture_default_str();
        app.add_flag("--check", check_, "max_abs_err against a float64 reference");
        app.add_option("--mode", s_.mode, "serving bench: a batch of prefills, decodes, or both (decodes next to "
                                          "prefill chunks)")
            ->check(CLI::IsMember({"prefill", "decode", "mixed"}));
        app.add_option("--batch", s_.batch, "--mode: sequences")->check(CLI::PositiveNumber)->capture_default_str();
        app.add_option("--kv-len", s_.kv_len, "--mode: mean KV length")->check(CLI::PositiveNumber)->capture_default_str();
        app.add_option("--kv-len-spread", s_.spread, "--mode: KV lengths uniform in kv_len * [1 - F, 1 + F]")
            ->check(CLI::Range(0.0, 1.0))->capture_default_str();
        app.add_option("--page-size", s_.page_size, "--mode: tokens per KV page")
            ->check(CLI::PositiveNumber)->capture_default_str();
        app.add_option("--dtype", s_.dtype, "--mode: storage of Q, K, V and the output (8-bit: of K/V, read by bf16 Q)")
            ->check(CLI::IsMember({"f32", "bf16", "f16", "fp8e4m3", "fp8e5m2", "int8"}))->capture_default_str();
        app.add_option("--layout", s_.layout, "--mode: page layout")->check(CLI::IsMember({"nhd", "hnd"}))
            ->capture_default_str();
        app.add_flag("--per-head-items", s_.per_head,
                     "--mode: one decode item per KV head (batch_options::group_decode_heads = false)");
        app.add_option("--kv-block", s_.kv_block, "--mode: decode keys per step (batch_options::kv_block; 0: the plan's)")
            ->check(CLI::Range(0, 256))->capture_default_str();
        app.add_option("--chunk", s_.chunk, "--mode mixed: query tokens of each prefill chunk")
            ->check(CLI::PositiveNumber)->capture_default_str();
        app.add_option("--backend", backend_, "--mode: where attention runs; cuda times the CUDA adapter on the GPU "
                                              "against a device copy and cuBLAS (frugal-bench built with nvcc)")
            ->check(CLI::IsMember({"cpu", "cuda"}))->capture_default_str();
        app.add_option("--reps", reps_, "--backend cuda: timed runs per implementation")
            ->check(CLI::PositiveNumber)->capture_default_str();
    }
    int run(result_sink& sink) override {
        if (backend_ == "cuda") return run_cuda(sink);
        const auto records = s_.mode.empty() ? compare(w_, impls_, check_, 0.3) : serve(serving(), impls_, check_, 0.5);
        for (auto r : records) sink.add(std::move(r));
        return 0;
    }
    report_section report(const report_context& ctx) override {
        report_section s;
        s.title = "Attention: tiled online softmax vs HyperGen staged, naive and GEMM";
        s.data_source = "generated (unit-variance normal Q, K, V, seed 42)";
        s.notes = "Non-causal, 4 heads, d = 128, 2 threads, budget 16 MiB (tiled workspace; staged device "
                  "limit). `ratio_to_gemm` is useful GFLOP/s over the Eigen GEMM of the same FLOP count. "
                  "`frugal-bench attention --sq N --skv N --d 128 --heads 4 --threads 2 --impl all`.";
        const std::vector<std::size_t> lengths = ctx.quick ? std::vector<std::size_t>{64, 128}
                                                           : std::vector<std::size_t>{256, 512, 1024, 2048, 4096};
        for (std::size_t n : lengths) {
            workload w{.sq = n, .skv = n, .d = ctx.quick ? 32u : 128u, .heads = 4, .threads = 2};
            for (auto& r : compare(w, {"all"}, false, ctx.quick ? 0.01 : 0.5)) s.records.push_back(std::move(r));
        }
        // Decode: a batch of 4 over 32 query heads and 8 KV heads, pages of 16 tokens, each
        // dtype against the streaming read of its own K/V bytes.
        const std::vector<std::size_t> kv_lengths = ctx.quick ? std::vector<std::size_t>{64, 128}
                                                              : std::vector<std::size_t>{512, 1024, 2048, 4096, 8192};
        for (const char* dtype : {"f32", "bf16", "f16"})
            for (std::size_t n : kv_lengths) {
                serve_workload w{.mode = "decode", .batch = 4, .kv_len = n, .heads = ctx.quick ? 4u : 32u,
                                 .kv_heads = ctx.quick ? 2u : 8u, .d = ctx.quick ? 32u : 128u, .page_size = 16,
                                 .threads = 2, .dtype = dtype};
                for (auto& r : serve(w, {"paged", "membw"}, false, ctx.quick ? 0.01 : 0.5)) s.records.push_back(std::move(r));
            }
        s.notes += " Decode rows (`mode` = decode): `frugal-bench attention --mode decode --batch 4 --kv-len N "
                   "--heads 32 --kv-heads 8 --d 128 --page-size 16 --dtype T --threads 2 --impl paged --impl membw`; "
                   "`bandwidth_ratio` is the unique K/V bytes per second over a streaming read of the same bytes.";
        // The serving targets' own workloads: a ragged decode batch of 8 in f32 and bf16, and
        // one long sequence (split-KV), each against membw and contiguous K/V in the same run.
        const std::size_t long_kv = ctx.quick ? 256 : 32768;
        for (const char* dtype : {"f32", "bf16"}) {
            serve_workload w{.mode = "decode", .batch = 8, .kv_len = ctx.quick ? 128u : 4096u,
                             .heads = ctx.quick ? 4u : 32u, .kv_heads = ctx.quick ? 2u : 8u, .d = ctx.quick ? 32u : 128u,
                             .page_size = 16, .threads = 2, .spread = 0.5, .dtype = dtype};
            for (auto& r : serve(w, {"paged", "contiguous", "membw", "fma"}, false, ctx.quick ? 0.01 : 0.5)) {
                r["workload"] = "target";
                s.records.push_back(std::move(r));
            }
        }
        serve_workload long_w{.mode = "decode", .batch = 1, .kv_len = long_kv, .heads = ctx.quick ? 4u : 32u,
                              .kv_heads = ctx.quick ? 2u : 8u, .d = ctx.quick ? 32u : 128u, .page_size = 16,
                              .threads = 2, .dtype = "f32"};
        for (auto& r : serve(long_w, {"paged", "membw", "fma"}, false, ctx.quick ? 0.01 : 0.5)) {
            r["workload"] = "target";
            s.records.push_back(std::move(r));
        }
        s.notes += " Target rows (`workload` = target) run the serving issue's workloads: `--batch 8 --kv-len 4096 "
                   "--kv-len-spread 0.5` in f32 and bf16, and `--batch 1 --kv-len 32768`, with `fma` (the step's "
                   "multiply-adds done in registers by the same threads); `roofline_ratio` is the slower of membw and "
                   "fma over the step's time.";
        // KV formats: token- vs head-major pages and 8-bit K/V vs bf16 on the same shapes, one
        // after another in this run.
        for (const auto& [batch, kv_len] : {std::pair<std::size_t, std::size_t>{8, ctx.quick ? 128 : 4096},
                                            std::pair<std::size_t, std::size_t>{1, long_kv}})
            for (const auto& [dtype, layout] : kv_formats) {
                serve_workload w{.mode = "decode", .batch = batch, .kv_len = kv_len, .heads = ctx.quick ? 4u : 32u,
                                 .kv_heads = ctx.quick ? 2u : 8u, .d = ctx.quick ? 32u : 128u, .page_size = 16,
                                 .threads = 2, .dtype = dtype, .layout = layout};
                for (auto& r : serve(w, {"paged"}, false, ctx.quick ? 0.01 : 0.5)) {
                    r["workload"] = "kv-format";
                    s.records.push_back(std::move(r));
                }
            }
        s.notes += " KV-format rows (`workload` = kv-format): `--batch 8 --kv-len 4096` and `--batch 1 --kv-len 32768` "
                   "with `--dtype T --layout L` (8-bit K/V read by bf16 queries; bytes as stored).";
        add_headlines(s, lengths.back(), ctx.quick);
        s.tables.push_back({.title = "One sequence (prefill)",
                            .columns = {"impl", "sq", "ms", "gflops", "useful_gflops", "ratio_to_gemm", "workspace_bytes"},
                            .exclude = {{"mode", "decode"}}});
        s.tables.push_back({.title = "KV formats: decode time by page layout and K/V storage",
                            .columns = {"batch", "kv_len", "dtype", "layout", "ms", "kv_bytes", "gbytes_per_s"},
                            .filter = {{"workload", "kv-format"}}});
        s.tables.push_back({.title = "Paged decode against a streaming read (membw)",
                            .columns = {"workload", "impl", "batch", "kv_len", "kv_len_spread", "dtype", "ms",
                                        "gbytes_per_s", "bandwidth_ratio", "cpu_bandwidth_ratio", "roofline_ratio"},
                            .filter = {{"mode", "decode"}},
                            .exclude = {{"workload", "kv-format"}}});
        s.plots.push_back({.file = "attention_gflops.png", .title = "Attention GFLOP/s vs sequence length",
                           .x = "sq", .y = "gflops", .series = "impl", .xlabel = "sequence length (sq = skv)",
                           .ylabel = "GFLOP/s (4 sq skv d heads / time)", .logx = true});
        s.plots.push_back({.file = "attention_workspace.png", .title = "Attention workspace vs sequence length",
                           .x = "sq", .y = "workspace_bytes", .series = "impl", .xlabel = "sequence length (sq = skv)",
                           .ylabel = "workspace bytes", .logx = true, .logy = true});
        s.plots.push_back({.file = "attention_decode_bandwidth.png",
                           .title = "Paged decode: K/V bandwidth over a streaming read", .x = "kv_len",
                           .y = "bandwidth_ratio", .series = "dtype", .xlabel = "KV length per sequence (batch 4)",
                           .ylabel = "bandwidth ratio (paged / membw)", .logx = true,
                           .filter = {{"impl", "paged"}, {"mode", "decode"}, {"batch", 4}}});  // not the target rows
        return s;
    }

private:
    // The KV formats the report times on each shape: f16 and bf16 in both page layouts,
    // and the 8-bit formats head-major.
    static constexpr std::array<std::pair<const char*, const char*>, 7> kv_formats{
        {{"f16", "hnd"}, {"f16", "nhd"}, {"bf16", "hnd"}, {"bf16", "nhd"}, {"fp8e4m3", "hnd"}, {"fp8e5m2", "hnd"}, {"int8", "hnd"}}};

    // The report's opening rows: the prefill roofline ratio at the longest sequence and the
    // serving targets' decode figures (each against membw or f32 in the same run).
    static void add_headlines(report_section& s, std::size_t longest, bool quick) {
        const auto& r = s.records;
        if (auto v = find_number(r, {{"impl", "tiled"}, {"sq", longest}}, "ratio_to_gemm"))
            s.headlines.push_back(at_least("prefill, s = " + std::to_string(longest) + ", 4 heads, tiled", *v,
                                           "Eigen GEMM of the same FLOPs", 0.85));
        const record f32{{"workload", "target"}, {"impl", "paged"}, {"batch", 8}, {"dtype", "f32"}};
        const record bf16{{"workload", "target"}, {"impl", "paged"}, {"batch", 8}, {"dtype", "bf16"}};
        const std::string batch8 = quick ? "decode, batch 8 (quick sizes)" : "decode, batch 8 x 4096 (spread 0.5)";
        if (auto v = find_number(r, f32, "bandwidth_ratio"))
            s.headlines.push_back(at_least(batch8 + ", paged f32", *v, "membw (streaming read of the K/V bytes)", 0.80));
        if (auto v = find_number(r, bf16, "bandwidth_ratio"))
            s.headlines.push_back(at_least(batch8 + ", paged bf16", *v, "membw (streaming read of the K/V bytes)", 0.70));
        // What the bandwidth target asks of the arithmetic: membw's time over the time of the
        // step's multiply-adds alone (below the target, no step can meet it on this machine).
        const record bf16_fma{{"workload", "target"}, {"impl", "fma"}, {"batch", 8}, {"dtype", "bf16"}};
        if (auto v = find_number(r, bf16_fma, "bandwidth_ratio"))
            s.headlines.push_back(untargeted(batch8 + ", bf16 multiply-adds alone (fma)", *v,
                                             "membw (streaming read of the K/V bytes)"));
        if (auto a = find_number(r, bf16, "ms"), b = find_number(r, f32, "ms"); a && b)
            s.headlines.push_back(at_most(batch8 + ", paged bf16 time", *a / *b, "paged f32 time", 0.6));
        if (auto v = find_number(r, {{"workload", "target"}, {"impl", "paged"}, {"batch", 1}}, "bandwidth_ratio"))
            s.headlines.push_back(at_least(quick ? "decode, batch 1 (quick sizes), paged f32"
                                                 : "decode, batch 1 x 32768, paged f32 (split-KV)",
                                           *v, "membw (streaming read of the K/V bytes)", 0.80));
        // KV formats: the worst ratio over both shapes (and f16 and bf16 for the layouts).
        const auto kv_ms = [&](std::size_t batch, const char* dtype, const char* layout) {
            return find_number(r, {{"workload", "kv-format"}, {"batch", batch}, {"dtype", dtype}, {"layout", layout}},
                               "ms");
        };
        const auto worst = [&](auto ratio) {
            std::optional<double> w;
            for (std::size_t batch : {8, 1})
                if (auto v = ratio(batch)) w = std::max(w.value_or(*v), *v);
            return w;
        };
        const std::string shapes = quick ? " (quick sizes)" : ", batch 8 x 4096 and 1 x 32768 (worse of the two)";
        const auto nhd_over_hnd = [&](std::size_t batch) -> std::optional<double> {
            std::optional<double> w;
            for (const char* dtype : {"f16", "bf16"})
                if (auto n = kv_ms(batch, dtype, "nhd"), h = kv_ms(batch, dtype, "hnd"); n && h)
                    w = std::max(w.value_or(*n / *h), *n / *h);
            return w;
        };
        if (auto v = worst(nhd_over_hnd))
            s.headlines.push_back(at_most("decode, token-major (NHD) pages, f16 and bf16" + shapes, *v,
                                          "head-major (HND) pages' time", 1.15));
        for (const char* dtype : {"fp8e4m3", "fp8e5m2", "int8"}) {
            const auto over_bf16 = [&](std::size_t batch) -> std::optional<double> {
                if (auto q = kv_ms(batch, dtype, "hnd"), b = kv_ms(batch, "bf16", "hnd"); q && b) return *q / *b;
                return std::nullopt;
            };
            if (auto v = worst(over_bf16))
                s.headlines.push_back(at_most(std::string("decode, ") + dtype + " K/V" + shapes, *v, "bf16 K/V time", 1.0));
        }
    }

    // The serving workload from the shared options (heads, KV heads, d, threads, causal).
    [[nodiscard]] serve_workload serving() const {
        serve_workload w = s_;
        w.heads = w_.heads;
        w.kv_heads = w_.kv_heads == 0 ? w_.heads : w_.kv_heads;
        w.d = w_.d;
        w.threads = w_.threads;
        w.causal = w_.causal;
        return w;
    }
    static std::vector<record> serve(const serve_workload& w, const std::vector<std::string>& impls, bool check,
                                     double seconds) {
        // 8-bit K/V is read by bf16 queries, as engines run it.
        if (w.dtype == "fp8e4m3") return serve_compare<attention::bfloat16, attention::float8_e4m3>(w, impls, check, seconds);
        if (w.dtype == "fp8e5m2") return serve_compare<attention::bfloat16, attention::float8_e5m2>(w, impls, check, seconds);
        if (w.dtype == "int8") return serve_compare<attention::bfloat16, std::int8_t>(w, impls, check, seconds);
        if (w.dtype == "bf16") return serve_compare<attention::bfloat16>(w, impls, check, seconds);
        if (w.dtype == "f16") return serve_compare<attention::float16>(w, impls, check, seconds);
        return serve_compare<float>(w, impls, check, seconds);
    }

    int run_cuda(result_sink& sink) const {
        FRUGAL_CHECK(!s_.mode.empty(), "attention --backend cuda needs --mode prefill|decode|mixed");
#ifdef FRUGAL_BENCH_HAVE_CUDA
        const serve_workload s = serving();
        const gpu::workload w{.mode = s.mode, .batch = s.batch, .kv_len = s.kv_len, .heads = s.heads,
                              .kv_heads = s.kv_heads, .d = s.d, .page_size = s.page_size, .chunk = s.chunk,
                              .spread = s.spread, .dtype = s.dtype, .layout = s.layout, .causal = s.causal,
                              .reps = reps_};
        for (auto r : gpu::run_attention(w)) sink.add(std::move(r));
        return 0;
#else
        (void)sink;
        FRUGAL_FAIL(frugal::invalid_argument, "attention --backend cuda: this frugal-bench was built without nvcc");
#endif
    }

    workload w_;
    serve_workload s_{.mode = ""};
    std::vector<std::string> impls_{"all"};
    bool check_ = false;
    std::string backend_ = "cpu";
    int reps_ = 30;
};

FRUGAL_BENCH_COMMAND(attention_command);

}  // namespace
}  // namespace frugal::bench
