#pragma once
/// @file
/// wtinylfu_policy: Window-TinyLFU admission over a segmented LRU, and `wtinylfu_cache`.

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <functional>

#include "frugal/cache/basic_cache_fwd.hpp"
#include "frugal/cache/counting_bloom_filter.hpp"
#include "frugal/cache/lru_policy.hpp"
#include "frugal/cache/tinylfu_admission.hpp"
#include "frugal/core/error.hpp"

namespace frugal::cache {

/// W-TinyLFU (Einziger, Friedman and Manes, ACM ToS 2017) with the decisions of libCacheSim's
/// WTinyLFU.c at its defaults: new entries enter an LRU window (1% of the capacity, at least
/// one unit); the main region is a segmented LRU of the rest (probation 1/5, protected 4/5;
/// an entry enters the lowest segment with room, probation when none has; a probation hit
/// moves to protected, whose oldest entries go back to probation, whose oldest then leave).
/// When room is needed, the window's oldest entries leave it in turn: into the main region
/// while it has room; else the one whose estimated frequency is strictly higher than the main
/// region's victim's takes its place, and the first one that is not higher is evicted, which
/// ends the eviction (as does an empty window, after one main-region eviction). That
/// comparison and the frequencies are a `tinylfu_admission<Sketch>` (a `counting_bloom_filter`;
/// `count_min_sketch`, Caffeine's, is 7 to 14 times smaller and also halves itself; or any
/// `frequency_sketch`): it counts each insertion, each main-region hit (not window hits) and
/// each entry leaving the window, and halves every 32 x main-region capacity main-region hits.
/// Scan resistant: a cyclic scan larger than the cache keeps most of the main region instead
/// of LRU's 0% hits. (`admitted_policy` puts the same admission in front of any policy.)
///
/// libCacheSim evicts every entry that eviction round decides on, and evicts from probation
/// during a hit that overflows it; here such entries wait at the head of the eviction order
/// and leave at the next insertions that need room (a hit never evicts; one hit while waiting
/// returns to the window as if inserted again). The sketch is sized by entries, not by
/// capacity units: for the main region's capacity up to 65536 at first (entries, for unit
/// weights, as libCacheSim), regrown (and reset) as `tinylfu_admission` regrows it, so a byte
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
template <frequency_sketch Sketch = counting_bloom_filter, bool Adaptive = false>
struct wtinylfu_policy {
    enum class segment : std::uint8_t { window, probation, protected_, leaving };
    struct node_data : detail::lru_hook {
        segment where = segment::window;
    };
    template <class Node>
    class state {
    public:
        explicit state(std::size_t capacity, double window_fraction = 0.01)
            : window_fraction_(window_fraction), admission_(capacity) {
            FRUGAL_CHECK(window_fraction > 0.0 && window_fraction < 1.0,
                         "wtinylfu_policy: window fraction ", window_fraction, " is outside (0, 1)");
            set_limits(capacity);
            if (main_max_ > 0 && main_max_ < admission_.sketch().capacity()) admission_.resize(main_max_);
            step_ = 0.0625 * static_cast<double>(capacity);  // the first move grows the window
        }
        void admit(Node& n, double /*cost*/) {
            if constexpr (Adaptive) record(false);
            count_in();
            admission_.count(n.hash);
            n.where = segment::window;
            window_.push_back(n);
        }
        void touch(Node& n) {
            if constexpr (Adaptive) record(true);
            switch (n.where) {
                case segment::window: window_.move_to_back(n); return;
                case segment::leaving:  // evicted in libCacheSim: back as a new entry
                    leaving_.erase(n);
                    n.where = segment::window;
                    window_.push_back(n);
                    admission_.count(n.hash);
                    return;
                case segment::protected_: protected_.move_to_back(n); break;
                case segment::probation:
                    probation_.erase(n);
                    n.where = segment::protected_;
                    protected_.push_back(n);
                    while (protected_.weight() > protected_max_ && !protected_.empty()) {
                        Node& d = *protected_.front();
                        protected_.erase(d);
                        d.where = segment::probation;
                        probation_.push_back(d);
                    }
                    while (probation_.weight() > probation_max_ && !probation_.empty()) leave(*probation_.front());
                    break;
            }
            admission_.record(n.hash);  // a main-region hit: counted, and ages the sketch
        }
        void remove(Node& n) noexcept {
            list(n.where).erase(n);
            --entries_;
        }
        void reattach(Node& n) {
            if (n.where == segment::leaving) n.where = segment::window;
            list(n.where).push_back(n);
            count_in();
        }
        void replace(Node& n, double /*cost*/) {  // back in its segment, then one access
            reattach(n);
            touch(n);
        }
        void evict(Node& n) noexcept { remove(n); }

