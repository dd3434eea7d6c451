// `frugal-bench rag --real` (`--parts r`): HedraRAG's schedulers in wall-clock time on this machine.
// Retrieval is real: eigen::ivf_flat over a clustered 128-d corpus, its scans on a thread
// pool of the machine's cores; requests draw a Zipf-skewed topic and their successive queries
// drift. The generator is a device stand-in on the runtime's generation thread, holding each
// decode step for the Llama-3-8B/H100 step-time model (no GPU here). The baseline retrieval is
// FAISS-like (a call's queries split over the threads, one query per thread: the paper's
// FlashRAG baseline); the wavefront's retrieval splits each query's lists over the threads,
// as HedraRAG's own retrieval does (part a's simulation separates the two with a naive
// pipeline on the split retriever). Each sustained rate is beside the simulation's for the
// same configuration and trials (the cost models calibrated on this index).
#include "rag_real.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <future>
#include <numeric>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <frugal/backend/eigen/eigen_backend.hpp>
#include <frugal/backend/eigen/similarity_scan.hpp>
#include <frugal/core/thread_pool.hpp>
#include <frugal/rag/ivf_retriever.hpp>
#include <frugal/rag/runtime.hpp>
#include <frugal/rag/scheduler.hpp>
#include <frugal/rag/workflow.hpp>
#include <frugal/sim/rag_event_loop.hpp>
#include <frugal/sim/rag_simulation.hpp>
#include <frugal/sim/rag_standins.hpp>

namespace frugal::bench {
namespace {

using index_type = eigen::ivf_flat;
using retriever_type = rag::ivf_retriever<index_type, sim::drifting_queries, thread_pool>;
using device_type = sim::held_generator<sim::simulated_generator>;

struct config {
    const char* name;
    std::size_t nprobe;
    rag::rag_workflow_lengths lengths;
};

struct flow {
    const char* name;
    rag::rag_graph graph;
    std::int64_t min_sub = 0, max_sub = 0;
};

struct scheduler {
    const char* name;
    rag::rag_policy policy;
    bool split_lists;
};

const std::vector<scheduler>& schedulers() {
    static const std::vector<scheduler> s{{"sequential", rag::rag_policy::sequential, false},
                                          {"naive_async", rag::rag_policy::naive_async, false},
                                          {"wavefront", rag::rag_policy::wavefront, true}};
    return s;
}

// Poisson arrivals; each request a Zipf(1.1) topic and its own query seed.
std::vector<sim::rag_request> make_requests(const flow& f, double rate, std::size_t n, std::size_t topics,
                                            std::uint64_t seed) {
    const std::vector<sim::rag_mix_entry> mix{{&f.graph, 1.0, f.min_sub, f.max_sub}};
    auto reqs = sim::poisson_requests(mix, rate, n, seed);
    std::vector<double> weights(topics);
    for (std::size_t t = 0; t < topics; ++t) weights[t] = 1.0 / std::pow(double(t + 1), 1.1);
    std::mt19937_64 rng(seed ^ 0x70b1c5);
    std::discrete_distribution<std::size_t> topic(weights.begin(), weights.end());
    for (std::size_t i = 0; i < reqs.size(); ++i) {
        reqs[i].state.values["topic"] = static_cast<std::int64_t>(topic(rng));
        reqs[i].state.values["seed"] = static_cast<std::int64_t>(seed * 1000003 + i);
    }
    return reqs;
}

struct latency {
    double mean = 0.0, tail = 0.0;  // all requests, and the last third by arrival
};

latency summarize(const std::vector<double>& ms) {
    latency l;
    l.mean = std::accumulate(ms.begin(), ms.end(), 0.0) / double(ms.size());
    const std::size_t from = ms.size() * 2 / 3;
    l.tail = std::accumulate(ms.begin() + std::ptrdiff_t(from), ms.end(), 0.0) / double(ms.size() - from);
    return l;
}

// The requests through a fresh runtime, each submitted at its arrival time.
latency run_real(const std::vector<sim::rag_request>& reqs, retriever_type& ret, thread_pool& cpu,
                 const rag::rag_schedule_options& opt) {
    device_type device{sim::simulated_generator{}};
    rag::rag_runtime rt(device, ret, cpu, {.schedule = opt, .max_in_flight = 4096});
    std::vector<std::future<rag::rag_result>> pending;
    const auto t0 = std::chrono::steady_clock::now();
    for (const auto& r : reqs) {
        std::this_thread::sleep_until(t0 + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                                               std::chrono::duration<double, std::milli>(r.arrival)));
        pending.push_back(rt.submit(*r.graph, r.state));
    }
    std::vector<double> ms;
    for (auto& f : pending) {
        const rag::rag_result res = f.get();
        FRUGAL_CHECK(res.status == rag::rag_status::finished, "rag real run: a request ended ",
                     rag::rag_status_name(res.status), ": ", res.error);
        ms.push_back(res.metrics.end_to_end_ms);
    }
    return summarize(ms);
}

// The same requests in simulation mode, on cost models calibrated on the index.
latency run_sim(const std::vector<sim::rag_request>& reqs, const sim::simulated_retriever::config& rc,
                const rag::rag_schedule_options& opt) {
    sim::simulated_generator gen;
    sim::simulated_retriever ret(rc);
    const rag::rag_run run = sim::schedule_rag(reqs, gen, ret, opt);
    std::vector<double> ms;
    for (const auto& o : run.requests) ms.push_back(o.latency());
    return summarize(ms);
}

// The highest sustained rate: from `start`, up or down by `factor` to a bracket (at most
// `moves` moves; the last rate tried when none brackets it), then `steps` bisections.
template <class Passes>
double sustained(Passes passes, double start, double factor, int moves, int steps) {
    double lo = 0.0, hi = 0.0, r = start;
    if (passes(r)) {
        lo = r;
        for (int i = 0; i < moves && hi == 0.0; ++i) {
            r *= factor;
            (passes(r) ? lo : hi) = r;
        }
        if (hi == 0.0) return lo;
    } else {
        hi = r;
        for (int i = 0; i < moves && lo == 0.0; ++i) {
            r /= factor;
            (passes(r) ? lo : hi) = r;
        }
        if (lo == 0.0) return 0.0;
    }
    for (int i = 0; i < steps; ++i) {
        const double mid = std::sqrt(lo * hi);
        (passes(mid) ? lo : hi) = mid;
    }
    return lo;
}

// The scheduler's own time per batch with 256 requests in flight: a simulated run of 256
// requests arriving at once, its wall time less what the models' step and search took,
// over the batches it scheduled.
record decision_record() {
    struct timed_gen : sim::simulated_generator {
        double ms = 0.0;
        double step(std::span<const rag::generation_slot> b) {
            const auto t = std::chrono::steady_clock::now();
            const double d = sim::simulated_generator::step(b);
            ms += std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t).count();
            return d;
        }
    };
    struct timed_ret : sim::simulated_retriever {
        using sim::simulated_retriever::simulated_retriever;
        double ms = 0.0;
        double search(std::span<const rag::retrieval_slot<std::uint64_t>> b) {
            const auto t = std::chrono::steady_clock::now();
            const double d = sim::simulated_retriever::search(b);
            ms += std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t).count();
            return d;
        }
    };
    const auto one = rag::one_shot_workflow(), multi = rag::multistep_workflow();
    std::vector<sim::rag_request> reqs;
    for (std::size_t i = 0; i < 256; ++i) {
        reqs.push_back({0.0, i % 2 == 0 ? &one : &multi, {}});
        if (i % 2 == 1) reqs.back().state.values["subquestions"] = 3;
    }
    timed_gen gen;
    timed_ret ret(sim::simulated_retriever::config{.lists = 1024, .nprobe = 64});
    const auto t = std::chrono::steady_clock::now();
    const rag::rag_run run = sim::schedule_rag(reqs, gen, ret, {.policy = rag::rag_policy::wavefront});
    const double total = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t).count();
    const double batches = double(run.gpu_batches + run.cpu_batches);
    return {{"kind", "decision"}, {"mode", "simulation"}, {"requests_in_flight", 256},
            {"batches", run.gpu_batches + run.cpu_batches},
            {"decision_us_per_batch", 1000.0 * (total - gen.ms - ret.ms) / batches},
            {"model_us_per_batch", 1000.0 * (gen.ms + ret.ms) / batches}};
}

}  // namespace

