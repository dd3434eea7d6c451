#pragma once
/// @file
/// two_queue_policy: 2Q, a FIFO for first-time entries, a ghost FIFO and an LRU, and
/// `two_queue_cache`.

#include <cstddef>
#include <functional>

#include "frugal/cache/basic_cache_fwd.hpp"
#include "frugal/cache/ghost_queue.hpp"
#include "frugal/cache/lru_policy.hpp"

namespace frugal::cache {

/// 2Q, the full version (Johnson and Shasha, "2Q: A Low Overhead High Performance Buffer
/// Management Replacement Algorithm", VLDB 1994): a new key enters the FIFO A1in (Kin = 25% of
/// the capacity); evicted from there, its hash joins the ghost FIFO A1out (Kout = 50% of the
/// capacity); a miss whose hash is in A1out enters the LRU Am. A hit in Am makes the entry the
/// most recent; a hit in A1in changes nothing (correlated references). Eviction takes A1in's
/// oldest entry while A1in is over Kin (or Am is empty), else Am's least recent.
/// @code
/// frugal::cache::two_queue_cache<std::uint64_t, int> c(1000);
/// @endcode
struct two_queue_policy {
    struct node_data : detail::lru_hook {
        bool in_am = false;
    };
    template <class Node>
    class state : public detail::on_recency_lists<state<Node>, Node> {
    public:
        explicit state(std::size_t capacity) { set_capacity(capacity); }
        void expect(std::size_t h, std::size_t /*weight*/) noexcept { a1out_.expect(h); }
        void admit(Node& n, double /*cost*/) noexcept {
            n.in_am = a1out_.recalled(n.hash);
            list(n).push_back(n);
        }
        void touch(Node& n) noexcept {
            if (n.in_am) am_.move_to_back(n);
        }
        [[nodiscard]] Node* victim() noexcept {
            if (!a1in_.empty() && (a1in_.weight() > kin_ || am_.empty())) return a1in_.front();
            return am_.front();
        }
        void evict(Node& n) {
            if (!n.in_am) a1out_.remember(n.hash, n.weight);  // first: it may allocate
            list(n).erase(n);
        }
        void set_capacity(std::size_t capacity) noexcept {
            kin_ = static_cast<std::size_t>(static_cast<double>(capacity) * 0.25);
            a1out_.set_limit(static_cast<std::size_t>(static_cast<double>(capacity) * 0.5));
        }

    private:
        friend detail::on_recency_lists<state, Node>;
        detail::recency_list<Node>& list(const Node& n) noexcept { return n.in_am ? am_ : a1in_; }
        detail::recency_list<Node> a1in_, am_;
        detail::ghost_filter a1out_;
        std::size_t kin_ = 0;
    };
};
static_assert(cache_policy<two_queue_policy>);

/// A 2Q cache of `capacity` weight units (entries by default).
/// @code
/// frugal::cache::two_queue_cache<std::uint64_t, int> c(1000);
/// @endcode
template <class Key, class Value, class Weigher = unit_weigher, class Hash = std::hash<Key>,
          class KeyEqual = std::equal_to<Key>, class Index = intrusive_index>
using two_queue_cache = basic_cache<Key, Value, two_queue_policy, Weigher, Hash, KeyEqual, Index>;

}  // namespace frugal::cache