        /// The next entry to leave: one an earlier eviction round decided on, else the next
        /// round runs (window entries into the main region or out) until one is decided on.
        [[nodiscard]] Node* victim() {
            if (leaving_.empty()) evict_round();
            return leaving_.front();
        }
        void set_capacity(std::size_t capacity) { set_limits(capacity); }
        [[nodiscard]] const Sketch& sketch() const noexcept { return admission_.sketch(); }
        /// Current window size in capacity units (moves with `Adaptive`).
        [[nodiscard]] std::size_t window_capacity() const noexcept { return window_max_; }

    private:
        [[nodiscard]] std::size_t main_weight() const noexcept { return probation_.weight() + protected_.weight(); }
        [[nodiscard]] Node* main_victim() noexcept { return probation_.empty() ? protected_.front() : probation_.front(); }
        void leave(Node& n) noexcept {
            list(n.where).erase(n);
            n.where = segment::leaving;
            leaving_.push_back(n);
        }
        // Into the lowest main segment with room (probation when none has, after making room).
        void enter_main(Node& n) noexcept {
            if (probation_.weight() + n.weight <= probation_max_) {
                n.where = segment::probation;
            } else if (protected_.weight() + n.weight <= protected_max_) {
                n.where = segment::protected_;
            } else {
                while (main_weight() + n.weight > main_max_) {
                    Node* v = main_victim();
                    if (v == nullptr) break;
                    leave(*v);
                }
                n.where = segment::probation;
            }
            list(n.where).push_back(n);
        }
        // One round of libCacheSim's WTinyLFU_evict.
        void evict_round() {
            while (Node* c = window_.front()) {
                // Into the main region while it has room; else in place of its victim when
                // estimated strictly more frequent; else it leaves and the round ends.
                const bool room = main_weight() + c->weight <= main_max_;
                Node* mv = room ? nullptr : main_victim();
                const bool enters = room || (mv != nullptr && admission_.admit(c->hash, mv->hash));
                admission_.count(c->hash);
                if (!enters) {
                    leave(*c);
                    return;
                }
                if (mv != nullptr) leave(*mv);
                window_.erase(*c);
                enter_main(*c);
            }
            if (Node* mv = main_victim()) leave(*mv);
        }
        // Counts an entry in (the sketch grows with the entries held).
        void count_in() {
            peak_entries_ = std::max(peak_entries_, ++entries_);
            admission_.hold(entries_);
        }
        void set_limits(std::size_t capacity) {
            capacity_ = capacity;
            admission_.set_capacity(capacity);
            window_size_ = std::max(1.0, std::floor(static_cast<double>(capacity) * window_fraction_));
            apply_window();
        }
        void apply_window() {
            window_max_ = static_cast<std::size_t>(window_size_);
            main_max_ = capacity_ > window_max_ ? capacity_ - window_max_ : 0;
            probation_max_ = static_cast<std::size_t>(1.0 / 5 * static_cast<double>(main_max_));
            protected_max_ = static_cast<std::size_t>(4.0 / 5 * static_cast<double>(main_max_));
            admission_.set_aging_period(32 * static_cast<std::uint64_t>(main_max_));
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
            switch (s) {
                case segment::window: return window_;
                case segment::probation: return probation_;
                case segment::protected_: return protected_;
                case segment::leaving: break;
            }
            return leaving_;
        }
        double window_fraction_, window_size_ = 1;
        std::size_t capacity_ = 0, window_max_ = 0, main_max_ = 0, probation_max_ = 0, protected_max_ = 0;
        std::size_t entries_ = 0, peak_entries_ = 0;           // entries held now and at most
        std::uint64_t sample_hits_ = 0, sample_requests_ = 0;  // hill climbing (Adaptive)
        double previous_rate_ = 0, step_ = 0;
        tinylfu_admission<Sketch> admission_;
        detail::recency_list<Node> window_, probation_, protected_;
        detail::recency_list<Node> leaving_;  // decided on by an eviction round, oldest first
    };
};

/// W-TinyLFU whose window size is tuned by hill climbing on the hit ratio (see `wtinylfu_policy`).
/// @code
/// frugal::cache::basic_cache<int, int, frugal::cache::adaptive_wtinylfu_policy> c(1000);
/// @endcode
using adaptive_wtinylfu_policy = wtinylfu_policy<counting_bloom_filter, true>;
static_assert(cache_policy<wtinylfu_policy<>> && cache_policy<adaptive_wtinylfu_policy>);

/// A W-TinyLFU cache of `capacity` weight units (entries by default).
/// @code
/// frugal::cache::wtinylfu_cache<std::uint64_t, int> c(1000);
/// @endcode
template <class Key, class Value, class Weigher = unit_weigher, class Hash = std::hash<Key>,
          class KeyEqual = std::equal_to<Key>, class Index = intrusive_index>
using wtinylfu_cache = basic_cache<Key, Value, wtinylfu_policy<>, Weigher, Hash, KeyEqual, Index>;

}  // namespace frugal::cache
