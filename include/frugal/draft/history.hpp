#pragma once
/// @file
/// The live history of past outputs (CoordGen 2.2's history similarity, SuffixDecoding's
/// global tree): finished outputs are added and old ones evicted while requests keep
/// drafting from immutable snapshots; saved to and loaded from a flat, versioned,
/// checksummed file that is read through a memory map.

#include <algorithm>
#include <atomic>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <memory>
#include <mutex>
#include <span>
#include <stop_token>
#include <string>
#include <system_error>
#include <type_traits>
#include <utility>
#include <vector>

#include <boost/interprocess/file_mapping.hpp>
#include <boost/interprocess/mapped_region.hpp>

#include "frugal/core/checked.hpp"
#include "frugal/core/error.hpp"
#include "frugal/core/record_file.hpp"
#include "frugal/draft/suffix_automaton.hpp"

namespace frugal::draft {

/// One immutable generation of the history: a suffix automaton over whole documents
/// (oldest first), and its lineage. A young generation is a copy of the previous young
/// one with documents appended, so the generations of one lineage only grow: a
/// `suffix_matcher` on any of them stays valid on a later one (`suffix_matcher::rebind`).
template <std::integral Token>
struct history_generation {
    suffix_automaton<Token> automaton;
    std::uint64_t lineage = 0;
};

template <std::integral Token>
class live_history;

/// A consistent, immutable view of the history: the old generation (the bulk of the
/// documents) and the young one (the newest). Holding a snapshot keeps both alive, so a
/// request drafting from it is never invalidated by later adds or evictions.
/// @code
/// auto snap = history.snapshot();
/// snap->for_each_document([&](std::span<const int> doc) { total += doc.size(); });
/// @endcode
template <std::integral Token>
class history_snapshot {
public:
    history_snapshot(std::shared_ptr<const history_generation<Token>> old_generation,
                     std::shared_ptr<const history_generation<Token>> young_generation, std::uint64_t version)
        : old_(std::move(old_generation)), young_(std::move(young_generation)), version_(version) {}

