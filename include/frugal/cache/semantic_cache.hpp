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
#include "frugal/retrieve/similarity_index.hpp"
#include "frugal/core/error.hpp"
#include "frugal/core/memory_budget.hpp"

namespace frugal::cache {

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

namespace detail {
/// Bytes of an answer: size() x element size for a contiguous container (std::string,
/// std::vector), sizeof otherwise.
template <class Answer>
[[nodiscard]] std::size_t answer_bytes(const Answer& a) noexcept {
    if constexpr (requires { a.size(); typename Answer::value_type; }) {
        return a.size() * sizeof(typename Answer::value_type);
    } else {
        return sizeof(Answer);
    }
}

/// Weigher of QA-bank entries: 1 each (a capacity in entries), or their bytes: the embedding
/// (dim floats), the query text, the answer and the chunk ids.
struct qa_weigher {
    std::size_t embedding_bytes = 0;  // 0: count entries
    template <class Id, class Entry>
    std::size_t operator()(const Id&, const Entry& e) const noexcept {
        if (embedding_bytes == 0) return 1;
        return embedding_bytes + e.query.size() + (e.answer ? answer_bytes(*e.answer) : 0) +
               e.chunks.size() * sizeof(typename decltype(e.chunks)::value_type);
    }
};
}  // namespace detail

/// PerCache's QA bank (section 4.2.1): a lookup returns the most similar stored query when
/// its cosine similarity is at least tau_query, and the exact same text by a hash lookup
/// before any vector search. tau is adjustable at runtime. Capacity and eviction come from
/// the cache core and its `Policy`: a number of entries, or a byte budget (`memory_budget`)
/// over each entry's embedding (dim x 4 bytes), query, answer (size() x element size for a
/// string or vector, sizeof otherwise) and chunk ids. An entry larger than the budget is
/// refused (`insert` returns nullopt), never stored over budget. The similarity search comes
/// from `Index` (the exhaustive `flat_similarity_index`, `frugal::eigen::flat_similarity_index`,
/// or your vector index).
/// @code
/// frugal::cache::semantic_cache<std::string> bank(frugal::memory_budget::mib(64), 384, 0.9);
/// if (auto hit = bank.lookup(text, embedding); hit && hit->entry->answer) return *hit->entry->answer;
/// auto id = bank.insert(text, embedding);   // answered later: bank.set_answer(*id, reply)
/// @endcode
template <class Answer, class ChunkId = std::uint32_t, class Index = retrieve::flat_similarity_index<>, class Policy = lru_policy>
    requires retrieve::similarity_index<Index>
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
    /// A bank within a byte budget (embeddings, queries, answers and chunk ids).
    semantic_cache(memory_budget budget, std::size_t dim, double tau_query)
        requires std::constructible_from<Index, std::size_t>
        : semantic_cache(budget, tau_query, Index(dim)) {}
    /// A bank of `capacity` entries over a caller-built index.
    semantic_cache(std::size_t capacity, double tau_query, Index index)
        : semantic_cache(capacity, detail::qa_weigher{}, tau_query, std::move(index)) {}
    /// A bank within a byte budget over a caller-built index.
    semantic_cache(memory_budget budget, double tau_query, Index index)
        : semantic_cache(budget.bytes(), detail::qa_weigher{index.dim() * sizeof(float)}, tau_query, std::move(index)) {}
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
        retrieve::normalize_into(embedding, unit_);
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

    /// Adds a query (or replaces the entry with the same text) and returns its id; nullopt
    /// when the policy refuses it: larger than the whole budget, or a W-TinyLFU admission loser.
    std::optional<entry_id> insert(std::string query, std::span<const float> embedding,
                                   std::optional<Answer> answer = std::nullopt, std::vector<ChunkId> chunks = {},
                                   float refresh_floor = std::numeric_limits<float>::infinity()) {
        retrieve::normalize_into(embedding, unit_);
        if (auto it = by_text_.find(query); it != by_text_.end()) entries_.erase(it->second);
        const std::size_t slot = take_slot();
        index_.store(slot, unit_);
        const entry_id id = next_id_++;
        if (owner_.size() <= slot) owner_.resize(slot + 1);
        owner_[slot] = id;
        by_text_.emplace(query, id);
        // A refusal goes through the eviction callback, which forgets the slot and the text.
        if (entries_.put(id, entry_type{std::move(query), std::move(answer), std::move(chunks), refresh_floor, slot}) ==
            put_result::rejected)
            return std::nullopt;
        return id;
    }

    /// Records the answer of entry `id` (the decode of a prefill-only query). Like any
    /// replacement in the core it counts as one access; with a byte budget the entry grows and
    /// others may be evicted. False when the entry was evicted meanwhile, or when with its
    /// answer it no longer fits in the budget (then it is removed).
    bool set_answer(entry_id id, Answer answer) {
        entry_type* e = entries_.peek(id);
        if (e == nullptr) return false;
        entry_type updated = std::move(*e);
        updated.answer = std::move(answer);
        return entries_.put(id, std::move(updated)) != put_result::rejected;
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
    /// Weight held: entries, or bytes with a byte budget.
    [[nodiscard]] std::size_t weight() const noexcept { return entries_.weight(); }
    /// Capacity: entries, or bytes with a byte budget.
    [[nodiscard]] std::size_t capacity() const noexcept { return entries_.capacity(); }
    [[nodiscard]] std::size_t dim() const noexcept { return index_.dim(); }
    /// Hits (exact and similar) and evictions come from the core; `misses` counts lookups
    /// that found nothing at or above tau.
    [[nodiscard]] const cache_stats& stats() const noexcept { return entries_.stats(); }
    [[nodiscard]] std::uint64_t misses() const noexcept { return misses_; }

private:
    semantic_cache(std::size_t capacity, detail::qa_weigher weigher, double tau_query, Index index)
        : entries_(capacity, weigher), index_(std::move(index)), unit_(index_.dim()) {
        set_tau(tau_query);
        // A replaced entry (set_answer) stays, with its slot and text; at destruction the
        // index and the text map go with the bank.
        entries_.set_eviction_callback([this](const entry_id&, entry_type& e, eviction_reason why) {
            if (why != eviction_reason::replaced && why != eviction_reason::destroyed) forget(e);
        });
    }
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

    basic_cache<entry_id, entry_type, Policy, detail::qa_weigher> entries_;
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

}  // namespace frugal::cache
