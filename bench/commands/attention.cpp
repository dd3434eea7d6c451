// `frugal-bench attention`: tiled online-softmax attention against HyperGen's staged
// attention, a naive materialized softmax(QK^T)V, and an Eigen GEMM of the same FLOP
// count (the practical roofline), all in the same run with the same threads.
#include <algorithm>
#include <chrono>
#include <functional>
#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include <frugal/sim/staged_attention.hpp>
#include <frugal/attention/tiled_attention.hpp>
#include <frugal/backend/eigen/attention_backend.hpp>

#include "harness.hpp"

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

// max |out - float64 reference| over every output element.
double check(const workload& w, std::size_t kvh, const tensors& t, const std::vector<float>& out,
             const attention::attention_mask& mask) {
    std::vector<double> worst(w.threads, 0.0);
    const double scale = 1.0 / std::sqrt(double(w.d));
    const auto sq = std::int64_t(w.sq), skv = std::int64_t(w.skv);
    parallel_for(default_thread_pool(), w.heads * w.sq, w.threads, [&](std::size_t item, std::size_t worker) {
        const std::size_t h = item / w.sq, i = item % w.sq, g = h / (w.heads / kvh);
        std::vector<double> s(w.skv, -std::numeric_limits<double>::infinity()), o(w.d, 0.0);
        double mx = -std::numeric_limits<double>::infinity();
        const float* qi = &t.q[(i * w.heads + h) * w.d];
        for (std::size_t j = 0; j < w.skv; ++j) {
            if (!mask.visible(std::int64_t(i), std::int64_t(j), sq, skv)) continue;
            const float* kj = &t.k[(j * kvh + g) * w.d];
            double acc = 0;
            for (std::size_t c = 0; c < w.d; ++c) acc += double(qi[c]) * double(kj[c]);
            s[j] = acc * scale;
            mx = std::max(mx, s[j]);
        }
        double sum = 0;
        for (std::size_t j = 0; j < w.skv && mx > -std::numeric_limits<double>::infinity(); ++j) {
            const double p = std::exp(s[j] - mx);
            sum += p;
            if (p == 0.0) continue;
            const float* vj = &t.v[(j * kvh + g) * w.d];
            for (std::size_t c = 0; c < w.d; ++c) o[c] += p * double(vj[c]);
        }
        for (std::size_t c = 0; c < w.d; ++c) {
            const double want = sum > 0 ? o[c] / sum : 0.0;
            worst[worker] = std::max(worst[worker], std::abs(double(out[(i * w.heads + h) * w.d + c]) - want));
        }
    });
    return *std::max_element(worst.begin(), worst.end());
}

// Rows of Q per GEMM in the roofline: a multiple of the micro-kernel, small enough
// that the materialized product stays in a few MiB.
constexpr std::size_t roofline_rows = 256;

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
    const std::size_t blocks = (w.sq + roofline_rows - 1) / roofline_rows;
    const std::size_t rows = std::min(roofline_rows, w.sq);
    const auto tiled_plan = attention::tiled::plan(shape, options, budget);
    const auto staged_plan = sim::staged_attention::plan(shape, options, budget);
    if (want("gemm")) {
        // The same FLOP count as dense attention: per head, (sq x d)(d x skv) then
        // (sq x skv)(skv x d), in row blocks spread over the same threads.
        c.resize(std::min(w.threads, w.heads * blocks) * rows * w.skv);
        add("gemm", [&] {
            parallel_for(default_thread_pool(), w.heads * blocks, w.threads, [&](std::size_t item, std::size_t worker) {
                const std::size_t h = item / blocks, r0 = item % blocks * roofline_rows;
                const std::size_t n = std::min(roofline_rows, w.sq - r0);
                const matrix_view<float> s(c.data() + worker * rows * w.skv, n, w.skv);
                const std::size_t g = h / (w.heads / kvh);
                cpu.gemm(qv.head(h).row_block(r0, n), transpose::no, kv.head(g), transpose::yes, s, scale, 0.0f);
                cpu.gemm(matrix_view<const float>(s), transpose::no, vv.head(g), transpose::no,
                         ov.head(h).row_block(r0, n), 1.0f, 0.0f);
            });
        }, c.size() * sizeof(float), flops);
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
        if (with_check && r.impl != "gemm") r.err = check(w, kvh, t, t.out, mask);
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

class attention_command final : public subcommand {
public:
    std::string name() const override { return "attention"; }
    std::string summary() const override {
        return "tiled online-softmax attention vs HyperGen staged, naive and an Eigen GEMM roofline";
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
        app.add_option("--impl", impls_, "tiled|staged|naive|gemm|all (repeatable)")
            ->check(CLI::IsMember({"tiled", "staged", "naive", "gemm", "all"}))->capture_default_str();
        app.add_option("--q-tile", w_.q_tile, "preferred query tile of the tiled plan")->capture_default_str();
        app.add_option("--kv-tile", w_.kv_tile, "preferred KV tile of the tiled plan")->capture_default_str();
        app.add_flag("--check", check_, "max_abs_err against a float64 reference");
    }
    int run(result_sink& sink) override {
        for (auto& r : compare(w_, impls_, check_, 0.3)) sink.add(std::move(r));
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
        s.columns = {"impl", "sq", "ms", "gflops", "useful_gflops", "ratio_to_gemm", "workspace_bytes"};
        s.plots.push_back({.file = "attention_gflops.png", .title = "Attention GFLOP/s vs sequence length",
                           .x = "sq", .y = "gflops", .series = "impl", .xlabel = "sequence length (sq = skv)",
                           .ylabel = "GFLOP/s (4 sq skv d heads / time)", .logx = true});
        s.plots.push_back({.file = "attention_workspace.png", .title = "Attention workspace vs sequence length",
                           .x = "sq", .y = "workspace_bytes", .series = "impl", .xlabel = "sequence length (sq = skv)",
                           .ylabel = "workspace bytes", .logx = true, .logy = true});
        return s;
    }

private:
    workload w_;
    std::vector<std::string> impls_{"all"};
    bool check_ = false;
};

FRUGAL_BENCH_COMMAND(attention_command);

}  // namespace
}  // namespace frugal::bench
