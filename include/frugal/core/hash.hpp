#pragma once
/// @file
/// The hash functions frugal shares: bit mixing for hash tables and sketches, combining
/// values into one hash, and the checksum of frugal's files.

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

namespace frugal {

/// Fibonacci hashing: multiplies by 2^64 / phi and folds the high half down, so that a
/// power-of-two mask of the result depends on every bit of `h` (user hashes such as
/// std::hash<int> are often the identity).
/// @code
/// std::size_t bucket = frugal::hash_mix(std::hash<int>{}(key)) & (buckets - 1);
/// @endcode
[[nodiscard]] constexpr std::uint64_t hash_mix(std::uint64_t h) noexcept {
    const std::uint64_t x = h * 0x9E3779B97F4A7C15ull;
    return x ^ (x >> 32);
}

/// Combines `v` into the running hash `h` (a boost::hash_combine step followed by the
/// splitmix64 finalizer), for hashing tuples and sequences.
/// @code
/// std::uint64_t h = frugal::hash_combine(frugal::hash_combine(0, request), round);
/// @endcode
[[nodiscard]] constexpr std::uint64_t hash_combine(std::uint64_t h, std::uint64_t v) noexcept {
    h ^= v + 0x9E3779B97F4A7C15ull + (h << 6) + (h >> 2);
    h ^= h >> 31;
    h *= 0xBF58476D1CE4E5B9ull;
    return h ^ (h >> 29);
}

/// 64-bit FNV-1a of `bytes`: the checksum frugal's file formats end with (it detects
/// truncation and flipped bytes, not tampering).
/// @code
/// std::uint64_t sum = frugal::fnv1a(std::string_view(buffer));
/// @endcode
[[nodiscard]] constexpr std::uint64_t fnv1a(std::span<const unsigned char> bytes) noexcept {
    std::uint64_t h = 0xCBF29CE484222325ull;
    for (unsigned char c : bytes) h = (h ^ c) * 0x100000001B3ull;
    return h;
}
/// 64-bit FNV-1a of the characters of `s` (see the byte overload).
[[nodiscard]] constexpr std::uint64_t fnv1a(std::string_view s) noexcept {
    std::uint64_t h = 0xCBF29CE484222325ull;
    for (char c : s) h = (h ^ static_cast<unsigned char>(c)) * 0x100000001B3ull;
    return h;
}

}  // namespace frugal
