// The routing of cluster_pruner and margin_pruner on hand-built pools (GRATING's working
// example, section 4.5), termination, both ranking modes, and bad input.
#include <gtest/gtest.h>

#include <algorithm>
#include <limits>
#include <random>
#include <vector>

#include <frugal/prune/cluster_pruner.hpp>
#include <frugal/prune/progressive_selection.hpp>
#include <frugal/sim/margin_pruner.hpp>

#include "counting_new.hpp"

namespace {

using frugal::prune::route;

// Section 4.5 before layer 10: two clear winners, sixteen mid candidates, two hopeless ones.
std::vector<float> working_example_layer9() {
    std::vector<float> s = {0.95f, 0.93f};
    for (int j = 0; j < 16; ++j) s.push_back(0.50f + 0.004f * float(j % 4) - 0.002f * float(j / 4));
    s.push_back(0.03f);
    s.push_back(0.02f);
    return s;
}

TEST(ClusterPruner, WorkingExampleFirstDecisionSelectsTwoDropsTwo) {
    const auto s = working_example_layer9();
    frugal::prune::cluster_pruner pruner({.threshold = 0.3, .confirmations = 0});
    std::vector<route> routes(s.size());
    const auto step = pruner.decide(s, 10, routes);
    EXPECT_TRUE(step.triggered);
    EXPECT_GT(step.dispersion, 0.3);
    EXPECT_FALSE(step.done);
    EXPECT_EQ(step.clusters, 3u);
    EXPECT_EQ(step.selected, 2u);
    EXPECT_EQ(step.dropped, 2u);
    EXPECT_EQ(step.deferred, 16u);
    EXPECT_EQ(routes[0], route::selected);
    EXPECT_EQ(routes[1], route::selected);
    for (int i = 2; i < 18; ++i) EXPECT_EQ(routes[i], route::deferred) << i;
    EXPECT_EQ(routes[18], route::dropped);
    EXPECT_EQ(routes[19], route::dropped);
}

TEST(ClusterPruner, WorkingExampleEndToEndTerminatesAfterLayerEleven) {
    frugal::prune::cluster_pruner pruner({.threshold = 0.3, .confirmations = 0});
    frugal::prune::progressive_selection sel(pruner, 20, 10);
    // before layer 10
    auto step = sel.observe(working_example_layer9());
    EXPECT_EQ(sel.active().size(), 16u);
    // after layer 10: the sixteen are close together, CV below the threshold: no pruning
    std::vector<float> layer10(16);
    for (std::size_t i = 0; i < 16; ++i) layer10[i] = 0.5f + 0.01f * float(i % 3);
    step = sel.observe(layer10);
    EXPECT_FALSE(step.triggered);
    EXPECT_LT(step.dispersion, 0.3);
    EXPECT_EQ(sel.active().size(), 16u);
    // after layer 11: ids 2..9 rise, ids 10..17 fall; 2 selected + 8 deferred == K: terminal
    std::vector<float> layer11(16);
    for (std::size_t i = 0; i < 16; ++i) layer11[i] = i < 8 ? 0.9f + 0.003f * float(i) : 0.1f + 0.003f * float(i);
    step = sel.observe(layer11);
    EXPECT_TRUE(step.triggered);
    EXPECT_TRUE(step.done);
    EXPECT_TRUE(sel.done());
    auto top = sel.finish({});
    std::sort(top.begin(), top.end());
    EXPECT_EQ(top, (std::vector<std::size_t>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}));
    EXPECT_EQ(sel.dropped(), 10u);
    EXPECT_THROW(sel.observe(layer11), frugal::invalid_argument);
}