    /// The old generation: every document but the newest few.
    [[nodiscard]] const history_generation<Token>& old_generation() const noexcept { return *old_; }
    /// The young generation: the documents added since the old one was last rebuilt.
    [[nodiscard]] const history_generation<Token>& young_generation() const noexcept { return *young_; }
    /// Increases with every publication (1 for the first).
    [[nodiscard]] std::uint64_t version() const noexcept { return version_; }
    /// Tokens held in both generations.
    [[nodiscard]] std::size_t size() const noexcept { return old_->automaton.size() + young_->automaton.size(); }
    /// Documents held in both generations.
    [[nodiscard]] std::size_t documents() const noexcept { return count(*old_) + count(*young_); }
    /// Calls `fn(std::span<const Token>)` for every document, oldest first.
    template <class Fn>
    void for_each_document(Fn&& fn) const {
        for (const auto* g : {old_.get(), young_.get()}) {
            const auto text = g->automaton.text();
            const auto starts = g->automaton.document_starts();
            for (std::size_t d = 0; d < count(*g); ++d) {
                const std::size_t stop = d + 1 < starts.size() ? starts[d + 1] : text.size();
                fn(text.subspan(starts[d], stop - starts[d]));
            }
        }
    }

private:
    friend class live_history<Token>;
    static std::size_t count(const history_generation<Token>& g) noexcept {
        return g.automaton.size() == 0 ? 0 : g.automaton.document_starts().size();
    }
    std::shared_ptr<const history_generation<Token>> old_, young_;
    std::uint64_t version_;
};

/// The history of past outputs that requests draft from while it changes.
///
/// Design. Readers never see the history change under them: they draft from an immutable
/// `history_snapshot` (two generations of suffix automata, shared by pointer), and the
/// writer publishes a new snapshot after building it off to the side. `add` (any thread)
/// only queues a copy of the document; `publish` (one writer thread: a loop the caller runs,
/// `publish_loop`, or a direct call) applies the queued documents:
/// - while the young generation has room, a new young generation is made as a copy of the
///   current one (a copy of the state array) with the documents appended, so readers' match
///   states carry over to it;
/// - otherwise the old generation is rebuilt from the newest documents of both generations
///   and the queue, and the young one starts empty.
/// A request takes the newest snapshot between its steps (one atomic load when nothing
/// changed); generations it drops are freed by the writer, not on the request's thread.
///
/// Bound and eviction order. At most `max_tokens` tokens are held. A batch of documents
/// goes into the young generation if that keeps it within `young_tokens` and the total
/// within `max_tokens`; otherwise the rebuild keeps the newest documents (queued ones
/// included) that fit in `max_tokens - young_tokens` and drops the rest, oldest first
/// (FIFO by the order documents were added). A document longer than that keeps its last
/// `max_tokens - young_tokens` tokens. The rebuild is linear in the tokens kept and comes
/// once per about `young_tokens` added tokens; a young generation costs a copy of at most
/// `young_tokens` tokens' states.
///
/// File format (version 1, native byte order, checked on load): the 8-byte magic
/// `FRGLHIST`, then u32 version, u32 byte-order tag 0x01020304, u32 sizeof(Token), u32
/// signedness, u64 max_tokens, u64 document count, u64 token count, the document start
/// offsets (u64 each), the tokens (raw Token values), and a 64-bit FNV-1a checksum of
/// everything before it. `save` writes the published documents crash-safely (a temporary
/// file, fsync, rename, folder fsync: a crash leaves the old file or the new one). Loading
/// maps the file read-only (Boost.Interprocess), validates it in place and builds the old
/// generation straight from the mapped tokens; a missing, truncated or corrupted file, or
/// one written for another token type, throws `frugal::runtime_error` naming the problem.
/// @code
/// frugal::draft::live_history<int> history(1 << 20);         // at most 1M tokens
/// std::jthread writer([&](std::stop_token stop) { history.publish_loop(stop); });
/// history.add(finished_output);                             // from any request's thread
/// frugal::draft::drafter<int> d({}, &history);              // drafts from the newest snapshot
/// @endcode
template <std::integral Token>
class live_history {
public:
    /// An empty history holding at most `max_tokens` tokens, of which the young generation
    /// holds at most `young_tokens` (0: max_tokens / 8, at least 1).
    explicit live_history(std::size_t max_tokens, std::size_t young_tokens = 0)
        : max_tokens_(max_tokens), young_tokens_(young_tokens != 0 ? young_tokens : std::max<std::size_t>(1, max_tokens / 8)) {
        FRUGAL_CHECK(max_tokens >= 2 && max_tokens <= suffix_automaton<Token>::max_tokens,
                     "live_history: max_tokens = ", max_tokens, " must be in [2, ", suffix_automaton<Token>::max_tokens,
                     "]");
        FRUGAL_CHECK(young_tokens_ < max_tokens_, "live_history: young_tokens = ", young_tokens_,
                     " must be below max_tokens = ", max_tokens_);
        install(make_generation(), make_generation());
    }

    /// Loads a history written by `save` (format above) through a read-only memory map.
    /// @code
    /// frugal::draft::live_history<int> history(std::filesystem::path("history.bin"));
    /// @endcode
    explicit live_history(const std::filesystem::path& file, std::size_t young_tokens = 0)
        : live_history(mapped_file(file), young_tokens) {}

    live_history(const live_history&) = delete;
    live_history& operator=(const live_history&) = delete;

    ~live_history() {
        (void)take_queue();
        std::lock_guard lock(reclaim_->mutex);
        reclaim_->open = false;
        reclaim_->dead.clear();
    }

    /// Queues a finished output as one document (empty ones are ignored). Thread-safe,
    /// lock-free and never waits on a build: it copies the document and links it into the
    /// queue; the document is visible to requests once published.
    /// @code
    /// history.add(output_tokens);
    /// @endcode
    void add(std::span<const Token> document) {
        if (document.empty()) return;
        auto* node = new queued{std::vector<Token>(document.begin(), document.end()), nullptr};
        node->next = queue_.load(std::memory_order_relaxed);
        while (!queue_.compare_exchange_weak(node->next, node, std::memory_order_release, std::memory_order_relaxed)) {
        }
        queued_.fetch_add(1, std::memory_order_relaxed);
        added_.fetch_add(1, std::memory_order_release);
        added_.notify_one();
    }

