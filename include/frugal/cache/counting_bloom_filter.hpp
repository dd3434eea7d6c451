#pragma once
/// @file
/// counting_bloom_filter: the counting Bloom filter of libCacheSim's W-TinyLFU (frequencies
/// with a halving decay driven by its user).

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <vector>

#include "frugal/core/error.hpp"
#include "frugal/core/hash.hpp"

namespace frugal::cache {

/// Counting Bloom filter of 32-bit counters sized for a false-positive rate of 0.1%, as
/// libCacheSim's W-TinyLFU (minimalIncrementCBF) sizes it: ceil(14.38 x entries) counters and
/// 10 probes per item by double hashing; an increment adds one to all 10 counters (saturating at
/// 2^32 - 1), the estimate is their minimum, and `halve` (the decay, called by its user) halves
/// every counter. Probes come from the item's hash, not from libCacheSim's XXH64 of the key,
/// and map onto the counters by multiply-shift, not modulo, so collisions (and with them a few
/// admission decisions) differ from libCacheSim's.
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
    // Multiply-shift maps a 32-bit probe onto the counters (fewer than 2^32) without a
    // division: a count or an estimate makes ten probes, and a 64-bit division each would
    // be a large share of W-TinyLFU's time.
    [[nodiscard]] std::size_t slot(std::uint32_t a, std::uint32_t b, std::uint32_t i) const noexcept {
        return static_cast<std::size_t>((std::uint64_t{a + i * b} * counters_.size()) >> 32);
    }
    std::vector<std::uint32_t> counters_;
    std::size_t capacity_ = 0;
};

}  // namespace frugal::cache
