#pragma once
/// @file
/// Aging, size- and cost-aware frequency policies: `gdsf_policy` (GreedyDual-Size-Frequency;
/// with cost = recompute time it is RAGCache's PGDSF used by PerCache's knowledge tree) and
/// `lfuda_policy` (LFU with dynamic aging), with `gdsf_cache` and `lfuda_cache`.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>

#include "frugal/cache/basic_cache.hpp"
#include "frugal/cache/priority_buckets.hpp"

namespace frugal::cache {

/// Priority = L + frequency x Score(cost, weight), where the clock L is raised to the
/// priority of each evicted entry (Cherkasova 1998; Arlitt et al. 2000). The victim has the
/// lowest priority, the oldest among equals. O(log n) per access.
/// Score for GDSF: cost / weight; for LFUDA: 1.
template <class Score>
struct aging_policy {
    using node_data = detail::bucket_node_data;
    template <class Node>
    class state {
    public:
        explicit state(std::size_t /*capacity*/) {}
        void admit(Node& n, double cost) {
            n.frequency = 1;
            n.cost = cost;
            buckets_.insert(n, priority(n));
        }
        void touch(Node& n) {
            ++n.frequency;
            buckets_.erase(n);
            buckets_.insert(n, priority(n));
        }
        void remove(Node& n) noexcept { buckets_.erase(n); }
        void reattach(Node& n) { buckets_.insert(n, priority(n)); }
        void replace(Node& n, double cost) {  // one more access, the new cost and weight
            ++n.frequency;
            n.cost = cost;
            buckets_.insert(n, priority(n));
        }
        void evict(Node& n) noexcept {
            clock_ = buckets_.priority_of(n);
            buckets_.erase(n);
        }
        [[nodiscard]] Node* victim() noexcept { return buckets_.front(); }
        void set_capacity(std::size_t) noexcept {}
        /// The aging clock L: the priority of the last evicted entry.
        [[nodiscard]] double clock() const noexcept { return clock_; }

    private:
        double priority(const Node& n) const {
            // Finite costs (checked by the caches) keep every priority finite: the clamp stops a
            // product near DBL_MAX from overflowing to infinity and stalling the clock there.
            return std::min(clock_ + static_cast<double>(n.frequency) * Score{}(n.cost, n.weight),
                            std::numeric_limits<double>::max());
        }
        detail::priority_buckets<Node, double> buckets_;
        double clock_ = 0.0;
    };
};

namespace detail {
struct gdsf_score {
    // A zero weight counts as 1: cost / 0 (or 0 / 0) would make the clock infinite (or NaN).
    double operator()(double cost, std::size_t weight) const noexcept {
        return cost / static_cast<double>(weight == 0 ? 1 : weight);
    }
};
struct lfuda_score {
    double operator()(double, std::size_t) const noexcept { return 1.0; }
};
}  // namespace detail

/// GreedyDual-Size-Frequency: priority = L + frequency x cost / weight. Pass the miss cost
/// (e.g. recompute time, RAGCache's PGDSF) as `put(key, value, cost)`; use a byte weigher.
/// @code
/// frugal::cache::gdsf_cache<chunk_id, kv_handle, kv_bytes> c(64 << 20);
/// c.put(id, handle, prefill_ms);
/// @endcode
using gdsf_policy = aging_policy<detail::gdsf_score>;

/// LFU with dynamic aging: priority = L + frequency, so old popular entries age out.
/// @code
/// frugal::cache::lfuda_cache<std::uint64_t, int> c(1000);
/// @endcode
using lfuda_policy = aging_policy<detail::lfuda_score>;
static_assert(cache_policy<gdsf_policy> && cache_policy<lfuda_policy>);

/// A GDSF cache (see `gdsf_policy`).
template <class Key, class Value, class Weigher = unit_weigher, class Hash = std::hash<Key>,
          class KeyEqual = std::equal_to<Key>, class Index = intrusive_index>
using gdsf_cache = basic_cache<Key, Value, gdsf_policy, Weigher, Hash, KeyEqual, Index>;

/// An LFUDA cache (see `lfuda_policy`).
template <class Key, class Value, class Weigher = unit_weigher, class Hash = std::hash<Key>,
          class KeyEqual = std::equal_to<Key>, class Index = intrusive_index>
using lfuda_cache = basic_cache<Key, Value, lfuda_policy, Weigher, Hash, KeyEqual, Index>;

}  // namespace frugal::cache
