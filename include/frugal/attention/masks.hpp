#pragma once
/// @file
/// attention_mask: none, causal (top-left, bottom-right or offset alignment) and sliding
/// window masks, computed analytically per row and per tile, never stored as a tensor.

#include <cstddef>
#include <cstdint>

#include "frugal/attention/host_device.hpp"
#include "frugal/core/error.hpp"

namespace frugal::attention {

/// Where the causal diagonal of a `q_len x kv_len` score matrix sits.
///
/// `top_left`: query i sees keys j <= i. `bottom_right`: the last query sees the last
/// key (j <= i + kv_len - q_len), the layout of new queries appended after a KV prefix.
/// `offset`: j <= i + offset for an explicit integer offset (e.g. the cached prefix length).
enum class causal_alignment : unsigned char { top_left, bottom_right, offset };

/// How much of a score tile the mask lets through.
enum class tile_coverage : unsigned char { skip, full, partial };

/// An analytic attention mask: which key j each query i may attend to.
///
/// `none()` lets every pair through; `causal()` keeps j <= i + diagonal; a
/// `sliding_window(w)` additionally keeps only the last `w` keys up to the diagonal
/// (i + diagonal - w < j). Rows, tiles and visible-pair counts are computed from the
/// shape, so whole tiles outside the mask are skipped and only tiles the diagonal
/// crosses are masked element by element. Every function is usable on the GPU.
/// @code
/// auto mask = frugal::attention::attention_mask::causal(frugal::attention::causal_alignment::bottom_right);
/// bool seen = mask.visible(/*i=*/3, /*j=*/10, /*q_len=*/4, /*kv_len=*/12);  // true: 10 <= 3 + 8
/// @endcode
struct attention_mask {
    bool is_causal = false;
    causal_alignment alignment = causal_alignment::top_left;
    std::int64_t offset = 0;  ///< the diagonal for causal_alignment::offset
    std::int64_t window = 0;  ///< keys visible per row up to the diagonal; 0 = unlimited

    /// Every query sees every key.
    [[nodiscard]] static constexpr attention_mask none() noexcept { return {}; }

    /// Causal mask with the given alignment; `diagonal_offset` is used by `causal_alignment::offset`.
    [[nodiscard]] static constexpr attention_mask causal(causal_alignment align = causal_alignment::bottom_right,
                                                              std::int64_t diagonal_offset = 0) noexcept {
        return {true, align, diagonal_offset, 0};
    }

    /// Causal mask limited to the `window` most recent keys (Mistral-style sliding window).
    [[nodiscard]] static constexpr attention_mask sliding_window(
        std::int64_t window, causal_alignment align = causal_alignment::bottom_right,
        std::int64_t diagonal_offset = 0) {
        FRUGAL_CHECK(window > 0, "attention_mask::sliding_window: window ", window, " must be positive");
        return {true, align, diagonal_offset, window};
    }

    /// The diagonal d: query i sees keys j <= i + d (causal masks only).
    [[nodiscard]] FRUGAL_HOST_DEVICE constexpr std::int64_t diagonal(std::int64_t q_len,
                                                                     std::int64_t kv_len) const noexcept {
        return alignment == causal_alignment::top_left ? 0
               : alignment == causal_alignment::bottom_right ? kv_len - q_len
                                                             : offset;
    }

    /// First key query `i` (0 <= i < 2^62) sees, clamped to [0, kv_len]. Exact for every
    /// offset and window: a sum that leaves the int64 range saturates, and then lies
    /// outside [0, kv_len] either way.
    [[nodiscard]] FRUGAL_HOST_DEVICE constexpr std::int64_t key_begin(std::int64_t i, std::int64_t q_len,
                                                                      std::int64_t kv_len) const noexcept {
        if (!is_causal || window == 0) return 0;
        return clamp(saturating_add(saturating_add(diagonal(q_len, kv_len), -window), i + 1), kv_len);
    }

    /// One past the last key query `i` sees (clamped to [0, kv_len]); <= key_begin when none.
    [[nodiscard]] FRUGAL_HOST_DEVICE constexpr std::int64_t key_end(std::int64_t i, std::int64_t q_len,
                                                                    std::int64_t kv_len) const noexcept {
        if (!is_causal) return kv_len;
        return clamp(saturating_add(diagonal(q_len, kv_len), i + 1), kv_len);
    }

    /// Whether query `i` may attend to key `j`.
    [[nodiscard]] FRUGAL_HOST_DEVICE constexpr bool visible(std::int64_t i, std::int64_t j, std::int64_t q_len,
                                                            std::int64_t kv_len) const noexcept {
        return j >= key_begin(i, q_len, kv_len) && j < key_end(i, q_len, kv_len);
    }

    /// Coverage of the tile of queries [q0, q1) x keys [k0, k1): both bounds of a row's
    /// visible range grow with the row, so the first and last rows decide.
    [[nodiscard]] FRUGAL_HOST_DEVICE constexpr tile_coverage classify(std::int64_t q0, std::int64_t q1,
                                                                      std::int64_t k0, std::int64_t k1,
                                                                      std::int64_t q_len,
                                                                      std::int64_t kv_len) const noexcept {
        if (q1 <= q0 || k1 <= k0) return tile_coverage::skip;
        const std::int64_t lo_first = key_begin(q0, q_len, kv_len), hi_first = key_end(q0, q_len, kv_len);
        const std::int64_t lo_last = key_begin(q1 - 1, q_len, kv_len), hi_last = key_end(q1 - 1, q_len, kv_len);
        if (hi_last <= k0 || lo_first >= k1) return tile_coverage::skip;
        // Rows whose range is empty inside the tile can sit between first and last only
        // when the window is narrower than the tile; treat that as partial.
        if (lo_last <= k0 && hi_first >= k1) return tile_coverage::full;
        return tile_coverage::partial;
    }

    /// Number of visible (query, key) pairs in a `q_len x kv_len` score matrix.
    [[nodiscard]] constexpr std::uint64_t visible_pairs(std::int64_t q_len, std::int64_t kv_len) const noexcept {
        std::uint64_t total = 0;
        for (std::int64_t i = 0; i < q_len; ++i) {
            const std::int64_t n = key_end(i, q_len, kv_len) - key_begin(i, q_len, kv_len);
            total += n > 0 ? static_cast<std::uint64_t>(n) : 0u;
        }
        return total;
    }

private:
    /// a + b, clamped to the int64 range instead of overflowing.
    [[nodiscard]] FRUGAL_HOST_DEVICE static constexpr std::int64_t saturating_add(std::int64_t a,
                                                                                  std::int64_t b) noexcept {
        constexpr std::int64_t hi = INT64_MAX, lo = INT64_MIN;
        if (b > 0 && a > hi - b) return hi;
        if (b < 0 && a < lo - b) return lo;
        return a + b;
    }
    [[nodiscard]] FRUGAL_HOST_DEVICE static constexpr std::int64_t clamp(std::int64_t x, std::int64_t hi) noexcept {
        return x < 0 ? 0 : (x > hi ? hi : x);
    }
};

}  // namespace frugal::attention
