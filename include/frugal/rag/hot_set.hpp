#pragma once
/// @file
/// hot_set: HedraRAG's hot-cluster cache plan, the top-gc ids by decayed access frequency.

#include <algorithm>
#include <concepts>
#include <cstddef>
#include <functional>
#include <limits>
#include <optional>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "frugal/core/error.hpp"

namespace frugal::rag {

/// A swap of the resident set: ids to load (hottest first) and ids to evict.
/// @code
/// if (auto plan = hot.step()) { for (int c : plan->to_evict) gpu.drop(c); for (int c : plan->to_load) gpu.load_async(c); }
/// @endcode
template <class Id>
struct swap_plan {
    std::vector<Id> to_load, to_evict;
};

/// HedraRAG's partial GPU index cache (section 4.4): tracks the access frequency of ids
/// (index clusters), decayed by `decay` every `period` steps, and every `period` steps
/// recomputes the top-`gc` set, returned as (to load, to evict) lists so the caller can swap
/// asynchronously (HedraRAG: gc clusters, every 50 sub-stages). Ties keep resident ids,
/// then prefer smaller ids. O(distinct ids) per recomputation, O(1) per access.
/// @code
/// frugal::rag::hot_set<int> hot(/*gc=*/64, /*period=*/50, /*decay=*/0.5);
/// for (int c : probed_clusters) hot.record(c);
/// if (auto plan = hot.step()) gpu.swap_async(plan->to_load, plan->to_evict);
/// @endcode
template <class Id, class Hash = std::hash<Id>>
    requires std::totally_ordered<Id>
class hot_set {
public:
    hot_set(std::size_t gc, std::size_t period, double decay) : gc_(gc), period_(period), decay_(decay) {
        FRUGAL_CHECK(gc > 0, "hot_set: a cache of gc = 0 ids");
        FRUGAL_CHECK(period > 0, "hot_set: recomputation period 0");
        FRUGAL_CHECK(decay >= 0.0 && decay <= 1.0, "hot_set: decay ", decay, " is outside [0, 1]");
    }

    /// Counts one access of `id` (weight 1, or `weight`).
    void record(const Id& id, double weight = 1.0) {
        FRUGAL_CHECK(weight >= 0 && weight < std::numeric_limits<double>::infinity(), "hot_set::record: weight ", weight);
        freq_[id] += weight;
    }

    /// Ends one step; every `period`-th step recomputes the top-gc set, applies the decay and
    /// returns the swap plan (possibly empty lists); other steps return nullopt.
    std::optional<swap_plan<Id>> step() {
        if (++steps_ % period_ != 0) return std::nullopt;
        std::vector<std::pair<double, Id>> ranked;
        ranked.reserve(freq_.size());
        for (const auto& [id, f] : freq_)
            if (f > 0) ranked.emplace_back(f, id);
        auto hotter = [&](const auto& a, const auto& b) {
            if (a.first != b.first) return a.first > b.first;
            const bool ra = resident_.contains(a.second), rb = resident_.contains(b.second);
            if (ra != rb) return ra;
            return a.second < b.second;
        };
        const std::size_t k = std::min(gc_, ranked.size());
        std::partial_sort(ranked.begin(), ranked.begin() + static_cast<std::ptrdiff_t>(k), ranked.end(), hotter);
        swap_plan<Id> plan;
        std::unordered_set<Id, Hash> next;
        for (std::size_t i = 0; i < k; ++i) {
            next.insert(ranked[i].second);
            if (!resident_.contains(ranked[i].second)) plan.to_load.push_back(ranked[i].second);
        }
        for (const Id& id : resident_)
            if (!next.contains(id)) plan.to_evict.push_back(id);
        std::sort(plan.to_evict.begin(), plan.to_evict.end());
        resident_.swap(next);
        for (auto& [id, f] : freq_) f *= decay_;
        return plan;
    }

    /// Whether `id` is in the current top-gc set.
    [[nodiscard]] bool contains(const Id& id) const { return resident_.contains(id); }
    [[nodiscard]] std::size_t size() const noexcept { return resident_.size(); }
    /// The decayed frequency of `id` (0 when never seen).
    [[nodiscard]] double frequency(const Id& id) const {
        auto it = freq_.find(id);
        return it == freq_.end() ? 0.0 : it->second;
    }

private:
    std::size_t gc_, period_;
    double decay_;
    std::size_t steps_ = 0;
    std::unordered_map<Id, double, Hash> freq_;
    std::unordered_set<Id, Hash> resident_;
};

}  // namespace frugal::rag
