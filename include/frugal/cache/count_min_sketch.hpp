#pragma once
/// @file
/// count_min_sketch: approximate access frequencies with periodic halving (TinyLFU), and
/// counting_bloom_filter: the unbounded counting Bloom filter libCacheSim's W-TinyLFU uses.

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <vector>

#include "frugal/core/error.hpp"
#include "frugal/core/hash.hpp"

namespace frugal::cache {

/// Count-min sketch of 4 rows of 4-bit counters (saturating at 15) with TinyLFU's reset:
/// after 10 x capacity increments every counter is halved, so the estimate follows recent
/// popularity (Einziger, Friedman and Manes, "TinyLFU", ACM ToS 2017, section 3.3).
/// Counters are kept one per byte rather than packed: the table is small (4 x capacity bytes)
/// and byte access keeps the increment branch-free.
/// @code
/// frugal::cache::count_min_sketch s(1000);
/// s.increment(hash);
/// unsigned f = s.estimate(hash);
/// @endcode
class count_min_sketch {
public:
    static constexpr std::uint8_t max_count = 15;
    static constexpr std::size_t depth = 4;

    /// The most entries a sketch is sized for (2^30: 4 GiB of counters).
    static constexpr std::size_t max_capacity = std::size_t{1} << 30;

    /// A sketch sized for a cache of `capacity` entries (width: the next power of two;
    /// capacities above `max_capacity` get `max_capacity`).
    explicit count_min_sketch(std::size_t capacity) { resize(capacity); }

    /// Resizes for a new capacity; forgets the counts.
    void resize(std::size_t capacity) {
        FRUGAL_CHECK(capacity > 0, "count_min_sketch: capacity must be positive");
        capacity_ = std::clamp<std::size_t>(capacity, 16, max_capacity);
        width_ = std::bit_ceil(capacity_);
        table_.assign(width_ * depth, 0);
        sample_size_ = 10 * capacity_;
        additions_ = 0;
    }
    /// The number of entries the sketch is sized for.
    [[nodiscard]] std::size_t capacity() const noexcept { return capacity_; }

    /// Counts one access of the item with hash `h`.
    void increment(std::size_t h) noexcept {
        bool added = false;
        for (std::size_t row = 0; row < depth; ++row) {
            std::uint8_t& c = table_[row * width_ + slot(h, row)];
            if (c < max_count) {
                ++c;
                added = true;
            }
        }
        if (added && ++additions_ >= sample_size_) halve();
    }

    /// The estimated recent access count of the item with hash `h` (never below the true
    /// count since the last halving, up to 15).
    [[nodiscard]] unsigned estimate(std::size_t h) const noexcept {
        unsigned m = max_count;
        for (std::size_t row = 0; row < depth; ++row) m = std::min<unsigned>(m, table_[row * width_ + slot(h, row)]);
        return m;
    }

    /// Halves every counter (TinyLFU's reset); done automatically every 10 x capacity additions.
    void halve() noexcept {
        for (auto& c : table_) c = static_cast<std::uint8_t>(c >> 1);
        additions_ /= 2;
    }

private:
    [[nodiscard]] std::size_t slot(std::size_t h, std::size_t row) const noexcept {
        static constexpr std::uint64_t seeds[depth] = {0xc3a5c85c97cb3127ull, 0xb492b66fbe98f273ull,
                                                       0x9ae16a3b2f90404full, 0xcbf29ce484222325ull};
        return static_cast<std::size_t>(hash_mix(static_cast<std::uint64_t>(h) + seeds[row])) & (width_ - 1);
    }
    std::vector<std::uint8_t> table_;
    std::size_t capacity_ = 0, width_ = 0, sample_size_ = 0, additions_ = 0;
};

/// Counting Bloom filter of 32-bit counters sized for a false-positive rate of 0.1%, as
/// libCacheSim's W-TinyLFU (minimalIncrementCBF) sizes it: ceil(14.38 x entries) counters and
/// 10 probes per item by double hashing; an increment adds one to all 10 counters (saturating at
/// 2^32 - 1), the estimate is their minimum, and `halve` (the decay, called by its user) halves
/// every counter. Probes come from the item's hash, not from libCacheSim's XXH64 of the key, so
/// collisions (and with them a few admission decisions) differ from libCacheSim's.
/// @code
/// frugal::cache::counting_bloom_filter f(1000);
/// f.increment(hash);
/// unsigned n = f.estimate(hash);
/// @endcode
class counting_bloom_filter {
public:
    static constexpr std::size_t probes = 10;
    /// The most entries a filter is sized for (2^27: 7.7 GB of counters).
    static constexpr std::size_t max_capacity = std::size_t{1} << 27;

    /// A filter sized for `capacity` entries (clamped to [1, max_capacity]).
    explicit counting_bloom_filter(std::size_t capacity) { resize(capacity); }

    /// Resizes for a new number of entries; forgets the counts.
    void resize(std::size_t capacity) {
        FRUGAL_CHECK(capacity > 0, "counting_bloom_filter: capacity must be positive");
        capacity_ = std::min(capacity, max_capacity);
        const double per_entry = -std::log(0.001) / (std::log(2.0) * std::log(2.0));
        counters_.assign(std::max<std::size_t>(2 * probes, static_cast<std::size_t>(std::ceil(per_entry * static_cast<double>(capacity_)))), 0);
    }
    [[nodiscard]] std::size_t capacity() const noexcept { return capacity_; }

    void increment(std::size_t h) noexcept {
        const auto [a, b] = seeds(h);
        for (std::uint32_t i = 0; i < probes; ++i) {
            std::uint32_t& c = counters_[slot(a, b, i)];
            if (c != std::numeric_limits<std::uint32_t>::max()) ++c;
        }
    }
    [[nodiscard]] unsigned estimate(std::size_t h) const noexcept {
        const auto [a, b] = seeds(h);
        std::uint32_t m = std::numeric_limits<std::uint32_t>::max();
        for (std::uint32_t i = 0; i < probes; ++i) m = std::min(m, counters_[slot(a, b, i)]);
        return m;
    }
    void halve() noexcept {
        for (auto& c : counters_) c >>= 1;
    }

private:
    struct probe_seeds {
        std::uint32_t a, b;
    };
    static probe_seeds seeds(std::size_t h) noexcept {
        const std::uint64_t x = hash_mix(static_cast<std::uint64_t>(h));
        return {static_cast<std::uint32_t>(x), static_cast<std::uint32_t>(x >> 32)};
    }
    [[nodiscard]] std::size_t slot(std::uint32_t a, std::uint32_t b, std::uint32_t i) const noexcept {
        return static_cast<std::uint32_t>(a + i * b) % counters_.size();
    }
    std::vector<std::uint32_t> counters_;
    std::size_t capacity_ = 0;
};

}  // namespace frugal::cache
