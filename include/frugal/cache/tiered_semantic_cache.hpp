#pragma once
/// @file
/// tiered_semantic_cache: a QA bank whose answers are kept in a cache tier (a local disk, a
/// Redis server other processes share), found there by their exact text, and rebuilt into
/// the in-process vector index after a restart.

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "frugal/cache/lru_policy.hpp"
#include "frugal/cache/page_keys.hpp"
#include "frugal/cache/semantic_cache.hpp"
#include "frugal/cache/tier.hpp"
#include "frugal/core/error.hpp"
#include "frugal/retrieve/similarity_index.hpp"

namespace frugal::cache {

/// The key of `query`'s answer in namespace `ns`: a 128-bit hash of the whole text, seeded
/// with the namespace (so two models never share an answer).
/// @code
/// frugal::cache::tier_key key = frugal::cache::answer_key(ns, "What is HBM?");
/// @endcode
[[nodiscard]] inline tier_key answer_key(const tier_namespace& ns, std::string_view query) {
    std::vector<std::uint32_t> symbols(query.begin(), query.end());
    for (auto& c : symbols) c &= 0xffu;       // the text's bytes
    symbols.push_back(0x100u);                // an end mark, so that every text has a key
    return chained_page_keys(std::span<const std::uint32_t>(symbols), symbols.size(), ns.id()).front();
}

/// Counters of a `tiered_semantic_cache` since it was made.
struct tiered_answer_stats {
    std::uint64_t tier_hits = 0;       ///< lookups memory missed and the tier answered (exact text)
    std::uint64_t writes = 0;          ///< answered entries handed to the tier
    std::uint64_t write_failures = 0;  ///< writes the tier's storage failed (the answer stays unshared)
    std::uint64_t refused = 0;         ///< tier records not readable as this bank's entries (misses)
};

/// PerCache's QA bank (`semantic_cache`) over a `listable_tier`, as GPTCache keeps answers
/// in Redis beside an in-process vector index:
/// - every entry that has an answer (`insert` with one, or `set_answer`) is written to the
///   tier under `answer_key(ns, query)`; the tier keeps the first answer stored for a text;
/// - `lookup` asks memory first (exact text, then the most similar query at or above tau);
///   on a miss it asks the tier for the exact text, and an answer found there joins memory;
/// - `restore()` rebuilds memory (and so the similarity index) from every answer in the
///   tier's namespace: after a restart, or to take in what other processes answered. Memory
///   keeps what its budget allows; the tier keeps the rest.
/// Records are checked (the tier's frame, then the entry's lengths, dimension and types): a
/// damaged, foreign or colliding record is a miss. Use a namespace of its own for answers
/// (not the KV pages'). One thread at a time; the tier must outlive the cache.
/// @code
/// frugal::cache::redis_tier tier(ns, {.port = 6379});
/// frugal::cache::tiered_semantic_cache<frugal::cache::redis_tier, std::string> bank(
///     tier, ns, frugal::memory_budget::mib(64), 384, 0.9);
/// bank.restore();                                  // what the tier holds, indexed again
/// if (auto hit = bank.lookup(text, embedding); hit && hit->entry->answer) return *hit->entry->answer;
/// bank.insert(text, embedding, reply);             // shared with every process on the tier
/// @endcode
template <listable_tier Tier, class Answer, class ChunkId = std::uint32_t,
          class Index = retrieve::flat_similarity_index<>, class Policy = lru_policy>
    requires detail::storable_answer<Answer> && std::is_trivially_copyable_v<ChunkId>
class tiered_semantic_cache {
public:
    using bank_type = semantic_cache<Answer, ChunkId, Index, Policy>;
    using entry_id = typename bank_type::entry_id;
    using entry_type = typename bank_type::entry_type;
    using hit = typename bank_type::hit;

    /// A bank built from `bank_args` (any `semantic_cache` constructor's arguments) over
    /// `tier`, its answers in namespace `ns`.
    template <class... Args>
    tiered_semantic_cache(Tier& tier, tier_namespace ns, Args&&... bank_args)
        : tier_(tier), ns_(std::move(ns)), bank_(std::forward<Args>(bank_args)...) {}
    tiered_semantic_cache(const tiered_semantic_cache&) = delete;
    tiered_semantic_cache& operator=(const tiered_semantic_cache&) = delete;

