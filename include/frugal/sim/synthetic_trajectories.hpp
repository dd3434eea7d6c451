#pragma once
/// @file
/// SYNTHETIC reranker score trajectories, for tests and benchmarks where no real reranker
/// can be run. They imitate GRATING's Figure 2 (scores bundled in early layers, diverging
/// into separated groups, ranks settling in intermediate layers); they are not measurements.

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <random>
#include <vector>

#include "frugal/core/error.hpp"
#include "frugal/prune/trajectory.hpp"

namespace frugal::sim {

/// Parameters of generate_synthetic_trajectories (logits are pre-sigmoid scores).
struct synthetic_trajectory_options {
    std::size_t queries = 200, candidates = 20, layers = 28;
    std::uint64_t seed = 1;
    /// Relevance groups per query, drawn uniformly in [min_groups, max_groups].
    std::size_t min_groups = 2, max_groups = 4;
    /// Logit distance between adjacent group centres, drawn uniformly per gap.
    double gap_min = 1.5, gap_max = 3.0;
    /// Spread of final logits inside a group.
    double within_group_sd = 0.6;
    /// Per-query common logit of early layers (before the groups separate), N(early_mean, early_mean_sd).
    double early_mean = 0.0, early_mean_sd = 1.0;
    /// Spread of the early-layer noise around the common logit, and its layer-to-layer
    /// correlation (an AR(1) walk per candidate).
    double early_sd = 0.4, noise_correlation = 0.8;
    /// Convergence: the weight of the final logit follows a logistic curve in depth whose
    /// midpoint (onset) and width are drawn per query, as fractions of the depth. The
    /// defaults put the midpoint between layers 5.6 and 12.6 of 28, after GRATING's
    /// Figure 2 (relative ranks settle around layers 7 to 13 of a 28-layer reranker); a
    /// query converges to 95% of its final logits about three widths after its midpoint.
    double onset_min = 0.2, onset_max = 0.45, width_min = 0.04, width_max = 0.1;
};

/// Generates a SYNTHETIC trajectory set: for each query, candidates fall in separated
/// relevance groups with final logits z_c; the logit after layer l is
/// a(l) z_c + (1 - a(l)) (b_q + e_c(l)), where a rises from 0 to exactly 1 at the last layer
/// along a logistic curve, b_q is the query's common early logit and e_c an AR(1) noise
/// walk; the reported score is sigmoid(logit), as a reranker's relevance probability.
/// Deterministic for a given seed.
/// @code
/// auto set = frugal::sim::generate_synthetic_trajectories({.queries = 200, .seed = 1});
/// @endcode
inline prune::trajectory_set generate_synthetic_trajectories(const synthetic_trajectory_options& o) {
    FRUGAL_CHECK(o.queries > 0 && o.candidates > 0 && o.layers > 0, "generate_synthetic_trajectories: ",
                 o.queries, " queries x ", o.candidates, " candidates x ", o.layers, " layers must all be positive");
    FRUGAL_CHECK(o.min_groups >= 1 && o.min_groups <= o.max_groups, "generate_synthetic_trajectories: groups ",
                 o.min_groups, "..", o.max_groups, " is not a valid range");
    FRUGAL_CHECK(o.gap_min >= 0 && o.gap_min <= o.gap_max && o.within_group_sd >= 0 && o.early_sd >= 0 &&
                     o.early_mean_sd >= 0 && std::abs(o.noise_correlation) < 1.0,
                 "generate_synthetic_trajectories: invalid spread parameters");
    FRUGAL_CHECK(o.onset_min <= o.onset_max && o.width_min > 0 && o.width_min <= o.width_max,
                 "generate_synthetic_trajectories: invalid convergence curve parameters");
    std::mt19937_64 rng(o.seed);
    std::normal_distribution<double> normal;
    const auto uniform = [&](double lo, double hi) { return std::uniform_real_distribution<double>(lo, hi)(rng); };
    prune::trajectory_set set;
    set.layers = o.layers;
    const double depth = static_cast<double>(o.layers);
    std::vector<double> centres, weight(o.layers);
    for (std::size_t q = 0; q < o.queries; ++q) {
        const std::size_t groups =
            std::uniform_int_distribution<std::size_t>(o.min_groups, o.max_groups)(rng);
        centres.assign(groups, 0.0);
        for (std::size_t g = 1; g < groups; ++g) centres[g] = centres[g - 1] + uniform(o.gap_min, o.gap_max);
        const double centre_shift = -0.5 * centres.back();  // centre the groups on logit 0
        const double onset = uniform(o.onset_min, o.onset_max) * depth;
        const double width = uniform(o.width_min, o.width_max) * depth;
        const auto logistic = [&](double l) { return 1.0 / (1.0 + std::exp(-(l - onset) / width)); };
        const double a0 = logistic(0.0), a1 = logistic(depth);
        for (std::size_t l = 0; l < o.layers; ++l)
            weight[l] = (logistic(static_cast<double>(l + 1)) - a0) / (a1 - a0);
        weight[o.layers - 1] = 1.0;
        const double base = o.early_mean + o.early_mean_sd * normal(rng);
        prune::score_trajectory traj(o.candidates, o.layers);
        for (std::size_t c = 0; c < o.candidates; ++c) {
            const std::size_t g = std::uniform_int_distribution<std::size_t>(0, groups - 1)(rng);
            const double final_logit = centres[g] + centre_shift + o.within_group_sd * normal(rng);
            double noise = o.early_sd * normal(rng);
            const double innovation = o.early_sd * std::sqrt(1.0 - o.noise_correlation * o.noise_correlation);
            for (std::size_t l = 0; l < o.layers; ++l) {
                if (l > 0) noise = o.noise_correlation * noise + innovation * normal(rng);
                const double z = weight[l] * final_logit + (1.0 - weight[l]) * (base + noise);
                traj.at(c, l) = static_cast<float>(1.0 / (1.0 + std::exp(-z)));
            }
        }
        set.queries.push_back(std::move(traj));
    }
    return set;
}

}  // namespace frugal::sim
