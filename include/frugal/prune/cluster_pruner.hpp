#pragma once
/// @file
/// Progressive cluster pruning (GRATING section 4.1): the pruning-policy concept, the
/// cluster policy (dispersion trigger + exact 1-D k-means + three-way routing) and a
/// fixed-margin policy as a second model of the concept.

#include <algorithm>
#include <cmath>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>
#include <numeric>
#include <span>
#include <vector>

#include <boost/container/small_vector.hpp>

#include "frugal/core/error.hpp"
#include "frugal/prune/dispersion.hpp"
#include "frugal/prune/kmeans1d.hpp"

namespace frugal::prune {

/// Where a pruning decision sends one active candidate.
enum class route : std::uint8_t {
    deferred,  ///< keeps computing (the boundary cluster)
    selected,  ///< accepted into the top-K; its computation stops
    dropped,   ///< cannot reach the top-K; its computation stops
};

/// What a policy may prune (GRATING section 7).
enum class ranking_mode : std::uint8_t {
    top_k,  ///< only the top-K set matters: winners and hopeless candidates both stop
    exact,  ///< exact ranks and final scores of the top-K: only hopeless candidates stop
};

/// The outcome of one pruning decision over the active candidates.
struct prune_step {
    bool triggered = false;  ///< the policy acted (the dispersion exceeded the threshold)
    bool done = false;       ///< every open slot is filled by `selected`: stop the forward pass
    double dispersion = 0.0; ///< the trigger statistic (0 for policies without one)
    std::size_t clusters = 0;  ///< clusters formed (0 when not triggered)
    std::size_t selected = 0, deferred = 0, dropped = 0;
};

/// A pruning policy: given the scores of the active candidates and the number of top-K
/// slots still open (K minus the candidates already selected), it writes one route per
/// candidate and reports the step. When it reports `done`, no candidate is deferred and
/// the selected ones fill the open slots exactly.
/// @code
/// static_assert(frugal::prune::pruning_policy<frugal::prune::cluster_pruner>);
/// @endcode
template <class P>
concept pruning_policy =
    requires(P& policy, std::span<const float> scores, std::size_t open_slots, std::span<route> routes) {
        { policy.decide(scores, open_slots, routes) } -> std::same_as<prune_step>;
    };

namespace detail {
/// Validates a decision's input and starts every candidate as deferred.
inline void begin_decide(std::span<const float> scores, std::size_t open_slots, std::span<route> routes,
                         const char* who) {
    FRUGAL_CHECK(!scores.empty(), who, ": empty pool of active candidates");
    FRUGAL_CHECK(open_slots >= 1, who, ": K (open top-K slots) must be at least 1");
    FRUGAL_CHECK(open_slots <= scores.size(), who, ": K = ", open_slots, " open slots exceed the ",
                 scores.size(), " active candidates");
    FRUGAL_CHECK(routes.size() == scores.size(), who, ": ", routes.size(), " routes for ", scores.size(),
                 " scores");
    for (std::size_t i = 0; i < scores.size(); ++i)
        FRUGAL_CHECK(std::isfinite(scores[i]), who, ": score of active candidate ", i, " is ", scores[i]);
    std::fill(routes.begin(), routes.end(), route::deferred);
}

/// Converts "selected + deferred fill the open slots" into termination (deferred become
/// selected), as GRATING's terminal condition.
inline void finish_step(prune_step& step, std::size_t open_slots, std::span<route> routes, ranking_mode mode) {
    if (mode == ranking_mode::top_k && step.selected + step.deferred == open_slots) {
        for (route& r : routes)
            if (r == route::deferred) r = route::selected;
        step.selected += step.deferred;
        step.deferred = 0;
        step.done = true;
    }
}
}  // namespace detail

/// Settings of cluster_pruner. `patience`, `lead_over_change` and `confirmations` are
/// frugal's extensions of GRATING's rule; all three at 0 is the paper's rule exactly.
/// docs/pruning.md shows what each does to precision and compute on synthetic workloads.
struct cluster_pruner_options {
    /// Dispersion above which the policy clusters and routes (GRATING's "dispersion
    /// threshold"); +infinity never prunes. Must be >= 0.
    double threshold = 0.2;
    dispersion_measure measure = dispersion_measure::cv;
    ranking_mode mode = ranking_mode::top_k;
    /// Clusters to form: 0 selects k in 1..max_clusters by BIC (Ckmeans.1d.dp), else fixed
    /// (capped at the pool size).
    std::size_t clusters = 0;
    std::size_t max_clusters = 6;
    /// Rank stability, for boundary clusters that never split (the K-th candidate inside a
    /// group of close scores, which GRATING's rule computes to the last layer). p > 0: once
    /// the trigger has fired in this query, when the set of the top open-slots candidates
    /// stays the same over p + 1 consecutive decisions over the same active candidates
    /// (nothing routed in between), that set is selected, the rest dropped, and the
    /// selection ends. Every decision after the first firing counts, whatever its own
    /// dispersion: the few close candidates left after routing have a low dispersion of
    /// their own. 0: off. Per-query state: use one pruner per query, or call reset()
    /// between queries (progressive_selection does).
    std::size_t patience = 3;
    /// With `patience`: an unchanged top set counts only when its lead (its lowest score
    /// minus the highest score outside it) is at least this many times the largest move of
    /// any candidate's score since the previous decision, since a lead that one layer's
    /// moves could overturn is not a settled ranking. 0: off. Finite, >= 0.
    double lead_over_change = 0.5;
    /// Trigger confirmation. c > 0: the dispersion must also have exceeded the threshold at
    /// the c decisions before (consecutive layers of one query) before anything is routed
    /// or counted towards `patience`, because the CV divides by the mean and a pool of low
    /// scores reaches a high CV from early-layer noise alone. 0: route at the first
    /// crossing, as GRATING. Per-query state, as `patience`.
    std::size_t confirmations = 1;
};

/// GRATING's progressive cluster pruning policy (section 4.1). When the dispersion of the
/// active scores exceeds the threshold, the scores are clustered by exact 1-D k-means and
/// routed by whole clusters around the boundary cluster (the one holding the K-th ranked
/// active candidate, K = open slots): clusters above it are selected, clusters below are
/// dropped, the boundary cluster is deferred. If selected + deferred equals the open slots,
/// the step is terminal (all of them selected). In `ranking_mode::exact` nothing is
/// selected; clusters above the boundary keep computing. With `patience` > 0 (the default)
/// it also ends a boundary group whose top set has stopped changing, and with
/// `confirmations` > 0 (the default) it acts only on a dispersion that stayed over the
/// threshold for consecutive decisions (see the options; both 0 is GRATING's rule exactly).
/// Keeps its k-means buffers: repeated decisions on pools of one size allocate nothing.
/// @code
/// frugal::prune::cluster_pruner pruner({.threshold = 0.3});
/// std::vector<frugal::prune::route> routes(scores.size());
/// frugal::prune::prune_step step = pruner.decide(scores, /*open_slots=*/10, routes);
/// @endcode
class cluster_pruner {
public:
    explicit cluster_pruner(cluster_pruner_options options = {}) : options_(options) {
        FRUGAL_CHECK(!std::isnan(options.threshold) && options.threshold >= 0.0,
                     "cluster_pruner: dispersion threshold ", options.threshold, " must be >= 0");
        FRUGAL_CHECK(options.max_clusters >= 1, "cluster_pruner: max_clusters must be at least 1");
        FRUGAL_CHECK(std::isfinite(options.lead_over_change) && options.lead_over_change >= 0.0,
                     "cluster_pruner: lead_over_change ", options.lead_over_change, " must be finite and >= 0");
    }