    /// Memory's answer for `query` (exact, else the most similar at or above tau), else the
    /// tier's for the exact text (then kept in memory too).
    [[nodiscard]] std::optional<hit> lookup(std::string_view query, std::span<const float> embedding) {
        if (auto h = bank_.lookup(query, embedding)) return h;
        std::optional<typename bank_type::stored_entry> stored = read(answer_key(ns_, query), query);
        if (!stored) return std::nullopt;
        const std::optional<entry_id> id = bank_.restore(std::move(*stored));
        if (!id) return std::nullopt;  // larger than memory's whole budget
        ++stats_.tier_hits;
        return hit{*id, bank_.find(*id), 1.0f, true};
    }

    /// `semantic_cache::insert`; an entry with an answer is written to the tier too.
    std::optional<entry_id> insert(std::string query, std::span<const float> embedding,
                                   std::optional<Answer> answer = std::nullopt, std::vector<ChunkId> chunks = {},
                                   float refresh_floor = std::numeric_limits<float>::infinity()) {
        const bool answered = answer.has_value();
        const std::optional<entry_id> id =
            bank_.insert(std::move(query), embedding, std::move(answer), std::move(chunks), refresh_floor);
        if (id && answered) write(*id);
        return id;
    }

    /// `semantic_cache::set_answer`, and the answered entry written to the tier.
    bool set_answer(entry_id id, Answer answer) {
        if (!bank_.set_answer(id, std::move(answer))) return false;
        write(id);
        return true;
    }

    /// Inserts every answer the tier's namespace holds into memory (replacing entries of the
    /// same text; memory's policy evicts beyond its budget); returns how many were read.
    std::size_t restore() {
        std::size_t n = 0;
        for (const tier_key& key : tier_.keys()) {
            std::optional<typename bank_type::stored_entry> stored = read(key, std::nullopt);
            if (!stored) continue;
            (void)bank_.restore(std::move(*stored));
            ++n;
        }
        return n;
    }

    /// The bank in memory (budget, tau, find, stats, save/load).
    [[nodiscard]] bank_type& memory() noexcept { return bank_; }
    [[nodiscard]] const bank_type& memory() const noexcept { return bank_; }
    [[nodiscard]] const tier_namespace& name_space() const noexcept { return ns_; }
    [[nodiscard]] const tiered_answer_stats& stats() const noexcept { return stats_; }

private:
    // A record is a small header (the bank's dimension and type sizes) and the entry.
    static constexpr std::size_t header_bytes = 12;
    [[nodiscard]] std::array<std::uint32_t, 3> shape() const noexcept {
        return {static_cast<std::uint32_t>(bank_.dim()), static_cast<std::uint32_t>(sizeof(ChunkId)),
                static_cast<std::uint32_t>(sizeof(Answer))};
    }

    void write(entry_id id) {
        const entry_type* e = bank_.find(id);
        if (e == nullptr) return;
        const auto head = shape();
        std::string record(header_bytes, '\0');
        std::memcpy(record.data(), head.data(), header_bytes);
        record += bank_.entry_record(*e);
        ++(put_one(tier_, answer_key(ns_, e->query), record) ? stats_.writes : stats_.write_failures);
    }

    // The entry stored under `key`, if it is a whole record of this bank's shape (and of
    // `query`'s text when given).
    std::optional<typename bank_type::stored_entry> read(const tier_key& key, std::optional<std::string_view> query) {
        const std::optional<std::string> record = tier_.read(key);
        if (!record) return std::nullopt;
        std::array<std::uint32_t, 3> head{};
        if (record->size() >= header_bytes) std::memcpy(head.data(), record->data(), header_bytes);
        if (head != shape()) {
            ++stats_.refused;
            return std::nullopt;
        }
        try {
            auto stored = bank_.parse_entry_record(std::string_view(*record).substr(header_bytes));
            if (!query || stored.entry.query == *query) return stored;
        } catch (const frugal::runtime_error&) {
        }
        ++stats_.refused;  // malformed, or another text under the same key
        return std::nullopt;
    }

    Tier& tier_;
    tier_namespace ns_;
    bank_type bank_;
    tiered_answer_stats stats_;
};

}  // namespace frugal::cache
