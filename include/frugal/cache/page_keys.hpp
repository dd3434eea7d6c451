#pragma once
/// @file
/// Keys of a token sequence's full pages, chained: each page's key hashes its tokens on top
/// of the previous page's key, so equal keys mean equal prefixes (vLLM's block hashes,
/// LMCache's chunk hashes). One chain serves the in-process prefix tree (`page_keys`, 64
/// bits) and the tiers shared between processes (`tier_key`, 128 bits: two chains).

#include <concepts>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>
#include <string_view>
#include <span>
#include <vector>

#include "frugal/core/error.hpp"
#include "frugal/core/hash.hpp"

namespace frugal::cache {

/// A page's 128-bit chained key (two independent 64-bit chains).
struct tier_key {
    std::uint64_t high = 0, low = 0;
    friend bool operator==(const tier_key&, const tier_key&) = default;
};

/// `key` as 32 lowercase hex digits (high chain first): its name in a tier's storage.
[[nodiscard]] inline std::string to_hex(const tier_key& key) {
    char buf[33];
    std::snprintf(buf, sizeof buf, "%016llx%016llx", static_cast<unsigned long long>(key.high),
                  static_cast<unsigned long long>(key.low));
    return buf;
}

/// The key that 32 lowercase hex digits spell (as `to_hex` writes them), or nullopt.
[[nodiscard]] inline std::optional<tier_key> tier_key_from_hex(std::string_view digits) {
    if (digits.size() != 32 || digits.find_first_not_of("0123456789abcdef") != std::string_view::npos) return std::nullopt;
    const std::string d(digits);
    return tier_key{std::stoull(d.substr(0, 16), nullptr, 16), std::stoull(d.substr(16), nullptr, 16)};
}

/// Hash of a `tier_key` for hash tables (both chains mixed).
struct tier_key_hash {
    std::size_t operator()(const tier_key& k) const noexcept {
        return static_cast<std::size_t>(hash_mix(k.high ^ hash_mix(k.low)));
    }
};

/// The chained keys of the full pages of `tokens` (`page_size` each; a last, partial page
/// has none), the chain seeded with `seed`.
/// @code
/// auto keys = frugal::cache::chained_page_keys(std::span<const int>(tokens), 64, model_id);
/// @endcode
template <std::integral Token>
[[nodiscard]] std::vector<tier_key> chained_page_keys(std::span<const Token> tokens, std::size_t page_size,
                                                      std::uint64_t seed) {
    FRUGAL_CHECK(page_size > 0, "page_keys: page size 0");
    std::vector<tier_key> keys;
    keys.reserve(tokens.size() / page_size);
    std::uint64_t high = hash_combine(0x6672756761ull, seed), low = hash_combine(0x14057B7EF767814Full, seed);
    for (std::size_t p = 0; p + page_size <= tokens.size(); p += page_size) {
        for (std::size_t i = p; i < p + page_size; ++i) {
            const auto t = static_cast<std::uint64_t>(static_cast<std::int64_t>(tokens[i]));
            high = hash_combine(high, t);
            low = hash_combine(low ^ 0xD6E8FEB86659FD93ull, t);
        }
        keys.push_back({high, low});
    }
    return keys;
}

/// Keys of the full pages of a token sequence for a `prefix_tree`: the first chain of
/// `chained_page_keys`, seeded with `namespace_key` (the model or adapter). A tree keyed by
/// them matches at page granularity: requests that share the first pages of a chunk share
/// those pages' nodes. The tokens of a last, partial page get no key.
/// @code
/// auto keys = frugal::cache::page_keys(std::span<const int>(tokens), 16, adapter_id);
/// auto lock = tree.match(keys);   // lock.length() pages of KV reusable
/// @endcode
template <std::integral Token>
[[nodiscard]] std::vector<std::uint64_t> page_keys(std::span<const Token> tokens, std::size_t page_size,
                                                   std::uint64_t namespace_key = 0) {
    const auto chained = chained_page_keys(tokens, page_size, namespace_key);
    std::vector<std::uint64_t> keys(chained.size());
    for (std::size_t i = 0; i < chained.size(); ++i) keys[i] = chained[i].high;
    return keys;
}

}  // namespace frugal::cache
