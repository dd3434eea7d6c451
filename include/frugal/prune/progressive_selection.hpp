#pragma once
/// @file
/// progressive_selection: the per-query bookkeeping of progressive pruning (which candidates
/// are still computing, which were selected or dropped), driven by any pruning_policy.

#include <algorithm>
#include <cstddef>
#include <numeric>
#include <span>
#include <vector>

#include "frugal/core/error.hpp"
#include "frugal/prune/cluster_pruner.hpp"

namespace frugal::prune {

/// Tracks one query's candidate pool through a layer-by-layer forward pass (GRATING 4.1 and
/// 4.5): call `observe()` with the active candidates' scores before each layer, run the layer
/// for `active()` only, and call `finish()` with the final scores when the last layer is done
/// (or stop early when `done()`). The result is the top-K ids: the selected ones in the
/// order they were selected (higher scores first within a step), then the best of the
/// candidates that computed to the end, by final score. A policy with a `reset()` member
/// (per-query state, e.g. cluster_pruner's rank-stability counter) is reset on construction.
/// @code
/// frugal::prune::cluster_pruner pruner({.threshold = 0.3});
/// frugal::prune::progressive_selection sel(pruner, /*pool=*/20, /*k=*/10);
/// for (int layer = 0; layer < layers && !sel.done(); ++layer) {
///     sel.observe(score_active(sel.active()));  // scores aligned with sel.active()
///     if (!sel.done()) forward_layer(sel.active());
/// }
/// std::vector<std::size_t> top = sel.done() ? sel.finish({}) : sel.finish(score_active(sel.active()));
/// @endcode
template <pruning_policy Policy>
class progressive_selection {
public:
    /// Starts with all `pool` candidates (ids 0..pool-1) active. Throws when k == 0, the pool
    /// is empty or k > pool.
    progressive_selection(Policy& policy, std::size_t pool, std::size_t k) : policy_(&policy), k_(k) {
        FRUGAL_CHECK(pool > 0, "progressive_selection: empty candidate pool");
        FRUGAL_CHECK(k >= 1, "progressive_selection: K must be at least 1");
        FRUGAL_CHECK(k <= pool, "progressive_selection: K = ", k, " exceeds the pool of ", pool, " candidates");
        active_.resize(pool);
        std::iota(active_.begin(), active_.end(), std::size_t{0});
        routes_.reserve(pool);
        selected_.reserve(k);
        if constexpr (requires { policy.reset(); }) policy.reset();  // per-query policy state
    }

    /// Candidate ids still computing, in ascending id order.
    [[nodiscard]] std::span<const std::size_t> active() const noexcept { return active_; }
    /// Candidate ids accepted so far.
    [[nodiscard]] std::span<const std::size_t> selected() const noexcept { return selected_; }
    /// Number of candidates dropped so far.
    [[nodiscard]] std::size_t dropped() const noexcept { return dropped_; }
    /// True when the top-K is complete and the forward pass can stop.
    [[nodiscard]] bool done() const noexcept { return done_; }

    /// Applies the policy to the scores of `active()` (same order) and removes the selected
    /// and dropped candidates from the active set.
    prune_step observe(std::span<const float> active_scores) {
        FRUGAL_CHECK(!done_, "progressive_selection::observe: the selection is already complete");
        FRUGAL_CHECK(active_scores.size() == active_.size(), "progressive_selection::observe: ",
                     active_scores.size(), " scores for ", active_.size(), " active candidates");
        routes_.resize(active_.size());
        const prune_step step = policy_->decide(active_scores, k_ - selected_.size(), routes_);
        // selected ones enter in descending score order
        order_.clear();
        for (std::size_t i = 0; i < active_.size(); ++i)
            if (routes_[i] == route::selected) order_.push_back(i);
        std::sort(order_.begin(), order_.end(),
                  [&](std::size_t a, std::size_t b) { return active_scores[a] > active_scores[b]; });
        for (std::size_t i : order_) selected_.push_back(active_[i]);
        std::size_t kept = 0;
        for (std::size_t i = 0; i < active_.size(); ++i) {
            if (routes_[i] == route::deferred) active_[kept++] = active_[i];
            else if (routes_[i] == route::dropped) ++dropped_;
        }
        active_.resize(kept);
        FRUGAL_CHECK(selected_.size() <= k_, "progressive_selection: the policy selected ", selected_.size(),
                     " candidates for K = ", k_);
        done_ = selected_.size() == k_ || step.done;
        FRUGAL_CHECK(!done_ || selected_.size() == k_, "progressive_selection: the policy reported done with ",
                     selected_.size(), " of K = ", k_, " selected");
        FRUGAL_CHECK(done_ || active_.size() >= k_ - selected_.size(), "progressive_selection: the policy left ",
                     active_.size(), " active candidates for ", k_ - selected_.size(), " open slots");
        return step;
    }

    /// The top-K ids. `final_scores` are the scores of `active()` after the last layer; pass
    /// an empty span when `done()`.
    [[nodiscard]] std::vector<std::size_t> finish(std::span<const float> final_scores) const {
        std::vector<std::size_t> out(selected_);
        if (done_) return out;
        FRUGAL_CHECK(final_scores.size() == active_.size(), "progressive_selection::finish: ",
                     final_scores.size(), " final scores for ", active_.size(), " active candidates");
        std::vector<std::size_t> idx(active_.size());
        std::iota(idx.begin(), idx.end(), std::size_t{0});
        const std::size_t open = k_ - selected_.size();
        std::partial_sort(idx.begin(), idx.begin() + static_cast<std::ptrdiff_t>(open), idx.end(),
                          [&](std::size_t a, std::size_t b) {
                              return final_scores[a] > final_scores[b] ||
                                     (final_scores[a] == final_scores[b] && active_[a] < active_[b]);
                          });
        for (std::size_t i = 0; i < open; ++i) out.push_back(active_[idx[i]]);
        return out;
    }

private:
    Policy* policy_;
    std::size_t k_;
    std::size_t dropped_ = 0;
    bool done_ = false;
    std::vector<std::size_t> active_, selected_, order_;
    std::vector<route> routes_;
};

}  // namespace frugal::prune
