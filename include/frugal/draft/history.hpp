#pragma once
/// @file
/// The persistent history of past outputs (CoordGen's history similarity): a bounded
/// suffix automaton over whole documents, saved to and loaded from a flat versioned file.

#include <algorithm>
#include <bit>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <system_error>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include <boost/interprocess/file_mapping.hpp>
#include <boost/interprocess/mapped_region.hpp>

#include "frugal/core/error.hpp"
#include "frugal/core/hash.hpp"
#include "frugal/draft/suffix_automaton.hpp"

namespace frugal::draft {

/// Past outputs as documents of a suffix automaton, bounded to `max_tokens` tokens.
///
/// Eviction rule: documents leave oldest first (FIFO). When adding a document would
/// exceed the bound, the oldest documents are dropped until the kept ones fill at most
/// three quarters of it, and the automaton is rebuilt from them; the rebuild is linear in
/// the kept tokens and happens at most once per bound/4 added tokens, so adding stays
/// amortized O(1) per token. A document longer than the bound keeps only its last
/// `max_tokens` tokens.
///
/// File format (version 1, native byte order, checked on load): the 8-byte magic
/// `FRGLHIST`, then u32 version, u32 byte-order tag 0x01020304, u32 sizeof(Token), u32
/// signedness, u64 max_tokens, u64 document count, u64 token count, the document start
/// offsets (u64 each), the tokens (raw Token values), and a 64-bit FNV-1a checksum of
/// everything before it. Only the tokens are stored (4 bytes a token for int32 against
/// ~64 for the automaton); `load` maps the file read-only (Boost.Interprocess), validates
/// it in place and rebuilds the automaton from the mapped tokens in linear time, without
/// copying the file. A missing, truncated or corrupted file throws `frugal::runtime_error`
/// naming the problem.
/// @code
/// frugal::draft::history_store<int> history(1 << 20);
/// history.add(response);                        // after each request
/// history.save("history.bin");
/// auto restored = frugal::draft::history_store<int>::load("history.bin");
/// frugal::draft::drafter<int> d({}, &restored.automaton());
/// @endcode
template <std::integral Token>
class history_store {
public:
    /// An empty history holding at most `max_tokens` tokens.
    explicit history_store(std::size_t max_tokens) : max_tokens_(max_tokens) {
        FRUGAL_CHECK(max_tokens >= 1 && max_tokens <= suffix_automaton<Token>::max_tokens,
                     "history_store: max_tokens = ", max_tokens, " must be in [1, ",
                     suffix_automaton<Token>::max_tokens, "]");
    }

    /// Adds one finished output as a document, evicting the oldest documents when needed.
    /// Call it between requests: it may rebuild the automaton a drafter is matching.
    /// @code
    /// history.add(generated_tokens);
    /// @endcode
    void add(std::span<const Token> document) {
        if (document.empty()) return;
        if (document.size() > max_tokens_) document = document.last(max_tokens_);
        if (sam_.size() + document.size() > max_tokens_) evict(document.size());
        sam_.begin_document();
        sam_.append(document);
    }

    /// The automaton to draft from (the same object for the store's lifetime; `add` may
    /// rebuild it, so start drafters' requests after adding).
    [[nodiscard]] const suffix_automaton<Token>& automaton() const noexcept { return sam_; }
    /// Tokens held.
    [[nodiscard]] std::size_t size() const noexcept { return sam_.size(); }
    /// The bound.
    [[nodiscard]] std::size_t max_tokens() const noexcept { return max_tokens_; }
    /// Number of documents held.
    [[nodiscard]] std::size_t documents() const noexcept {
        return sam_.size() == 0 ? 0 : sam_.document_starts().size();
    }

