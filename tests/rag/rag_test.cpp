// Tests of the RAG workflow graph, the wavefront scheduler in simulation mode, and the
// retrieval module (one translation unit to keep CI compile time low).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <limits>
#include <map>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "frugal_test_errors.hpp"

#include "minimal_backend.hpp"
#include "rag_oracle.hpp"
#if FRUGAL_TEST_RAG_EIGEN
#include "frugal/backend/eigen/eigen_backend.hpp"
#include "frugal/backend/eigen/similarity_scan.hpp"
#endif

#include "frugal/core/thread_pool.hpp"
#include "frugal/rag/cluster_order.hpp"
#include "frugal/rag/ivf_retriever.hpp"
#include "frugal/retrieve/ivf_flat.hpp"
#include "frugal/retrieve/similarity_index.hpp"
#include "frugal/rag/tiered_ivf.hpp"
#include "frugal/retrieve/top_k.hpp"
#include "frugal/sim/rag_simulation.hpp"
#include "frugal/rag/scheduler.hpp"
#include "frugal/sim/rag_event_loop.hpp"
#include "frugal/rag/workflow.hpp"

namespace {

using frugal::rag::rag_end;
using frugal::rag::rag_start;

template <class F>
std::string error_of(F&& f) {
    return frugal::testing::error_of<frugal::invalid_argument>(std::forward<F>(f));
}

// Concepts: the simulation types model them, other types do not.
static_assert(frugal::rag::rag_generator<frugal::sim::simulated_generator>);
static_assert(frugal::rag::rag_previewing_generator<frugal::sim::simulated_generator>);
static_assert(!frugal::rag::rag_generator<frugal::sim::simulated_retriever>);
static_assert(frugal::rag::rag_retriever<frugal::sim::simulated_retriever>);
static_assert(!frugal::rag::rag_retriever<frugal::sim::simulated_generator>);
static_assert(frugal::rag::rag_ordered_retriever<frugal::sim::simulated_retriever>);

// A retriever that does not name its results' clusters: the scheduler searches in probe order.
struct unordered_retriever {
    frugal::sim::simulated_retriever inner;
    std::uint64_t query_of(const frugal::rag::rag_state& s, const frugal::rag::rag_node& n) const {
        return inner.query_of(s, n);
    }
    std::vector<std::size_t> probe(std::uint64_t q) const { return inner.probe(q); }
    double cluster_time(std::size_t c) const { return inner.cluster_time(c); }
    double search(std::span<const frugal::rag::retrieval_slot<std::uint64_t>> batch) { return inner.search(batch); }
};
static_assert(frugal::rag::rag_retriever<unordered_retriever>);
static_assert(!frugal::rag::rag_ordered_retriever<unordered_retriever>);
// One that cannot name its queries is no retriever: the library has no rule to invent them.
struct queryless_retriever {
    std::vector<std::size_t> probe(std::uint64_t) const { return {}; }
    double cluster_time(std::size_t) const { return 0.0; }
    double search(std::span<const frugal::rag::retrieval_slot<std::uint64_t>>) { return 0.0; }
};
static_assert(!frugal::rag::rag_retriever<queryless_retriever>);
// A generator that cannot commit or discard its generations is no generator.
struct uncommitted_generator {
    double step(std::span<const frugal::rag::generation_slot>) { return 1.0; }
    double step_time(std::size_t, std::size_t) const { return 1.0; }
    std::size_t length(const frugal::rag::rag_state&, const frugal::rag::rag_node&) const { return 1; }
};
static_assert(!frugal::rag::rag_generator<uncommitted_generator>);
// A generator that cannot preview its partial output: no speculative retrieval.
struct no_preview_generator {
    frugal::sim::simulated_generator inner;
    double step(std::span<const frugal::rag::generation_slot> b) { return inner.step(b); }
    double step_time(std::size_t b, std::size_t c) const { return inner.step_time(b, c); }
    std::size_t length(const frugal::rag::rag_state& s, const frugal::rag::rag_node& n) const { return inner.length(s, n); }
    void commit(frugal::rag::rag_state& s, const frugal::rag::rag_node& n) { inner.commit(s, n); }
    void discard(std::size_t request) { inner.discard(request); }
};
static_assert(frugal::rag::rag_generator<no_preview_generator>);
static_assert(!frugal::rag::rag_previewing_generator<no_preview_generator>);
static_assert(frugal::retrieve::ivf_index<frugal::retrieve::ivf_flat>);
static_assert(!frugal::retrieve::ivf_index<frugal::sim::simulated_retriever>);

TEST(RagGraph, ListingOneWorkflowsValidate) {
    EXPECT_NO_THROW(frugal::rag::one_shot_workflow().validate());
    EXPECT_NO_THROW(frugal::rag::hyde_workflow().validate());
    EXPECT_NO_THROW(frugal::rag::multistep_workflow().validate());
}

TEST(RagGraph, DanglingEdgeIsNamed) {
    frugal::rag::rag_graph g;
    g.add_generation(0, "a", 4);
    g.add_edge(rag_start, 0);
    g.add_edge(0, 7);
    const std::string msg = error_of([&] { g.validate(); });
    EXPECT_NE(msg.find("dangling edge 0 (a) -> 7"), std::string::npos) << msg;
}

TEST(RagGraph, EdgeFromUnknownNode) {
    frugal::rag::rag_graph g;
    g.add_generation(0, "a", 4);
    g.add_edge(rag_start, 0);
    g.add_edge(0, rag_end);
    g.add_edge(3, rag_end);
    EXPECT_NE(error_of([&] { g.validate(); }).find("edge from unknown node 3"), std::string::npos);
}

TEST(RagGraph, CycleWithoutConditionalExit) {
    frugal::rag::rag_graph g;
    g.add_generation(0, "gen", 4);
    g.add_retrieval(1, "ret", 2);
    g.add_edge(rag_start, 0);
    g.add_edge(0, 1);
    g.add_edge(1, 0);
    const std::string msg = error_of([&] { g.validate(); });
    EXPECT_NE(msg.find("cycle through node 0 (gen) has no conditional edge"), std::string::npos) << msg;
}

TEST(RagGraph, AConditionalExitAndAVisitBoundMakeTheCycleValid) {
    frugal::rag::rag_graph g;
    g.add_generation(0, "gen", 4);
    g.add_retrieval(1, "ret", 2);
    g.add_edge(rag_start, 0);
    g.add_edge(0, 1);
    g.add_edge(1, [](const frugal::rag::rag_state&) { return rag_end; }, {0, rag_end});
    // A loop must be bounded: a router that never leaves it would run forever.
    const std::string msg = error_of([&] { g.validate(); });
    EXPECT_NE(msg.find("the loop through node 0 (gen) has no visit bound"), std::string::npos) << msg;
    g.bound_visits(1, 3);
    EXPECT_NO_THROW(g.validate());
    EXPECT_THROW(g.bound_visits(7, 3), frugal::invalid_argument);
    EXPECT_THROW(g.bound_visits(0, 0), frugal::invalid_argument);
}

TEST(RagSchedule, ALoopPastItsBoundFailsOnlyItsRequest) {
    // A router that always loops back: the bound ends the request (failed, naming the node);
    // a request of another workflow beside it finishes.
    frugal::rag::rag_graph looping;
    looping.add_retrieval(0, "ret", 2);
    looping.add_generation(1, "gen", 3);
    looping.add_edge(rag_start, 0);
    looping.add_edge(0, 1);
    looping.add_edge(1, [](const frugal::rag::rag_state&) { return frugal::rag::rag_node_id{0}; }, {0, rag_end});
    looping.bound_visits(0, 3);
    const auto one = frugal::rag::one_shot_workflow();
    frugal::sim::simulated_generator gen;
    frugal::sim::simulated_retriever ret;
    const auto run = frugal::sim::schedule_rag({{0.0, &looping, {}}, {1.0, &one, {}}}, gen, ret);
    EXPECT_EQ(run.requests[0].status, frugal::rag::rag_status::failed);
    EXPECT_NE(run.requests[0].error.find("would run node 0 (ret) a 4th time, beyond its bound of 3"), std::string::npos)
        << run.requests[0].error;
    EXPECT_EQ(run.requests[0].state.visited(0), 3u);
    EXPECT_EQ(run.requests[1].status, frugal::rag::rag_status::finished);
}

TEST(RagGraph, DeadEndsUnreachableNodesAndDuplicates) {
    frugal::rag::rag_graph g;
    g.add_generation(0, "a", 4);
    g.add_generation(1, "b", 4);
    g.add_edge(rag_start, 0);
    EXPECT_NE(error_of([&] { g.validate(); }).find("node 0 (a) has no outgoing edge"), std::string::npos);
    g.add_edge(0, rag_end);
    g.add_edge(1, rag_end);
    EXPECT_NE(error_of([&] { g.validate(); }).find("node 1 (b) is unreachable"), std::string::npos);
    EXPECT_THROW(g.add_edge(0, 1), frugal::invalid_argument);
    EXPECT_THROW(g.add_generation(0, "again", 4), frugal::invalid_argument);
    EXPECT_THROW(g.add_edge(0, rag_start), frugal::invalid_argument);
    frugal::rag::rag_graph empty;
    EXPECT_NE(error_of([&] { empty.validate(); }).find("no edge from START"), std::string::npos);
}

TEST(RagGraph, ConditionalEdgeMustChooseADeclaredTarget) {
    frugal::rag::rag_graph g;
    g.add_generation(0, "a", 4);
    g.add_generation(1, "b", 4);
    g.add_edge(rag_start, 0);
    g.add_edge(0, [](const frugal::rag::rag_state&) { return frugal::rag::rag_node_id{1}; }, {rag_end});
    EXPECT_THROW(g.validate(), frugal::invalid_argument);  // 1 unreachable over declared targets
    frugal::rag::rag_state s;
    EXPECT_NE(error_of([&] { (void)g.next(0, s); }).find("not among its declared targets"), std::string::npos);
}

using frugal::rag::testing::walk_alone;

TEST(RagSchedule, ConditionalRoutingRunsOneRoundPerSubquestion) {
    const auto g = frugal::rag::multistep_workflow(2);
    for (std::int64_t rounds : {1, 3, 5}) {
        frugal::sim::simulated_generator gen;
        frugal::sim::simulated_retriever ret;
        frugal::sim::rag_request r{0.0, &g, {}};
        r.state.values["subquestions"] = rounds;
        const auto run = frugal::sim::schedule_rag({r}, gen, ret);
        const auto& s = run.requests.at(0).state;
        EXPECT_EQ(s.visited(0), 1u);
        EXPECT_EQ(s.visited(1), static_cast<std::size_t>(rounds));
        EXPECT_EQ(s.visited(2), static_cast<std::size_t>(rounds));
        ASSERT_EQ(s.retrieved.size(), static_cast<std::size_t>(rounds));
        for (const auto& docs : s.retrieved) EXPECT_EQ(docs.size(), 2u);
    }
}

TEST(RagSchedule, UserNodesDriveConditionalEdges) {
    // A user node counts rounds; the conditional edge stops after the count reaches 2.
    frugal::rag::rag_graph g;
    g.add_retrieval(0, "ret", 3);
    g.add_user(1, "count", [](frugal::rag::rag_state& s) { ++s.values["rounds"]; });
    g.add_edge(rag_start, 0);
    g.add_edge(0, 1);
    g.add_edge(1, [](const frugal::rag::rag_state& s) { return s.get("rounds") < 2 ? frugal::rag::rag_node_id{0} : rag_end; },
               {0, rag_end});
    g.bound_visits(1, 10);
    frugal::sim::simulated_generator gen;
    frugal::sim::simulated_retriever ret;
    const auto run = frugal::sim::schedule_rag({{0.0, &g, {}}}, gen, ret);
    EXPECT_EQ(run.requests[0].state.get("rounds"), 2);
    EXPECT_EQ(run.requests[0].state.retrieved.size(), 2u);
}

std::vector<frugal::sim::rag_request> mixed_requests(const frugal::rag::rag_graph& one, const frugal::rag::rag_graph& hyde,
                                                const frugal::rag::rag_graph& multi, double rate, std::size_t n) {
    const std::vector<frugal::sim::rag_mix_entry> mix{{&one, 1.0}, {&hyde, 1.0}, {&multi, 1.0, 1, 3}};
    return frugal::sim::poisson_requests(mix, rate, n, 11);
}

TEST(RagSchedule, EveryPolicyMatchesTheOneRequestOracle) {
    const auto one = frugal::rag::one_shot_workflow(), hyde = frugal::rag::hyde_workflow(), multi = frugal::rag::multistep_workflow();
    const auto reqs = mixed_requests(one, hyde, multi, 8.0, 40);
    for (auto policy : {frugal::rag::rag_policy::sequential, frugal::rag::rag_policy::naive_async, frugal::rag::rag_policy::wavefront}) {
        frugal::sim::simulated_generator gen;
        frugal::sim::simulated_retriever ret;
        const auto run = frugal::sim::schedule_rag(reqs, gen, ret, {.policy = policy});
        ASSERT_EQ(run.requests.size(), reqs.size());
        for (std::size_t i = 0; i < reqs.size(); ++i) {
            const auto expect = walk_alone(*reqs[i].graph, reqs[i].state, i, 128);
            const auto& got = run.requests[i].state;
            EXPECT_NE(expect.get("text"), 0) << "request " << i;  // the generator wrote its output
            EXPECT_EQ(got.values, expect.values) << "request " << i;
            EXPECT_EQ(got.retrieved, expect.retrieved) << "request " << i;
            EXPECT_EQ(got.visits, expect.visits) << "request " << i;
            EXPECT_GE(run.requests[i].finish, run.requests[i].arrival);
        }
        if (policy == frugal::rag::rag_policy::sequential) {
            EXPECT_LE(run.gpu_busy + run.cpu_busy, run.makespan + 1e-9);
        }
    }
}

TEST(RagSchedule, SimulationIsDeterministic) {
    const auto one = frugal::rag::one_shot_workflow(), hyde = frugal::rag::hyde_workflow(), multi = frugal::rag::multistep_workflow();
    const auto reqs = mixed_requests(one, hyde, multi, 12.0, 60);
    auto once = [&] {
        frugal::sim::simulated_generator gen;
        frugal::sim::simulated_retriever ret;
        return frugal::sim::schedule_rag(reqs, gen, ret);
    };
    const auto a = once(), b = once();
    ASSERT_EQ(a.requests.size(), b.requests.size());
    for (std::size_t i = 0; i < a.requests.size(); ++i) {
        EXPECT_EQ(a.requests[i].finish, b.requests[i].finish);
        EXPECT_EQ(a.requests[i].state.values, b.requests[i].state.values);
    }
    EXPECT_EQ(a.gpu_batches, b.gpu_batches);
    EXPECT_EQ(a.speculations, b.speculations);
}

TEST(RagSchedule, SpeculationRollbackGivesTheNonSpeculativeResults) {
    const auto one = frugal::rag::one_shot_workflow(), hyde = frugal::rag::hyde_workflow(), multi = frugal::rag::multistep_workflow();
    const auto reqs = mixed_requests(one, hyde, multi, 4.0, 60);
    auto run_with = [&](bool speculate) {
        frugal::sim::simulated_generator gen;
        frugal::sim::simulated_retriever ret;
        return frugal::sim::schedule_rag(reqs, gen, ret, {.policy = frugal::rag::rag_policy::wavefront, .speculate = speculate});
    };
    const auto plain = run_with(false), spec = run_with(true);
    EXPECT_EQ(plain.speculations, 0u);
    EXPECT_GT(spec.speculations, 0u);
    EXPECT_GT(spec.rollbacks, 0u);  // some partial top-k differ from the final one...
    EXPECT_LT(spec.rollbacks, spec.speculations);  // ...and some are confirmed
    for (std::size_t i = 0; i < reqs.size(); ++i) {
        EXPECT_EQ(spec.requests[i].state.values, plain.requests[i].state.values) << "request " << i;
        EXPECT_EQ(spec.requests[i].state.retrieved, plain.requests[i].state.retrieved) << "request " << i;
    }
}

// The engine-facing contract (rag_oracle.hpp's contract_generator): every generation ends in
// one commit or, speculative only, one discard. The retriever sees the request's question in
// every query it names.
struct question_checking_retriever {
    frugal::sim::simulated_retriever inner;
    std::size_t queries = 0;
    std::uint64_t query_of(const frugal::rag::rag_state& s, const frugal::rag::rag_node& n) const {
        EXPECT_EQ(s.input, "question " + std::to_string(s.request));
        return inner.query_of(s, n);
    }
    std::vector<std::size_t> probe(std::uint64_t q) const { return inner.probe(q); }
    double cluster_time(std::size_t c) const { return inner.cluster_time(c); }
    double search(std::span<const frugal::rag::retrieval_slot<std::uint64_t>> batch) {
        queries += batch.size();
        return inner.search(batch);
    }
    std::size_t list_of(std::uint64_t id) const { return inner.list_of(id); }
};

TEST(RagSchedule, GeneratorSeesEveryGenerationEndInCommitOrDiscard) {
    const auto one = frugal::rag::one_shot_workflow(), hyde = frugal::rag::hyde_workflow(), multi = frugal::rag::multistep_workflow();
    auto reqs = mixed_requests(one, hyde, multi, 4.0, 60);
    for (std::size_t i = 0; i < reqs.size(); ++i) reqs[i].state.input = "question " + std::to_string(i);
    frugal::rag::testing::contract_generator gen;
    question_checking_retriever ret;
    const auto run = frugal::sim::schedule_rag(reqs, gen, ret, {.policy = frugal::rag::rag_policy::wavefront});
    EXPECT_EQ(gen.breaches(), std::vector<std::string>{});
    std::size_t generations = 0;
    for (const auto& r : run.requests) {
        for (const auto& [node, visits] : r.state.visits)
            if (reqs[r.state.request].graph->node(node).kind == frugal::rag::rag_node_kind::generation) generations += visits;
        EXPECT_EQ(r.state.input, reqs[r.state.request].state.input);
    }
    EXPECT_EQ(gen.commits(), generations);
    EXPECT_LE(gen.discards(), run.rollbacks);  // a speculation rolled back before its first step is not the generator's
    EXPECT_GT(gen.discards(), 0u);
    EXPECT_GT(ret.queries, 0u);
    // Speculative retrieval needs a generator that previews its partial output: asking for it
    // without one is an error, not a silent no-op.
    no_preview_generator plain;
    const std::string msg = error_of([&] {
        (void)frugal::sim::schedule_rag(reqs, plain, ret, {.speculate_retrieval = true});
    });
    EXPECT_NE(msg.find("speculate_retrieval needs a generator with preview(state, node)"), std::string::npos) << msg;
}

// Requests whose successive queries share a topic, and whose query from a half-done
// generation is the final one half of the time.
frugal::sim::simulated_retriever::config similar_queries() {
    frugal::sim::simulated_retriever::config rc;
    rc.request_similarity = 0.95;
    rc.query_buckets = 2;
    return rc;
}

TEST(RagSchedule, SimilarityAwareOrderFindsTheTopKSoonerWithTheSameResults) {
    const auto multi = frugal::rag::multistep_workflow(2);
    const std::vector<frugal::sim::rag_mix_entry> mix{{&multi, 1.0, 3, 4}};
    const auto reqs = frugal::sim::poisson_requests(mix, 4.0, 40, 5);
    auto run_with = [&](bool reorder) {
        frugal::sim::simulated_generator gen;
        frugal::sim::simulated_retriever ret(similar_queries());
        return frugal::sim::schedule_rag(reqs, gen, ret, {.policy = frugal::rag::rag_policy::wavefront, .reorder = reorder});
    };
    const auto plain = run_with(false), ordered = run_with(true);
    ASSERT_EQ(plain.retrievals, ordered.retrievals);
    frugal::sim::simulated_generator gen;
    unordered_retriever hashed{frugal::sim::simulated_retriever{}};
    const auto fallback = frugal::sim::schedule_rag(reqs, gen, hashed);
    // Clusters searched until the top-k last changed: the history's lists come first.
    EXPECT_LT(ordered.clusters_to_final, plain.clusters_to_final);
    for (std::size_t i = 0; i < reqs.size(); ++i) {
        const auto expect = walk_alone(*reqs[i].graph, reqs[i].state, i, 128, similar_queries());
        EXPECT_EQ(ordered.requests[i].state.retrieved, expect.retrieved) << "request " << i;
        EXPECT_EQ(ordered.requests[i].state.values, expect.values) << "request " << i;
        EXPECT_EQ(plain.requests[i].state.values, expect.values) << "request " << i;
        EXPECT_EQ(fallback.requests[i].state.retrieved, walk_alone(*reqs[i].graph, reqs[i].state, i, 128).retrieved);
    }
}

TEST(RagSchedule, SpeculativeRetrievalRollbackGivesTheNonSpeculativeResults) {
    const auto hyde = frugal::rag::hyde_workflow(), multi = frugal::rag::multistep_workflow();
    const std::vector<frugal::sim::rag_mix_entry> mix{{&hyde, 1.0}, {&multi, 1.0, 2, 4}};
    const auto reqs = frugal::sim::poisson_requests(mix, 6.0, 60, 9);
    auto run_with = [&](bool speculate) {
        frugal::sim::simulated_generator gen;
        frugal::sim::simulated_retriever ret(similar_queries());
        return frugal::sim::schedule_rag(reqs, gen, ret,
                                    {.policy = frugal::rag::rag_policy::wavefront, .speculate_retrieval = speculate});
    };
    const auto plain = run_with(false), spec = run_with(true);
    EXPECT_EQ(plain.retrieval_speculations, 0u);
    EXPECT_GT(spec.retrieval_speculations, 0u);
    EXPECT_GT(spec.retrieval_rollbacks, 0u);                          // some partial queries differ...
    EXPECT_LT(spec.retrieval_rollbacks, spec.retrieval_speculations);  // ...and some are the final ones
    for (std::size_t i = 0; i < reqs.size(); ++i) {
        const auto expect = walk_alone(*reqs[i].graph, reqs[i].state, i, 128, similar_queries());
        EXPECT_EQ(spec.requests[i].state.retrieved, expect.retrieved) << "request " << i;
        EXPECT_EQ(spec.requests[i].state.values, expect.values) << "request " << i;
        EXPECT_EQ(spec.requests[i].state.visits, expect.visits) << "request " << i;
        EXPECT_EQ(plain.requests[i].state.values, expect.values) << "request " << i;
    }
}

TEST(RagSchedule, GenerationsEndingAtAnEndOfSequenceMatchTheOracle) {
    // Generations that may stop after any step (p = 0.15, drawn from their text, so a
    // speculation over other documents may stop elsewhere): every policy still gives each
    // request the state it reaches alone, and the stops really shorten generations.
    const auto one = frugal::rag::one_shot_workflow(), hyde = frugal::rag::hyde_workflow(), multi = frugal::rag::multistep_workflow();
    const auto reqs = mixed_requests(one, hyde, multi, 6.0, 50);
    const frugal::sim::simulated_generator::config stops{.stop_probability = 0.15};
    frugal::sim::simulated_generator full;
    frugal::sim::simulated_retriever ret0;
    const auto unstopped = frugal::sim::schedule_rag(reqs, full, ret0);
    for (auto policy : {frugal::rag::rag_policy::sequential, frugal::rag::rag_policy::wavefront}) {
        frugal::rag::testing::contract_generator gen(stops);
        frugal::sim::simulated_retriever ret;
        const auto run = frugal::sim::schedule_rag(reqs, gen, ret, {.policy = policy});
        EXPECT_EQ(gen.breaches(), std::vector<std::string>{});
        EXPECT_LT(run.gpu_busy, unstopped.gpu_busy);
        for (std::size_t i = 0; i < reqs.size(); ++i) {
            const auto expect = walk_alone(*reqs[i].graph, reqs[i].state, i, 128, {}, stops);
            EXPECT_EQ(run.requests[i].state.values, expect.values) << "request " << i;
            EXPECT_EQ(run.requests[i].state.retrieved, expect.retrieved) << "request " << i;
        }
    }
}

TEST(RagScheduler, RequestsSubmittedAsTheyArriveRunAsIfKnownUpFront) {
    // The same stream served twice: all at once through schedule_rag, and through a
    // rag_event_loop that is handed each request just before its arrival, runs in 50 ms
    // slices and hands back finished requests along the way.
    const auto one = frugal::rag::one_shot_workflow(), hyde = frugal::rag::hyde_workflow(), multi = frugal::rag::multistep_workflow();
    const auto reqs = mixed_requests(one, hyde, multi, 10.0, 80);
    frugal::sim::simulated_generator gen;
    frugal::sim::simulated_retriever ret;
    const auto offline = frugal::sim::schedule_rag(reqs, gen, ret);

    frugal::sim::simulated_generator gen2;
    frugal::sim::simulated_retriever ret2;
    frugal::sim::rag_event_loop sched(gen2, ret2);
    std::vector<frugal::rag::rag_outcome> online(reqs.size());
    std::size_t next = 0, taken = 0;
    double last_finish = 0.0;
    for (double t = 50.0; taken < reqs.size(); t += 50.0) {
        for (; next < reqs.size() && reqs[next].arrival < t; ++next) EXPECT_EQ(sched.submit(reqs[next]), next);
        sched.run_until(t);
        EXPECT_LT(sched.now(), t);
        for (auto& done : sched.take_finished()) {
            EXPECT_GE(done.finish, last_finish);  // handed back in finishing order
            EXPECT_LT(done.finish, t);
            last_finish = done.finish;
            online.at(done.state.request) = std::move(done);
            ++taken;
        }
        EXPECT_EQ(sched.in_flight(), next - taken);
        ASSERT_LT(t, 1e6) << "stalled";
    }
    for (std::size_t i = 0; i < reqs.size(); ++i) {
        EXPECT_EQ(online[i].arrival, offline.requests[i].arrival) << "request " << i;
        EXPECT_EQ(online[i].finish, offline.requests[i].finish) << "request " << i;
        EXPECT_EQ(online[i].state.values, offline.requests[i].state.values) << "request " << i;
        EXPECT_EQ(online[i].state.retrieved, offline.requests[i].state.retrieved) << "request " << i;
    }
    EXPECT_EQ(sched.statistics().gpu_batches, offline.gpu_batches);
    EXPECT_EQ(sched.statistics().speculations, offline.speculations);
    EXPECT_EQ(sched.statistics().makespan, offline.makespan);
    // No request may arrive in the scheduler's past, and its clock never runs backwards.
    const double clock = sched.now() + 100.0;
    sched.run_until(clock);
    frugal::sim::rag_request late{clock - 1.0, &one, {}};
    EXPECT_NE(error_of([&] { (void)sched.submit(late); }).find("before the clock"), std::string::npos);
    EXPECT_THROW(sched.run_until(clock - 1.0), frugal::invalid_argument);
    late.arrival = clock;
    EXPECT_EQ(sched.submit(late), reqs.size());
    sched.run();
    ASSERT_EQ(sched.take_finished().size(), 1u);
    EXPECT_EQ(sched.in_flight(), 0u);
}

TEST(RagSchedule, RejectsBadInput) {
    frugal::sim::simulated_generator gen;
    frugal::sim::simulated_retriever ret;
    frugal::rag::rag_graph broken;
    broken.add_generation(0, "a", 4);
    EXPECT_THROW((void)frugal::sim::schedule_rag({{0.0, &broken, {}}}, gen, ret), frugal::invalid_argument);
    EXPECT_THROW((void)frugal::sim::schedule_rag({{0.0, nullptr, {}}}, gen, ret), frugal::invalid_argument);
    const auto g = frugal::rag::one_shot_workflow();
    EXPECT_THROW((void)frugal::sim::schedule_rag({{-1.0, &g, {}}}, gen, ret), frugal::invalid_argument);
    EXPECT_THROW((void)frugal::sim::schedule_rag({{0.0, &g, {}}}, gen, ret, {.history = 0}), frugal::invalid_argument);
    EXPECT_THROW((void)frugal::sim::schedule_rag({{0.0, &g, {}}}, gen, ret, {.speculate_retrieval_at = 1.0}),
                 frugal::invalid_argument);
}

TEST(TopK, MatchesSortingEveryCandidate) {
    std::vector<std::pair<float, std::uint64_t>> all;
    frugal::retrieve::top_k best(7);
    for (std::uint64_t i = 0; i < 200; ++i) {
        const float d = static_cast<float>((i * 7919) % 101) / 10.0f;  // many ties
        all.emplace_back(d, i);
        best.offer(d, i);
    }
    std::sort(all.begin(), all.end());
    all.resize(7);
    EXPECT_EQ(best.sorted(), all);
    EXPECT_THROW(frugal::retrieve::top_k(0), frugal::invalid_argument);
}

TEST(TopK, ArgminIsTheFirstSmallest) {
    std::mt19937_64 rng(5);
    for (int trial = 0; trial < 200; ++trial) {
        std::vector<float> v(1 + rng() % 20);
        for (auto& x : v) x = static_cast<float>(rng() % 5);  // many ties
        std::size_t want = 0;
        for (std::size_t i = 0; i < v.size(); ++i)
            if (v[i] < v[want]) want = i;
        EXPECT_EQ(frugal::retrieve::argmin(v), want);
    }
    const std::vector<float> nan{1.0f, std::numeric_limits<float>::quiet_NaN(), 0.5f};
    EXPECT_NE(error_of([&] { (void)frugal::retrieve::argmin(nan); }).find("NaN score at 1"), std::string::npos);
    EXPECT_THROW((void)frugal::retrieve::argmin(std::vector<float>{}), frugal::invalid_argument);
}

TEST(TopK, MergeKeepsTheBestOfBoth) {
    std::vector<std::pair<float, std::uint64_t>> all;
    frugal::retrieve::top_k a(6), b(6);
    for (std::uint64_t i = 0; i < 120; ++i) {
        const float d = static_cast<float>((i * 7907) % 53);  // ties across the two heaps
        all.emplace_back(d, i);
        (i % 3 == 0 ? a : b).offer(d, i);
    }
    a.merge(b);
    std::sort(all.begin(), all.end());
    all.resize(6);
    EXPECT_EQ(a.sorted(), all);
    a.clear();
    EXPECT_EQ(a.size(), 0u);
    EXPECT_EQ(a.k(), 6u);
    a.offer(2.0f, 9);
    EXPECT_EQ(a.ids(), std::vector<std::uint64_t>{9});
}

std::vector<float> gaussian_mixture(std::size_t n, std::size_t dim, std::size_t topics, std::uint64_t seed) {
    std::mt19937_64 rng(seed);
    std::normal_distribution<float> z;
    std::vector<float> centers(topics * dim), out;
    for (auto& c : centers) c = 4.0f * z(rng);
    for (std::size_t i = 0; i < n; ++i) {
        const std::size_t t = i % topics;
        for (std::size_t d = 0; d < dim; ++d) out.push_back(centers[t * dim + d] + z(rng));
    }
    return out;
}

std::vector<std::uint64_t> brute_force(const std::vector<float>& data, std::size_t dim, std::span<const float> q,
                                       std::size_t k) {
    std::vector<std::pair<double, std::uint64_t>> d;
    for (std::size_t i = 0; i < data.size() / dim; ++i) {
        double s = 0.0;
        for (std::size_t j = 0; j < dim; ++j) s += (double(data[i * dim + j]) - q[j]) * (double(data[i * dim + j]) - q[j]);
        d.emplace_back(s, i);
    }
    std::sort(d.begin(), d.end());
    std::vector<std::uint64_t> out;
    for (std::size_t i = 0; i < k; ++i) out.push_back(d[i].second);
    return out;
}

TEST(IvfFlat, ListsHoldTheirNearestCentroidsVectors) {
    const std::size_t dim = 8;
    const auto data = gaussian_mixture(600, dim, 6, 3);
    const auto ix = frugal::retrieve::ivf_flat::train(data, dim, 12, 8, 1);
    std::size_t total = 0;
    for (std::size_t c = 0; c < ix.lists(); ++c)
        for (std::size_t id : ix.members(c)) {
            ++total;
            EXPECT_EQ(ix.list_of(id), c);
            for (std::size_t o = 0; o < ix.lists(); ++o)
                EXPECT_LE(frugal::retrieve::squared_l2(ix.vector(id), ix.centroid(c)), frugal::retrieve::squared_l2(ix.vector(id), ix.centroid(o)));
        }
    EXPECT_EQ(total, 600u);
}

// Every vector sits in the list of a nearest centroid, up to float rounding of the GEMM
// distances (checked in double precision).
template <class Backend>
void expect_gemm_training_is_kmeans(Backend backend) {
    const std::size_t dim = 16, n = 3000;
    const auto data = gaussian_mixture(n, dim, 10, 12);
    const auto ix = frugal::retrieve::ivf_flat::train(data, dim, 24, 8, 5, backend);
    auto dist = [&](std::size_t id, std::size_t c) {
        double s = 0.0;
        for (std::size_t d = 0; d < dim; ++d) {
            const double x = double(ix.vector(id)[d]) - ix.centroid(c)[d];
            s += x * x;
        }
        return s;
    };
    std::size_t total = 0;
    for (std::size_t id = 0; id < n; ++id) {
        double best = dist(id, 0);
        for (std::size_t c = 1; c < ix.lists(); ++c) best = std::min(best, dist(id, c));
        EXPECT_LE(dist(id, ix.list_of(id)), best + 1e-4 * (1.0 + best)) << "vector " << id;
    }
    for (std::size_t c = 0; c < ix.lists(); ++c) {
        total += ix.list_size(c);
        // Lloyd's fixed point: a non-empty list's centroid is (nearly) its members' mean.
        if (ix.list_size(c) == 0) continue;
        for (std::size_t d = 0; d < dim; ++d) {
            double mean = 0.0;
            for (std::size_t id : ix.members(c)) mean += ix.vector(id)[d];
            mean /= static_cast<double>(ix.list_size(c));
            EXPECT_NEAR(ix.centroid(c)[d], mean, 0.5) << "list " << c;
        }
    }
    EXPECT_EQ(total, n);
    const auto queries = gaussian_mixture(10, dim, 10, 71);
    for (std::size_t q = 0; q < 10; ++q) {
        const std::span<const float> query(queries.data() + q * dim, dim);
        EXPECT_EQ(ix.search(query, 5, ix.lists()), brute_force(data, dim, query, 5)) << "query " << q;
    }
}

// The flat similarity index against a double-precision brute force over the stored slots
// (no near-ties in random data at this size), through erasures and overwrites.
template <class Index>
void expect_flat_index_is_brute_force() {
    const std::size_t dim = 12;
    std::mt19937_64 rng(21);
    std::normal_distribution<float> z;
    auto draw = [&] {
        std::vector<float> v(dim);
        for (auto& x : v) x = z(rng);
        return v;
    };
    Index index(dim);
    EXPECT_FALSE(index.nearest(draw()).has_value());
    std::map<std::size_t, std::vector<float>> stored;
    for (std::size_t op = 0; op < 300; ++op) {
        const std::size_t slot = rng() % 40;
        if (stored.contains(slot) && rng() % 3 == 0) {
            index.erase(slot);
            stored.erase(slot);
        } else {
            stored[slot] = draw();
            index.store(slot, stored[slot]);
        }
        const auto q = draw();
        const auto got = index.nearest(q);
        ASSERT_EQ(got.has_value(), !stored.empty());
        if (!got) continue;
        double best = -1e300;
        std::size_t best_slot = 0;
        for (const auto& [s, v] : stored) {
            double ip = 0.0;
            for (std::size_t d = 0; d < dim; ++d) ip += double(v[d]) * q[d];
            if (ip > best) best = ip, best_slot = s;
        }
        EXPECT_EQ(got->slot, best_slot) << "op " << op;
        EXPECT_NEAR(got->similarity, best, 1e-4 * (1.0 + std::abs(best)));
    }
    std::vector<float> bad(dim, 0.0f);
    bad[3] = std::numeric_limits<float>::quiet_NaN();
    EXPECT_NE(error_of([&] { index.store(0, bad); }).find("non-finite value nan at 3"), std::string::npos);
    EXPECT_THROW(index.erase(99), frugal::out_of_range);
}

TEST(FlatSimilarityIndex, NearestIsTheBruteForceArgmax) {
    expect_flat_index_is_brute_force<frugal::retrieve::flat_similarity_index<>>();
}

TEST(IvfFlat, RejectsNonFiniteInput) {
    const auto data = gaussian_mixture(100, 4, 2, 3);
    const auto ix = frugal::retrieve::ivf_flat::train(data, 4, 4, 2, 1);
    std::vector<float> q(4, 0.0f);
    q[1] = std::numeric_limits<float>::infinity();
    EXPECT_NE(error_of([&] { (void)ix.probe(q, 2); }).find("non-finite query value inf at 1"), std::string::npos);
    auto broken = data;
    broken[9] = std::numeric_limits<float>::quiet_NaN();
    EXPECT_NE(error_of([&] { (void)frugal::retrieve::ivf_flat::train(broken, 4, 4, 2, 1); }).find("at row 2"),
              std::string::npos);
    frugal::retrieve::top_k heap(3);
    const std::vector<std::size_t> missing{4};
    EXPECT_THROW(ix.search_lists(std::vector<float>(4, 0.0f), missing, heap), frugal::out_of_range);
}

template <class Index>
void expect_full_probe_is_brute_force() {
    const std::size_t dim = 8;
    const auto data = gaussian_mixture(500, dim, 5, 4);
    const auto ix = Index::train(data, dim, 10, 6, 2);
    const auto queries = gaussian_mixture(20, dim, 5, 99);
    for (std::size_t q = 0; q < 20; ++q) {
        const std::span<const float> query(queries.data() + q * dim, dim);
        EXPECT_EQ(ix.search(query, 7, ix.lists()), brute_force(data, dim, query, 7)) << "query " << q;
    }
}

TEST(IvfFlat, GemmKMeansOnAUserBackend) { expect_gemm_training_is_kmeans(example::minimal_backend{}); }

#if FRUGAL_TEST_RAG_EIGEN
TEST(IvfFlat, GemmKMeansOnEigen) { expect_gemm_training_is_kmeans(frugal::eigen::backend{}); }

TEST(FlatSimilarityIndex, EigenScanIsTheBruteForceArgmax) { expect_flat_index_is_brute_force<frugal::eigen::flat_similarity_index>(); }

TEST(IvfFlat, EigenScansEqualBruteForceAtFullProbe) { expect_full_probe_is_brute_force<frugal::eigen::ivf_flat>(); }
#endif

TEST(IvfFlat, FullProbeEqualsBruteForce) { expect_full_probe_is_brute_force<frugal::retrieve::ivf_flat>(); }

TEST(IvfFlat, ResumableSearchEqualsOneShot) {
    const std::size_t dim = 8;
    const auto data = gaussian_mixture(800, dim, 8, 5);
    const auto ix = frugal::retrieve::ivf_flat::train(data, dim, 16, 6, 3);
    const auto queries = gaussian_mixture(10, dim, 8, 77);
    for (std::size_t q = 0; q < 10; ++q) {
        const std::span<const float> query(queries.data() + q * dim, dim);
        const auto probe = ix.probe(query, 9);
        for (std::size_t chunk : {1u, 2u, 4u}) {
            frugal::retrieve::top_k heap(5);
            for (std::size_t at = 0; at < probe.size(); at += chunk)
                ix.search_lists(query, std::span<const std::size_t>(probe).subspan(at, std::min(chunk, probe.size() - at)), heap);
            EXPECT_EQ(heap.ids(), ix.search(query, 5, 9)) << "query " << q << " chunk " << chunk;
        }
    }
    EXPECT_THROW((void)ix.probe(std::vector<float>(3), 2), frugal::invalid_argument);
    EXPECT_THROW((void)ix.search(std::span<const float>(queries.data(), dim), 5, 17), frugal::invalid_argument);
}

// An ivf_index that cannot locate rows (FAISS keeps no id-to-list map): still a retriever,
// searched in probe order.
struct unlocated_index {
    const frugal::retrieve::ivf_flat* ix;
    std::size_t lists() const { return ix->lists(); }
    std::size_t list_size(std::size_t c) const { return ix->list_size(c); }
    std::vector<std::size_t> probe(std::span<const float> q, std::size_t n) const { return ix->probe(q, n); }
    void search_lists(std::span<const float> q, std::span<const std::size_t> l, frugal::retrieve::top_k& h) const {
        ix->search_lists(q, l, h);
    }
};
static_assert(frugal::retrieve::ivf_index<unlocated_index>);

TEST(IvfRetriever, EveryPolicyRetrievesWhatTheIndexFindsForTheQuestion) {
    // One-shot and Multistep requests over real vectors: each question is a point of the
    // data's mixture, its embedding a table lookup. Whatever the policy, sub-stages, order or
    // speculation, every retrieval returns the index's one-shot top-k for that query.
    const std::size_t dim = 8;
    const auto data = gaussian_mixture(600, dim, 6, 31);
    const auto ix = frugal::retrieve::ivf_flat::train(data, dim, 16, 6, 2);
    const auto points = gaussian_mixture(40, dim, 6, 32);
    std::map<std::string, std::vector<float>, std::less<>> questions;
    const auto one = frugal::rag::one_shot_workflow(4), multi = frugal::rag::multistep_workflow(3);
    auto reqs = mixed_requests(one, one, multi, 20.0, 40);
    for (std::size_t i = 0; i < reqs.size(); ++i) {
        reqs[i].state.input = "question " + std::to_string(i);
        questions[reqs[i].state.input].assign(points.begin() + static_cast<std::ptrdiff_t>(i * dim),
                                              points.begin() + static_cast<std::ptrdiff_t>((i + 1) * dim));
    }
    const auto embed = [&](const frugal::rag::rag_state& s, const frugal::rag::rag_node&) { return questions.at(s.input); };
    static_assert(frugal::rag::rag_ordered_retriever<frugal::rag::ivf_retriever<frugal::retrieve::ivf_flat, decltype(embed)>>);
    static_assert(frugal::rag::rag_retriever<frugal::rag::ivf_retriever<unlocated_index, decltype(embed)>>);
    static_assert(!frugal::rag::rag_ordered_retriever<frugal::rag::ivf_retriever<unlocated_index, decltype(embed)>>);
    const unlocated_index plain{&ix};
    for (auto policy : {frugal::rag::rag_policy::sequential, frugal::rag::rag_policy::wavefront})
        for (bool measure : {false, true}) {
            frugal::sim::simulated_generator gen;
            frugal::rag::ivf_retriever ret(ix, embed, {.nprobe = 5, .measure = measure});
            frugal::rag::ivf_retriever unordered(plain, embed, {.nprobe = 5, .measure = measure});
            const auto run = frugal::sim::schedule_rag(reqs, gen, ret, {.policy = policy});
            frugal::sim::simulated_generator gen2;
            const auto run2 = frugal::sim::schedule_rag(reqs, gen2, unordered, {.policy = policy});
            for (std::size_t i = 0; i < reqs.size(); ++i) {
                const auto& q = questions.at(reqs[i].state.input);
                const std::size_t k = reqs[i].graph == &one ? 4 : 3;
                const auto& got = run.requests[i].state.retrieved;
                ASSERT_FALSE(got.empty()) << "request " << i;
                for (const auto& ids : got) EXPECT_EQ(ids, ix.search(q, k, 5)) << "request " << i;
                EXPECT_EQ(run2.requests[i].state.retrieved, got) << "request " << i;
            }
            if (policy == frugal::rag::rag_policy::wavefront) {
                EXPECT_GT(run.clusters_to_final, 0u);
            }
        }
    // Searching a batch on a thread pool, by query or by slices of each query's lists,
    // changes nothing but the time.
    frugal::thread_pool pool(3);
    frugal::sim::simulated_generator gen, gen2, gen3;
    frugal::rag::ivf_retriever serial(ix, embed, {.nprobe = 5, .measure = false});
    frugal::rag::ivf_retriever parallel(ix, embed, {.nprobe = 5, .measure = false}, pool);
    frugal::rag::ivf_retriever sliced(ix, embed, {.nprobe = 5, .measure = false, .split_lists = true}, pool);
    static_assert(frugal::rag::rag_parallel_retriever<decltype(sliced), frugal::thread_pool>);
    const auto a = frugal::sim::schedule_rag(reqs, gen, serial), b = frugal::sim::schedule_rag(reqs, gen2, parallel);
    const auto c = frugal::sim::schedule_rag(reqs, gen3, sliced);
    for (std::size_t i = 0; i < reqs.size(); ++i) {
        EXPECT_EQ(a.requests[i].state.retrieved, b.requests[i].state.retrieved) << "request " << i;
        EXPECT_EQ(a.requests[i].state.retrieved, c.requests[i].state.retrieved) << "request " << i;
        EXPECT_EQ(a.requests[i].finish, b.requests[i].finish) << "request " << i;  // estimated times: equal
        EXPECT_EQ(a.requests[i].finish, c.requests[i].finish) << "request " << i;
    }
    EXPECT_THROW(frugal::rag::ivf_retriever(ix, embed, {.nprobe = 17}), frugal::invalid_argument);
}

TEST(TieredIvf, MergedTopKEqualsSingleTierSearch) {
    const std::size_t dim = 8;
    const auto data = gaussian_mixture(1200, dim, 8, 6);
    const auto ix = frugal::retrieve::ivf_flat::train(data, dim, 24, 6, 4);
    const auto queries = gaussian_mixture(60, dim, 3, 55);  // few topics: a skewed access pattern
    frugal::rag::tiered_ivf tiers(ix, /*hot_lists=*/5, /*period=*/4, /*decay=*/0.5, dim * sizeof(float),
                             {.load_gb_per_s = 1e9, .fast_call_ms = 0.0});
    std::size_t split = 0;
    for (std::size_t q = 0; q < 60; ++q) {
        const std::span<const float> query(queries.data() + q * dim, dim);
        const auto probe = ix.probe(query, 10);
        std::vector<std::size_t> resident;
        for (std::size_t c : probe)
            if (tiers.in_fast_tier(c)) resident.push_back(c);
        frugal::retrieve::top_k tiered(7), single(7);
        const auto what = tiers.search_lists(query, probe, tiered);
        ix.search_lists(query, probe, single);
        EXPECT_EQ(tiered.sorted(), single.sorted()) << "query " << q;
        EXPECT_EQ(what.fast, resident);  // fast_call_ms = 0: every resident list is searched there
        EXPECT_EQ(what.fast.size() + what.slow.size(), probe.size());
        split += !what.fast.empty() && !what.slow.empty() ? 1 : 0;
        tiers.end_substage();
    }
    EXPECT_GT(split, 30u);  // the searches really were split between the tiers
    EXPECT_GT(tiers.hit_ratio(), 0.0);
    EXPECT_LT(tiers.search_ms(), tiers.single_tier_ms());
}

TEST(TieredIvf, RefreshLoadsTheHottestListsAsynchronously) {
    // Four lists of known sizes (one vector each, 1 MB per vector); list 2 is accessed
    // most, then 0: with room for two lists, those are loaded, 2 first, at 1 GB/s (1 ms each).
    const std::vector<float> data{0, 0, 10, 0, 20, 0, 30, 0};
    const auto ix = frugal::retrieve::ivf_flat::train(data, 2, 4, 0, 1);
    frugal::rag::tiered_ivf tiers(ix, 2, /*period=*/1, /*decay=*/1.0, 1000000,
                             {.slow_gb_per_s = 1.0, .fast_gb_per_s = 10.0, .load_gb_per_s = 1.0, .list_ms = 0.0,
                              .fast_call_ms = 0.0});
    const std::vector<float> q{0, 0};
    const std::size_t l0 = ix.list_of(0), l2 = ix.list_of(2), l3 = ix.list_of(3);
    const std::vector<std::size_t> hot{l2, l2, l2, l0, l0, l3};
    frugal::retrieve::top_k heap(1);
    const auto first = tiers.search_lists(q, hot, heap);
    EXPECT_TRUE(first.fast.empty());
    EXPECT_DOUBLE_EQ(first.ms, 6.0);  // 6 MB at 1 GB/s
    tiers.end_substage(0.5);          // refresh at t = 6.5: list l2 ready at 7.5, l0 at 8.5
    EXPECT_FALSE(tiers.in_fast_tier(l2));
    tiers.end_substage(1.0);          // t = 7.5
    EXPECT_TRUE(tiers.in_fast_tier(l2));
    EXPECT_FALSE(tiers.in_fast_tier(l0));
    EXPECT_DOUBLE_EQ(tiers.load_ms(), 2.0);
    const std::vector<std::size_t> both{l2, l3};
    const auto second = tiers.search_lists(q, both, heap);
    EXPECT_EQ(second.fast, std::vector<std::size_t>{l2});
    EXPECT_EQ(second.slow, std::vector<std::size_t>{l3});
    EXPECT_DOUBLE_EQ(second.ms, 1.0);  // max(0.1 ms on the fast tier, 1 ms on the slow one)
    EXPECT_DOUBLE_EQ(second.single_tier_ms, 2.0);
    EXPECT_EQ(heap.ids(), std::vector<std::uint64_t>{0});
}

TEST(TieredIvf, SkipsTheFastTierWhenItsLaunchCostsMore) {
    const auto data = gaussian_mixture(300, 4, 3, 8);
    const auto ix = frugal::retrieve::ivf_flat::train(data, 4, 6, 4, 1);
    frugal::rag::tiered_ivf tiers(ix, 6, 1, 1.0, 16, {.load_gb_per_s = 1e9, .fast_call_ms = 1e6});
    const std::vector<std::size_t> all{0, 1, 2, 3, 4, 5};
    frugal::retrieve::top_k heap(3), single(3);
    (void)tiers.search_lists(std::span<const float>(data.data(), 4), all, heap);
    tiers.end_substage();     // refresh: all six lists start loading
    tiers.end_substage(1.0);  // and are loaded a millisecond later
    const auto what = tiers.search_lists(std::span<const float>(data.data(), 4), all, heap = frugal::retrieve::top_k(3));
    EXPECT_TRUE(what.fast.empty());
    EXPECT_EQ(what.slow, all);
    EXPECT_DOUBLE_EQ(what.ms, what.single_tier_ms);
    EXPECT_DOUBLE_EQ(tiers.hit_ratio(), 0.5);  // resident in the second search, though not used
    ix.search_lists(std::span<const float>(data.data(), 4), all, single);
    EXPECT_EQ(heap.sorted(), single.sorted());
    EXPECT_THROW(frugal::rag::tiered_ivf(ix, 2, 1, 0.5, 0), frugal::invalid_argument);
    EXPECT_THROW(tiers.end_substage(-1.0), frugal::invalid_argument);
}

TEST(ClusterOrder, ResultListsThenSearchedListsThenTheRest) {
    const std::vector<std::size_t> probe{9, 4, 7, 1, 3, 8};
    const std::vector<std::size_t> held{3, 7, 42}, searched{4, 3, 7, 5};
    EXPECT_EQ(frugal::rag::similarity_cluster_order(probe, held, searched), (std::vector<std::size_t>{7, 3, 4, 9, 1, 8}));
    frugal::rag::retrieval_history h(2);
    const std::vector<std::pair<std::uint64_t, std::size_t>> results{{10, 8}, {11, 1}, {12, 9}};  // third is dropped
    h.remember(results, searched);
    EXPECT_EQ(h.results().size(), 2u);
    EXPECT_EQ(h.order(probe), (std::vector<std::size_t>{1, 8, 4, 7, 3, 9}));
}

}  // namespace
