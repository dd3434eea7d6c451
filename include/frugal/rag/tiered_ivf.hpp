#pragma once
/// @file
/// tiered_ivf: HedraRAG's hybrid retrieval engine with a partial GPU index cache
/// (HedraRAG 4.4, Figure 11): a hot_set decides which lists a fast tier holds, refreshed
/// every N sub-stages with asynchronous loads; each search splits its lists between the
/// tiers, which run concurrently, and merges their top-k. The tiers' times come from a cost
/// model (a simulated fast tier), so the plan and its savings are measurable on any machine.

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <span>
#include <unordered_map>
#include <vector>

#include "frugal/core/error.hpp"
#include "frugal/rag/hot_set.hpp"
#include "frugal/retrieve/top_k.hpp"
#include "frugal/retrieve/vector_index.hpp"

namespace frugal::rag {

/// Costs of the two tiers. Defaults: a 32-core CPU scanning lists at ~200 GB/s in all, an
/// H100 scanning at ~2 TB/s (of its 3.35 TB/s HBM) with a ~50 us kernel launch and
/// synchronisation per batch, and PCIe 5 at ~25 GB/s for the asynchronous swaps.
/// @code
/// frugal::rag::tier_costs c{.fast_gb_per_s = 1000.0};
/// double ms = c.slow_ms(/*lists=*/3, /*bytes=*/1 << 20);
/// @endcode
struct tier_costs {
    double slow_gb_per_s = 200.0, fast_gb_per_s = 2000.0, load_gb_per_s = 25.0;
    double list_ms = 0.002;       ///< per-list overhead on either tier
    double fast_call_ms = 0.05;   ///< per fast-tier batch (kernel launch, result copy)

    [[nodiscard]] double slow_ms(std::size_t lists, double bytes) const {
        return list_ms * static_cast<double>(lists) + bytes / (slow_gb_per_s * 1e6);
    }
    [[nodiscard]] double fast_ms(std::size_t lists, double bytes) const {
        return lists == 0 ? 0.0 : fast_call_ms + list_ms * static_cast<double>(lists) + bytes / (fast_gb_per_s * 1e6);
    }
    [[nodiscard]] double load_ms(double bytes) const { return bytes / (load_gb_per_s * 1e6); }
};

/// What one tiered search did: the lists each tier searched and the simulated times of the
/// tiered search (the slower of the two concurrent tiers) and of the same search on the slow
/// tier alone.
struct tier_search {
    std::vector<std::size_t> fast, slow;
    double ms = 0.0, single_tier_ms = 0.0;
};

/// A two-tier IVF over any `ivf_index`: up to `hot_lists` lists live in the fast tier, the
/// top ones of a `hot_set` over list accesses weighted by list size (decayed by `decay`),
/// recomputed every `period` sub-stages. Loads are asynchronous (PCIe time in the cost
/// model): a list being loaded is searched on the slow tier until its transfer is done.
/// A search uses the fast tier only when that makes it faster (4.4: GPU acceleration is
/// skipped when too few target lists are cached to pay for the launch). Results equal a
/// single-tier search exactly; only the simulated time differs.
/// @code
/// frugal::rag::tiered_ivf tiers(index, /*hot_lists=*/64, /*period=*/50, /*decay=*/0.5, /*bytes_per_vector=*/4096);
/// frugal::retrieve::top_k best(5);
/// auto what = tiers.search_lists(query, index.probe(query, 32), best);
/// tiers.end_substage();
/// @endcode
template <retrieve::ivf_index Index>
class tiered_ivf {
public:
    tiered_ivf(const Index& index, std::size_t hot_lists, std::size_t period, double decay, std::size_t bytes_per_vector,
               tier_costs costs = {})
        : ix_(index), hot_(hot_lists, period, decay), bytes_per_vector_(static_cast<double>(bytes_per_vector)),
          costs_(costs) {
        FRUGAL_CHECK(bytes_per_vector > 0, "tiered_ivf: bytes_per_vector 0");
        FRUGAL_CHECK(costs.slow_gb_per_s > 0 && costs.fast_gb_per_s > 0 && costs.load_gb_per_s > 0 &&
                         costs.list_ms >= 0 && costs.fast_call_ms >= 0,
                     "tiered_ivf: tier costs must be positive bandwidths and non-negative overheads");
    }

