// `frugal-bench rag`: HedraRAG's scheduling in simulation mode (sequential stages, a naive
// asynchronous pipeline, and the wavefront scheduler with sub-stages and speculation) on
// One-shot, HyDE and Multistep request streams: mean latency by request rate and the
// highest rate each scheduler sustains under a mean-latency limit.
#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include <frugal/cache/hot_set.hpp>
#include <frugal/retrieve/cluster_order.hpp>
#include <frugal/retrieve/ivf_flat.hpp>
#include <frugal/schedule/rag_simulation.hpp>
#include <frugal/schedule/wavefront.hpp>
#include <frugal/schedule/workflow.hpp>

#include "harness.hpp"

namespace frugal::bench {
namespace {

struct scheduler_spec {
    const char* name;
    rag_schedule_options options;
};

const std::vector<scheduler_spec>& schedulers() {
    static const std::vector<scheduler_spec> s{
        {"sequential", {.policy = rag_policy::sequential}},
        {"naive_async", {.policy = rag_policy::naive_async}},
        {"wavefront", {.policy = rag_policy::wavefront, .speculate = true}},
    };
    return s;
}

struct workload {
    std::string name;
    rag_graph graph;
    std::int64_t min_sub = 0, max_sub = 0;
};

std::vector<workload> workloads() {
    std::vector<workload> w;
    w.push_back({"one-shot", one_shot_workflow(5), 0, 0});
    w.push_back({"hyde", hyde_workflow(5), 0, 0});
    w.push_back({"multistep", multistep_workflow(2), 2, 4});
    return w;
}

struct sim_settings {
    std::size_t requests = 400;
    double latency_factor = 3.0;
    std::uint64_t seed = 42;
    std::size_t nprobe = 256;
    double max_rate = 1e4;     ///< the scan stops here (reported as sustained)
    int bisections = 8;
};

double mean_latency(const workload& w, const rag_schedule_options& opt, double rate, const sim_settings& s,
                    rag_run* keep = nullptr, double* tail_mean = nullptr) {
    const std::vector<rag_mix_entry> mix{{&w.graph, 1.0, w.min_sub, w.max_sub}};
    simulated_generator gen;
    simulated_retriever::config rc;
    rc.nprobe = s.nprobe;
    simulated_retriever ret(rc);
    rag_run run = schedule_rag(poisson_requests(mix, rate, s.requests, s.seed), gen, ret, opt);
    const double m = run.mean_latency();
    if (tail_mean) {
        // Requests are in arrival order: the last third shows whether latency keeps growing.
        double sum = 0.0;
        const std::size_t from = run.requests.size() * 2 / 3;
        for (std::size_t i = from; i < run.requests.size(); ++i) sum += run.requests[i].latency();
        *tail_mean = sum / static_cast<double>(run.requests.size() - from);
    }
    if (keep) *keep = std::move(run);
    return m;
}

// Whether `rate` is sustained: the mean latency of all requests and of the last third
// (by arrival; it grows without bound when the system is overloaded) are within `limit`.
bool sustains(const workload& w, const rag_schedule_options& opt, double rate, double limit, const sim_settings& s) {
    double tail = 0.0;
    const double all = mean_latency(w, opt, rate, s, nullptr, &tail);
    return all <= limit && tail <= limit;
}

// The highest sustained request rate: a geometric scan (x1.25) from a rate that is
// sustained, then bisection (8 steps) between the last passing and the first failing rate.
double sustained_rate(const workload& w, const rag_schedule_options& opt, double limit, const sim_settings& s) {
    double lo = 0.05, hi = lo;
    while (sustains(w, opt, hi, limit, s)) {
        lo = hi;
        hi *= 1.25;
        if (hi > s.max_rate) return hi;
    }
    if (lo == hi) return 0.0;
    for (int i = 0; i < s.bisections; ++i) {
        const double mid = std::sqrt(lo * hi);
        (sustains(w, opt, mid, limit, s) ? lo : hi) = mid;
    }
    return lo;
}

void simulate(const sim_settings& s, const std::vector<double>& rate_fractions, std::vector<record>& out) {
    for (const workload& w : workloads()) {
        // The unloaded latency: requests so sparse that none overlaps another.
        const double unloaded = mean_latency(w, schedulers()[0].options, 0.01, s);
        const double limit = s.latency_factor * unloaded;
        std::vector<double> sustained;
        for (const auto& sch : schedulers()) sustained.push_back(sustained_rate(w, sch.options, limit, s));
        out.push_back({{"workflow", w.name}, {"kind", "summary"}, {"unloaded_latency_ms", unloaded},
                       {"latency_limit_ms", limit}, {"sequential_rate", sustained[0]},
                       {"naive_async_rate", sustained[1]}, {"wavefront_rate", sustained[2]},
                       {"naive_ratio", sustained[1] / sustained[0]}, {"rate_ratio", sustained[2] / sustained[0]}});
        for (double f : rate_fractions) {
            const double rate = f * sustained[2];
            for (const auto& sch : schedulers()) {
                rag_run run;
                const double m = mean_latency(w, sch.options, rate, s, &run);
                out.push_back({{"workflow", w.name}, {"kind", "rate"}, {"scheduler", sch.name}, {"rate_per_s", rate},
                               {"mean_latency_ms", m},
                               {"throughput_per_s", 1000.0 * static_cast<double>(run.requests.size()) / run.makespan},
                               {"gpu_util", run.gpu_busy / run.makespan}, {"cpu_util", run.cpu_busy / run.makespan},
                               {"speculations", run.speculations}, {"rollbacks", run.rollbacks}});
            }
        }
    }
}

// Part (b): real retrieval on the reference IVF-Flat over a Gaussian mixture (64 unit-variance
// topics whose centers are themselves N(0, 1), so topics overlap). Requests pick
// a topic by Zipf(1.1) and issue successive queries that drift a little from each other.
// For every query after a request's first: the number of probed lists searched, in probe
// order and in the similarity-aware order, before the final top-k is complete (one past the
// last list holding a final result), and how often the final top-k lies in the previous
// query's top-20. A hot_set of 20% of the lists (refreshed every 50 queries, decay 0.5)
// gives the hit ratio of probed lists (and of scanned vectors) in the fast tier.
void retrieval_study(bool quick, std::vector<record>& out) {
    const std::size_t dim = 32, topics = 64, n = quick ? 4000 : 30000, lists = quick ? 32 : 256;
    const std::size_t nprobe = quick ? 8 : 32, k = 5, requests = quick ? 40 : 300, rounds = 4;
    std::mt19937_64 rng(42);
    std::normal_distribution<float> z;
    std::vector<float> centers(topics * dim), data;
    for (auto& c : centers) c = z(rng);  // topics overlap, as embedding clusters do
    for (std::size_t i = 0; i < n; ++i) {
        const std::size_t t = i % topics;
        for (std::size_t d = 0; d < dim; ++d) data.push_back(centers[t * dim + d] + z(rng));
    }
    const ivf_flat ix = ivf_flat::train(data, dim, lists, 8, 7);
    std::vector<double> zipf;
    for (std::size_t t = 0; t < topics; ++t) zipf.push_back(1.0 / std::pow(double(t + 1), 1.1));
    std::discrete_distribution<std::size_t> topic(zipf.begin(), zipf.end());
    hot_set<std::size_t> hot(lists / 5, 50, 0.5);
    double plain_sum = 0, reordered_sum = 0, in_cache = 0, hits = 0, probes = 0, hit_work = 0, work = 0;
    std::size_t follow_ups = 0;
    for (std::size_t r = 0; r < requests; ++r) {
        const std::size_t t = topic(rng);
        std::vector<float> q(dim);
        for (std::size_t d = 0; d < dim; ++d) q[d] = centers[t * dim + d] + z(rng);
        retrieval_history history(20);
        for (std::size_t round = 0; round < rounds; ++round) {
            if (round > 0)
                for (auto& v : q) v += 0.3f * z(rng);
            const auto probe = ix.probe(q, nprobe);
            top_k wide(20);
            ix.search_lists(q, probe, wide);
            const auto wide_ids = wide.ids();
            const std::vector<std::uint64_t> final_ids(wide_ids.begin(), wide_ids.begin() + static_cast<std::ptrdiff_t>(k));
            if (round > 0) {
                auto needed = [&](const std::vector<std::size_t>& order) {
                    std::size_t last = 0;
                    for (std::uint64_t id : final_ids) {
                        const auto pos = std::find(order.begin(), order.end(), ix.list_of(id)) - order.begin();
                        last = std::max(last, static_cast<std::size_t>(pos) + 1);
                    }
                    return static_cast<double>(last);
                };
                plain_sum += needed(probe);
                reordered_sum += needed(history.order(probe));
                bool all = true;
                for (std::uint64_t id : final_ids) {
                    bool found = false;
                    for (const auto& [cid, list] : history.results()) found = found || cid == id;
                    all = all && found;
                }
                in_cache += all ? 1.0 : 0.0;
                ++follow_ups;
            }
            std::vector<std::pair<std::uint64_t, std::size_t>> with_lists;
            for (std::uint64_t id : wide_ids) with_lists.emplace_back(id, ix.list_of(id));
            history.remember(with_lists, probe);
            for (std::size_t c : probe) {
                const double size = static_cast<double>(ix.list_size(c));
                if (hot.contains(c)) {
                    ++hits;
                    hit_work += size;
                }
                ++probes;
                work += size;
                hot.record(c, size);
            }
            (void)hot.step();
        }
    }
    const double f = static_cast<double>(follow_ups);
    out.push_back({{"kind", "reorder"}, {"vectors", n}, {"lists", lists}, {"nprobe", nprobe}, {"k", k},
                   {"follow_up_queries", follow_ups}, {"clusters_probe_order", plain_sum / f},
                   {"clusters_reordered", reordered_sum / f}, {"reorder_ratio", reordered_sum / plain_sum},
                   {"final_topk_in_previous_top20", in_cache / f}});
    out.push_back({{"kind", "hot_set"}, {"lists", lists}, {"gc", lists / 5}, {"period", 50}, {"decay", 0.5},
                   {"hit_ratio", hits / probes}, {"work_hit_ratio", hit_work / work}});
}

class rag_command final : public subcommand {
public:
    std::string name() const override { return "rag"; }
    std::string summary() const override {
        return "RAG serving simulation: sequential vs naive async vs wavefront (HedraRAG)";
    }
    int report_order() const override { return 60; }
    void configure(CLI::App& app) override {
        app.add_option("--requests", s_.requests, "requests per simulated run")->check(CLI::PositiveNumber)->capture_default_str();
        app.add_option("--latency-factor", s_.latency_factor, "mean-latency limit as a multiple of the unloaded sequential latency")
            ->check(CLI::PositiveNumber)->capture_default_str();
        app.add_option("--nprobe", s_.nprobe, "IVF clusters searched per query (of 4096)")->check(CLI::Range(1, 4096))->capture_default_str();
        app.add_option("--seed", s_.seed, "arrival seed")->capture_default_str();
    }
    int run(result_sink& sink) override {
        std::vector<record> out;
        simulate(s_, {0.25, 0.5, 0.75, 1.0}, out);
        retrieval_study(false, out);
        for (auto& r : out) sink.add(std::move(r));
        return 0;
    }
    report_section report(const report_context& ctx) override {
        report_section sec;
        sec.title = "RAG serving: wavefront scheduling (HedraRAG)";
        sec.data_source = "simulation (decode and IVF cost models; seeded Poisson arrivals, seed 42)";
        sim_settings s = s_;
        if (ctx.quick) {  // harness check only: few requests, a coarse search
            s.requests = 40;
            s.max_rate = 100.0;
            s.bisections = 2;
        }
        sec.notes = "Simulation mode of `frugal::schedule_rag` (docs/rag.md): Llama-3-8B/H100 decode model, IVF4096 "
                    "over 38M 1024-d vectors with nprobe 256 on 32 CPU threads. `rate_ratio` = highest Poisson rate "
                    "the wavefront scheduler sustains at mean latency <= 3x the unloaded sequential latency, over the "
                    "rate sequential stage execution sustains. `frugal-bench rag`.";
        const std::vector<double> fractions = ctx.quick ? std::vector<double>{0.5, 1.0}
                                                        : std::vector<double>{0.2, 0.4, 0.6, 0.8, 0.9, 1.0, 1.1};
        sec.columns = {"workflow",       "kind",          "scheduler",     "rate_per_s",   "mean_latency_ms",
                       "sequential_rate", "wavefront_rate", "rate_ratio",   "naive_ratio",  "reorder_ratio",
                       "final_topk_in_previous_top20", "hit_ratio", "work_hit_ratio"};
        simulate(s, fractions, sec.records);
        retrieval_study(ctx.quick, sec.records);
        for (const char* wf : {"one-shot", "hyde", "multistep"})
            sec.plots.push_back({.file = std::string("rag_latency_") + wf + ".png",
                                 .title = std::string("mean latency vs request rate, ") + wf,
                                 .x = "rate_per_s", .y = "mean_latency_ms", .series = "scheduler",
                                 .xlabel = "requests / s", .ylabel = "mean latency (ms)", .logy = true,
                                 .filter = {{"workflow", wf}, {"kind", "rate"}}});
        return sec;
    }

private:
    sim_settings s_;
};

FRUGAL_BENCH_COMMAND(rag_command);

}  // namespace
}  // namespace frugal::bench
