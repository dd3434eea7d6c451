#pragma once
/// @file
/// embedding_row_cache: GRATING's embedding-table cache, an LRU of embedding rows read on
/// miss from a row store, and `row_file`, a row store over a binary file.

#include <algorithm>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <span>
#include <vector>

#include "frugal/cache/basic_cache.hpp"
#include "frugal/cache/lru_policy.hpp"
#include "frugal/core/assert.hpp"
#include "frugal/core/checked.hpp"
#include "frugal/core/error.hpp"
#include "frugal/core/matrix_view.hpp"

namespace frugal::cache {

/// A table of float rows that can be read one row at a time (from disk, flash, a remote tier).
/// @code
/// static_assert(frugal::cache::row_store<frugal::cache::row_file>);
/// @endcode
template <class S>
concept row_store = requires(S& s, const S& cs, std::size_t r, std::span<float> out) {
    { cs.rows() } -> std::convertible_to<std::size_t>;
    { cs.cols() } -> std::convertible_to<std::size_t>;
    s.read_row(r, out);
};

/// Rows of a float32 table stored row-major, without header, in a binary file (native byte
/// order), read with one seek and one read per row.
/// @code
/// frugal::cache::row_file table("embeddings.f32", 1024);   // rows = file size / (1024 * 4)
/// @endcode
class row_file {
public:
    row_file(const std::filesystem::path& path, std::size_t cols) : path_(path), in_(path, std::ios::binary), cols_(cols) {
        FRUGAL_CHECK(cols > 0, "row_file: 0 columns");
        const std::size_t row_bytes = checked_mul(cols, sizeof(float), "row_file: bytes of a row");
        if (!in_) FRUGAL_FAIL(frugal::runtime_error, "row_file: cannot open ", path);
        std::error_code ec;
        const auto bytes = std::filesystem::file_size(path, ec);
        if (ec) FRUGAL_FAIL(frugal::runtime_error, "row_file: cannot read the size of ", path, ": ", ec.message());
        if (bytes % row_bytes != 0)
            FRUGAL_FAIL(frugal::runtime_error, "row_file: ", path, " has ", bytes, " bytes, not whole rows of ", cols, " floats");
        rows_ = static_cast<std::size_t>(bytes / row_bytes);
    }
    [[nodiscard]] std::size_t rows() const noexcept { return rows_; }
    [[nodiscard]] std::size_t cols() const noexcept { return cols_; }
    /// Reads row `r` into `out` (cols() floats).
    void read_row(std::size_t r, std::span<float> out) {
        FRUGAL_CHECK_AS(frugal::out_of_range, r < rows_, "row_file: row ", r, " >= rows ", rows_);
        FRUGAL_CHECK(out.size() == cols_, "row_file: buffer of ", out.size(), " floats for rows of ", cols_);
        in_.seekg(static_cast<std::streamoff>(r * cols_ * sizeof(float)));
        in_.read(reinterpret_cast<char*>(out.data()), static_cast<std::streamsize>(cols_ * sizeof(float)));
        if (!in_) FRUGAL_FAIL(frugal::runtime_error, "row_file: reading row ", r, " of ", path_, " failed");
    }

private:
    std::filesystem::path path_;
    std::ifstream in_;
    std::size_t cols_, rows_ = 0;
};

static_assert(row_store<row_file>);

/// GRATING's embedding table caching (section 4.4): only the rows of recently seen tokens
/// stay in memory, in an LRU of `capacity` rows backed by one preallocated arena; a miss
/// reads the row from the store. Token activation is sparse (6.75% of a 151k vocabulary in
/// the paper), so a small cache replaces the whole table.
/// @code
/// frugal::cache::embedding_row_cache cache(frugal::cache::row_file("embed.f32", 1024), 4096);
/// cache.gather(tokens, hidden);   // hidden: tokens.size() x 1024
/// @endcode
template <row_store Store>
class embedding_row_cache {
public:
    embedding_row_cache(Store store, std::size_t capacity)
        : store_(std::move(store)), cols_(store_.cols()),
          arena_(checked_mul(checked_add(capacity, std::size_t{1}, "embedding_row_cache: capacity + 1 slots"), cols_,
                             "embedding_row_cache: floats of the arena")),
          rows_(capacity) {
        // One slot more than the capacity: a miss reads into the spare slot, then the put
        // evicts the LRU row, whose slot becomes the next spare.
        free_.reserve(capacity + 1);
        for (std::size_t s = capacity + 1; s-- > 0;) free_.push_back(s);
        rows_.set_eviction_callback([this](const std::size_t&, std::size_t& slot, eviction_reason why) {
            if (why != eviction_reason::destroyed) free_.push_back(slot);  // free_ goes first at destruction
        });
    }
    embedding_row_cache(const embedding_row_cache&) = delete;
    embedding_row_cache& operator=(const embedding_row_cache&) = delete;

    /// Row `r` of the table; valid until the next call that may miss.
    [[nodiscard]] std::span<const float> row(std::size_t r) {
        FRUGAL_CHECK_AS(frugal::out_of_range, r < store_.rows(), "embedding_row_cache: row ", r, " >= rows ", store_.rows());
        if (const std::size_t* slot = rows_.get(r)) return slot_span(*slot);
        FRUGAL_ASSERT(!free_.empty());
        const std::size_t slot = free_.back();
        free_.pop_back();
        try {
            store_.read_row(r, slot_span(slot));
        } catch (...) {
            free_.push_back(slot);  // a failed read keeps the slot (the store may have shrunk)
            throw;
        }
        ++reads_;
        rows_.put(r, slot);
        return slot_span(slot);
    }

    /// Copies the rows of `tokens` into the rows of `out` (tokens.size() x cols()): the
    /// embedding layer's lookup.
    template <std::integral Token>
    void gather(std::span<const Token> tokens, matrix_view<float> out) {
        FRUGAL_CHECK(out.rows() == tokens.size() && out.cols() == cols_, "embedding_row_cache::gather: output ", out.rows(), "x",
                     out.cols(), " for ", tokens.size(), " tokens of ", cols_, " columns");
        for (std::size_t i = 0; i < tokens.size(); ++i) {
            FRUGAL_CHECK_AS(frugal::out_of_range, tokens[i] >= 0, "embedding_row_cache: negative token ", tokens[i]);
            const auto src = row(static_cast<std::size_t>(tokens[i]));
            std::copy(src.begin(), src.end(), out.row(i).begin());
        }
    }

    [[nodiscard]] std::size_t cols() const noexcept { return cols_; }
    /// Rows read from the store (misses).
    [[nodiscard]] std::uint64_t reads() const noexcept { return reads_; }
    [[nodiscard]] const cache_stats& stats() const noexcept { return rows_.stats(); }
    /// Bytes of the resident arena ((capacity + 1) x cols floats).
    [[nodiscard]] std::size_t arena_bytes() const noexcept { return arena_.size() * sizeof(float); }

private:
    std::span<float> slot_span(std::size_t slot) noexcept { return std::span<float>(arena_).subspan(slot * cols_, cols_); }

    Store store_;
    std::size_t cols_;
    std::vector<float> arena_;
    lru_cache<std::size_t, std::size_t> rows_;
    std::vector<std::size_t> free_;
    std::uint64_t reads_ = 0;
};

}  // namespace frugal::cache