    /// Applies the queued documents and publishes the new snapshot; returns false when
    /// nothing was queued. Calls are serialized (one publishes at a time); readers keep
    /// drafting from the previous snapshot meanwhile.
    /// @code
    /// history.add(output); history.publish();   // single-threaded use: visible at once
    /// @endcode
    bool publish() {
        std::lock_guard publishing(publish_mutex_);
        std::vector<std::vector<Token>> docs = take_queue();
        reclaim();
        if (docs.empty()) return false;
        const auto current = snapshot();
        const std::size_t old_cap = max_tokens_ - young_tokens_;
        std::size_t incoming = 0;
        for (auto& d : docs) {
            if (d.size() > old_cap) d.erase(d.begin(), d.end() - static_cast<std::ptrdiff_t>(old_cap));
            incoming += d.size();
        }
        const auto& young = current->young_generation().automaton;
        if (young.size() + incoming <= young_tokens_ && current->size() + incoming <= max_tokens_) {
            auto next = std::make_unique<history_generation<Token>>(current->young_generation());
            for (const auto& d : docs) {
                next->automaton.begin_document();
                next->automaton.append(std::span<const Token>(d));
            }
            install(current->old_, share(std::move(next)));
            return true;
        }
        // Rebuild: the newest documents that fit in old_cap, queued ones first.
        std::vector<std::span<const Token>> kept;  // newest first
        std::size_t tokens = 0;
        bool full = false;
        auto keep = [&](std::span<const Token> d) {
            if (full || tokens + d.size() > old_cap) {
                full = true;
                return;
            }
            kept.push_back(d);
            tokens += d.size();
        };
        for (auto it = docs.rbegin(); it != docs.rend(); ++it) keep(*it);
        std::vector<std::span<const Token>> older;
        current->for_each_document([&](std::span<const Token> d) { older.push_back(d); });
        for (auto it = older.rbegin(); it != older.rend(); ++it) keep(*it);
        auto rebuilt = make_generation();
        rebuilt->automaton.reserve(tokens);
        for (auto it = kept.rbegin(); it != kept.rend(); ++it) {
            rebuilt->automaton.begin_document();
            rebuilt->automaton.append(*it);
        }
        install(share(std::move(rebuilt)), share(make_generation()));
        return true;
    }

    /// Publishes queued documents as they arrive until `stop` is requested (then publishes
    /// what is left and returns): the body of the writer thread the caller owns.
    /// @code
    /// std::jthread writer([&](std::stop_token stop) { history.publish_loop(stop); });
    /// @endcode
    void publish_loop(std::stop_token stop) {
        const std::stop_callback wake(stop, [this] {
            added_.fetch_add(1, std::memory_order_release);
            added_.notify_all();
        });
        while (true) {
            const std::uint64_t seen = added_.load(std::memory_order_acquire);
            publish();
            if (stop.stop_requested()) break;
            // Returns at once if anything came (or a stop was requested) since `seen`.
            added_.wait(seen, std::memory_order_acquire);
        }
        publish();
    }

    /// The newest published snapshot (thread-safe; a pointer copy under a short lock).
    [[nodiscard]] std::shared_ptr<const history_snapshot<Token>> snapshot() const {
        std::lock_guard lock(snapshot_mutex_);
        return current_;
    }
    /// The version of the newest snapshot: compare with `history_snapshot::version()` to
    /// see whether a newer one exists without taking the lock.
    [[nodiscard]] std::uint64_t version() const noexcept { return version_.load(std::memory_order_acquire); }

    /// The bound on held tokens.
    [[nodiscard]] std::size_t max_tokens() const noexcept { return max_tokens_; }
    /// The young generation's bound.
    [[nodiscard]] std::size_t young_tokens() const noexcept { return young_tokens_; }
    /// Documents queued and not yet published.
    [[nodiscard]] std::size_t pending() const noexcept { return queued_.load(std::memory_order_relaxed); }