    /// Writes the history to `path` (format above); I/O failures throw frugal::runtime_error.
    /// @code
    /// history.save("history.bin");
    /// @endcode
    void save(const std::filesystem::path& path) const {
        std::vector<unsigned char> bytes;
        put(bytes, magic, sizeof magic);
        const std::uint32_t head[4] = {version, byte_order, sizeof(Token), std::is_signed_v<Token> ? 1u : 0u};
        put(bytes, head, sizeof head);
        const auto starts = sam_.document_starts();
        const std::uint64_t sizes[3] = {max_tokens_, documents(), sam_.size()};
        put(bytes, sizes, sizeof sizes);
        for (std::size_t d = 0; d < documents(); ++d) {
            const std::uint64_t s = starts[d];
            put(bytes, &s, sizeof s);
        }
        put(bytes, sam_.text().data(), sam_.text().size_bytes());
        const std::uint64_t sum = frugal::fnv1a(bytes);
        put(bytes, &sum, sizeof sum);
        std::ofstream out(path, std::ios::binary | std::ios::trunc);
        if (!out) FRUGAL_FAIL(frugal::runtime_error, "history: cannot open ", path.string(), " for writing");
        out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
        if (!out) FRUGAL_FAIL(frugal::runtime_error, "history: write to ", path.string(), " failed");
    }

    /// Reads a history written by `save` through a read-only memory map; a missing,
    /// truncated or corrupted file, or one written for another token type, throws
    /// frugal::runtime_error.
    /// @code
    /// auto history = frugal::draft::history_store<int>::load("history.bin");
    /// @endcode
    [[nodiscard]] static history_store load(const std::filesystem::path& path) {
        const std::string name = path.string();
        std::error_code ec;
        const std::uintmax_t file_size = std::filesystem::file_size(path, ec);
        if (ec) FRUGAL_FAIL(frugal::runtime_error, "history: cannot open ", name, ": ", ec.message());
        if (file_size == 0)
            FRUGAL_FAIL(frugal::runtime_error, "history file ", name, " is truncated: the file is empty");
        // The file is read in place through a read-only mapping: validated there, and the
        // automaton is rebuilt straight from the mapped tokens (no copy of the file).
        boost::interprocess::mapped_region region;
        try {
            const boost::interprocess::file_mapping file(name.c_str(), boost::interprocess::read_only);
            region = boost::interprocess::mapped_region(file, boost::interprocess::read_only);
        } catch (const boost::interprocess::interprocess_exception& e) {
            FRUGAL_FAIL(frugal::runtime_error, "history: cannot map ", name, ": ", e.what());
        }
        const std::span<const unsigned char> bytes(static_cast<const unsigned char*>(region.get_address()),
                                                   region.get_size());
        std::size_t at = 0;
        auto take = [&](void* dst, std::size_t n, const char* what) {
            if (bytes.size() - at < n)
                FRUGAL_FAIL(frugal::runtime_error, "history file ", name, " is truncated: ", what, " needs ", n,
                            " bytes at offset ", at, ", the file has ", bytes.size());
            std::memcpy(dst, bytes.data() + at, n);
            at += n;
        };
        char m[sizeof magic];
        take(m, sizeof m, "the magic");
        if (std::memcmp(m, magic, sizeof magic) != 0)
            FRUGAL_FAIL(frugal::runtime_error, "history file ", name, " is not a frugal history (bad magic)");
        std::uint32_t head[4];
        take(head, sizeof head, "the header");
        if (head[0] != version)
            FRUGAL_FAIL(frugal::runtime_error, "history file ", name, " has version ", head[0], ", expected ", version);
        if (head[1] != byte_order)
            FRUGAL_FAIL(frugal::runtime_error, "history file ", name, " was written with another byte order");
        if (head[2] != sizeof(Token) || head[3] != (std::is_signed_v<Token> ? 1u : 0u))
            FRUGAL_FAIL(frugal::runtime_error, "history file ", name, " holds ", head[2] * 8, "-bit ",
                        head[3] ? "signed" : "unsigned", " tokens, not this token type");
        std::uint64_t sizes[3];
        take(sizes, sizeof sizes, "the sizes");
        const std::uint64_t max_tokens = sizes[0], docs = sizes[1], tokens = sizes[2];
        if (max_tokens < 1 || max_tokens > suffix_automaton<Token>::max_tokens || tokens > max_tokens ||
            docs > tokens || (tokens > 0 && docs == 0))
            FRUGAL_FAIL(frugal::runtime_error, "history file ", name, " is corrupt: ", docs, " documents, ", tokens,
                        " tokens, bound ", max_tokens);
        const std::uint64_t need = at + docs * 8 + tokens * sizeof(Token) + 8;
        if (bytes.size() != need)
            FRUGAL_FAIL(frugal::runtime_error, "history file ", name, " is ",
                        bytes.size() < need ? "truncated" : "corrupt", ": ", bytes.size(), " bytes, expected ", need);
        std::uint64_t stored = 0;
        std::memcpy(&stored, bytes.data() + bytes.size() - 8, 8);
        if (stored != frugal::fnv1a(bytes.first(bytes.size() - 8)))
            FRUGAL_FAIL(frugal::runtime_error, "history file ", name, " is corrupt: checksum mismatch");
        const std::size_t starts_at = at, tokens_at = at + docs * 8;
        auto start = [&](std::uint64_t d) {
            if (d == docs) return tokens;
            std::uint64_t v = 0;
            std::memcpy(&v, bytes.data() + starts_at + d * 8, 8);
            return v;
        };
        for (std::uint64_t d = 0; d < docs; ++d)
            if (start(d) >= start(d + 1) || start(d + 1) > tokens || (d == 0 && start(0) != 0))
                FRUGAL_FAIL(frugal::runtime_error, "history file ", name, " is corrupt: document ", d,
                            " spans [", start(d), ", ", start(d + 1), ")");
        // The tokens start at 48 + 8 * documents bytes into a page-aligned mapping, so they
        // are aligned for any token of at most 8 bytes.
        static_assert(sizeof(Token) <= 8);
        const std::span<const Token> text(reinterpret_cast<const Token*>(bytes.data() + tokens_at), tokens);
        history_store h(max_tokens);
        h.sam_.reserve(tokens);
        for (std::uint64_t d = 0; d < docs; ++d) {
            h.sam_.begin_document();
            h.sam_.append(text.subspan(start(d), start(d + 1) - start(d)));
        }
        return h;
    }

private:
    static constexpr char magic[8] = {'F', 'R', 'G', 'L', 'H', 'I', 'S', 'T'};
    static constexpr std::uint32_t version = 1;
    static constexpr std::uint32_t byte_order = 0x01020304;