std::vector<record> rag_real_run(const rag_real_settings& s) {
    std::vector<record> out;
    out.push_back(decision_record());

    const std::size_t dim = 128, topics = 64, n = s.quick ? 20000 : s.vectors, lists = s.quick ? 64 : s.lists;
    const auto corpus = sim::clustered_corpus::make(n, dim, topics, 0.6, s.seed);
    const index_type index = index_type::train(corpus.vectors, dim, lists, 1, s.seed, eigen::backend{});
    thread_pool cpu(std::max(1u, std::thread::hardware_concurrency()));
    const sim::drifting_queries embed{&corpus, 0.6, 0.3};

    // Calibration: single-threaded scans of whole probe lists, ms per vector scanned.
    double per_vector_ms = 0.0;
    {
        const flow cal{"calibration", rag::one_shot_workflow()};
        const auto reqs = make_requests(cal, 1.0, 8, topics, s.seed + 1);
        std::size_t scanned = 0;
        const auto t = std::chrono::steady_clock::now();
        for (const auto& r : reqs) {
            const auto q = embed(r.state, r.graph->node(0));
            const auto probe = index.probe(q, lists / 2);
            retrieve::top_k heap(5);
            index.search_lists(q, probe, heap);
            for (std::size_t c : probe) scanned += index.list_size(c);
        }
        per_vector_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t).count() /
                        double(scanned);
    }
    std::vector<std::size_t> sizes;
    for (std::size_t c = 0; c < lists; ++c) sizes.push_back(index.list_size(c));

    const std::vector<config> configs{
        {"retrieval-heavy", s.quick ? std::size_t{32} : std::size_t{512}, {.hypothesis = 4, .answer = 8}},
        {"generation-heavy", s.quick ? std::size_t{8} : std::size_t{128}, {.hypothesis = 16, .answer = 32}},
    };
    const double trial_seconds = s.quick ? 0.3 : 2.0;
    const std::size_t min_requests = s.quick ? 6 : 30;
    for (const config& c : configs) {
        if (s.quick && &c != &configs.front()) break;  // the harness check: one configuration, one workflow
        std::vector<flow> flows{{"one-shot", rag::one_shot_workflow(5, c.lengths)}};
        if (!s.quick) flows.push_back({"multistep", rag::multistep_workflow(2, c.lengths), 2, 4});
        for (const flow& f : flows) {
            sim::simulated_retriever::config rc{.lists = lists, .nprobe = c.nprobe, .per_cluster_ms = 0.002,
                                                .per_vector_ms = per_vector_ms, .call_overhead_ms = 0.02,
                                                .threads = cpu.concurrency(), .list_sizes = sizes};
            // The unloaded sequential latency: the same requests one at a time (real), far apart
            // (simulation). The real one sets the limit of both, so both answer one question.
            const rag::rag_schedule_options seq{.policy = rag::rag_policy::sequential};
            retriever_type plain(index, embed, {.nprobe = c.nprobe, .split_lists = false}, cpu);
            const auto lone = make_requests(f, 0.01, s.quick ? 2 : 8, topics, s.seed + 2);
            std::vector<double> alone;
            for (const auto& r : lone) alone.push_back(run_real({{0.0, r.graph, r.state}}, plain, cpu, seq).mean);
            const double unloaded_real = summarize(alone).mean;
            rc.parallel_scans = false;
            const double unloaded_sim = run_sim(lone, rc, seq).mean;
            const double limit_real = s.latency_factor * unloaded_real, limit_sim = limit_real;

            // A trial offers a rate for a window at least twice the latency limit (an overload
            // then shows in the last third's latency), the same in both modes.
            const double window_s = std::min(6.0, std::max(trial_seconds, 2.0 * limit_real / 1000.0));
            const auto trial = [&](double rate) {
                return make_requests(f, rate, std::max(min_requests, std::size_t(std::lround(rate * window_s))), topics,
                                     s.seed);
            };
            std::vector<double> real_rates, sim_rates;
            for (const scheduler& sch : schedulers()) {
                const rag::rag_schedule_options opt{.policy = sch.policy};
                rc.parallel_scans = sch.split_lists;
                auto sim_passes = [&](double rate) {
                    const latency l = run_sim(trial(rate), rc, opt);
                    return l.mean <= limit_sim && l.tail <= limit_sim;
                };
                const double sim_rate = sustained(sim_passes, 1.0, 1.25, 40, 8);
                retriever_type ret(index, embed, {.nprobe = c.nprobe, .split_lists = sch.split_lists}, cpu);
                auto real_passes = [&](double rate) {
                    const latency l = run_real(trial(rate), ret, cpu, opt);
                    return l.mean <= limit_real && l.tail <= limit_real;
                };
                const double real_rate = sustained(real_passes, std::max(sim_rate, 0.5), 1.2, 6, s.quick ? 1 : 2);
                real_rates.push_back(real_rate);
                sim_rates.push_back(sim_rate);
                std::fprintf(stderr, "rag real run: %s %s %s: %.2f req/s (simulated %.2f)\n", c.name, f.name, sch.name,
                             real_rate, sim_rate);
                for (const auto& [mode, rate, unloaded, limit] :
                     {std::tuple{"real", real_rate, unloaded_real, limit_real},
                      std::tuple{"simulation", sim_rate, unloaded_sim, limit_sim}})
                    out.push_back({{"kind", "real_run"}, {"mode", mode}, {"workflow", f.name}, {"config", c.name},
                                   {"scheduler", sch.name}, {"sustained_rate", rate}, {"nprobe", c.nprobe},
                                   {"unloaded_latency_ms", unloaded}, {"latency_limit_ms", limit}});
            }
            // schedulers(): sequential, naive_async, wavefront.
            out.push_back({{"kind", "real_summary"}, {"workflow", f.name}, {"config", c.name}, {"nprobe", c.nprobe},
                           {"per_vector_ns", per_vector_ms * 1e6}, {"threads", cpu.concurrency()},
                           {"unloaded_latency_ms", unloaded_real}, {"latency_limit_ms", limit_real},
                           {"real_wavefront_over_naive_async", real_rates[2] / real_rates[1]},
                           {"sim_wavefront_over_naive_async", sim_rates[2] / sim_rates[1]},
                           {"sim_over_real_sequential", sim_rates[0] / real_rates[0]},
                           {"sim_over_real_naive_async", sim_rates[1] / real_rates[1]},
                           {"sim_over_real_wavefront", sim_rates[2] / real_rates[2]}});
        }
    }
    return out;
}

}  // namespace frugal::bench
