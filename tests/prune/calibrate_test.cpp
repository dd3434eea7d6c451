// Replaying trajectories under a policy on hand-built pools, and threshold calibration on
// held-back queries.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>

#include <frugal/prune/calibrate.hpp>
#include <frugal/sim/synthetic_trajectories.hpp>
#include <frugal/prune/trajectory.hpp>

#include "make_query.hpp"

namespace {

using frugal::testing::make_query;

TEST(EvaluatePruning, HandBuiltPoolsGiveHandComputedFigures) {
    // 4 candidates x 3 layers, K = 2. After layer 1 two clear winners and two clear losers:
    // the pruner (GRATING's rule: no confirmation, no patience) terminates, having computed 4
    // of 12 candidate-layers.
    frugal::prune::trajectory_set set;
    set.layers = 3;
    set.queries.push_back(make_query({{0.90f, 0.9f, 0.9f}, {0.91f, 0.9f, 0.8f}, {0.10f, 0.1f, 0.1f}, {0.11f, 0.2f, 0.3f}}));
    // same first layer, but candidate 3 overtakes candidate 1 by the final layer
    set.queries.push_back(make_query({{0.90f, 0.9f, 0.9f}, {0.91f, 0.5f, 0.2f}, {0.10f, 0.1f, 0.1f}, {0.11f, 0.4f, 0.8f}}));
    const auto ev = frugal::prune::evaluate_pruning(set, 2, [] {
        return frugal::prune::cluster_pruner({.threshold = 0.5, .patience = 0, .confirmations = 0});
    });
    EXPECT_EQ(ev.queries, 2u);
    EXPECT_NEAR(ev.layer_compute_saved, 1.0 - 8.0 / 24.0, 1e-12);
    EXPECT_NEAR(ev.precision_at_k, (1.0 + 0.5) / 2.0, 1e-12);
    ASSERT_EQ(ev.mean_active_per_layer.size(), 3u);
    EXPECT_EQ(ev.mean_active_per_layer[0], 4.0);
    EXPECT_EQ(ev.mean_active_per_layer[1], 0.0);
    // never pruning computes everything and is exact
    const auto full = frugal::prune::evaluate_pruning(set, 2, [] {
        return frugal::prune::cluster_pruner({.threshold = std::numeric_limits<double>::infinity()});
    });
    EXPECT_EQ(full.precision_at_k, 1.0);
    EXPECT_EQ(full.layer_compute_saved, 0.0);
    EXPECT_THROW((void)frugal::prune::evaluate_pruning(set, 5, [] { return frugal::prune::cluster_pruner(); }),
                 frugal::invalid_argument);
    EXPECT_THROW((void)frugal::prune::evaluate_pruning(set, 0, [] { return frugal::prune::cluster_pruner(); }),
                 frugal::invalid_argument);
}

TEST(Calibrate, AutomaticThresholdHoldsOnHeldBackQueries) {
    frugal::sim::synthetic_trajectory_options g{.queries = 120};
    g.seed = 11;
    const auto cal = frugal::sim::generate_synthetic_trajectories(g);
    g.seed = 12;
    const auto test = frugal::sim::generate_synthetic_trajectories(g);
    // the paper's rule: no margin for the calibration queries' sampling error
    const auto result = frugal::prune::calibrate_threshold(cal, 10, 0.98,
                                                    {.grid_points = 32, .margin_standard_errors = 0.0, .padding_queries = 0});
    ASSERT_TRUE(result.met);
    EXPECT_GE(result.chosen.precision_at_k, 0.98);
    // the lowest passing grid threshold: the next lower one fails
    for (std::size_t i = 0; i + 1 < result.curve.size(); ++i)
        if (result.curve[i + 1].threshold == result.threshold) {
            EXPECT_LT(result.curve[i].precision_at_k, 0.98);
        }
    const auto applied = frugal::prune::evaluate_pruning(test, 10, [&] {
        return frugal::prune::cluster_pruner({.threshold = result.threshold});
    });
    EXPECT_GE(applied.precision_at_k, 0.98 - 0.01);  // held-back queries, sampling slack
    EXPECT_GT(applied.layer_compute_saved, 0.2);
}

TEST(Calibrate, StandardErrorMarginIsMetAtTheChoiceAndNotBelowIt) {
    frugal::sim::synthetic_trajectory_options g{.queries = 120};
    g.seed = 21;
    const auto cal = frugal::sim::generate_synthetic_trajectories(g);
    const double target = 0.98, z = 1.645;
    const auto plain = frugal::prune::calibrate_threshold(cal, 10, target,
                                                   {.grid_points = 32, .margin_standard_errors = 0.0, .padding_queries = 0});
    const auto guarded = frugal::prune::calibrate_threshold(cal, 10, target,
                                                     {.grid_points = 32, .margin_standard_errors = z, .padding_queries = 0});
    ASSERT_TRUE(plain.met);
    ASSERT_TRUE(guarded.met);
    EXPECT_GE(guarded.threshold, plain.threshold);
    // recomputed here: mean per-query precision minus z standard errors of the mean
    const auto lower_bound = [&](double threshold) {
        const auto ev = frugal::prune::evaluate_pruning(cal, 10, [&] { return frugal::prune::cluster_pruner({.threshold = threshold}); });
        double mean = 0.0, ss = 0.0;
        for (double loss : ev.query_loss) mean += 1.0 - loss;
        mean /= double(ev.query_loss.size());
        for (double loss : ev.query_loss) ss += (1.0 - loss - mean) * (1.0 - loss - mean);
        const double n = double(ev.query_loss.size());
        return mean - z * std::sqrt(ss / (n - 1.0) / n);
    };
    EXPECT_GE(lower_bound(guarded.threshold), target - 1e-12);
    for (std::size_t i = 0; i + 1 < guarded.curve.size(); ++i)
        if (guarded.curve[i + 1].threshold == guarded.threshold) {
            EXPECT_LT(lower_bound(guarded.curve[i].threshold), target);
        }
    EXPECT_THROW((void)frugal::prune::calibrate_threshold(cal, 10, target, {.margin_standard_errors = -1.0}),
                 frugal::invalid_argument);
}

TEST(Calibrate, PaddingQueriesCarryTheTypicalLossIntoTheMargin) {
    frugal::sim::synthetic_trajectory_options g{.queries = 120};
    g.seed = 31;
    const auto cal = frugal::sim::generate_synthetic_trajectories(g);
    const double target = 0.98, z = 1.645;
    const std::size_t padding = 2;
    const auto unpadded = frugal::prune::calibrate_threshold(cal, 10, target,
                                                      {.grid_points = 32, .margin_standard_errors = z, .padding_queries = 0});
    const auto padded = frugal::prune::calibrate_threshold(cal, 10, target,
                                                    {.grid_points = 32, .margin_standard_errors = z, .padding_queries = padding});
    ASSERT_TRUE(padded.met);
    EXPECT_GE(padded.threshold, unpadded.threshold);  // padding only adds loss and spread
    // recomputed here: every grid threshold's per-query losses, the typical loss of a query
    // that lost anything over all of them, and the padded mean minus z standard errors
    std::vector<std::vector<double>> losses;
    double lost = 0.0, losing = 0.0;
    for (const auto& point : padded.curve) {
        const auto ev = frugal::prune::evaluate_pruning(cal, 10, [&] { return frugal::prune::cluster_pruner({.threshold = point.threshold}); });
        losses.push_back(ev.query_loss);
        for (double loss : ev.query_loss) {
            if (loss > 0.0) {
                lost += loss;
                losing += 1.0;
            }
        }
    }
    ASSERT_GT(losing, 0.0);
    const auto lower_bound = [&](std::size_t point) {
        std::vector<double> x = losses[point];
        x.insert(x.end(), padding, lost / losing);
        const double n = double(x.size());
        double mean = 0.0, ss = 0.0;
        for (double loss : x) mean += 1.0 - loss;
        mean /= n;
        for (double loss : x) ss += (1.0 - loss - mean) * (1.0 - loss - mean);
        return mean - z * std::sqrt(ss / (n - 1.0) / n);
    };
    for (std::size_t i = 0; i < padded.curve.size(); ++i) {
        if (padded.curve[i].threshold < padded.threshold) continue;
        EXPECT_GE(lower_bound(i), target - 1e-12) << "threshold " << padded.curve[i].threshold;
        if (padded.curve[i].threshold == padded.threshold && i > 0) {
            EXPECT_LT(lower_bound(i - 1), target);
        }
    }
}

TEST(Calibrate, HoeffdingBentkusPValueMatchesClosedForms) {
    // zero observed loss: Hoeffding gives (1 - alpha)^n, Bentkus e (1 - alpha)^n
    EXPECT_NEAR(frugal::prune::detail::hoeffding_bentkus_p_value(0.0, 200, 0.01), std::pow(0.99, 200), 1e-12);
    // observed loss above alpha: no evidence, p = min(1, e P(Binom(n, a) <= ceil(n r)))
    EXPECT_NEAR(frugal::prune::detail::hoeffding_bentkus_p_value(0.5, 10, 0.1), 1.0, 1e-12);
    // n = 20, alpha = 0.2, r = 0.05 (1 failure): e * P(Binom(20, 0.2) <= 1) vs Hoeffding
    const double binom = std::pow(0.8, 20) + 20 * 0.2 * std::pow(0.8, 19);
    const double h = 0.05 * std::log(0.05 / 0.2) + 0.95 * std::log(0.95 / 0.8);
    EXPECT_NEAR(frugal::prune::detail::hoeffding_bentkus_p_value(0.05, 20, 0.2), std::min(std::exp(-20 * h), std::exp(1.0) * binom),
                1e-12);
}

TEST(Calibrate, GuardedModeIsConservativeAndRefusesWhenUncertifiable) {
    frugal::sim::synthetic_trajectory_options g{.queries = 60};
    const auto small = frugal::sim::generate_synthetic_trajectories(g);
    // 60 queries cannot certify a 1% risk at delta = 0.1 even with zero loss: never prune
    const auto refused = frugal::prune::calibrate_threshold(small, 10, 0.99, {.grid_points = 8, .delta = 0.1});
    EXPECT_FALSE(refused.met);
    EXPECT_TRUE(std::isinf(refused.threshold));
    // a loose target is certifiable and no lower than the automatic choice
    const auto guarded = frugal::prune::calibrate_threshold(small, 10, 0.9, {.grid_points = 16, .delta = 0.1});
    const auto automatic = frugal::prune::calibrate_threshold(small, 10, 0.9, {.grid_points = 16});
    ASSERT_TRUE(guarded.met);
    EXPECT_GE(guarded.threshold, automatic.threshold);
    EXPECT_THROW((void)frugal::prune::calibrate_threshold(small, 10, 1.5), frugal::invalid_argument);
    EXPECT_THROW((void)frugal::prune::calibrate_threshold(small, 10, 0.9, {.delta = 0.0}), frugal::invalid_argument);
}

TEST(SyntheticTrajectories, DeterministicProbabilitiesThatDivergeWithDepth) {
    frugal::sim::synthetic_trajectory_options g{.queries = 30, .candidates = 12, .layers = 20, .seed = 5};
    const auto a = frugal::sim::generate_synthetic_trajectories(g);
    const auto b = frugal::sim::generate_synthetic_trajectories(g);
    double early = 0.0, late = 0.0;
    std::vector<float> col(12);
    for (std::size_t q = 0; q < a.queries.size(); ++q) {
        for (std::size_t c = 0; c < 12; ++c)
            for (std::size_t l = 0; l < 20; ++l) {
                ASSERT_EQ(a.queries[q].at(c, l), b.queries[q].at(c, l));
                ASSERT_GT(a.queries[q].at(c, l), 0.0f);
                ASSERT_LT(a.queries[q].at(c, l), 1.0f);
            }
        for (std::size_t l : {std::size_t{0}, std::size_t{19}}) {
            for (std::size_t c = 0; c < 12; ++c) col[c] = a.queries[q].at(c, l);
            (l == 0 ? early : late) += frugal::prune::coefficient_of_variation(std::span<const float>(col));
        }
    }
    EXPECT_LT(early, 0.5 * late);  // bundled early, spread late (GRATING Figure 2)
    g.seed = 6;
    EXPECT_NE(frugal::sim::generate_synthetic_trajectories(g).queries[0].at(0, 0), a.queries[0].at(0, 0));
    EXPECT_THROW((void)frugal::sim::generate_synthetic_trajectories({.queries = 0}), frugal::invalid_argument);
}

}  // namespace
