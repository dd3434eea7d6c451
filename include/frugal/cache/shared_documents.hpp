#pragma once
/// @file
/// shared_documents: token sequences (finished outputs) that engine replicas share through a
/// cache tier, so that each replica's drafting history holds every replica's outputs.

#include <concepts>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <span>
#include <string>
#include <type_traits>
#include <unordered_set>
#include <utility>
#include <vector>

#include "frugal/cache/page_keys.hpp"
#include "frugal/cache/tier.hpp"
#include "frugal/core/error.hpp"

namespace frugal::cache {

/// Counters of a `shared_documents` since it was made.
struct shared_documents_stats {
    std::uint64_t published = 0;       ///< sequences handed to the tier
    std::uint64_t write_failures = 0;  ///< writes the tier's storage failed
    std::uint64_t pulled = 0;          ///< sequences other replicas published, handed to pull()'s callback
    std::uint64_t refused = 0;         ///< records not readable as this namespace's sequences (skipped)
};

/// Token sequences shared between engine replicas through a `listable_tier`: behind a load
/// balancer each replica sees a share of the requests, so a drafting history of its own
/// outputs alone is that much poorer (`frugal-bench draft --replicas`).
/// - `publish(tokens)` stores a sequence under a 128-bit hash of its tokens in the namespace
///   (replicas that produce the same output store it once); an empty one is not stored;
/// - `pull(add)` lists the namespace (a SCAN on Redis, a directory walk on disk: call it
///   every few seconds, not per request) and calls `add(std::span<const Token>)` once for
///   each sequence it has neither published nor pulled before; returns how many.
/// Records are checked (the tier's frame, then the token width, the length and the hash of
/// the tokens): a damaged or foreign record is skipped. What it remembers as seen is what the
/// tier held at the last pull, so its memory follows the tier's budget. Use a namespace of
/// its own. One thread at a time; the tier must outlive it.
/// @code
/// frugal::cache::redis_tier tier(outputs_ns, {.port = 6379});
/// frugal::cache::shared_documents<frugal::cache::redis_tier, int> shared(tier, outputs_ns);
/// shared.publish(output);                                             // a request finished
/// shared.pull([&](std::span<const int> doc) { history.add(doc); });   // every few seconds
/// @endcode
template <listable_tier Tier, std::integral Token>
class shared_documents {
public:
    shared_documents(Tier& tier, tier_namespace ns) : tier_(tier), ns_(std::move(ns)) {}
    shared_documents(const shared_documents&) = delete;
    shared_documents& operator=(const shared_documents&) = delete;

    /// Stores `tokens` in the tier (a storage failure is counted, not thrown: the sequence
    /// stays unshared).
    void publish(std::span<const Token> tokens) {
        if (tokens.empty()) return;
        const tier_key key = key_of(tokens);
        std::string record(header_bytes + tokens.size_bytes(), '\0');
        const header h{static_cast<std::uint32_t>(sizeof(Token)), std::is_signed_v<Token> ? 1u : 0u, tokens.size()};
        std::memcpy(record.data(), &h, header_bytes);
        std::memcpy(record.data() + header_bytes, tokens.data(), tokens.size_bytes());
        ++(put_one(tier_, key, record) ? stats_.published : stats_.write_failures);
        seen_.insert(key);
    }

    /// Calls `add(sequence)` for every sequence the tier holds that this object has not
    /// published or pulled; returns how many.
    template <class Add>
        requires std::invocable<Add&, std::span<const Token>>
    std::size_t pull(Add&& add) {
        std::unordered_set<tier_key, tier_key_hash> listed;
        std::size_t n = 0;
        std::vector<Token> tokens;
        for (const tier_key& key : tier_.keys()) {
            listed.insert(key);
            if (seen_.contains(key)) continue;
            if (!read(key, tokens)) {
                ++stats_.refused;
                continue;
            }
            add(std::span<const Token>(tokens));
            ++stats_.pulled;
            ++n;
        }
        seen_ = std::move(listed);
        return n;
    }

    [[nodiscard]] const shared_documents_stats& stats() const noexcept { return stats_; }
    [[nodiscard]] const tier_namespace& name_space() const noexcept { return ns_; }

private:
    // A record is this header and the tokens.
    struct header {
        std::uint32_t token_bytes, is_signed;
        std::uint64_t count;
    };
    static constexpr std::size_t header_bytes = sizeof(header);
    static_assert(header_bytes == 16);

    [[nodiscard]] tier_key key_of(std::span<const Token> tokens) const {
        return chained_page_keys(tokens, tokens.size(), ns_.id()).front();  // the whole sequence as one page
    }

    // The sequence under `key` into `tokens`, if its record is whole, of this token type,
    // and hashes to `key`.
    bool read(const tier_key& key, std::vector<Token>& tokens) {
        const std::optional<std::string> record = tier_.read(key);
        if (!record || record->size() < header_bytes) return false;
        header h{};
        std::memcpy(&h, record->data(), header_bytes);
        if (h.token_bytes != sizeof(Token) || h.is_signed != (std::is_signed_v<Token> ? 1u : 0u) || h.count == 0 ||
            h.count != (record->size() - header_bytes) / sizeof(Token) ||
            (record->size() - header_bytes) % sizeof(Token) != 0)
            return false;
        tokens.resize(h.count);
        std::memcpy(tokens.data(), record->data() + header_bytes, record->size() - header_bytes);
        return key_of(tokens) == key;
    }

    Tier& tier_;
    tier_namespace ns_;
    std::unordered_set<tier_key, tier_key_hash> seen_;
    shared_documents_stats stats_;
};

}  // namespace frugal::cache
