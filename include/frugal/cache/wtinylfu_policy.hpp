#pragma once
/// @file
/// wtinylfu_policy: Window-TinyLFU admission over a segmented LRU, and `wtinylfu_cache`.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <functional>

#include "frugal/cache/basic_cache.hpp"
#include "frugal/cache/count_min_sketch.hpp"
#include "frugal/cache/lru_policy.hpp"

namespace frugal {

/// W-TinyLFU (Einziger, Friedman and Manes, ACM ToS 2017): new entries enter a small LRU
/// window (1% of the capacity by default); an entry leaving the window competes with the
/// main region's victim and is admitted only if its estimated frequency (a
/// `count_min_sketch`, or any `Sketch` with increment/estimate on hashes) is higher. The main
/// region is a segmented LRU (20% probation, 80% protected). Scan resistant: a cyclic scan
/// larger than the cache keeps most of the main region instead of LRU's 0% hits.
/// @code
/// frugal::wtinylfu_cache<std::uint64_t, int> c(1000);
/// frugal::basic_cache<int, int, frugal::wtinylfu_policy<>> d(1000, {}, {}, {}, 0.05);  // 5% window
/// @endcode
template <class Sketch = count_min_sketch>
struct wtinylfu_policy {
    /// The newcomer joins the window before the eviction that makes room for it.
    static constexpr bool admits_before_eviction = true;
    enum class segment : std::uint8_t { window, probation, protected_ };
    struct node_data : detail::lru_hook {
        segment where = segment::window;
    };
    template <class Node>
    class state {
    public:
        explicit state(std::size_t capacity, double window_fraction = 0.01)
            : window_fraction_(window_fraction), sketch_(capacity) {
            FRUGAL_CHECK(window_fraction > 0.0 && window_fraction < 1.0,
                         "wtinylfu_policy: window fraction ", window_fraction, " is outside (0, 1)");
            set_limits(capacity);
        }
        void admit(Node& n, double /*cost*/) {
            sketch_.increment(n.hash);
            n.where = segment::window;
            window_.push_back(n);
        }
        void touch(Node& n) {
            sketch_.increment(n.hash);
            switch (n.where) {
                case segment::window: window_.move_to_back(n); break;
                case segment::protected_: protected_.move_to_back(n); break;
                case segment::probation:
                    probation_.erase(n);
                    n.where = segment::protected_;
                    protected_.push_back(n);
                    while (protected_.weight() > protected_max_) {
                        Node& d = *protected_.front();
                        protected_.erase(d);
                        d.where = segment::probation;
                        probation_.push_back(d);
                    }
                    break;
            }
        }
        void remove(Node& n) noexcept { list(n.where).erase(n); }
        void reattach(Node& n) noexcept { list(n.where).push_back(n); }
        void replace(Node& n, double /*cost*/) {  // back in its segment, then one access
            list(n.where).push_back(n);
            touch(n);
        }
        void evict(Node& n) noexcept { remove(n); }

        /// Moves window overflow into the main region while it has room; then the loser of
        /// window candidate against main victim (by estimated frequency) is the victim.
        [[nodiscard]] Node* victim() {
            while (window_.weight() > window_max_ && !window_.empty()) {
                Node& candidate = *window_.front();
                Node* main_victim = probation_.empty() ? protected_.front() : probation_.front();
                const bool room = probation_.weight() + protected_.weight() + candidate.weight <= main_max_;
                if (!room && main_victim != nullptr &&
                    sketch_.estimate(candidate.hash) <= sketch_.estimate(main_victim->hash)) {
                    return &candidate;
                }
                window_.erase(candidate);
                candidate.where = segment::probation;
                probation_.push_back(candidate);
                if (!room && main_victim != nullptr) return main_victim;
            }
            if (Node* v = probation_.front()) return v;
            if (Node* v = protected_.front()) return v;
            return window_.front();
        }
        void set_capacity(std::size_t capacity) { set_limits(capacity); }
        [[nodiscard]] const Sketch& sketch() const noexcept { return sketch_; }

    private:
        void set_limits(std::size_t capacity) {
            window_max_ = std::max<std::size_t>(1, static_cast<std::size_t>(static_cast<double>(capacity) * window_fraction_));
            main_max_ = capacity > window_max_ ? capacity - window_max_ : 0;
            protected_max_ = static_cast<std::size_t>(static_cast<double>(main_max_) * 0.8);
        }
        detail::recency_list<Node>& list(segment s) noexcept {
            return s == segment::window ? window_ : s == segment::probation ? probation_ : protected_;
        }
        double window_fraction_;
        std::size_t window_max_ = 0, main_max_ = 0, protected_max_ = 0;
        Sketch sketch_;
        detail::recency_list<Node> window_, probation_, protected_;
    };
};

/// A W-TinyLFU cache of `capacity` weight units (entries by default).
/// @code
/// frugal::wtinylfu_cache<std::uint64_t, int> c(1000);
/// @endcode
template <class Key, class Value, class Weigher = unit_weigher, class Hash = std::hash<Key>,
          class KeyEqual = std::equal_to<Key>, class Index = intrusive_index>
using wtinylfu_cache = basic_cache<Key, Value, wtinylfu_policy<>, Weigher, Hash, KeyEqual, Index>;

}  // namespace frugal
