#pragma once
/// @file
/// count_min_sketch: approximate access frequencies with periodic halving (TinyLFU).

#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstdint>
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

}  // namespace frugal::cache