    /// Whether list `c` is usable in the fast tier now (resident and its load finished).
    [[nodiscard]] bool in_fast_tier(std::size_t c) const {
        auto it = valid_at_.find(c);
        return it != valid_at_.end() && it->second <= clock_;
    }

    /// Searches `lists` into `heap`: the fast-tier lists into one heap, the others into
    /// another, both merged into `heap`; records the accesses for the next refresh.
    tier_search search_lists(std::span<const float> query, std::span<const std::size_t> lists, retrieve::top_k& heap) {
        tier_search out;
        double fast_bytes = 0.0, slow_bytes = 0.0;
        for (std::size_t c : lists) {
            const double bytes = bytes_per_vector_ * static_cast<double>(ix_.list_size(c));
            (in_fast_tier(c) ? out.fast : out.slow).push_back(c);
            (in_fast_tier(c) ? fast_bytes : slow_bytes) += bytes;
            hot_.record(c, static_cast<double>(ix_.list_size(c)));
        }
        // Cache hits count residency (HedraRAG Figure 20), whether or not the fast tier runs.
        hits_ += static_cast<double>(out.fast.size());
        hit_bytes_ += fast_bytes;
        probes_ += static_cast<double>(lists.size());
        bytes_ += fast_bytes + slow_bytes;
        out.single_tier_ms = costs_.slow_ms(lists.size(), fast_bytes + slow_bytes);
        out.ms = std::max(costs_.fast_ms(out.fast.size(), fast_bytes), costs_.slow_ms(out.slow.size(), slow_bytes));
        if (out.ms >= out.single_tier_ms) {  // the fast tier would not pay for its launch
            out.slow.assign(lists.begin(), lists.end());
            out.fast.clear();
            out.ms = out.single_tier_ms;
        }
        retrieve::top_k fast_heap(heap.k());
        ix_.search_lists(query, out.fast, fast_heap);
        ix_.search_lists(query, out.slow, heap);
        heap.merge(fast_heap);
        clock_ += out.ms;
        time_ += out.ms;
        single_time_ += out.single_tier_ms;
        return out;
    }

    /// Ends one sub-stage of `ms` (the time other work took, during which loads progress);
    /// every `period`-th call refreshes the fast tier: evicted lists leave at once, new
    /// hot lists are loaded one after another and become usable when their transfer ends.
    void end_substage(double ms = 0.0) {
        FRUGAL_CHECK(std::isfinite(ms) && ms >= 0.0, "tiered_ivf::end_substage: ", ms, " ms");
        clock_ += ms;
        const auto plan = hot_.step();
        if (!plan) return;
        for (std::size_t c : plan->to_evict) valid_at_.erase(c);
        double at = std::max(clock_, pcie_free_);
        for (std::size_t c : plan->to_load) {
            const double bytes = bytes_per_vector_ * static_cast<double>(ix_.list_size(c));
            at += costs_.load_ms(bytes);
            load_time_ += costs_.load_ms(bytes);
            valid_at_[c] = at;
        }
        pcie_free_ = at;
    }

    /// Fraction of searched lists resident in the fast tier (the cache hit ratio).
    [[nodiscard]] double hit_ratio() const { return probes_ == 0 ? 0.0 : hits_ / probes_; }
    /// Fraction of scanned bytes resident in the fast tier.
    [[nodiscard]] double work_hit_ratio() const { return bytes_ == 0 ? 0.0 : hit_bytes_ / bytes_; }
    /// Simulated search time so far, tiered and on the slow tier alone (ms).
    [[nodiscard]] double search_ms() const noexcept { return time_; }
    [[nodiscard]] double single_tier_ms() const noexcept { return single_time_; }
    /// Total (asynchronous) PCIe time of the refreshes so far (ms).
    [[nodiscard]] double load_ms() const noexcept { return load_time_; }

private:
    const Index& ix_;
    hot_set<std::size_t> hot_;
    double bytes_per_vector_;
    tier_costs costs_;
    std::unordered_map<std::size_t, double> valid_at_;  // fast-tier lists -> time their load ends
    double clock_ = 0.0, pcie_free_ = 0.0;
    double hits_ = 0, probes_ = 0, hit_bytes_ = 0, bytes_ = 0, time_ = 0, single_time_ = 0, load_time_ = 0;
};

}  // namespace frugal::rag
