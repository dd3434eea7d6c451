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

namespace frugal::cache {

/// W-TinyLFU (Einziger, Friedman and Manes, ACM ToS 2017): new entries enter a small LRU
/// window (1% of the capacity by default); an entry leaving the window competes with the
/// main region's victim and is admitted only if its estimated frequency (a
/// `count_min_sketch`, or any `Sketch` with increment/estimate on hashes, capacity() and
/// resize(entries)) is higher. The main region is a segmented LRU (20% probation, 80%
/// protected). Scan resistant: a cyclic scan larger than the cache keeps most of the main
/// region instead of LRU's 0% hits.
///
/// The sketch is sized by entries, not by capacity units: at most 65536 entries at first,
/// doubled (and reset, as Caffeine does) whenever the resident entries outgrow it, so a byte
/// budget costs counters per entry held, never per byte.
///
/// With `Adaptive`, the window size is tuned online by hill climbing on the hit ratio, as
/// Caffeine does: every sample of 10 requests per entry the cache has held at most (at least
/// 1000 requests), the window moves by a step (6.25% of the capacity at first, in capacity
/// units) in the direction that last raised the hit ratio, reverses when it fell, and the step
/// decays by 0.98 per sample unless the hit ratio moved by 5 points or more (then it restarts
/// at 6.25%). The window stays within [1, capacity - 1].
/// @code
/// frugal::cache::wtinylfu_cache<std::uint64_t, int> c(1000);
/// frugal::cache::basic_cache<int, int, frugal::cache::wtinylfu_policy<>> d(1000, {}, {}, {}, 0.05);  // 5% window
/// frugal::cache::basic_cache<int, int, frugal::cache::adaptive_wtinylfu_policy> e(1000);           // hill climbing
/// @endcode
template <class Sketch = count_min_sketch, bool Adaptive = false>
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
        static constexpr std::size_t initial_sketch_entries = 65536;

        explicit state(std::size_t capacity, double window_fraction = 0.01)
            : window_fraction_(window_fraction), sketch_(std::min(capacity, initial_sketch_entries)) {
            FRUGAL_CHECK(window_fraction > 0.0 && window_fraction < 1.0,
                         "wtinylfu_policy: window fraction ", window_fraction, " is outside (0, 1)");
            set_limits(capacity);
            step_ = 0.0625 * static_cast<double>(capacity);  // the first move grows the window
        }
        void admit(Node& n, double /*cost*/) {
            if constexpr (Adaptive) record(false);
            count_in();
            sketch_.increment(n.hash);
            n.where = segment::window;
            window_.push_back(n);
        }
        void touch(Node& n) {
            if constexpr (Adaptive) record(true);
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
        void remove(Node& n) noexcept {
            list(n.where).erase(n);
            --entries_;
        }
        void reattach(Node& n) {
            list(n.where).push_back(n);
            count_in();
        }
        void replace(Node& n, double /*cost*/) {  // back in its segment, then one access
            reattach(n);
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
        /// Current window size in capacity units (moves with `Adaptive`).
        [[nodiscard]] std::size_t window_capacity() const noexcept { return window_max_; }

    private:
        // Counts an entry in; the sketch grows (and resets) when the entries outgrow it.
        void count_in() {
            peak_entries_ = std::max(peak_entries_, ++entries_);
            const std::size_t held = std::min(peak_entries_, capacity_);  // beyond: a newcomer on trial
            if (held > sketch_.capacity() && sketch_.capacity() < count_min_sketch::max_capacity)
                sketch_.resize(std::min(2 * held, capacity_));
        }
        void set_limits(std::size_t capacity) {
            capacity_ = capacity;
            window_size_ = std::max(1.0, static_cast<double>(capacity) * window_fraction_);
            apply_window();
        }
        void apply_window() {
            window_max_ = static_cast<std::size_t>(window_size_);
            main_max_ = capacity_ > window_max_ ? capacity_ - window_max_ : 0;
            protected_max_ = static_cast<std::size_t>(static_cast<double>(main_max_) * 0.8);
        }
        // Hill climbing: one request (a hit or a miss followed by an admission) per call.
        void record(bool hit) {
            sample_hits_ += hit ? 1 : 0;
            // Entries beyond the capacity are admissions about to be decided, not held ones.
            const auto held = std::min(peak_entries_, capacity_);
            const auto sample = std::max<std::uint64_t>(1000, 10 * static_cast<std::uint64_t>(held));
            if (++sample_requests_ < sample) return;
            const double rate = static_cast<double>(sample_hits_) / static_cast<double>(sample_requests_);
            const double change = rate - previous_rate_;
            const double amount = change >= 0 ? step_ : -step_;
            const double restart = 0.0625 * static_cast<double>(capacity_);
            step_ = std::abs(change) >= 0.05 ? (amount >= 0 ? restart : -restart) : 0.98 * amount;
            previous_rate_ = rate;
            sample_hits_ = sample_requests_ = 0;
            window_size_ = std::clamp(window_size_ + amount, 1.0, std::max(1.0, static_cast<double>(capacity_) - 1.0));
            apply_window();
        }
        detail::recency_list<Node>& list(segment s) noexcept {
            return s == segment::window ? window_ : s == segment::probation ? probation_ : protected_;
        }
        double window_fraction_, window_size_ = 1;
        std::size_t capacity_ = 0, window_max_ = 0, main_max_ = 0, protected_max_ = 0;
        std::size_t entries_ = 0, peak_entries_ = 0;           // entries held (the sketch's size)
        std::uint64_t sample_hits_ = 0, sample_requests_ = 0;  // hill climbing (Adaptive)
        double previous_rate_ = 0, step_ = 0;
        Sketch sketch_;
        detail::recency_list<Node> window_, probation_, protected_;
    };
};

/// W-TinyLFU whose window size is tuned by hill climbing on the hit ratio (see `wtinylfu_policy`).
/// @code
/// frugal::cache::basic_cache<int, int, frugal::cache::adaptive_wtinylfu_policy> c(1000);
/// @endcode
using adaptive_wtinylfu_policy = wtinylfu_policy<count_min_sketch, true>;
static_assert(cache_policy<wtinylfu_policy<>> && cache_policy<adaptive_wtinylfu_policy>);

/// A W-TinyLFU cache of `capacity` weight units (entries by default).
/// @code
/// frugal::cache::wtinylfu_cache<std::uint64_t, int> c(1000);
/// @endcode
template <class Key, class Value, class Weigher = unit_weigher, class Hash = std::hash<Key>,
          class KeyEqual = std::equal_to<Key>, class Index = intrusive_index>
using wtinylfu_cache = basic_cache<Key, Value, wtinylfu_policy<>, Weigher, Hash, KeyEqual, Index>;

}  // namespace frugal::cache
