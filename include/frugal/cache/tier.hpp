#pragma once
/// @file
/// A cache tier below a process's memory (a local disk, a shared server): what it stores
/// (chunks of a token prefix, each under a key chained to its parent's), in which namespace
/// (model, dtype, layout, page size), and the batched interface every tier provides.

#include <concepts>
#include <optional>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "frugal/cache/page_keys.hpp"
#include "frugal/core/error.hpp"
#include "frugal/core/hash.hpp"

namespace frugal::cache {

/// What the values of a tier are: two engines share an entry only when every field is
/// equal, so a model's pages are never read as another's.
/// @code
/// frugal::cache::tier_namespace ns{.model = "llama-3.2-1b", .dtype = "bf16", .layout = "nhd", .page_tokens = 64};
/// @endcode
struct tier_namespace {
    std::string model, dtype, layout;
    std::uint32_t page_tokens = 0;

    /// The namespace's 64-bit id (stored in every frame and key).
    [[nodiscard]] std::uint64_t id() const noexcept {
        std::uint64_t h = fnv1a(model);
        h = hash_combine(h, fnv1a(dtype));
        h = hash_combine(h, fnv1a(layout));
        return hash_combine(h, page_tokens);
    }
};

/// The keys of the whole chunks of `tokens` (`ns.page_tokens` each; a partial last chunk
/// has none) in namespace `ns`: `chained_page_keys` seeded with the namespace's id, so a
/// key names the whole prefix up to and including its chunk, in that namespace only.
/// @code
/// auto keys = frugal::cache::chunk_keys<int>(ns, prompt);   // prompt.size() / 64 keys
/// @endcode
template <std::integral Token>
[[nodiscard]] std::vector<tier_key> chunk_keys(const tier_namespace& ns, std::span<const Token> tokens) {
    FRUGAL_CHECK(ns.page_tokens > 0, "chunk_keys: the namespace's page_tokens must be > 0");
    return chained_page_keys(tokens, ns.page_tokens, ns.id());
}

/// Counters of a tier since it was opened.
struct tier_stats {
    std::uint64_t hits = 0, misses = 0, puts = 0, evictions = 0;
    std::uint64_t refused = 0;  ///< entries found but not whole (truncated, corrupt, foreign): read as misses
    std::uint64_t errors = 0;   ///< calls cut short by the storage (unreachable, timed out, failed)
    std::uint64_t bytes_read = 0, bytes_written = 0;
};

/// A cache tier: values (e.g. KV pages) under chained chunk keys of one namespace.
/// - `exists_prefix(keys)`: how many of `keys`, from the first, the tier holds in a row;
/// - `get(keys, out)`: loads the longest run of `keys` from the first into the caller's
///   buffers `out[i]` (each exactly the value's size) and returns its length; an entry
///   missing, of another size, truncated or corrupt ends the run (never wrong data);
/// - `put(keys, values)`: stores each value under its key (an existing key is kept).
/// @code
/// static_assert(frugal::cache::kv_tier<frugal::cache::disk_tier<>>);
/// std::size_t n = tier.get(keys, buffers);   // pages 0..n are loaded
/// @endcode
template <class T>
concept kv_tier = requires(T& t, std::span<const tier_key> keys, std::span<const std::span<std::byte>> out,
                           std::span<const std::span<const std::byte>> values) {
    { t.exists_prefix(keys) } -> std::convertible_to<std::size_t>;
    { t.get(keys, out) } -> std::convertible_to<std::size_t>;
    t.put(keys, values);
    { t.stats() } -> std::convertible_to<tier_stats>;
};

/// Stores `value` under `key`, best effort: false when the tier's storage failed (a
/// `frugal::runtime_error`), for values that may stay unshared (an answer, an output).
/// @code
/// if (!frugal::cache::put_one(tier, key, record)) ++write_failures;
/// @endcode
template <kv_tier Tier>
bool put_one(Tier& tier, const tier_key& key, std::string_view value) {
    const std::span<const std::byte> bytes = std::as_bytes(std::span(value));
    try {
        tier.put({&key, 1}, {&bytes, 1});
        return true;
    } catch (const frugal::runtime_error&) {
        return false;
    }
}

/// A tier that also stores values of any size and lists what it holds (a semantic cache's
/// answers, rebuilt into an index after a restart):
/// - `read(key)`: the value under `key` (nullopt: missing, truncated, corrupt or foreign);
/// - `keys()`: the keys of the namespace the storage holds now (what other processes wrote
///   included; a key may vanish before it is read).
/// @code
/// static_assert(frugal::cache::listable_tier<frugal::cache::disk_tier<>>);
/// for (const auto& key : tier.keys()) if (auto value = tier.read(key)) use(*value);
/// @endcode
template <class T>
concept listable_tier = kv_tier<T> && requires(T& t, const tier_key& key) {
    { t.read(key) } -> std::same_as<std::optional<std::string>>;
    { t.keys() } -> std::same_as<std::vector<tier_key>>;
};

}  // namespace frugal::cache