    [[nodiscard]] const cluster_pruner_options& options() const noexcept { return options_; }

    /// One decision over the active candidates' scores; see the class comment.
    prune_step decide(std::span<const float> scores, std::size_t open_slots, std::span<route> routes) {
        detail::begin_decide(scores, open_slots, routes, "cluster_pruner");
        prune_step step;
        const std::size_t n = scores.size();
        step.deferred = n;
        if (options_.mode == ranking_mode::top_k && open_slots == n) {  // every candidate is a winner
            detail::finish_step(step, open_slots, routes, options_.mode);
            return step;
        }
        step.dispersion = dispersion(scores, options_.measure);
        over_threshold_ = step.dispersion > options_.threshold ? over_threshold_ + 1 : 0;
        const bool fired = over_threshold_ > options_.confirmations;
        if (options_.patience > 0 && track_stability(scores, open_slots, fired, routes, step)) return step;
        if (!fired) return step;
        step.triggered = true;
        const std::size_t k_max = options_.clusters > 0 ? options_.clusters : options_.max_clusters;
        km_.fit(scores, k_max);
        const std::size_t k = options_.clusters > 0 ? km_.k_max() : km_.select_k_bic();
        step.clusters = k;
        bounds_.resize(k + 1);
        km_.boundaries(k, std::span<std::size_t>(bounds_.data(), bounds_.size()));
        // sorted position of the K-th highest score, and the cluster holding it
        const std::size_t pivot = n - open_slots;
        std::size_t boundary = 0;
        while (bounds_[boundary + 1] <= pivot) ++boundary;
        const auto order = km_.order();
        step.dropped = bounds_[boundary];
        for (std::size_t p = 0; p < bounds_[boundary]; ++p) routes[order[p]] = route::dropped;
        if (options_.mode == ranking_mode::top_k) {
            step.selected = n - bounds_[boundary + 1];
            for (std::size_t p = bounds_[boundary + 1]; p < n; ++p) routes[order[p]] = route::selected;
        }
        step.deferred = n - step.dropped - step.selected;
        detail::finish_step(step, open_slots, routes, options_.mode);
        if (step.selected + step.dropped > 0) stable_ = 0;  // the next pool differs
        return step;
    }