TEST(ClusterPruner, ExactModeOnlyDropsHopelessCandidates) {
    const auto s = working_example_layer9();
    frugal::prune::cluster_pruner pruner({.threshold = 0.3, .mode = frugal::prune::ranking_mode::exact, .confirmations = 0});
    std::vector<route> routes(s.size());
    const auto step = pruner.decide(s, 10, routes);
    EXPECT_EQ(step.selected, 0u);
    EXPECT_EQ(step.dropped, 2u);
    EXPECT_EQ(step.deferred, 18u);
    EXPECT_FALSE(step.done);
    EXPECT_EQ(routes[0], route::deferred);
    EXPECT_EQ(routes[19], route::dropped);
    // the final ranking comes from final scores of the survivors, in exact order
    frugal::prune::progressive_selection sel(pruner, 20, 3);
    sel.observe(s);
    std::vector<float> final_scores(sel.active().size());
    for (std::size_t i = 0; i < final_scores.size(); ++i) final_scores[i] = float(sel.active()[i]);  // id order
    EXPECT_EQ(sel.finish(final_scores), (std::vector<std::size_t>{17, 16, 15}));
}

TEST(ClusterPruner, BelowThresholdDefersEverything) {
    const auto s = working_example_layer9();
    frugal::prune::cluster_pruner pruner({.threshold = 100.0});
    std::vector<route> routes(s.size());
    const auto step = pruner.decide(s, 10, routes);
    EXPECT_FALSE(step.triggered);
    EXPECT_EQ(step.deferred, 20u);
    EXPECT_TRUE(std::all_of(routes.begin(), routes.end(), [](route r) { return r == route::deferred; }));
    frugal::prune::cluster_pruner never({.threshold = std::numeric_limits<double>::infinity()});
    EXPECT_FALSE(never.decide(s, 10, routes).triggered);
}

TEST(ClusterPruner, TerminatesWhenBoundaryClusterFillsTheSlots) {
    // three winners exactly: the boundary cluster is the winners' cluster
    std::vector<float> s = {0.1f, 0.9f, 0.12f, 0.91f, 0.11f, 0.92f, 0.13f};
    frugal::prune::cluster_pruner pruner({.threshold = 0.1, .confirmations = 0});
    std::vector<route> routes(s.size());
    const auto step = pruner.decide(s, 3, routes);
    EXPECT_TRUE(step.done);
    EXPECT_EQ(step.selected, 3u);
    EXPECT_EQ(step.deferred, 0u);
    EXPECT_EQ(step.dropped, 4u);
    EXPECT_EQ(routes[1], route::selected);
    EXPECT_EQ(routes[3], route::selected);
    EXPECT_EQ(routes[5], route::selected);
    // as many open slots as candidates: all selected without clustering
    std::vector<route> two(2);
    const auto all = pruner.decide(std::vector<float>{0.4f, 0.6f}, 2, two);
    EXPECT_TRUE(all.done);
    EXPECT_EQ(all.selected, 2u);
}

TEST(ClusterPruner, RankStabilityTerminatesAStableBoundaryGroup) {
    // one evenly spread group (BIC keeps it whole): nothing is routed by clusters, but the
    // top three stay the same; with patience 2 the third triggered decision terminates.
    const std::vector<float> s = {0.30f, 0.45f, 0.35f, 0.50f, 0.40f, 0.55f};
    frugal::prune::cluster_pruner pruner({.threshold = 0.1, .patience = 2, .confirmations = 0});
    frugal::prune::progressive_selection sel(pruner, 6, 3);
    auto step = sel.observe(s);
    EXPECT_TRUE(step.triggered);
    EXPECT_EQ(step.deferred, 6u);
    step = sel.observe(s);
    EXPECT_FALSE(step.done);
    std::vector<float> moved = s;
    moved[0] = 0.31f;  // scores move, the top three (ids 1, 3, 5) do not
    step = sel.observe(moved);
    EXPECT_TRUE(step.done);
    auto top = sel.finish({});
    std::sort(top.begin(), top.end());
    EXPECT_EQ(top, (std::vector<std::size_t>{1, 3, 5}));
    // a change of the top set restarts the count; patience 0 never uses stability
    frugal::prune::cluster_pruner paper({.threshold = 0.1, .patience = 0, .confirmations = 0});
    std::vector<route> routes(6);
    for (int i = 0; i < 5; ++i) EXPECT_FALSE(paper.decide(s, 3, routes).done);
    frugal::prune::cluster_pruner restart({.threshold = 0.1, .patience = 2, .confirmations = 0});
    std::vector<float> swapped = s;
    std::swap(swapped[0], swapped[5]);
    EXPECT_FALSE(restart.decide(s, 3, routes).done);
    EXPECT_FALSE(restart.decide(s, 3, routes).done);
    EXPECT_FALSE(restart.decide(swapped, 3, routes).done);
    EXPECT_FALSE(restart.decide(swapped, 3, routes).done);
    EXPECT_TRUE(restart.decide(swapped, 3, routes).done);
}

