#pragma once
/// @file
/// margin_pruner: the fixed score-gap pruning rule GRATING argues against (section 3.3), a
/// baseline for `frugal::prune::cluster_pruner` and a second model of `pruning_policy`.

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <functional>
#include <limits>
#include <span>
#include <vector>

#include "frugal/core/error.hpp"
#include "frugal/prune/cluster_pruner.hpp"

namespace frugal::sim {

/// A fixed-margin policy, the "absolute score gap" rule GRATING argues against (section
/// 3.3), kept as a second model of prune::pruning_policy and a baseline: a candidate is selected
/// when it leads the first candidate outside the open slots by more than `margin`, and
/// dropped when it trails the K-th by more than `margin`. In `prune::ranking_mode::exact` nothing
/// is selected. Terminates like cluster_pruner.
/// @code
/// frugal::margin_pruner pruner(0.2);
/// auto step = pruner.decide(scores, 10, routes);
/// @endcode
class margin_pruner {
public:
    explicit margin_pruner(double margin, prune::ranking_mode mode = prune::ranking_mode::top_k) : margin_(margin), mode_(mode) {
        FRUGAL_CHECK(!std::isnan(margin) && margin >= 0.0, "margin_pruner: margin ", margin, " must be >= 0");
    }

    /// One decision over the active candidates' scores; see the class comment.
    prune::prune_step decide(std::span<const float> scores, std::size_t open_slots, std::span<prune::route> routes) {
        prune::detail::begin_decide(scores, open_slots, routes, "margin_pruner");
        prune::prune_step step;
        const std::size_t n = scores.size();
        step.triggered = true;
        sorted_.assign(scores.begin(), scores.end());
        std::sort(sorted_.begin(), sorted_.end(), std::greater<>());
        const double kth = sorted_[open_slots - 1];
        const double first_out = open_slots < n ? static_cast<double>(sorted_[open_slots])
                                                : -std::numeric_limits<double>::infinity();
        for (std::size_t i = 0; i < n; ++i) {
            const double s = scores[i];
            if (mode_ == prune::ranking_mode::top_k && s - first_out > margin_) {
                routes[i] = prune::route::selected;
                ++step.selected;
            } else if (kth - s > margin_) {
                routes[i] = prune::route::dropped;
                ++step.dropped;
            }
        }
        step.deferred = n - step.selected - step.dropped;
        prune::detail::finish_step(step, open_slots, routes, mode_);
        return step;
    }

private:
    double margin_;
    prune::ranking_mode mode_;
    std::vector<float> sorted_;
};
static_assert(prune::pruning_policy<margin_pruner>);

}  // namespace frugal::sim
