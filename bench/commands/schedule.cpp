// `frugal-bench schedule`: the partition schedulers of frugal/schedule, each scored by the
// timeline simulator. (a) graph switching (CoordGen 3.2): frugal's greedy and the paper's
// literal greedy (Eq. 2) against the exact optimum on random instances and on Figure 8;
// (b) weight placement (HyperGen 3.1) on the OPT-30B fragment profile; (c) the sub-stage
// budget of HedraRAG Eq. 1 against fixed budgets on a simulated retrieval stream.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include <frugal/core/stats.hpp>
#include <frugal/schedule/graph_switch.hpp>
#include <frugal/sim/paper_graph_switch.hpp>
#include <frugal/schedule/placement.hpp>

#include "harness.hpp"

namespace frugal::bench {
namespace {

double ms_since(std::chrono::steady_clock::time_point t0) {
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

// Random instance: per-block G1 compute p ~ U[0.5, 1.5]; G2 (decode graph run on
// sub-chunks) slower for prefill, d = p * U[1.0, 1.5]; load s = rho * p * U[0.5, 1.5] with
// one load/compute level rho per instance, log-uniform in [0.25, 4]; C = 2 chunks.
schedule::graph_switch_problem random_switch_problem(std::mt19937_64& rng, std::size_t n) {
    std::uniform_real_distribution<double> unit(0.5, 1.5), slow(1.0, 1.5), log_rho(std::log(0.25), std::log(4.0));
    schedule::graph_switch_problem p;
    p.chunks = 2;
    const double rho = std::exp(log_rho(rng));
    for (std::size_t i = 0; i < n; ++i) {
        const double pi = unit(rng);
        p.prefill_compute.push_back(pi);
        p.decode_compute.push_back(pi * slow(rng));
        p.load.push_back(rho * pi * unit(rng));
    }
    return p;
}

// CoordGen Figure 8: N = 6, two chunks, a load covers two block computes.
schedule::graph_switch_problem figure8_problem() {
    return {.prefill_compute = std::vector<double>(6, 1.0), .decode_compute = std::vector<double>(6, 1.0),
            .load = std::vector<double>(6, 2.0), .chunks = 2};
}

struct switch_sample {
    double gap, paper_gap, exact_ms, greedy_ms, paper_ms;
};

switch_sample solve_switch(const schedule::graph_switch_problem& p) {
    switch_sample s{};
    auto t0 = std::chrono::steady_clock::now();
    const auto paper = sim::paper_greedy_graph_switch(p);
    s.paper_ms = ms_since(t0);
    t0 = std::chrono::steady_clock::now();
    const auto greedy = schedule::greedy_graph_switch(p);
    s.greedy_ms = ms_since(t0);
    t0 = std::chrono::steady_clock::now();
    const auto exact = schedule::exact_graph_switch(p);
    s.exact_ms = ms_since(t0);
    // Every plan scored by replaying it on the timeline simulator.
    const double opt = schedule::graph_switch_makespan(p, exact);
    s.gap = schedule::graph_switch_makespan(p, greedy) / opt - 1.0;
    s.paper_gap = schedule::graph_switch_makespan(p, paper) / opt - 1.0;
    return s;
}

record summarize_switch(const std::string& workload, std::size_t n, const std::vector<switch_sample>& samples) {
    auto column = [&](double switch_sample::*field) {
        std::vector<double> v;
        for (const auto& s : samples) v.push_back(s.*field);
        return v;
    };
    const auto gap = column(&switch_sample::gap), paper = column(&switch_sample::paper_gap);
    const auto exact = column(&switch_sample::exact_ms), greedy = column(&switch_sample::greedy_ms),
               paper_ms = column(&switch_sample::paper_ms);
    const auto within = [](const std::vector<double>& g) {
        return double(std::count_if(g.begin(), g.end(), [](double x) { return x <= 0.05; })) / double(g.size());
    };
    return {{"part", "graph_switch"},
            {"workload", workload},
            {"n", n},
            {"instances", samples.size()},
            {"gap_median", quantile(gap, 0.5)},
            {"gap_p95", quantile(gap, 0.95)},
            {"gap_max", quantile(gap, 1.0)},
            {"within_5pct", within(gap)},
            {"paper_gap_median", quantile(paper, 0.5)},
            {"paper_gap_p95_literal", quantile(paper, 0.95)},
            {"paper_gap_max", quantile(paper, 1.0)},
            {"paper_within_5pct", within(paper)},
            {"exact_ms_median", quantile(exact, 0.5)},
            {"exact_ms_p95", quantile(exact, 0.95)},
            {"exact_ms_max", quantile(exact, 1.0)},
            {"greedy_ms_median", quantile(greedy, 0.5)},
            {"paper_greedy_ms_median", quantile(paper_ms, 0.5)}};
}

std::vector<record> graph_switch_records(std::size_t instances, std::uint64_t seed) {
    std::vector<record> out;
    out.push_back(summarize_switch("figure8", 6, {solve_switch(figure8_problem())}));
    for (std::size_t n : {6, 12, 16, 20}) {
        std::mt19937_64 rng(seed + n);
        std::vector<switch_sample> samples;
        for (std::size_t k = 0; k < instances; ++k) samples.push_back(solve_switch(random_switch_problem(rng, n)));
        out.push_back(summarize_switch("random", n, samples));
    }
    return out;
}

// OPT-30B as FlexGen partitions it (hidden 7168, FFN 28672, 48 layers, fp16), which
// gives the paper's profile: 482 fragments under 60 KiB (biases and layer norms, 8.6 MiB),
// 290 over 90 MiB (the six weight matrices of each layer plus the input and output token
// embeddings, 56.5 GiB) and the 28 MiB positional embedding. Blocks: 0 = input embedding,
// 1..48 = layers, 49 = output. `tied`: the output embedding is the input one (one
// fragment used by blocks 0 and 49), as in the Hugging Face checkpoint.
std::vector<schedule::fragment> opt30b_fragments(bool tied) {
    constexpr std::uint64_t h = 7168, ffn = 28672, vocab = 50272, positions = 2050, fp16 = 2;
    std::vector<schedule::fragment> f;
    f.push_back({vocab * h * fp16, tied ? std::vector<std::size_t>{0, 49} : std::vector<std::size_t>{0}});
    f.push_back({positions * h * fp16, {0}});
    for (std::size_t layer = 1; layer <= 48; ++layer) {
        for (int k = 0; k < 4; ++k) f.push_back({h * h * fp16, {layer}});        // q, k, v, out
        f.push_back({h * ffn * fp16, {layer}});                                   // fc1
        f.push_back({ffn * h * fp16, {layer}});                                   // fc2
        for (int k = 0; k < 9; ++k) f.push_back({h * fp16, {layer}});             // 5 biases, 2 x 2 norms
        f.push_back({ffn * fp16, {layer}});                                       // fc1 bias
    }
    f.push_back({h * fp16, {49}});  // final layer norm
    f.push_back({h * fp16, {49}});
    if (!tied) f.push_back({vocab * h * fp16, {49}});
    return f;
}

std::vector<record> placement_records(bool quick) {
    std::vector<record> out;
    const double gib = 1024.0 * 1024 * 1024, mib = 1024.0 * 1024;
    // Per-block compute of a 512-token prefill at 50 TFLOP/s (2 flops per weight per token),
    // and a 16 GB/s host link.
    const double bandwidth = 16e9;
    for (const bool tied : {false, true}) {
        const auto f = opt30b_fragments(tied);
        std::vector<double> compute(50, 0.0);
        for (const auto& fr : f)
            for (std::size_t b : fr.blocks) compute[b] += 2.0 * 512 * double(fr.bytes / 2) / 50e12;
        const auto limits = quick ? std::vector<std::uint64_t>{10, 64} : std::vector<std::uint64_t>{10, 64, 512, 2048, 4096};
        for (const std::uint64_t limit_mib : limits) {
            const std::uint64_t limit = limit_mib << 20;
            double baseline = 0;
            for (const auto& [name, objective] :
                 {std::pair{"smallest-first", schedule::placement_objective::smallest_first},
                  std::pair{"knapsack-bytes", schedule::placement_objective::bytes_kept},
                  std::pair{"min-transfer", schedule::placement_objective::transfer}}) {
                const auto p = schedule::place_fragments(f, limit, objective);
                const auto r = schedule::placement_timeline(f, p, compute, bandwidth).simulate();
                if (objective == schedule::placement_objective::smallest_first) baseline = double(p.transfer_bytes_per_pass);
                out.push_back({{"part", "placement"},
                               {"profile", tied ? "opt30b-tied" : "opt30b"},
                               {"limit_mib", limit_mib},
                               {"policy", name},
                               {"exact", p.exact},
                               {"resident_fragments", p.resident.size()},
                               {"resident_mib", double(p.resident_bytes) / mib},
                               {"transfer_gib_per_pass", double(p.transfer_bytes_per_pass) / gib},
                               {"transfer_ratio_to_smallest_first", double(p.transfer_bytes_per_pass) / baseline},
                               {"pass_ms", r.makespan * 1e3},
                               {"peak_gib", double(r.peak_resident_bytes) / gib}});
            }
        }
    }
    return out;
}

// The records of one part as a markdown table (the report's own table shows the
// graph-switch records; the parts have different fields).
std::string markdown_table(const std::vector<record>& records, const std::string& part,
                           const std::vector<std::string>& columns) {
    std::string out = "|";
    for (const auto& c : columns) out += " " + c + " |";
    out += "\n|";
    for (std::size_t k = 0; k < columns.size(); ++k) out += "---|";
    out += "\n";
    for (const auto& r : records) {
        if (r.value("part", "") != part) continue;
        out += "|";
        for (const auto& c : columns) out += " " + (r.contains(c) ? format_value(r[c]) : std::string()) + " |";
        out += "\n";
    }
    return out;
}

class schedule_command final : public subcommand {
public:
    std::string name() const override { return "schedule"; }
    std::string summary() const override {
        return "partition schedulers (graph switching, placement, sub-stage budget) scored by the timeline";
    }
    int report_order() const override { return 60; }
    void configure(CLI::App& app) override {
        app.add_option("--instances", instances_, "random graph-switch instances per N")
            ->check(CLI::PositiveNumber)
            ->capture_default_str();
        app.add_option("--seed", seed_, "random seed")->capture_default_str();
    }
    int run(result_sink& sink) override {
        for (auto& r : graph_switch_records(instances_, seed_)) sink.add(std::move(r));
        for (auto& r : placement_records(false)) sink.add(std::move(r));
        return 0;
    }
    report_section report(const report_context& ctx) override {
        report_section s;
        s.title = "Partition schedulers";
        const std::size_t instances = ctx.quick ? 3 : 200;
        s.data_source = "generated: " + std::to_string(instances) +
                        " random graph-switch instances per N (seed 1; `frugal-bench schedule` runs 1000), "
                        "and CoordGen Figure 8";
        s.notes =
            "Graph switching (CoordGen 3.2): makespan excess of frugal's greedy (paper greedy + local "
            "improvement) and of the paper's literal greedy (Eq. 2) over the exact branch-and-bound optimum; "
            "every plan replayed on the timeline simulator. Instances: C = 2 chunks, G1 compute U[0.5, 1.5], "
            "G2 1.0-1.5x slower, load/compute level log-uniform in [0.25, 4]. The report runs fewer instances "
            "than `frugal-bench schedule --json` (1000 per N).\n\n"
            "Placement (HyperGen 3.1): the OPT-30B fragment profile (FlexGen partitioning; `opt30b-tied` shares "
            "the token embedding between the first and last block), smallest-first vs 0/1 knapsack on bytes kept "
            "vs 0/1 knapsack on bytes transferred per pass; pass time replayed on the timeline at 16 GB/s.";
        for (auto& r : graph_switch_records(instances, seed_)) s.records.push_back(std::move(r));
        for (auto& r : placement_records(ctx.quick)) s.records.push_back(std::move(r));
        s.notes += "\n\nPlacement records:\n\n" +
                   markdown_table(s.records, "placement",
                                  {"profile", "limit_mib", "policy", "exact", "resident_fragments", "resident_mib",
                                   "transfer_gib_per_pass", "transfer_ratio_to_smallest_first", "pass_ms", "peak_gib"}) +
                   "\nAll records below (graph switching fields; solver times in ms; the placement rows' "
                   "fields are in the table above):";
        s.columns = {"part", "workload", "n", "instances", "gap_median", "gap_p95", "gap_max", "within_5pct",
                     "paper_gap_median", "paper_gap_p95_literal", "paper_gap_max", "exact_ms_median",
                     "exact_ms_p95", "exact_ms_max", "greedy_ms_median"};
        s.plots.push_back({.file = "schedule_switch_paper_gap.png",
                           .title = "Graph switching: the paper's literal greedy (Eq. 2), p95 excess",
                           .x = "n", .y = "paper_gap_p95_literal", .series = "", .xlabel = "blocks N",
                           .ylabel = "p95 gap (paper greedy)", .logx = false, .logy = false, .kind = "bar",
                           .filter = {{"workload", "random"}}});
        s.plots.push_back({.file = "schedule_placement.png",
                           .title = "OPT-30B placement (tied embeddings): bytes moved per pass",
                           .x = "limit_mib", .y = "transfer_gib_per_pass", .series = "policy",
                           .xlabel = "allocation limit (MiB)", .ylabel = "GiB transferred per forward pass",
                           .logx = true, .logy = false, .kind = "line", .filter = {{"profile", "opt30b-tied"}}});
        s.plots.push_back({.file = "schedule_switch_gap.png",
                           .title = "Graph switching: p95 makespan excess over the exact optimum",
                           .x = "n", .y = "gap_p95",
                           .series = "", .xlabel = "blocks N", .ylabel = "p95 gap (frugal greedy)", .logx = false, .logy = false, .kind = "bar", .filter = {{"workload", "random"}}});
        return s;
    }

private:
    std::size_t instances_ = 1000;
    std::uint64_t seed_ = 1;
};

FRUGAL_BENCH_COMMAND(schedule_command);

}  // namespace
}  // namespace frugal::bench