TEST(ClusterPruner, RankStabilityCountsEveryDecisionAfterTheFirstFiring) {
    // the same top three (ids 1, 3, 5) throughout; `close` has a dispersion under the
    // threshold, `s` over it. The lead check is off: the jump from `s` to `close` would
    // otherwise not count (its own test is below).
    const std::vector<float> s = {0.30f, 0.45f, 0.35f, 0.50f, 0.40f, 0.55f};
    const std::vector<float> close = {0.500f, 0.515f, 0.505f, 0.520f, 0.510f, 0.525f};
    std::vector<route> routes(6);
    frugal::prune::cluster_pruner pruner({.threshold = 0.1, .patience = 2, .lead_over_change = 0.0, .confirmations = 0});
    ASSERT_LT(frugal::prune::dispersion(std::span<const float>(close), frugal::prune::dispersion_measure::cv), 0.1);
    // before any firing, calm decisions do not count
    for (int i = 0; i < 4; ++i) EXPECT_FALSE(pruner.decide(close, 3, routes).done);
    EXPECT_TRUE(pruner.decide(s, 3, routes).triggered);  // fires: count 1
    EXPECT_FALSE(pruner.decide(close, 3, routes).done);  // calm, counts: 2
    const auto step = pruner.decide(close, 3, routes);   // 3 = patience + 1: terminates
    EXPECT_TRUE(step.done);
    EXPECT_EQ(step.selected, 3u);
    for (std::size_t i : {1u, 3u, 5u}) EXPECT_EQ(routes[i], route::selected);
    // reset() forgets the firing
    pruner.reset();
    for (int i = 0; i < 4; ++i) EXPECT_FALSE(pruner.decide(close, 3, routes).done);
}

TEST(ClusterPruner, RankStabilityCountsOnlyALeadThatTheScoresMovesCannotOverturn) {
    // Top three ids 1, 3, 5 throughout, with a lead of 0.1 over the rest (0.6 against 0.5).
    // One cluster per decision routes nothing, so only the rank-stability stop can end it.
    const std::vector<std::vector<float>> pools = {
        {0.20f, 0.60f, 0.30f, 0.70f, 0.50f, 0.80f},
        {-0.10f, 0.60f, 0.30f, 0.70f, 0.50f, 0.80f},  // id 0 moved 0.3: 0.5 x 0.3 > 0.1
        {-0.10f, 0.60f, 0.34f, 0.70f, 0.50f, 0.80f},  // largest move 0.04: 0.02 < 0.1
        {-0.10f, 0.60f, 0.30f, 0.70f, 0.50f, 0.80f},
    };
    const auto decisions_until_done = [&](double lead_over_change) {
        frugal::prune::cluster_pruner pruner(
            {.threshold = 0.0, .clusters = 1, .patience = 2, .lead_over_change = lead_over_change, .confirmations = 0});
        std::vector<route> routes(6);
        for (std::size_t d = 0; d < pools.size(); ++d) {
            if (pruner.decide(pools[d], 3, routes).done) {
                for (std::size_t i : {1u, 3u, 5u}) EXPECT_EQ(routes[i], route::selected);
                return d + 1;
            }
        }
        return std::size_t{0};
    };
    // counted by hand: without the check every unchanged top set counts (1, 2, 3 = patience
    // + 1 at the third decision); with it the second does not (1, 1, 2, 3 at the fourth)
    EXPECT_EQ(decisions_until_done(0.0), 3u);
    EXPECT_EQ(decisions_until_done(0.5), 4u);
    // a lead of 0.1 against a 0.3 move counts from a ratio of 1/3 down
    EXPECT_EQ(decisions_until_done(0.3), 3u);
}

