// `frugal-bench schedule`: the partition schedulers of frugal/schedule, each scored by the
// timeline simulator. (a) graph switching (CoordGen 3.2): frugal's greedy and the paper's
// literal greedy (Eq. 2) against the exact optimum on random instances and on Figure 8.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include <frugal/core/stats.hpp>
#include <frugal/schedule/graph_switch.hpp>

#include "harness.hpp"

namespace frugal::bench {
namespace {

double ms_since(std::chrono::steady_clock::time_point t0) {
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

// Random instance: per-block G1 compute p ~ U[0.5, 1.5]; G2 (decode graph run on
// sub-chunks) slower for prefill, d = p * U[1.0, 1.5]; load s = rho * p * U[0.5, 1.5] with
// one load/compute level rho per instance, log-uniform in [0.25, 4]; C = 2 chunks.
graph_switch_problem random_switch_problem(std::mt19937_64& rng, std::size_t n) {
    std::uniform_real_distribution<double> unit(0.5, 1.5), slow(1.0, 1.5), log_rho(std::log(0.25), std::log(4.0));
    graph_switch_problem p;
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

// coordgen.txt Figure 8: N = 6, two chunks, a load covers two block computes.
graph_switch_problem figure8_problem() {
    return {.prefill_compute = std::vector<double>(6, 1.0), .decode_compute = std::vector<double>(6, 1.0),
            .load = std::vector<double>(6, 2.0), .chunks = 2};
}

struct switch_sample {
    double gap, paper_gap, exact_ms, greedy_ms, paper_ms;
};

switch_sample solve_switch(const graph_switch_problem& p) {
    switch_sample s{};
    auto t0 = std::chrono::steady_clock::now();
    const auto paper = paper_greedy_graph_switch(p);
    s.paper_ms = ms_since(t0);
    t0 = std::chrono::steady_clock::now();
    const auto greedy = greedy_graph_switch(p);
    s.greedy_ms = ms_since(t0);
    t0 = std::chrono::steady_clock::now();
    const auto exact = exact_graph_switch(p);
    s.exact_ms = ms_since(t0);
    // Every plan scored by replaying it on the timeline simulator.
    const double opt = graph_switch_makespan(p, exact);
    s.gap = graph_switch_makespan(p, greedy) / opt - 1.0;
    s.paper_gap = graph_switch_makespan(p, paper) / opt - 1.0;
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
        return 0;
    }
    report_section report(const report_context& ctx) override {
        report_section s;
        s.title = "Partition schedulers";
        const std::size_t instances = ctx.quick ? 10 : 200;
        s.data_source = "generated: " + std::to_string(instances) +
                        " random graph-switch instances per N (seed 1; `frugal-bench schedule` runs 1000), "
                        "and coordgen.txt Figure 8";
        s.notes =
            "Graph switching (CoordGen 3.2): makespan excess of frugal's greedy (paper greedy + local "
            "improvement) and of the paper's literal greedy (Eq. 2) over the exact branch-and-bound optimum; "
            "every plan replayed on the timeline simulator. Instances: C = 2 chunks, G1 compute U[0.5, 1.5], "
            "G2 1.0-1.5x slower, load/compute level log-uniform in [0.25, 4].";
        for (auto& r : graph_switch_records(instances, seed_)) s.records.push_back(std::move(r));
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
