// The wavefront scheduler against the one-request oracle: random workflows (chains of
// generation, retrieval and user nodes with conditional loops), random arrivals, random
// policies and options (sub-stages, speculative generation and retrieval, similarity-aware
// order) on small simulated models. Every request must end in the state it reaches when it
// runs alone, and the generator must see every generation end in exactly one commit or
// (speculative only) discard (rag_oracle.hpp's contract_generator). A rag_scheduler handed
// the requests a few at a time, its clock run in random slices, must give the same run.
#include <frugal/rag/scheduler.hpp>
#include <frugal/sim/rag_event_loop.hpp>
#include <frugal/rag/workflow.hpp>
#include <frugal/sim/rag_simulation.hpp>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "../rag/rag_oracle.hpp"
#include "fuzz.hpp"

namespace {

namespace rag = frugal::rag;
using frugal::fuzz::input;

std::size_t byte(input& in, std::size_t bound) { return in.take<std::uint8_t>() % bound; }

// A chain START -> 0 -> ... -> m-1 -> END; node j may loop back to an earlier node while it
// has been visited fewer than the state's "loops j" times (so every request terminates).
rag::rag_graph random_graph(input& in) {
    rag::rag_graph g;
    const std::size_t m = 1 + byte(in, 5);
    for (std::size_t j = 0; j < m; ++j) {
        switch (byte(in, 3)) {
            case 0: g.add_generation(j, "gen", 1 + byte(in, 8), byte(in, 64)); break;
            case 1: g.add_retrieval(j, "ret", 1 + byte(in, 4)); break;
            default:
                g.add_user(j, "user", [j](rag::rag_state& s) { ++s.values["user " + std::to_string(j)]; });
        }
    }
    g.add_edge(rag::rag_start, 0);
    for (std::size_t j = 0; j < m; ++j) {
        const rag::rag_node_id next = j + 1 == m ? rag::rag_end : j + 1;
        if (byte(in, 3) != 0) {
            g.add_edge(j, next);
            continue;
        }
        const rag::rag_node_id back = byte(in, j + 1);
        const std::string key = "loops " + std::to_string(j);
        g.add_edge(
            j, [j, back, next, key](const rag::rag_state& s) {
                return static_cast<std::int64_t>(s.visited(j)) < s.get(key) ? back : next;
            },
            {back, next});
        g.bound_visits(j, 256);  // above any "loops j" a byte can ask for
    }
    g.validate();
    return g;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    input in(data, size);
    const std::vector<rag::rag_graph> graphs{random_graph(in), random_graph(in)};
    frugal::sim::simulated_retriever::config rc;
    rc.lists = 4 + byte(in, 60);
    rc.nprobe = 1 + byte(in, rc.lists);
    rc.mean_list_size = 1 + byte(in, 200);
    rc.candidates_per_cluster = 1 + byte(in, 4);
    rc.threads = 1 + byte(in, 8);
    rc.request_similarity = byte(in, 3) * 0.45;
    rc.query_buckets = byte(in, 4);
    rag::rag_schedule_options opt;
    opt.policy = static_cast<rag::rag_policy>(byte(in, 3));
    opt.speculate = byte(in, 2) == 0;
    opt.beta_ms = 0.05 + static_cast<double>(byte(in, 40)) / 10.0;
    opt.speculate_below = byte(in, 20);
    opt.speculate_after = 1 + byte(in, 3);
    opt.doc_tokens = byte(in, 200);
    opt.reorder = byte(in, 2) == 0;
    opt.history = 1 + byte(in, 25);
    opt.speculate_retrieval = byte(in, 2) == 0;
    opt.speculate_retrieval_at = (1.0 + static_cast<double>(byte(in, 9))) / 10.0;
    opt.speculate_retrieval_below = byte(in, 40);
    std::vector<frugal::sim::rag_request> reqs(1 + byte(in, 12));
    for (auto& r : reqs) {
        r.arrival = static_cast<double>(byte(in, 255)) * 2.0;
        r.graph = &graphs[byte(in, 2)];
        for (std::size_t j = 0; j < 5; ++j) r.state.values["loops " + std::to_string(j)] = static_cast<std::int64_t>(byte(in, 4));
    }
    const frugal::sim::simulated_generator::config gc{.fixed_ms = 0.5 + static_cast<double>(byte(in, 20)),
                                                      .length_jitter = static_cast<double>(byte(in, 10)) / 10.0,
                                                      .stop_probability = static_cast<double>(byte(in, 4)) / 8.0};
    rag::testing::contract_generator gen(gc);
    frugal::sim::simulated_retriever ret(rc);
    const auto run = frugal::sim::schedule_rag(reqs, gen, ret, opt);
    FRUGAL_FUZZ_CHECK(run.requests.size() == reqs.size(), "%zu outcomes for %zu requests", run.requests.size(), reqs.size());
    const auto breaches = gen.breaches();
    FRUGAL_FUZZ_CHECK(breaches.empty(), "generator contract: %s", breaches.empty() ? "" : breaches.front().c_str());
    FRUGAL_FUZZ_CHECK(gen.discards() <= run.rollbacks && run.rollbacks <= run.speculations &&
                          run.retrieval_rollbacks <= run.retrieval_speculations,
                      "counters: %zu discards, %zu rollbacks of %zu speculations", gen.discards(), run.rollbacks,
                      run.speculations);
    // The same requests handed to a rag_event_loop a few at a time (in input order, so they
    // get the same ids), its clock run in random slices but never past a request not yet
    // handed over: the same run.
    rag::testing::contract_generator gen2(gc);
    frugal::sim::simulated_retriever ret2(rc);
    frugal::sim::rag_event_loop sched(gen2, ret2, opt);
    std::size_t next = 0, finished = 0;
    for (double t = 0.0; finished < reqs.size();) {
        for (std::size_t more = 1 + byte(in, 4); more > 0 && next < reqs.size(); --more, ++next)
            FRUGAL_FUZZ_CHECK(sched.submit(reqs[next]) == next, "request %zu got another id", next);
        double limit = std::numeric_limits<double>::infinity();
        for (std::size_t j = next; j < reqs.size(); ++j) limit = std::min(limit, reqs[j].arrival);
        t = std::min(limit, t + 1.0 + static_cast<double>(byte(in, 200)));
        if (next == reqs.size() && byte(in, 4) == 0) sched.run();
        else sched.run_until(std::max(t, sched.now()));
        for (const auto& done : sched.take_finished()) {
            const std::size_t i = done.state.request;
            FRUGAL_FUZZ_CHECK(i < reqs.size() && done.finish == run.requests[i].finish &&
                                  done.state.values == run.requests[i].state.values &&
                                  done.state.retrieved == run.requests[i].state.retrieved,
                              "online request %zu differs from the offline run", i);
            ++finished;
        }
        FRUGAL_FUZZ_CHECK(t < 1e9, "online run stalled with %zu of %zu finished", finished, reqs.size());
    }
    for (std::size_t i = 0; i < reqs.size(); ++i) {
        const auto& got = run.requests[i];
        const auto want = rag::testing::walk_alone(*reqs[i].graph, reqs[i].state, i, opt.doc_tokens, rc, gc);
        FRUGAL_FUZZ_CHECK(got.state.values == want.values && got.state.retrieved == want.retrieved &&
                              got.state.visits == want.visits,
                          "request %zu (policy %d) ends in another state than alone", i, static_cast<int>(opt.policy));
        FRUGAL_FUZZ_CHECK(got.finish >= got.arrival, "request %zu finishes at %g, arrived at %g", i, got.finish,
                          got.arrival);
    }
    return 0;
}