TEST(ClusterPruner, ConfirmationsWaitForTheTriggerToHoldOnConsecutiveDecisions) {
    const auto spread = working_example_layer9();  // dispersion over 0.3: the paper's first decision
    const std::vector<float> bundled(20, 0.5f);    // dispersion 0
    std::vector<route> routes(20);
    // default: one confirmation; the first crossing routes nothing, the second routes as the paper
    frugal::prune::cluster_pruner pruner({.threshold = 0.3});
    EXPECT_EQ(pruner.options().confirmations, 1u);
    auto step = pruner.decide(spread, 10, routes);
    EXPECT_GT(step.dispersion, 0.3);
    EXPECT_FALSE(step.triggered);
    EXPECT_EQ(step.deferred, 20u);
    EXPECT_TRUE(std::all_of(routes.begin(), routes.end(), [](route r) { return r == route::deferred; }));
    step = pruner.decide(spread, 10, routes);
    EXPECT_TRUE(step.triggered);
    EXPECT_EQ(step.selected, 2u);
    EXPECT_EQ(step.dropped, 2u);
    // a decision under the threshold restarts the count, and so does reset()
    (void)pruner.decide(bundled, 10, routes);
    EXPECT_FALSE(pruner.decide(spread, 10, routes).triggered);
    EXPECT_TRUE(pruner.decide(spread, 10, routes).triggered);
    pruner.reset();
    EXPECT_FALSE(pruner.decide(spread, 10, routes).triggered);
    // two confirmations: the third consecutive crossing acts
    frugal::prune::cluster_pruner twice({.threshold = 0.3, .confirmations = 2});
    EXPECT_FALSE(twice.decide(spread, 10, routes).triggered);
    EXPECT_FALSE(twice.decide(spread, 10, routes).triggered);
    EXPECT_TRUE(twice.decide(spread, 10, routes).triggered);
}

TEST(ClusterPruner, SteadyStateDecisionsAllocateNothing) {
    // after one decision per pool size, decisions on new pools of at most that size allocate
    // nothing: the pruner and its k-means are their own workspace
    std::mt19937 rng(4);
    std::normal_distribution<float> normal(0.0f, 0.05f);
    std::vector<std::vector<float>> pools;
    for (int p = 0; p < 8; ++p) {
        pools.emplace_back(100 - 10 * std::size_t(p % 3));
        for (std::size_t i = 0; i < pools.back().size(); ++i) pools.back()[i] = 0.15f + 0.2f * float(i % 4) + normal(rng);
    }
    frugal::prune::cluster_pruner pruner({.threshold = 0.1, .confirmations = 0});
    std::vector<route> routes(100);
    (void)pruner.decide(pools[0], 10, routes);  // warm-up at the largest size
    std::size_t triggered = 0;
    frugal::testing::allocations().start();
    for (const auto& pool : pools) {
        const auto step = pruner.decide(pool, 10, std::span<route>(routes.data(), pool.size()));
        triggered += step.triggered ? 1 : 0;
    }
    frugal::testing::allocations().stop();
    EXPECT_EQ(frugal::testing::allocations().count.load(), 0u);
    EXPECT_EQ(triggered, pools.size());  // every decision clustered (the path that matters)
}

