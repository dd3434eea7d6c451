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

#include <boost/intrusive/set.hpp>

#include "frugal/cache/basic_cache_fwd.hpp"
#include "frugal/cache/priority_buckets.hpp"

namespace frugal::cache {

namespace detail {
struct priority_tree_tag;
/// Per-entry data of a `priority_tree`: its hook and the entry's arrival order.
struct priority_tree_data : boost::intrusive::set_base_hook<boost::intrusive::tag<priority_tree_tag>,
                                                            boost::intrusive::link_mode<boost::intrusive::normal_link>,
                                                            boost::intrusive::optimize_size<true>> {
    std::uint64_t seq = 0;
};

/// Entries in one intrusive red-black tree ordered by (priority, arrival): the same interface
/// and order as `priority_buckets` (insert at a priority, erase, front), for priorities that
/// are nearly all distinct, where a bucket per entry would add a level for nothing. `Node`
/// derives from `priority_tree_data` and has a `priority` member.
template <class Node, class Priority>
class priority_tree {
    struct order {
        bool operator()(const Node& a, const Node& b) const noexcept {
            return a.priority < b.priority || (a.priority == b.priority && a.seq < b.seq);
        }
    };
    using set = boost::intrusive::multiset<
        Node, boost::intrusive::base_hook<boost::intrusive::set_base_hook<
                  boost::intrusive::tag<priority_tree_tag>, boost::intrusive::link_mode<boost::intrusive::normal_link>,
                  boost::intrusive::optimize_size<true>>>,
        boost::intrusive::compare<order>, boost::intrusive::constant_time_size<false>>;

public:
    priority_tree() = default;
    priority_tree(const priority_tree&) = delete;
    priority_tree& operator=(const priority_tree&) = delete;
    ~priority_tree() { set_.clear(); }
    void insert(Node& n, Priority p) {
        n.priority = p;
        n.seq = ++arrivals_;
        set_.insert(n);
    }
    void erase(Node& n) noexcept { set_.erase(set_.iterator_to(n)); }
    [[nodiscard]] Node* front() noexcept { return set_.empty() ? nullptr : &*set_.begin(); }

private:
    set set_;
    std::uint64_t arrivals_ = 0;
};
}  // namespace detail

/// Priority = L + frequency x Score(cost, weight), where the clock L is raised to the
/// priority of each evicted entry (Cherkasova 1998; Arlitt et al. 2000). The victim has the
/// lowest priority, the first to get it among equals. The entries sit in a `Queue` of
/// priorities: `priority_buckets` (O(log b) per access, b the number of distinct priorities:
/// LFUDA's are few) or `priority_tree` (O(log n), for GDSF's nearly distinct ones).
/// Score for GDSF: cost / weight; for LFUDA: 1.
template <class Score, template <class, class> class Queue, class QueueData>
struct aging_policy {
    struct node_data : QueueData {
        double priority = 0;
        std::uint64_t frequency = 0;
        double cost = 1.0;
    };
    template <class Node>
    class state {
    public:
        explicit state(std::size_t /*capacity*/) {}
        void admit(Node& n, double cost) {
            n.frequency = 1;
            n.cost = cost;
            enter(n);
        }
        void touch(Node& n) {
            ++n.frequency;
            queue_.erase(n);
            enter(n);
        }
        void remove(Node& n) noexcept { queue_.erase(n); }
        void reattach(Node& n) { enter(n); }
        void replace(Node& n, double cost) {  // one more access, the new cost and weight
            ++n.frequency;
            n.cost = cost;
            enter(n);
        }
        void evict(Node& n) noexcept {
            clock_ = n.priority;
            queue_.erase(n);
        }
        [[nodiscard]] Node* victim() noexcept { return queue_.front(); }
        void set_capacity(std::size_t) noexcept {}
        /// The aging clock L: the priority of the last evicted entry.
        [[nodiscard]] double clock() const noexcept { return clock_; }

    private:
        // Finite costs (checked by the caches) keep every priority finite: the clamp stops a
        // product near DBL_MAX from overflowing to infinity and stalling the clock there.
        void enter(Node& n) {
            n.priority = std::min(clock_ + static_cast<double>(n.frequency) * Score{}(n.cost, n.weight),
                                  std::numeric_limits<double>::max());
            queue_.insert(n, n.priority);
        }
        Queue<Node, double> queue_;
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
using gdsf_policy = aging_policy<detail::gdsf_score, detail::priority_tree, detail::priority_tree_data>;

/// LFU with dynamic aging: priority = L + frequency, so old popular entries age out.
/// @code
/// frugal::cache::lfuda_cache<std::uint64_t, int> c(1000);
/// @endcode
using lfuda_policy = aging_policy<detail::lfuda_score, detail::priority_buckets, detail::bucket_node_data>;
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