    /// Writes the published documents to `path` (format above) crash-safely; I/O failures
    /// throw frugal::runtime_error and leave `path` as it was.
    /// @code
    /// history.publish(); history.save("history.bin");
    /// @endcode
    void save(const std::filesystem::path& path) const {
        const auto snap = snapshot();
        record_file_writer out(file_format);
        out.append(byte_order);
        out.append(static_cast<std::uint32_t>(sizeof(Token)));
        out.append(std::is_signed_v<Token> ? 1u : 0u);
        out.append(static_cast<std::uint64_t>(max_tokens_));
        out.append(static_cast<std::uint64_t>(snap->documents()));
        out.append(static_cast<std::uint64_t>(snap->size()));
        std::uint64_t start = 0;
        snap->for_each_document([&](std::span<const Token> d) {
            out.append(start);
            start += d.size();
        });
        snap->for_each_document([&](std::span<const Token> d) { out.append_bytes(d.data(), d.size_bytes()); });
        std::move(out).save(path);
    }

private:
    static constexpr record_file_format file_format{{'F', 'R', 'G', 'L', 'H', 'I', 'S', 'T'}, 1, "frugal history"};
    static constexpr std::uint32_t byte_order = 0x01020304;
    static constexpr std::size_t header_bytes = 48;

    // Generations a reader released last are handed here by their deleter and freed by the
    // writer (publish), so a request's thread never pays for freeing a large automaton.
    struct reclaimer {
        std::mutex mutex;
        std::vector<std::unique_ptr<const history_generation<Token>>> dead;
        bool open = true;
    };

    std::unique_ptr<history_generation<Token>> make_generation() {
        auto g = std::make_unique<history_generation<Token>>();
        g->lineage = ++lineages_;
        return g;
    }
    std::shared_ptr<const history_generation<Token>> share(std::unique_ptr<history_generation<Token>> g) {
        return std::shared_ptr<const history_generation<Token>>(
            g.release(), [r = reclaim_](const history_generation<Token>* p) {
                std::unique_ptr<const history_generation<Token>> owned(p);
                std::lock_guard lock(r->mutex);
                if (!r->open) return;  // the history is gone: free it here
                try {
                    r->dead.push_back(std::move(owned));
                } catch (...) {  // no room to defer: free it here
                }
            });
    }
    void install(std::unique_ptr<history_generation<Token>> old_generation,
                 std::unique_ptr<history_generation<Token>> young_generation) {
        install(share(std::move(old_generation)), share(std::move(young_generation)));
    }
    void install(std::shared_ptr<const history_generation<Token>> old_generation,
                 std::shared_ptr<const history_generation<Token>> young_generation) {
        const std::uint64_t v = version_.load(std::memory_order_relaxed) + 1;
        auto snap = std::make_shared<const history_snapshot<Token>>(std::move(old_generation),
                                                                   std::move(young_generation), v);
        {
            std::lock_guard lock(snapshot_mutex_);
            current_.swap(snap);
        }
        version_.store(v, std::memory_order_release);
        // `snap` (the previous snapshot) is released here, on the writer's thread.
    }
    // Every queued document, oldest first.
    std::vector<std::vector<Token>> take_queue() {
        std::vector<std::vector<Token>> docs;
        for (queued* n = queue_.exchange(nullptr, std::memory_order_acquire); n != nullptr;) {
            docs.push_back(std::move(n->tokens));
            queued* next = n->next;
            delete n;
            n = next;
            queued_.fetch_sub(1, std::memory_order_relaxed);
        }
        std::reverse(docs.begin(), docs.end());
        return docs;
    }
    void reclaim() {
        std::vector<std::unique_ptr<const history_generation<Token>>> dead;
        {
            std::lock_guard lock(reclaim_->mutex);
            dead.swap(reclaim_->dead);
        }
    }

    // A validated, mapped history file.
    struct mapped_file {
        boost::interprocess::mapped_region region;
        std::span<const unsigned char> bytes;
        std::uint64_t max_tokens = 0, documents = 0, tokens = 0;

