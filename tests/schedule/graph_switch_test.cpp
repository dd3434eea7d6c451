#include <frugal/schedule/graph_switch.hpp>
#include <frugal/sim/paper_graph_switch.hpp>

#include <gtest/gtest.h>

#include "graph_switch_oracle.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <vector>

namespace {

using frugal::schedule::graph_switch_plan;
using frugal::schedule::graph_switch_problem;
using frugal::schedule::resource;

graph_switch_problem random_problem(std::mt19937& rng, std::size_t n, std::size_t chunks) {
    std::uniform_real_distribution<double> p(0.5, 1.5), slow(1.0, 1.6), ratio(0.3, 3.0);
    graph_switch_problem pr;
    pr.chunks = chunks;
    const double level = ratio(rng);
    for (std::size_t i = 0; i < n; ++i) {
        pr.prefill_compute.push_back(p(rng));
        pr.decode_compute.push_back(pr.prefill_compute.back() * slow(rng));
        pr.load.push_back(pr.prefill_compute.back() * level * p(rng));
    }
    return pr;
}

using frugal::schedule::testing::brute_force_optimum;

TEST(GraphSwitch, ExactMatchesBruteForceOverAssignmentsAndLoadOrders) {
    std::mt19937 rng(7);
    for (int trial = 0; trial < 25; ++trial) {
        const std::size_t n = trial % 2 == 0 ? 4 : 3, chunks = trial % 2 == 0 ? 2 : 3;
        const auto p = random_problem(rng, n, chunks);
        const double oracle = brute_force_optimum(p);
        const double exact = frugal::schedule::graph_switch_makespan(p, frugal::schedule::exact_graph_switch(p));
        EXPECT_NEAR(exact, oracle, 1e-9 * oracle) << "trial " << trial;
        const double greedy = frugal::schedule::graph_switch_makespan(p, frugal::schedule::greedy_graph_switch(p));
        const double paper = frugal::schedule::graph_switch_makespan(p, frugal::sim::paper_greedy_graph_switch(p));
        EXPECT_GE(greedy, oracle * (1 - 1e-12));
        EXPECT_GE(paper, greedy * (1 - 1e-12));
    }
}

TEST(GraphSwitch, ExactMatchesBruteForceOverAssignmentsAtN8) {
    // Larger N: brute force over all 3^8 assignments (plans' load order), timeline-scored.
    std::mt19937 rng(11);
    for (int trial = 0; trial < 3; ++trial) {
        const auto p = random_problem(rng, 8, 2);
        double oracle = INFINITY;
        graph_switch_plan plan{std::vector<std::size_t>(8)};
        for (std::size_t code = 0; code < 6561; ++code) {
            for (std::size_t i = 0, x = code; i < 8; ++i, x /= 3) plan.switch_chunk[i] = x % 3;
            oracle = std::min(oracle, frugal::schedule::graph_switch_makespan(p, plan));
        }
        EXPECT_NEAR(frugal::schedule::graph_switch_makespan(p, frugal::schedule::exact_graph_switch(p)), oracle, 1e-9 * oracle);
    }
}

TEST(GraphSwitch, ExactMatchesEnumerationOnHardInstancesAtN10) {
    // Loads close to the compute (the hard range): every one of the 3^10 assignments,
    // scored by the closed-loop replay (checked against the timeline below).
    std::mt19937 rng(13);
    std::uniform_real_distribution<double> p(0.5, 1.5), slow(1.0, 1.5), level(1.2, 2.2);
    std::vector<double> scratch;
    for (int trial = 0; trial < 8; ++trial) {
        graph_switch_problem pr;
        pr.chunks = 2;
        const double rho = level(rng);
        for (int i = 0; i < 10; ++i) {
            pr.prefill_compute.push_back(p(rng));
            pr.decode_compute.push_back(pr.prefill_compute.back() * slow(rng));
            pr.load.push_back(pr.prefill_compute.back() * rho * p(rng));
        }
        double oracle = INFINITY;
        std::vector<std::size_t> sw(10);
        for (std::size_t code = 0; code < 59049; ++code) {
            for (std::size_t i = 0, x = code; i < 10; ++i, x /= 3) sw[i] = x % 3;
            oracle = std::min(oracle, frugal::schedule::detail::fast_switch_makespan(pr, sw, scratch));
        }
        EXPECT_NEAR(frugal::schedule::graph_switch_makespan(pr, frugal::schedule::exact_graph_switch(pr)), oracle, 1e-9 * oracle)
            << "trial " << trial;
    }
}

TEST(GraphSwitch, ClosedLoopReplayAgreesWithTimeline) {
    std::mt19937 rng(3);
    std::vector<double> scratch;
    for (int trial = 0; trial < 50; ++trial) {
        const auto p = random_problem(rng, 2 + trial % 7, 1 + trial % 3);
        std::vector<std::size_t> sw(p.blocks());
        for (auto& x : sw) x = std::uniform_int_distribution<std::size_t>(0, p.chunks)(rng);
        EXPECT_NEAR(frugal::schedule::detail::fast_switch_makespan(p, sw, scratch),
                    frugal::schedule::graph_switch_makespan(p, {sw}), 1e-9);
    }
}

// CoordGen Figure 8: N = 6, two chunks, loading a block takes two block computes.
// Times by hand (unit compute, G2 as fast as G1 here):
//  chunk 1: P5 and P6 are loaded during P1-P4 ([0,2), [2,4)) and run under G2 at t = 4, 5;
//           chunk 1 ends at t = 6 with half of the model switched and no compute stall.
//  chunk 2: P3, P4 load during chunk 1's P5, P6 and chunk 2's P1, P2; P1, P2 load behind
//           chunk 2's P3-P6 (after their own last compute): everything ends at t = 12.
//  synchronous loading: 12 + 6 * 2 = 24.  Naive asynchronous (each block after its last
//  compute): loads start at 7 and run back to back: 7 + 12 = 19.
TEST(GraphSwitch, Figure8ProgressiveSchedule) {
    const graph_switch_problem p{.prefill_compute = std::vector<double>(6, 1.0),
                                 .decode_compute = std::vector<double>(6, 1.0),
                                 .load = std::vector<double>(6, 2.0),
                                 .chunks = 2};
    const auto plan = frugal::sim::paper_greedy_graph_switch(p);
    EXPECT_EQ(plan.switch_chunk, (std::vector<std::size_t>{2, 2, 1, 1, 0, 0}));
    const auto s = frugal::schedule::graph_switch_timeline(p, plan);
    const auto r = s.schedule.simulate();
    EXPECT_DOUBLE_EQ(r.start[s.load_task[4]], 0.0);
    EXPECT_DOUBLE_EQ(r.finish[s.load_task[5]], 4.0);
    EXPECT_DOUBLE_EQ(r.start[s.compute_task[4]], 4.0);  // P5 under G2, no stall
    EXPECT_DOUBLE_EQ(r.finish[s.compute_task[5]], 6.0);  // chunk 1 done at 6
    EXPECT_DOUBLE_EQ(r.start[s.load_task[2]], 4.0);
    EXPECT_DOUBLE_EQ(r.start[s.load_task[0]], 8.0);
    EXPECT_DOUBLE_EQ(r.makespan, 12.0);
    EXPECT_DOUBLE_EQ(r.idle_time(resource::compute), 0.0);

    const graph_switch_plan naive{std::vector<std::size_t>(6, 2)};
    EXPECT_DOUBLE_EQ(frugal::schedule::graph_switch_makespan(p, naive), 19.0);
    // Synchronous: every load after the whole prefill.
    auto sync = frugal::schedule::graph_switch_timeline(p, naive);
    for (std::size_t i = 0; i < 6; ++i) sync.schedule.add_dependency(sync.load_task[i], sync.compute_task.back());
    EXPECT_DOUBLE_EQ(sync.schedule.simulate().makespan, 24.0);
    EXPECT_DOUBLE_EQ(frugal::schedule::graph_switch_makespan(p, frugal::schedule::exact_graph_switch(p)), 12.0);
}

// Appendix A: 2-Partition reduces to graph switching. Items a_j become blocks with load
// a_j and negligible compute; a last block computes B = sum/2 per chunk under G1 and
// switches for free. All loads hide inside the two B-long windows iff a partition exists.
double partition_instance_optimum(const std::vector<double>& items) {
    const double b = std::accumulate(items.begin(), items.end(), 0.0) / 2;
    graph_switch_problem p;
    p.chunks = 2;
    for (double a : items) {
        p.prefill_compute.push_back(1e-4);
        p.decode_compute.push_back(2e-4);
        p.load.push_back(a);
    }
    p.prefill_compute.push_back(b);
    p.decode_compute.push_back(2 * b);
    p.load.push_back(0.0);
    return frugal::schedule::graph_switch_makespan(p, frugal::schedule::exact_graph_switch(p));
}

TEST(GraphSwitch, AppendixAPartitionReduction) {
    // {3, 1, 1, 2, 2, 1}: sum 10, {3, 2} = 5 -> a partition exists.
    EXPECT_LT(partition_instance_optimum({3, 1, 1, 2, 2, 1}), 10.0 + 0.01);
    // {1, 1, 4}: sum 6, no subset sums to 3 -> some load sticks out by >= 1.
    EXPECT_GT(partition_instance_optimum({1, 1, 4}), 6.0 + 0.9);
    // {5, 4, 3, 3, 3}: sum 18, {5, 4} = 9.
    EXPECT_LT(partition_instance_optimum({5, 4, 3, 3, 3}), 18.0 + 0.01);
}

TEST(GraphSwitch, EstimatorMovesTowardMeasurements) {
    graph_switch_problem p{.prefill_compute = {1, 1}, .decode_compute = {1, 1}, .load = {4, 4}, .chunks = 2};
    frugal::schedule::graph_switch_estimator est(p, 0.5);
    est.observe_load(1, 2.0);
    EXPECT_DOUBLE_EQ(est.estimate().load[1], 3.0);
    est.observe_load(1, 2.0);
    EXPECT_DOUBLE_EQ(est.estimate().load[1], 2.5);
    est.observe_prefill_compute(0, 3.0);
    EXPECT_DOUBLE_EQ(est.estimate().prefill_compute[0], 2.0);
    EXPECT_THROW(est.observe_load(2, 1.0), frugal::out_of_range);
    EXPECT_THROW(est.observe_load(0, -1.0), frugal::invalid_argument);
    EXPECT_THROW(frugal::schedule::graph_switch_estimator(p, 0.0), frugal::invalid_argument);
}

TEST(GraphSwitch, RejectsBadInput) {
    graph_switch_problem empty;
    EXPECT_THROW((void)frugal::schedule::greedy_graph_switch(empty), frugal::invalid_argument);
    graph_switch_problem negative{.prefill_compute = {1}, .decode_compute = {1}, .load = {-1}, .chunks = 1};
    EXPECT_THROW((void)frugal::schedule::exact_graph_switch(negative), frugal::invalid_argument);
    graph_switch_problem mismatch{.prefill_compute = {1, 2}, .decode_compute = {1}, .load = {1}, .chunks = 1};
    EXPECT_THROW((void)frugal::sim::paper_greedy_graph_switch(mismatch), frugal::invalid_argument);
    graph_switch_problem zero_chunks{.prefill_compute = {1}, .decode_compute = {1}, .load = {1}, .chunks = 0};
    EXPECT_THROW((void)frugal::sim::paper_greedy_graph_switch(zero_chunks), frugal::invalid_argument);
    graph_switch_problem ok{.prefill_compute = {1}, .decode_compute = {1}, .load = {1}, .chunks = 1};
    EXPECT_THROW((void)frugal::schedule::graph_switch_makespan(ok, {{2}}), frugal::invalid_argument);
    std::mt19937 rng(1);
    EXPECT_THROW((void)frugal::schedule::exact_graph_switch(random_problem(rng, 25, 2)), frugal::invalid_argument);
}

}  // namespace
