#pragma once
/// @file
/// Replaying recorded trajectories under a pruning policy, and choosing GRATING's dispersion
/// threshold from them (section 4.1's automatic mode, plus a Learn-then-Test guarded mode).

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>
#include <numbers>
#include <numeric>
#include <optional>
#include <span>
#include <type_traits>
#include <vector>

#include "frugal/core/error.hpp"
#include "frugal/prune/cluster_pruner.hpp"
#include "frugal/prune/dispersion.hpp"
#include "frugal/prune/progressive_selection.hpp"
#include "frugal/prune/trajectory.hpp"

namespace frugal::prune {

/// Precision and compute of a policy replayed over a trajectory set.
struct pruning_evaluation {
    std::size_t queries = 0, k = 0;
    /// Mean over queries of |pruned top-K ∩ full-model top-K| / K (final-layer scores,
    /// ties broken by lower candidate index).
    double precision_at_k = 0.0;
    /// Fraction of candidate-layers not computed: 1 - computed / (candidates x layers).
    double layer_compute_saved = 0.0;
    /// Mean number of candidates computing each layer (index = layer).
    std::vector<double> mean_active_per_layer;
    /// 1 - precision@K of each query (the loss the guarded mode bounds).
    std::vector<double> query_loss;
};

/// Replays `set` as a pruned forward pass: every candidate computes layer 1; after each
/// layer but the last, the policy sees the active candidates' scores at that layer and may
/// select or drop them; survivors of the last layer are ranked by their final scores.
/// `make_policy()` returns a fresh pruning_policy per query.
/// @code
/// auto eval = frugal::prune::evaluate_pruning(set, 10, [] { return frugal::prune::cluster_pruner({.threshold = 0.4}); });
/// @endcode
template <class MakePolicy>
    requires pruning_policy<std::invoke_result_t<MakePolicy&>>
[[nodiscard]] pruning_evaluation evaluate_pruning(const trajectory_set& set, std::size_t k, MakePolicy&& make_policy) {
    FRUGAL_CHECK(!set.queries.empty(), "evaluate_pruning: empty trajectory set");
    FRUGAL_CHECK(k >= 1, "evaluate_pruning: K must be at least 1");
    pruning_evaluation ev;
    ev.queries = set.queries.size();
    ev.k = k;
    ev.mean_active_per_layer.assign(set.layers, 0.0);
    double computed = 0.0, total = 0.0, hits_sum = 0.0;
    std::vector<float> scores;
    std::vector<std::size_t> truth, ids;
    for (const score_trajectory& q : set.queries) {
        const std::size_t n = q.candidates(), layers = q.layers();
        FRUGAL_CHECK(layers == set.layers, "evaluate_pruning: a query has ", layers, " layers, the set ", set.layers);
        FRUGAL_CHECK(k <= n, "evaluate_pruning: K = ", k, " exceeds a pool of ", n, " candidates");
        auto policy = make_policy();
        progressive_selection<decltype(policy)> sel(policy, n, k);
        std::vector<std::size_t> result;
        for (std::size_t l = 0; l < layers; ++l) {
            const auto active = sel.active();
            computed += static_cast<double>(active.size());
            ev.mean_active_per_layer[l] += static_cast<double>(active.size());
            scores.resize(active.size());
            for (std::size_t i = 0; i < active.size(); ++i) scores[i] = q.at(active[i], l);
            if (l + 1 == layers) {
                result = sel.finish(scores);
                break;
            }
            sel.observe(scores);
            if (sel.done()) {
                result = sel.finish({});
                break;
            }
        }
        total += static_cast<double>(n * layers);
        truth.resize(n);
        std::iota(truth.begin(), truth.end(), std::size_t{0});
        std::partial_sort(truth.begin(), truth.begin() + static_cast<std::ptrdiff_t>(k), truth.end(),
                          [&](std::size_t a, std::size_t b) {
                              const float fa = q.at(a, layers - 1), fb = q.at(b, layers - 1);
                              return fa > fb || (fa == fb && a < b);
                          });
        std::sort(truth.begin(), truth.begin() + static_cast<std::ptrdiff_t>(k));
        std::size_t hits = 0;
        for (std::size_t id : result)
            hits += std::binary_search(truth.begin(), truth.begin() + static_cast<std::ptrdiff_t>(k), id) ? 1 : 0;
        const double precision = static_cast<double>(hits) / static_cast<double>(k);
        hits_sum += precision;
        ev.query_loss.push_back(1.0 - precision);
    }
    for (double& a : ev.mean_active_per_layer) a /= static_cast<double>(ev.queries);
    ev.precision_at_k = hits_sum / static_cast<double>(ev.queries);
    ev.layer_compute_saved = 1.0 - computed / total;
    return ev;
}

/// One point of a threshold sweep.
struct threshold_point {
    double threshold = 0.0, precision_at_k = 0.0, layer_compute_saved = 0.0;
};

/// The candidate thresholds calibration searches, ascending: `points` quantiles of the
/// dispersion (policy.measure) of every full pool at every decision layer, plus 0 and
/// +infinity (never prune).
/// @code
/// auto grid = frugal::prune::threshold_grid(set, frugal::prune::cluster_pruner_options{}, 128);
/// @endcode
[[nodiscard]] inline std::vector<double> threshold_grid(const trajectory_set& set,
                                                        const cluster_pruner_options& policy, std::size_t points) {
    FRUGAL_CHECK(points >= 2, "threshold_grid: at least 2 points, got ", points);
    std::vector<double> grid = {0.0, std::numeric_limits<double>::infinity()};
    std::vector<double> seen;
    std::vector<float> pool;
    for (const auto& q : set.queries) {
        for (std::size_t l = 0; l + 1 < q.layers(); ++l) {
            pool.resize(q.candidates());
            for (std::size_t c = 0; c < q.candidates(); ++c) pool[c] = q.at(c, l);
            seen.push_back(dispersion(std::span<const float>(pool), policy.measure));
        }
    }
    std::sort(seen.begin(), seen.end());
    for (std::size_t i = 0; !seen.empty() && i < points; ++i)
        grid.push_back(seen[i * (seen.size() - 1) / (points - 1)]);
    std::sort(grid.begin(), grid.end());
    grid.erase(std::unique(grid.begin(), grid.end()), grid.end());
    return grid;
}

/// Settings of calibrate_threshold.
struct calibration_options {
    /// The policy being calibrated; its threshold is replaced by each candidate threshold.
    cluster_pruner_options policy{};
    /// Size of the threshold grid (threshold_grid).
    std::size_t grid_points = 96;
    /// Guarded mode when set: the chosen threshold meets the target on new queries from the
    /// same distribution with probability >= 1 - delta.
    std::optional<double> delta{};
    /// Automatic mode: the calibration set's mean precision must exceed the target by this
    /// many standard errors of that mean (per-query precision spread / sqrt(queries)). The
    /// default, 2.326 * sqrt(2) = 3.290, is a one-sided 99% normal bound on the difference
    /// between the calibration set's mean and that of a new set of as many queries: the
    /// target is meant to hold on the new set, whose own sampling luck counts as much as the
    /// calibration set's (docs/pruning.md compares the two on synthetic seed pairs). For new
    /// sets of another size, the same bound is 2.326 * sqrt(1 + calibration queries / new
    /// queries). 0 = the paper's rule (the lowest threshold meeting the target on the
    /// calibration set itself).
    double margin_standard_errors = 2.326 * std::numbers::sqrt2;
    /// Automatic mode: before the mean and its standard error are taken, the calibration
    /// queries' losses are padded with this many more queries, each with the typical loss of
    /// a query that lost any precision (their mean over every grid threshold). Most of the
    /// precision lost at a good threshold comes from a few queries that lose several slots;
    /// a few hundred calibration queries that happened to hold few of them look both more
    /// precise and less variable than they are, and the margin alone then chose too low a
    /// threshold (docs/pruning.md). 0 with a margin of 0 is the paper's rule.
    std::size_t padding_queries = 1;
};

/// The outcome of calibration.
struct calibration_result {
    double threshold = std::numeric_limits<double>::infinity();
    /// False when no finite threshold passed: `threshold` is +infinity (never prune).
    bool met = false;
    threshold_point chosen;               ///< the calibration set's figures at `threshold`
    std::vector<threshold_point> curve;   ///< every grid threshold, ascending
};

namespace detail {
/// Hoeffding-Bentkus p-value for H0: E[loss] > alpha, losses in [0, 1] (Learn then Test,
/// Angelopoulos et al. 2021): min(exp(-n h(min(r, alpha), alpha)), e P(Binom(n, alpha) <= ceil(n r))).
[[nodiscard]] inline double hoeffding_bentkus_p_value(double mean_loss, std::size_t n, double alpha) {
    const double dn = static_cast<double>(n);
    const double a = std::min(mean_loss, alpha);
    const auto h = [](double x, double y) {
        const double first = x > 0.0 ? x * std::log(x / y) : 0.0;
        return first + (1.0 - x) * std::log((1.0 - x) / (1.0 - y));
    };
    const double hoeffding = std::exp(-dn * h(a, alpha));
    // binomial CDF at ceil(n r), summed in log space
    const auto m = static_cast<std::size_t>(std::ceil(dn * mean_loss - 1e-9));
    double cdf = 0.0;
    for (std::size_t i = 0; i <= std::min(m, n); ++i) {
        const double di = static_cast<double>(i);
        const double log_term = std::lgamma(dn + 1) - std::lgamma(di + 1) - std::lgamma(dn - di + 1) +
                                di * std::log(alpha) + (dn - di) * std::log1p(-alpha);
        cdf += std::exp(log_term);
    }
    return std::min({hoeffding, std::numbers::e * cdf, 1.0});
}
}  // namespace detail

/// Chooses the dispersion threshold of cluster_pruner from calibration trajectories.
/// Automatic mode (GRATING 4.1): the lowest grid threshold whose precision@K on the
/// calibration set (padded with `options.padding_queries` typical losses) meets `target`
/// with a margin of `options.margin_standard_errors` standard errors, and at every higher
/// grid threshold too (so a lucky dip in a
/// non-monotone curve is not chosen). Guarded mode (`options.delta`): fixed-sequence
/// Learn-then-Test from the highest threshold down, rejecting "mean per-query precision
/// loss > 1 - target" with the Hoeffding-Bentkus p-value at level delta and stopping at the
/// first threshold that cannot be certified; with few queries or a strict target nothing
/// may be certified and the result is +infinity (never prune), `met` false.
/// @code
/// auto cal = frugal::prune::calibrate_threshold(cal_set, 10, 0.99);
/// frugal::prune::cluster_pruner pruner({.threshold = cal.threshold});
/// @endcode
[[nodiscard]] inline calibration_result calibrate_threshold(const trajectory_set& set, std::size_t k, double target,
                                                            const calibration_options& options = {}) {
    FRUGAL_CHECK(target > 0.0 && target <= 1.0, "calibrate_threshold: precision target ", target,
                 " is outside (0, 1]");
    FRUGAL_CHECK(!options.delta || (*options.delta > 0.0 && *options.delta < 1.0),
                 "calibrate_threshold: delta ", options.delta.value_or(0.0), " is outside (0, 1)");
    FRUGAL_CHECK(std::isfinite(options.margin_standard_errors) && options.margin_standard_errors >= 0.0,
                 "calibrate_threshold: margin of ", options.margin_standard_errors, " standard errors must be >= 0");
    const auto grid = threshold_grid(set, options.policy, options.grid_points);
    calibration_result out;
    std::vector<pruning_evaluation> evals;
    for (double t : grid) {
        cluster_pruner_options po = options.policy;
        po.threshold = t;
        evals.push_back(evaluate_pruning(set, k, [&] { return cluster_pruner(po); }));
        out.curve.push_back({t, evals.back().precision_at_k, evals.back().layer_compute_saved});
    }
    std::optional<std::size_t> pick;
    const double alpha = 1.0 - target;
    // automatic mode's padding: the mean loss of the queries that lost anything, over the grid
    double lost = 0.0;
    std::size_t losing = 0;
    if (!options.delta && options.padding_queries > 0)
        for (const auto& ev : evals)
            for (double x : ev.query_loss)
                if (x > 0.0) {
                    lost += x;
                    ++losing;
                }
    const double typical_loss = losing > 0 ? lost / static_cast<double>(losing) : 0.0;
    for (std::size_t i = grid.size(); i-- > 0;) {  // from never-prune down
        bool pass = false;
        if (options.delta) {
            const auto& loss = evals[i].query_loss;
            const double mean = 1.0 - evals[i].precision_at_k;
            pass = alpha > 0.0 && detail::hoeffding_bentkus_p_value(mean, loss.size(), alpha) <= *options.delta;
        } else {
            const auto& loss = evals[i].query_loss;
            const double padding = static_cast<double>(options.padding_queries);
            const double n = static_cast<double>(loss.size()) + padding;
            const double mean = (std::accumulate(loss.begin(), loss.end(), 0.0) + padding * typical_loss) / n;
            double var = padding * (typical_loss - mean) * (typical_loss - mean);
            for (double x : loss) var += (x - mean) * (x - mean);
            const double standard_error = n > 1.0 ? std::sqrt(var / (n - 1.0) / n) : 0.0;
            pass = 1.0 - mean - options.margin_standard_errors * standard_error >= target - 1e-12;
        }
        if (!pass) break;
        pick = i;
    }
    if (pick && std::isfinite(grid[*pick])) {
        out.threshold = grid[*pick];
        out.met = true;
        out.chosen = out.curve[*pick];
    } else {
        out.chosen = out.curve.back();
    }
    return out;
}

}  // namespace frugal::prune
