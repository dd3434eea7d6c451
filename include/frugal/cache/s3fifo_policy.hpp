#pragma once
/// @file
/// s3fifo_policy: S3-FIFO, three static FIFO queues (small, main, ghost), and `s3fifo_cache`.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <functional>

#include "frugal/cache/basic_cache_fwd.hpp"
#include "frugal/cache/ghost_queue.hpp"
#include "frugal/cache/lru_policy.hpp"

namespace frugal::cache {

/// S3-FIFO (Yang et al., "FIFO queues are all you need for cache eviction", SOSP 2023), with
/// the decisions of libCacheSim's S3FIFOv0.c (the paper's algorithm, the default) and, with
/// `WarmMain`, of its later S3FIFO.c at their default parameters: a small FIFO of 10% of the
/// capacity, a main FIFO of the rest and a ghost FIFO remembering the hashes of up to 90% of
/// the capacity's worth of entries evicted from the small queue. A new key enters the small
/// queue, or the main queue when its hash is a ghost; with `WarmMain`, a new key also goes to
/// the main queue while the small queue is full and nothing has been evicted yet, so a cold
/// cache fills its main queue first. Each hit adds one to a 2-bit counter (at most 3). Each
/// eviction picks its queue once: the main queue when it is over its share or the small
/// queue is empty, else the small queue. From the small queue, entries hit at least twice
/// move to the main queue (counter reset, even past its share) until one hit fewer times
/// leaves and its hash joins the ghost; from the main queue, entries with a nonzero counter go
/// back to the tail with the counter minus one until one with a zero counter leaves. Hits only
/// bump a counter: no list moves, no locks needed for them in a concurrent design. Byte
/// weights count against the queue shares; an entry heavier than the small queue still enters
/// it (libCacheSim refuses it; a cache here always admits what fits its budget).
/// @code
/// frugal::cache::s3fifo_cache<std::uint64_t, int> c(1000);
/// frugal::cache::basic_cache<int, int, frugal::cache::s3fifo_warm_main_policy> w(1000);
/// @endcode
template <bool WarmMain = false>
struct basic_s3fifo_policy {
    struct node_data : detail::lru_hook {
        std::uint8_t freq = 0;
        bool in_main = false;
    };
    template <class Node>
    class state {
    public:
        explicit state(std::size_t capacity) { set_capacity(capacity); }
        void expect(std::size_t h, std::size_t /*weight*/) noexcept { ghost_.expect(h); }
        void admit(Node& n, double /*cost*/) noexcept {
            chosen_ = nullptr;
            n.freq = 0;
            const bool ghost_hit = ghost_.recalled(n.hash);
            n.in_main = ghost_hit || (WarmMain && !has_evicted_ && small_.weight() >= small_max_);
            list(n).push_back(n);
        }
        void touch(Node& n) noexcept {
            chosen_ = nullptr;
            n.freq = static_cast<std::uint8_t>(std::min(n.freq + 1, 3));
        }
        void remove(Node& n) noexcept {
            chosen_ = nullptr;
            list(n).erase(n);
        }
        void reattach(Node& n) noexcept {
            chosen_ = nullptr;
            list(n).push_back(n);
        }
        void replace(Node& n, double /*cost*/) noexcept {
            reattach(n);
            touch(n);
        }
        /// Runs the queue moves of S3-FIFO's eviction until an entry is to leave. As in
        /// libCacheSim, the queue to evict from is chosen once per eviction: the main queue when
        /// it is over its share or the small queue is empty, else the small queue, whose hit
        /// entries then move to the main queue (even past its share) until one hit fewer than
        /// twice is found. Asked again before anything but `expect` changes the state, it names
        /// the same entry (those moves may have put the main queue over its share).
        [[nodiscard]] Node* victim() noexcept {
            if (chosen_ == nullptr) chosen_ = choose();
            return chosen_;
        }
        void evict(Node& n) {
            if (!n.in_main) ghost_.remember(n.hash, n.weight);  // first: it may allocate
            has_evicted_ = true;
            chosen_ = nullptr;
            list(n).erase(n);
        }
        void set_capacity(std::size_t capacity) noexcept {
            chosen_ = nullptr;
            small_max_ = static_cast<std::size_t>(static_cast<double>(capacity) * 0.1);
            main_max_ = capacity - small_max_;
            ghost_.set_limit(static_cast<std::size_t>(static_cast<double>(capacity) * 0.9));
        }
        /// Weight held by the small and the main queue (unpinned entries).
        [[nodiscard]] std::size_t small_weight() const noexcept { return small_.weight(); }
        [[nodiscard]] std::size_t main_weight() const noexcept { return main_.weight(); }

    private:
        [[nodiscard]] Node* choose() noexcept {
            if (main_.weight() <= main_max_ && !small_.empty()) {
                while (Node* s = small_.front()) {
                    if (s->freq < 2) return s;
                    small_.erase(*s);  // hit since admission: to the main queue
                    s->freq = 0;
                    s->in_main = true;
                    main_.push_back(*s);
                }
            }
            while (Node* m = main_.front()) {
                if (m->freq == 0) return m;
                m->freq = static_cast<std::uint8_t>(m->freq - 1);  // a second chance, one use fewer
                main_.move_to_back(*m);
            }
            return small_.front();
        }
        detail::recency_list<Node>& list(const Node& n) noexcept { return n.in_main ? main_ : small_; }
        detail::recency_list<Node> small_, main_;
        detail::ghost_filter ghost_;
        std::size_t small_max_ = 0, main_max_ = 0;
        Node* chosen_ = nullptr;  // the victim named, until the state changes
        bool has_evicted_ = false;
    };
};
/// S3-FIFO as the paper defines it (see `basic_s3fifo_policy`).
using s3fifo_policy = basic_s3fifo_policy<false>;
/// S3-FIFO filling its main queue first in a cold cache (see `basic_s3fifo_policy`).
using s3fifo_warm_main_policy = basic_s3fifo_policy<true>;
static_assert(cache_policy<s3fifo_policy> && cache_policy<s3fifo_warm_main_policy>);

/// An S3-FIFO cache of `capacity` weight units (entries by default).
/// @code
/// frugal::cache::s3fifo_cache<std::uint64_t, int> c(1000);
/// @endcode
template <class Key, class Value, class Weigher = unit_weigher, class Hash = std::hash<Key>,
          class KeyEqual = std::equal_to<Key>, class Index = intrusive_index>
using s3fifo_cache = basic_cache<Key, Value, s3fifo_policy, Weigher, Hash, KeyEqual, Index>;

}  // namespace frugal::cache
