#pragma once
/// @file
/// semantic_cache: PerCache's QA bank, answers reused for semantically similar queries.

#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "frugal/cache/basic_cache.hpp"
#include "frugal/cache/lru_policy.hpp"
#include "frugal/cache/similarity_index.hpp"
#include "frugal/core/error.hpp"

namespace frugal {

/// One QA-bank entry: the query text, its answer (empty until decoded: PerCache's
/// prefill-only population stores queries without answers), the knowledge chunks retrieved
/// for it (to re-prefill them, section 4.3.3) and the similarity of its k_refresh-th best
/// chunk (a new chunk scoring above it triggers a refresh, section 4.1.3).
/// @code
/// if (const auto* e = bank.find(id); e && !e->answer) decode_later(e->query);
/// @endcode
template <class Answer, class ChunkId>
struct qa_entry {
    std::string query;
    std::optional<Answer> answer;
    std::vector<ChunkId> chunks;
    float refresh_floor = std::numeric_limits<float>::infinity();
    std::size_t slot = 0;  // the entry's slot in the similarity index
};

/// PerCache's QA bank (section 4.2.1): a lookup returns the most similar stored query when
/// its cosine similarity is at least tau_query, and the exact same text by a hash lookup
/// before any vector search. tau is adjustable at runtime. Capacity and eviction come from
/// the cache core (`Policy`, entries); the similarity search from `Index` (the exhaustive
/// `flat_similarity_index`, `frugal::eigen::flat_similarity_index`, or your vector index).
/// @code
/// frugal::semantic_cache<std::string> bank(1000, 384, 0.9);
/// if (auto hit = bank.lookup(text, embedding); hit && hit->entry->answer) return *hit->entry->answer;
/// auto id = bank.insert(text, embedding);   // answered later: bank.set_answer(id, reply)
/// @endcode
template <class Answer, class ChunkId = std::uint32_t, class Index = flat_similarity_index<>, class Policy = lru_policy>
    requires similarity_index<Index>
class semantic_cache {
public:
    using entry_id = std::uint64_t;
    using entry_type = qa_entry<Answer, ChunkId>;

    /// A lookup result: the entry, its id, the cosine similarity and whether the text matched.
    struct hit {
        entry_id id;
        const entry_type* entry;
        float similarity;
        bool exact;
    };

    /// A bank of `capacity` entries over `dim`-dimensional embeddings with threshold `tau_query`.
    semantic_cache(std::size_t capacity, std::size_t dim, double tau_query)
        requires std::constructible_from<Index, std::size_t>
        : semantic_cache(capacity, tau_query, Index(dim)) {}
    /// A bank over a caller-built index.
    semantic_cache(std::size_t capacity, double tau_query, Index index)
        : entries_(capacity), index_(std::move(index)), unit_(index_.dim()) {
        set_tau(tau_query);
        entries_.set_eviction_callback([this](const entry_id&, entry_type& e, eviction_reason) { forget(e); });
    }
    semantic_cache(const semantic_cache&) = delete;
    semantic_cache& operator=(const semantic_cache&) = delete;

    /// The similarity threshold tau_query in [-1, 1].
    [[nodiscard]] double tau() const noexcept { return tau_; }
    void set_tau(double tau_query) {
        FRUGAL_CHECK(tau_query >= -1.0 && tau_query <= 1.0, "semantic_cache: tau_query ", tau_query, " is outside [-1, 1]");
        tau_ = tau_query;
    }

    /// The entry with the same text, else the most similar one if its cosine >= tau; a hit
    /// counts as an access for the eviction policy.
    [[nodiscard]] std::optional<hit> lookup(std::string_view query, std::span<const float> embedding) {
        if (auto it = by_text_.find(std::string(query)); it != by_text_.end()) {
            const entry_type* e = entries_.get(it->second);
            return hit{it->second, e, 1.0f, true};
        }
        normalize_into(embedding, unit_);
        const auto best = index_.nearest(unit_);
        if (!best || best->similarity < tau_) {
            ++misses_;
            return std::nullopt;
        }
        const entry_id id = owner_[best->slot];
        const entry_type* e = entries_.get(id);
        FRUGAL_ASSERT(e != nullptr);
        return hit{id, e, best->similarity, false};
    }

    /// Adds a query (or replaces the entry with the same text) and returns its id.
    entry_id insert(std::string query, std::span<const float> embedding, std::optional<Answer> answer = std::nullopt,
                    std::vector<ChunkId> chunks = {}, float refresh_floor = std::numeric_limits<float>::infinity()) {
        normalize_into(embedding, unit_);
        if (auto it = by_text_.find(query); it != by_text_.end()) entries_.erase(it->second);
        const std::size_t slot = take_slot();
        index_.store(slot, unit_);
        const entry_id id = next_id_++;
        if (owner_.size() <= slot) owner_.resize(slot + 1);
        owner_[slot] = id;
        by_text_.emplace(query, id);
        entries_.put(id, entry_type{std::move(query), std::move(answer), std::move(chunks), refresh_floor, slot});
        return id;
    }

    /// Records the answer of entry `id` (the decode of a prefill-only query); false when the
    /// entry was evicted meanwhile.
    bool set_answer(entry_id id, Answer answer) {
        entry_type* e = entries_.peek(id);
        if (e == nullptr) return false;
        e->answer = std::move(answer);
        return true;
    }
    /// Sets the refresh floor of entry `id`; false when evicted.
    bool set_refresh_floor(entry_id id, float floor) {
        entry_type* e = entries_.peek(id);
        if (e == nullptr) return false;
        e->refresh_floor = floor;
        return true;
    }
    /// The entry `id` without counting an access; nullptr when evicted.
    [[nodiscard]] const entry_type* find(entry_id id) const { return entries_.peek(id); }
    bool erase(entry_id id) { return entries_.erase(id); }

    /// Calls `f(id, entry)` for every entry, without counting accesses.
    template <class F>
    void for_each(F&& f) const {
        entries_.for_each(f);
    }
    /// The stored unit embedding of an entry.
    [[nodiscard]] std::span<const float> embedding(const entry_type& e) const { return index_.vector(e.slot); }

    [[nodiscard]] std::size_t size() const noexcept { return entries_.size(); }
    [[nodiscard]] std::size_t dim() const noexcept { return index_.dim(); }
    /// Hits (exact and similar) and evictions come from the core; `misses` counts lookups
    /// that found nothing at or above tau.
    [[nodiscard]] const cache_stats& stats() const noexcept { return entries_.stats(); }
    [[nodiscard]] std::uint64_t misses() const noexcept { return misses_; }

private:
    std::size_t take_slot() {
        if (free_slots_.empty()) return next_slot_++;
        const std::size_t s = free_slots_.back();
        free_slots_.pop_back();
        return s;
    }
    void forget(entry_type& e) {
        index_.erase(e.slot);
        free_slots_.push_back(e.slot);
        by_text_.erase(e.query);
    }

    basic_cache<entry_id, entry_type, Policy> entries_;
    Index index_;
    std::vector<float> unit_;
    std::unordered_map<std::string, entry_id> by_text_;
    std::vector<entry_id> owner_;
    std::vector<std::size_t> free_slots_;
    std::size_t next_slot_ = 0;
    entry_id next_id_ = 0;
    double tau_ = 0;
    std::uint64_t misses_ = 0;
};

}  // namespace frugal