TEST(ClusterPruner, RejectsBadInput) {
    EXPECT_THROW(frugal::prune::cluster_pruner({.threshold = -0.1}), frugal::invalid_argument);
    EXPECT_THROW(frugal::prune::cluster_pruner({.threshold = std::numeric_limits<double>::quiet_NaN()}),
                 frugal::invalid_argument);
    frugal::prune::cluster_pruner pruner({.threshold = 0.1});
    std::vector<float> s = {0.1f, 0.5f, 0.9f};
    std::vector<route> routes(3);
    EXPECT_THROW(pruner.decide(s, 0, routes), frugal::invalid_argument);  // K = 0
    EXPECT_THROW(pruner.decide(s, 4, routes), frugal::invalid_argument);  // K > pool
    EXPECT_THROW(pruner.decide({}, 1, {}), frugal::invalid_argument);     // empty pool
    std::vector<route> short_routes(2);
    EXPECT_THROW(pruner.decide(s, 1, short_routes), frugal::invalid_argument);
    for (float bad : {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity(),
                      -std::numeric_limits<float>::infinity()}) {
        s[1] = bad;
        EXPECT_THROW(pruner.decide(s, 1, routes), frugal::invalid_argument);
    }
    EXPECT_THROW(frugal::prune::cluster_pruner({.lead_over_change = -0.5}), frugal::invalid_argument);
    EXPECT_THROW(frugal::prune::cluster_pruner({.lead_over_change = std::numeric_limits<double>::infinity()}),
                 frugal::invalid_argument);
    EXPECT_THROW(frugal::sim::margin_pruner(-1.0), frugal::invalid_argument);
    EXPECT_THROW(frugal::prune::progressive_selection(pruner, 0, 1), frugal::invalid_argument);
    EXPECT_THROW(frugal::prune::progressive_selection(pruner, 5, 0), frugal::invalid_argument);
    EXPECT_THROW(frugal::prune::progressive_selection(pruner, 5, 6), frugal::invalid_argument);
    frugal::prune::progressive_selection sel(pruner, 3, 1);
    EXPECT_THROW(sel.observe(std::vector<float>{0.1f, 0.2f}), frugal::invalid_argument);
}

TEST(MarginPruner, RoutesByAbsoluteGap) {
    // K = 2: the K-th score is 0.8, the first outside is 0.65.
    const std::vector<float> s = {0.9f, 0.8f, 0.5f, 0.65f, 0.1f};
    frugal::sim::margin_pruner wide(0.2);  // selected: s > 0.85; dropped: s < 0.6
    std::vector<route> routes(s.size());
    auto step = wide.decide(s, 2, routes);
    EXPECT_EQ(routes, (std::vector<route>{route::selected, route::deferred, route::dropped, route::deferred,
                                          route::dropped}));
    EXPECT_FALSE(step.done);
    frugal::sim::margin_pruner narrow(0.1);  // selected: s > 0.75; dropped: s < 0.7
    step = narrow.decide(s, 2, routes);
    EXPECT_EQ(routes, (std::vector<route>{route::selected, route::selected, route::dropped, route::dropped,
                                          route::dropped}));
    EXPECT_TRUE(step.done);
    frugal::sim::margin_pruner exact(0.2, frugal::prune::ranking_mode::exact);
    exact.decide(s, 2, routes);
    EXPECT_EQ(routes, (std::vector<route>{route::deferred, route::deferred, route::dropped, route::deferred,
                                          route::dropped}));
}

// A policy model must return prune_step from decide(scores, open_slots, routes).
struct returns_bool {
    bool decide(std::span<const float>, std::size_t, std::span<route>) { return true; }
};
struct wrong_scores {
    frugal::prune::prune_step decide(std::span<const int>, std::size_t, std::span<route>) { return {}; }
};
static_assert(frugal::prune::pruning_policy<frugal::prune::cluster_pruner>);
static_assert(frugal::prune::pruning_policy<frugal::sim::margin_pruner>);
static_assert(!frugal::prune::pruning_policy<returns_bool>);
static_assert(!frugal::prune::pruning_policy<wrong_scores>);

}  // namespace