    /// Forgets the per-query state (see `patience` and `confirmations`) before a new query.
    void reset() noexcept {
        stable_ = 0;
        over_threshold_ = 0;
        has_fired_ = false;
        previous_top_.clear();
        previous_scores_.clear();
    }

private:
    /// Rank-stability bookkeeping; true when it terminated the selection (routes written).
    bool track_stability(std::span<const float> scores, std::size_t open_slots, bool fired, std::span<route> routes,
                         prune_step& step) {
        const std::size_t n = scores.size();
        rank_.resize(n);
        std::iota(rank_.begin(), rank_.end(), std::size_t{0});
        std::nth_element(rank_.begin(), rank_.begin() + static_cast<std::ptrdiff_t>(open_slots - 1), rank_.end(),
                         [&](std::size_t a, std::size_t b) { return scores[a] > scores[b] || (scores[a] == scores[b] && a < b); });
        top_.assign(n, 0);
        for (std::size_t i = 0; i < open_slots; ++i) top_[rank_[i]] = 1;
        const bool same_pool = previous_top_.size() == n && previous_open_ == open_slots;
        has_fired_ = has_fired_ || fired;
        const bool settled = same_pool && top_ == previous_top_ && lead_holds(scores);
        stable_ = has_fired_ && settled ? stable_ + 1 : (has_fired_ ? 1 : 0);
        if (options_.lead_over_change > 0.0) previous_scores_.assign(scores.begin(), scores.end());
        previous_top_ = top_;
        previous_open_ = open_slots;
        if (stable_ <= options_.patience) return false;
        for (std::size_t i = 0; i < n; ++i) {
            const bool in = top_[i] != 0;
            routes[i] = in ? (options_.mode == ranking_mode::top_k ? route::selected : route::deferred) : route::dropped;
        }
        step.triggered = true;
        step.dropped = n - open_slots;
        step.selected = options_.mode == ranking_mode::top_k ? open_slots : 0;
        step.deferred = n - step.dropped - step.selected;
        step.done = options_.mode == ranking_mode::top_k;
        stable_ = 0;
        return true;
    }

    /// The top set's lead over the rest is at least lead_over_change times the largest score
    /// move since the previous decision over the same pool (previous_scores_).
    [[nodiscard]] bool lead_holds(std::span<const float> scores) const noexcept {
        if (options_.lead_over_change == 0.0) return true;
        double change = 0.0;
        double lowest_in = std::numeric_limits<double>::infinity(), highest_out = -lowest_in;
        for (std::size_t i = 0; i < scores.size(); ++i) {
            const double s = scores[i];
            change = std::max(change, std::abs(s - previous_scores_[i]));
            if (top_[i] != 0) lowest_in = std::min(lowest_in, s);
            else highest_out = std::max(highest_out, s);
        }
        return lowest_in - highest_out >= options_.lead_over_change * change;
    }

    cluster_pruner_options options_;
    kmeans1d km_;
    boost::container::small_vector<std::size_t, 17> bounds_;
    std::size_t stable_ = 0, previous_open_ = 0;
    std::size_t over_threshold_ = 0;  // consecutive decisions with the dispersion over the threshold
    bool has_fired_ = false;          // the trigger fired in this query: decisions count towards patience
    std::vector<std::uint8_t> top_, previous_top_;
    std::vector<double> previous_scores_;  // the pool at the previous decision, kept only for lead_holds
    std::vector<std::size_t> rank_;
};
static_assert(pruning_policy<cluster_pruner>);

}  // namespace frugal::prune
