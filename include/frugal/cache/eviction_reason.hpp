#pragma once
/// @file
/// eviction_reason: why an entry left a cache, the vocabulary `basic_cache`, `prefix_tree`
/// and their callbacks share.

#include <cstddef>
#include <cstdint>

namespace frugal::cache {

/// Why an entry left the cache (or never entered it); passed to the eviction callback and
/// counted in `cache_stats::evictions`.
/// @code
/// c.set_eviction_callback([](auto&, auto& v, frugal::cache::eviction_reason r) {
///     if (r == frugal::cache::eviction_reason::capacity) demote(v); else release(v); });
/// @endcode
enum class eviction_reason : std::uint8_t {
    capacity,  ///< chosen by the policy to make room (including W-TinyLFU admission losers)
    rejected,  ///< never admitted: heavier than the whole budget, or the rest is pinned
    replaced,  ///< the old value of a key that was put again
    erased,    ///< removed by erase()
    cleared,   ///< removed by clear()
    expired,   ///< its time to live ran out (see `basic_cache::set_expiry`)
    destroyed, ///< still held when the cache was destroyed
};

/// Number of `eviction_reason` values, the size of `cache_stats::evictions`.
inline constexpr std::size_t eviction_reason_count = 7;

}  // namespace frugal::cache