        explicit mapped_file(const std::filesystem::path& path) {
            const std::string name = path.string();
            std::error_code ec;
            const std::uintmax_t file_size = std::filesystem::file_size(path, ec);
            if (ec) FRUGAL_FAIL(frugal::runtime_error, "history: cannot open ", name, ": ", ec.message());
            if (file_size == 0)
                FRUGAL_FAIL(frugal::runtime_error, "history: ", name, " is truncated: the file is empty");
            try {
                const boost::interprocess::file_mapping file(name.c_str(), boost::interprocess::read_only);
                region = boost::interprocess::mapped_region(file, boost::interprocess::read_only);
            } catch (const boost::interprocess::interprocess_exception& e) {
                FRUGAL_FAIL(frugal::runtime_error, "history: cannot map ", name, ": ", e.what());
            }
            bytes = {static_cast<const unsigned char*>(region.get_address()), region.get_size()};
            const record_file_reader in(std::as_bytes(bytes), file_format, "history", path);
            std::size_t at = 0;
            if (in.read<std::uint32_t>(at, "the byte order") != byte_order)
                in.fail("was written with another byte order");
            const auto token_bytes = in.read<std::uint32_t>(at, "the token size");
            const auto token_signed = in.read<std::uint32_t>(at, "the token signedness");
            if (token_bytes != sizeof(Token) || token_signed != (std::is_signed_v<Token> ? 1u : 0u))
                in.fail("holds ", std::uint64_t{token_bytes} * 8, "-bit ", token_signed ? "signed" : "unsigned",
                        " tokens, not this token type");
            max_tokens = in.read<std::uint64_t>(at, "the token bound");
            documents = in.read<std::uint64_t>(at, "the document count");
            tokens = in.read<std::uint64_t>(at, "the token count");
            if (max_tokens < 2 || max_tokens > suffix_automaton<Token>::max_tokens || tokens > max_tokens ||
                documents > tokens || (tokens > 0 && documents == 0))
                in.fail("is corrupt: ", documents, " documents, ", tokens, " tokens, bound ", max_tokens);
            // Bounded above (max_tokens < 2^32), so the size cannot wrap.
            const std::uint64_t need = header_bytes + documents * 8 + tokens * sizeof(Token) + 8;
            if (bytes.size() != need)
                in.fail(bytes.size() < need ? "is truncated: " : "is corrupt: ", bytes.size(), " bytes, expected ", need);
            in.check_checksum();
            auto fail = [&](const auto&... why) { in.fail(why...); };
            for (std::uint64_t d = 0; d < documents; ++d)
                if (start(d) >= start(d + 1) || (d == 0 && start(0) != 0))
                    fail("is corrupt: document ", d, " spans [", start(d), ", ", start(d + 1), ")");
        }
        [[nodiscard]] std::uint64_t start(std::uint64_t d) const {
            if (d == documents) return tokens;
            std::uint64_t v = 0;
            std::memcpy(&v, bytes.data() + header_bytes + d * 8, 8);
            return v;
        }
        // The tokens start at 48 + 8 * documents bytes into a page-aligned mapping, so they
        // are aligned for any token of at most 8 bytes.
        [[nodiscard]] std::span<const Token> text() const {
            static_assert(sizeof(Token) <= 8);
            return {reinterpret_cast<const Token*>(bytes.data() + header_bytes + documents * 8), tokens};
        }
    };

    live_history(const mapped_file& f, std::size_t young_tokens) : live_history(f.max_tokens, young_tokens) {
        auto old_generation = make_generation();
        old_generation->automaton.reserve(f.tokens);
        const auto text = f.text();
        for (std::uint64_t d = 0; d < f.documents; ++d) {
            old_generation->automaton.begin_document();
            old_generation->automaton.append(text.subspan(f.start(d), f.start(d + 1) - f.start(d)));
        }
        install(std::move(old_generation), make_generation());
    }

    std::size_t max_tokens_, young_tokens_;
    std::uint64_t lineages_ = 0;  // writer only
    std::shared_ptr<reclaimer> reclaim_ = std::make_shared<reclaimer>();
    // The queue of added documents: a lock-free stack (newest first) that publish takes whole.
    struct queued {
        std::vector<Token> tokens;
        queued* next;
    };
    std::atomic<queued*> queue_{nullptr};
    std::atomic<std::size_t> queued_{0};
    std::atomic<std::uint64_t> added_{0};  // publish_loop waits on it
    std::mutex publish_mutex_;
    mutable std::mutex snapshot_mutex_;
    std::shared_ptr<const history_snapshot<Token>> current_;
    std::atomic<std::uint64_t> version_{0};
};

}  // namespace frugal::draft
