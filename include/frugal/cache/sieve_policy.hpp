#pragma once
/// @file
/// sieve_policy: SIEVE, a FIFO queue swept by a moving hand, and `sieve_cache`.

#include <cstddef>
#include <functional>

#include "frugal/cache/basic_cache_fwd.hpp"
#include "frugal/cache/lru_policy.hpp"

namespace frugal::cache {

/// SIEVE (Zhang et al., "SIEVE is Simpler than LRU: an Efficient Turn-Key Eviction Algorithm
/// for Web Caches", NSDI 2024): entries stay in insertion order; a hit only sets a visited
/// bit. A hand sweeps from the oldest entry toward the newest, clearing visited bits, and
/// evicts the first unvisited entry; it stays where it stopped and wraps to the oldest entry
/// at the end. New entries enter at the newest end, so they are passed by the hand at most
/// once before they must have been visited.
/// @code
/// frugal::cache::sieve_cache<std::uint64_t, int> c(1000);
/// @endcode
struct sieve_policy {
    struct node_data : detail::lru_hook {
        bool visited = false;
    };
    template <class Node>
    class state {
    public:
        explicit state(std::size_t /*capacity*/) {}
        void admit(Node& n, double /*cost*/) noexcept {
            n.visited = false;
            list_.push_back(n);
        }
        void touch(Node& n) noexcept {
            if (!n.visited) n.visited = true;
        }
        void remove(Node& n) noexcept {
            if (hand_ == &n) hand_ = list_.next(n);
            list_.erase(n);
        }
        void reattach(Node& n) noexcept { list_.push_back(n); }
        void replace(Node& n, double /*cost*/) noexcept {
            reattach(n);
            touch(n);
        }
        /// Moves the hand to the next unvisited entry, clearing the visited bits it passes.
        [[nodiscard]] Node* victim() noexcept {
            Node* p = hand_ != nullptr ? hand_ : list_.front();
            if (p == nullptr) return nullptr;
            while (p->visited) {
                p->visited = false;
                Node* next = list_.next(*p);
                p = next != nullptr ? next : list_.front();
            }
            hand_ = p;
            return p;
        }
        void evict(Node& n) noexcept { remove(n); }
        void set_capacity(std::size_t) noexcept {}

    private:
        detail::recency_list<Node> list_;  // oldest at the front
        Node* hand_ = nullptr;             // nullptr: start from the oldest
    };
};
static_assert(cache_policy<sieve_policy>);

/// A SIEVE cache of `capacity` weight units (entries by default).
/// @code
/// frugal::cache::sieve_cache<std::uint64_t, int> c(1000);
/// @endcode
template <class Key, class Value, class Weigher = unit_weigher, class Hash = std::hash<Key>,
          class KeyEqual = std::equal_to<Key>, class Index = intrusive_index>
using sieve_cache = basic_cache<Key, Value, sieve_policy, Weigher, Hash, KeyEqual, Index>;

}  // namespace frugal::cache
