#pragma once
/// @file
/// semantic_cache: PerCache's QA bank, answers reused for semantically similar queries.

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <limits>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <unordered_map>
#include <utility>
#include <vector>

#include "frugal/cache/basic_cache.hpp"
#include "frugal/cache/lru_policy.hpp"
#include "frugal/retrieve/similarity_index.hpp"
#include "frugal/core/atomic_file.hpp"
#include "frugal/core/error.hpp"
#include "frugal/core/hash.hpp"
#include "frugal/core/memory_budget.hpp"
#include "frugal/core/record_file.hpp"

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

/// Answers `semantic_cache::save` can write: trivially copyable values, or contiguous
/// containers of them built from a pointer range (std::string, std::vector<float>).
template <class Answer>
concept storable_answer =
    std::is_trivially_copyable_v<Answer> ||
    requires(const Answer& a, const typename Answer::value_type* p) {
        requires std::is_trivially_copyable_v<typename Answer::value_type>;
        { a.data() } -> std::convertible_to<const typename Answer::value_type*>;
        { a.size() } -> std::convertible_to<std::size_t>;
        Answer(p, p);
    };

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
        normalize(embedding, "lookup");  // checked on the exact-text path too
        if (auto it = by_text_.find(std::string(query)); it != by_text_.end()) {
            const entry_type* e = entries_.get(it->second);
            return hit{it->second, e, 1.0f, true};
        }
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
        normalize(embedding, "insert");
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
    /// Removes every entry.
    void clear() { entries_.clear(); }

    /// Writes every entry (query, answer, chunk ids, refresh floor, unit embedding) with
    /// `write_file_atomically`: a crash leaves the old file or the new one. Recency is not
    /// kept: a load re-inserts the entries in the file's order.
    void save(const std::filesystem::path& path) const
        requires detail::storable_answer<Answer> && std::is_trivially_copyable_v<ChunkId>
    {
        std::string entries;
        entries_.for_each([&](const entry_id&, const entry_type& e) { append_entry(entries, e); });
        record_file_writer out(file_format);
        out.append(static_cast<std::uint32_t>(dim()));
        out.append(static_cast<std::uint32_t>(sizeof(ChunkId)));
        out.append(static_cast<std::uint32_t>(answer_unit));
        out.append(static_cast<std::uint64_t>(size()));
        out.append_bytes(entries.data(), entries.size());
        std::move(out).save(path);
    }

    /// Replaces the contents with the bank saved at `path`, after validating all of it
    /// (magic, version, dimension, id and answer element sizes, every length against the
    /// bytes left, finite embeddings, distinct queries, a checksum). A corrupt file throws
    /// `frugal::runtime_error` and leaves the bank unchanged. Entries beyond the capacity are
    /// evicted by the policy as they are re-inserted.
    void load(const std::filesystem::path& path)
        requires detail::storable_answer<Answer> && std::is_trivially_copyable_v<ChunkId>
    {
        const std::string bytes = read_whole_file(path, "semantic_cache::load");
        const record_file_reader in(std::as_bytes(std::span(bytes)), file_format, "semantic_cache::load", path);
        auto fail = [&](const auto&... why) { in.fail(why...); };
        in.check_checksum();
        std::size_t at = 0;
        const auto file_dim = in.read<std::uint32_t>(at, "the dimension");
        const auto id_bytes = in.read<std::uint32_t>(at, "the chunk id size");
        const auto unit = in.read<std::uint32_t>(at, "the answer element size");
        const auto count = in.read<std::uint64_t>(at, "the entry count");
        if (file_dim != dim() || id_bytes != sizeof(ChunkId) || unit != answer_unit)
            fail("has dimension / chunk id / answer element sizes ", file_dim, "/", id_bytes, "/", unit,
                 ", this bank's are ", dim(), "/", sizeof(ChunkId), "/", answer_unit);
        const auto body = in.body();
        const std::string_view entries(reinterpret_cast<const char*>(body.data()), body.size());
        const std::size_t end = entries.size();
        if (count > (end - at) / minimum_record_bytes()) fail("has entry count ", count, " beyond what ", end - at, " bytes can hold");
        std::vector<stored_entry> loaded;
        loaded.reserve(static_cast<std::size_t>(count));
        std::unordered_map<std::string, std::size_t> seen;
        for (std::uint64_t i = 0; i < count; ++i) {
            auto fail_in_entry = [&](const auto&... why) { fail("entry ", i, ": ", why...); };
            loaded.push_back(read_entry(entries, at, fail_in_entry));
            if (!seen.emplace(loaded.back().entry.query, i).second) fail("entry ", i, " repeats the query of an earlier one");
        }
        if (at != end) fail("has ", end - at, " bytes after the last entry");
        clear();
        for (stored_entry& s : loaded) restore(std::move(s));
    }

    /// An entry with its unit embedding, as `entry_record` writes it.
    struct stored_entry {
        entry_type entry;
        std::vector<float> embedding;
    };

    /// Entry `e` as one record (what `save` writes for it: query, answer, chunk ids, refresh
    /// floor, unit embedding), e.g. to keep it in a tier.
    /// @code
    /// std::string record = bank.entry_record(*bank.find(id));
    /// @endcode
    [[nodiscard]] std::string entry_record(const entry_type& e) const
        requires detail::storable_answer<Answer> && std::is_trivially_copyable_v<ChunkId>
    {
        std::string out;
        append_entry(out, e);
        return out;
    }

    /// The entry in `record` (from `entry_record` of a bank of this dimension and these
    /// types), validated as `load` validates; a malformed record throws
    /// `frugal::runtime_error`.
    [[nodiscard]] stored_entry parse_entry_record(std::string_view record) const
        requires detail::storable_answer<Answer> && std::is_trivially_copyable_v<ChunkId>
    {
        auto fail = [](const auto&... why) { FRUGAL_FAIL(frugal::runtime_error, "semantic_cache: entry record: ", why...); };
        std::size_t at = 0;
        stored_entry e = read_entry(record, at, fail);
        if (at != record.size()) fail(record.size() - at, " bytes after the entry");
        return e;
    }

    /// Inserts a stored entry (from `parse_entry_record`) as `insert` does.
    std::optional<entry_id> restore(stored_entry e) {
        return insert(std::move(e.entry.query), e.embedding, std::move(e.entry.answer), std::move(e.entry.chunks),
                      e.entry.refresh_floor);
    }

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
    static constexpr record_file_format file_format{{'F', 'R', 'G', 'Q', 'B', 'A', 'N', 'K'}, 1, "frugal QA bank"};
    static constexpr std::size_t answer_unit = [] {
        if constexpr (std::is_trivially_copyable_v<Answer>) {
            return sizeof(Answer);
        } else if constexpr (requires { typename Answer::value_type; }) {
            return sizeof(typename Answer::value_type);
        } else {
            return std::size_t{0};
        }
    }();
    [[nodiscard]] std::size_t minimum_record_bytes() const noexcept { return 8 + 1 + 8 + sizeof(float) * (dim() + 1); }
    template <class T>
    static void append(std::string& s, T v) {
        s.append(reinterpret_cast<const char*>(&v), sizeof(T));
    }
    template <class T>
    static void append_bytes(std::string& s, const T* p, std::size_t n) {
        append(s, static_cast<std::uint64_t>(n));
        if (n > 0) s.append(reinterpret_cast<const char*>(p), n * sizeof(T));
    }
    template <class T>
    static T get(std::string_view s, std::size_t off) noexcept {
        T v;
        std::memcpy(&v, s.data() + off, sizeof(T));
        return v;
    }

    // Appends entry `e`: query, answer flag and answer, chunk ids, refresh floor, unit embedding.
    void append_entry(std::string& out, const entry_type& e) const {
        append_bytes(out, e.query.data(), e.query.size());
        out.push_back(e.answer ? '\1' : '\0');
        if (e.answer) {
            if constexpr (std::is_trivially_copyable_v<Answer>) {
                append_bytes(out, &*e.answer, 1);
            } else {
                append_bytes(out, e.answer->data(), e.answer->size());
            }
        }
        append_bytes(out, e.chunks.data(), e.chunks.size());
        append(out, e.refresh_floor);
        const auto v = index_.vector(e.slot);
        out.append(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(float));
    }

    // Reads the entry at `at` of `in` (advancing `at`); `fail(why...)` throws. Each length is
    // checked against the bytes left before anything is allocated for it.
    template <class Fail>
    stored_entry read_entry(std::string_view in, std::size_t& at, Fail&& fail) const {
        const std::size_t end = in.size();
        auto take_length = [&](std::size_t unit, const char* what) {
            if (end - at < 8) fail("truncated before a ", what, " length");
            const auto n = get<std::uint64_t>(in, at);
            at += 8;
            if (n > (end - at) / unit) fail(what, " length ", n, " exceeds the ", end - at, " bytes left");
            return static_cast<std::size_t>(n);
        };
        stored_entry s;
        entry_type& e = s.entry;
        const std::size_t qn = take_length(1, "query");
        e.query.assign(in.data() + at, qn);
        at += qn;
        if (end - at < 1) fail("truncated after the query");
        const char has_answer = in[at++];
        if (has_answer != 0 && has_answer != 1) fail("answer flag ", int(has_answer));
        if (has_answer == 1) {
            const std::size_t an = take_length(answer_unit, "answer");
            if constexpr (std::is_trivially_copyable_v<Answer>) {
                if (an != 1) fail(an, " answers");
                Answer a;
                std::memcpy(&a, in.data() + at, sizeof(Answer));
                e.answer = a;
            } else {
                using element = typename Answer::value_type;
                std::vector<element> elements(an);
                if (an > 0) std::memcpy(elements.data(), in.data() + at, an * sizeof(element));
                e.answer = Answer(elements.data(), elements.data() + an);
            }
            at += an * answer_unit;
        }
        const std::size_t cn = take_length(sizeof(ChunkId), "chunk list");
        e.chunks.resize(cn);
        if (cn > 0) std::memcpy(e.chunks.data(), in.data() + at, cn * sizeof(ChunkId));
        at += cn * sizeof(ChunkId);
        if (end - at < sizeof(float) * (dim() + 1)) fail("truncated before the embedding");
        e.refresh_floor = get<float>(in, at);
        at += sizeof(float);
        s.embedding.resize(dim());
        std::memcpy(s.embedding.data(), in.data() + at, dim() * sizeof(float));
        at += dim() * sizeof(float);
        double norm = 0;
        for (float x : s.embedding) {
            if (!std::isfinite(x)) fail("a non-finite embedding");
            norm += static_cast<double>(x) * x;
        }
        if (!(norm > 0)) fail("a zero embedding");
        return s;
    }

    // The embedding dimension, refused by name when no embedding could be that long.
    static std::size_t checked_dim(std::size_t dim) {
        FRUGAL_CHECK(dim > 0 && dim <= max_dim, "semantic_cache: embedding dimension ", dim, " is outside [1, ", max_dim, "]");
        return dim;
    }
    static constexpr std::size_t max_dim = std::size_t(1) << 20;

    semantic_cache(std::size_t capacity, detail::qa_weigher weigher, double tau_query, Index index)
        : entries_(capacity, weigher), index_(std::move(index)), unit_(checked_dim(index_.dim())) {
        set_tau(tau_query);
        // A replaced entry (set_answer) stays, with its slot and text; at destruction the
        // index and the text map go with the bank.
        entries_.set_eviction_callback([this](const entry_id&, entry_type& e, eviction_reason why) {
            if (why != eviction_reason::replaced && why != eviction_reason::destroyed) forget(e);
        });
    }
    // `embedding` as a unit vector in unit_; one of another size, or of no direction (zero,
    // NaN, infinite), is refused naming the call.
    void normalize(std::span<const float> embedding, const char* who) {
        FRUGAL_CHECK(embedding.size() == unit_.size(), "semantic_cache::", who, ": the embedding has ", embedding.size(),
                     " values, the bank's dimension is ", unit_.size());
        retrieve::normalize_into(embedding, unit_);
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

/// A thread-safe QA bank: a `semantic_cache` behind one mutex, whose lookups return copies
/// (the entry may be evicted by another thread as soon as the lock is released). Every call
/// may come from any thread.
/// @code
/// frugal::cache::synchronized_semantic_cache<std::string> bank(1000, 384, 0.9);
/// if (auto hit = bank.lookup(text, embedding); hit && hit->entry.answer) return *hit->entry.answer;
/// bank.insert(text, embedding, reply);
/// @endcode
template <class Answer, class ChunkId = std::uint32_t, class Index = retrieve::flat_similarity_index<>, class Policy = lru_policy>
class synchronized_semantic_cache {
public:
    using bank_type = semantic_cache<Answer, ChunkId, Index, Policy>;
    using entry_id = typename bank_type::entry_id;
    using entry_type = typename bank_type::entry_type;

    /// A lookup result with a copy of the entry.
    struct hit {
        entry_id id;
        entry_type entry;
        float similarity;
        bool exact;
    };

    /// Takes the arguments of any `semantic_cache` constructor.
    template <class... Args>
    explicit synchronized_semantic_cache(Args&&... args) : bank_(std::forward<Args>(args)...) {}

    [[nodiscard]] std::optional<hit> lookup(std::string_view query, std::span<const float> embedding) {
        std::lock_guard lock(mutex_);
        auto h = bank_.lookup(query, embedding);
        if (!h) return std::nullopt;
        return hit{h->id, *h->entry, h->similarity, h->exact};
    }
    std::optional<entry_id> insert(std::string query, std::span<const float> embedding, std::optional<Answer> answer = std::nullopt,
                                   std::vector<ChunkId> chunks = {},
                                   float refresh_floor = std::numeric_limits<float>::infinity()) {
        std::lock_guard lock(mutex_);
        return bank_.insert(std::move(query), embedding, std::move(answer), std::move(chunks), refresh_floor);
    }
    bool set_answer(entry_id id, Answer answer) {
        std::lock_guard lock(mutex_);
        return bank_.set_answer(id, std::move(answer));
    }
    /// A copy of entry `id`, or nullopt when evicted.
    [[nodiscard]] std::optional<entry_type> find(entry_id id) const {
        std::lock_guard lock(mutex_);
        const entry_type* e = bank_.find(id);
        return e == nullptr ? std::nullopt : std::optional<entry_type>(*e);
    }
    bool erase(entry_id id) {
        std::lock_guard lock(mutex_);
        return bank_.erase(id);
    }
    void set_tau(double tau_query) {
        std::lock_guard lock(mutex_);
        bank_.set_tau(tau_query);
    }
    [[nodiscard]] std::size_t size() const {
        std::lock_guard lock(mutex_);
        return bank_.size();
    }
    [[nodiscard]] cache_stats stats() const {
        std::lock_guard lock(mutex_);
        return bank_.stats();
    }
    /// See `semantic_cache::save`; other threads wait while the bank is serialized.
    void save(const std::filesystem::path& path) const {
        std::lock_guard lock(mutex_);
        bank_.save(path);
    }
    /// See `semantic_cache::load`.
    void load(const std::filesystem::path& path) {
        std::lock_guard lock(mutex_);
        bank_.load(path);
    }
    /// Calls `f(bank)` under the lock, for anything the wrapper does not forward.
    template <class F>
    decltype(auto) with_lock(F&& f) {
        std::lock_guard lock(mutex_);
        return std::forward<F>(f)(bank_);
    }

private:
    mutable std::mutex mutex_;
    bank_type bank_;
};

}  // namespace frugal::cache