    static void put(std::vector<unsigned char>& out, const void* src, std::size_t n) {
        const auto* p = static_cast<const unsigned char*>(src);
        out.insert(out.end(), p, p + n);
    }
    // FNV-1a, 64-bit: a few lines, enough to detect corruption (not tampering).

    void evict(std::size_t incoming) {
        const auto starts = sam_.document_starts();
        const auto text = sam_.text();
        const std::size_t target = max_tokens_ - std::min(max_tokens_, incoming);
        const std::size_t keep_at_most = std::min(target, max_tokens_ / 4 * 3);
        std::size_t first = 0;  // first kept document
        while (first < starts.size() && text.size() - starts[first] > keep_at_most) ++first;
        std::vector<std::vector<Token>> kept;
        for (std::size_t d = first; d < starts.size(); ++d) {
            const std::size_t stop = d + 1 < starts.size() ? starts[d + 1] : text.size();
            kept.emplace_back(text.begin() + static_cast<std::ptrdiff_t>(starts[d]),
                              text.begin() + static_cast<std::ptrdiff_t>(stop));
        }
        sam_.clear();
        for (const auto& doc : kept) {
            sam_.begin_document();
            sam_.append(std::span<const Token>(doc));
        }
    }

    std::size_t max_tokens_;
    suffix_automaton<Token> sam_;
};

}  // namespace frugal::draft
