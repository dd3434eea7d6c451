#pragma once
/// @file
/// tinylfu_admission: TinyLFU's frequency-based admission (a frequency sketch with periodic
/// halving), an `admission_policy`; the `frequency_sketch` concept its sketch satisfies.

#include <algorithm>
#include <concepts>
#include <cstddef>
#include <cstdint>

#include "frugal/cache/admission_policy.hpp"
#include "frugal/cache/counting_bloom_filter.hpp"

namespace frugal::cache {

/// Approximate access counts by hash, as TinyLFU keeps them: constructed for a number of
/// entries, `increment(hash)` counts one access, `estimate(hash)` never undercounts what was
/// counted since the last halving (collisions may add), `halve()` halves every count,
/// `resize(entries)` sizes it anew and forgets the counts, `capacity()` is the entries it is
/// sized for, up to `max_capacity`. `counting_bloom_filter` (libCacheSim's) and
/// `count_min_sketch` (Caffeine's, 7 to 14 times smaller, which also halves itself) are two.
/// @code
/// static_assert(frugal::cache::frequency_sketch<frugal::cache::count_min_sketch>);
/// @endcode
template <class S>
concept frequency_sketch = std::constructible_from<S, std::size_t> &&
                           requires(S& s, const S& cs, std::size_t h, std::size_t n) {
                               s.increment(h);
                               { cs.estimate(h) } -> std::convertible_to<unsigned>;
                               s.halve();
                               s.resize(n);
                               { cs.capacity() } -> std::convertible_to<std::size_t>;
                               { S::max_capacity } -> std::convertible_to<std::size_t>;
                           };

/// TinyLFU admission (Einziger, Friedman and Manes, ACM ToS 2017) with W-TinyLFU's counting
/// rules (libCacheSim's WTinyLFU.c): a candidate is admitted when its estimated frequency is
/// strictly higher than the victim's. Accesses are counted in a `Sketch` sized by entries, not
/// by capacity units: for the capacity up to 65536 at first, regrown (and reset) to twice the
/// entries held when they outgrow twice its size, never past the capacity, so a byte budget
/// costs counters per entry held, never per byte. Every 32 x capacity `record`ed accesses the
/// counts are halved, so they follow recent popularity. `wtinylfu_policy` drives it with its
/// own rules: only main-region hits `record` (and age), other accesses only `count`, and the
/// aging period follows the main region (`set_aging_period`).
/// @code
/// frugal::cache::basic_cache<int, int, frugal::cache::admitted_policy<frugal::cache::tinylfu_admission<>,
///                                                                     frugal::cache::lru_policy>> c(1000);
/// @endcode
template <frequency_sketch Sketch = counting_bloom_filter>
class tinylfu_admission {
public:
    /// The most entries the sketch is sized for at first.
    static constexpr std::size_t initial_entries = 65536;

    /// Admission for a cache of `capacity` units: a sketch for min(capacity, 65536) entries
    /// (at least one), halved every 32 x capacity recorded accesses.
    explicit tinylfu_admission(std::size_t capacity)
        : sketch_(std::max<std::size_t>(1, std::min(capacity, initial_entries))) {
        set_capacity(capacity);
    }

    /// Counts one access to `hash` and advances the aging clock (a halving every period).
    void record(std::size_t hash) {
        sketch_.increment(hash);
        if (++records_ >= period_) {
            records_ = 0;
            sketch_.halve();
        }
    }
    /// Counts one access to `hash` without advancing the aging clock.
    void count(std::size_t hash) { sketch_.increment(hash); }
    /// Whether `candidate` is estimated strictly more frequent than `victim`.
    [[nodiscard]] bool admit(std::size_t candidate, std::size_t victim) const {
        return sketch_.estimate(candidate) > sketch_.estimate(victim);
    }
    /// The cache holds `entries` entries: when the most it has held (at most the capacity)
    /// passes twice the sketch's size, the sketch is sized for twice that and reset.
    void hold(std::size_t entries) {
        peak_ = std::max(peak_, entries);
        const std::size_t held = std::min(peak_, capacity_);
        if (held > 2 * sketch_.capacity() && sketch_.capacity() < Sketch::max_capacity)
            sketch_.resize(std::min(2 * held, capacity_));
    }
    /// A new capacity: the bound of the sketch's growth; the aging period becomes 32 x capacity.
    void set_capacity(std::size_t capacity) noexcept {
        capacity_ = capacity;
        period_ = 32 * static_cast<std::uint64_t>(capacity);
    }
    /// Halves every `records` recorded accesses instead (until the next `set_capacity`).
    void set_aging_period(std::uint64_t records) noexcept { period_ = records; }
    /// Sizes the sketch for `entries` and forgets the counts.
    void resize(std::size_t entries) { sketch_.resize(entries); }
    [[nodiscard]] const Sketch& sketch() const noexcept { return sketch_; }

private:
    Sketch sketch_;
    std::size_t capacity_ = 0, peak_ = 0;
    std::uint64_t period_ = 0, records_ = 0;  // records since the last halving
};
static_assert(admission_policy<tinylfu_admission<>>);

}  // namespace frugal::cache
