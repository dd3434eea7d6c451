#pragma once
/// @file
/// GRATING's chunk size for chunked execution (section 4.3): split a layer's batch of
/// tokens into chunks so that one chunk's intermediate tensors fit a memory limit while
/// the layer's compute still uses the hardware and covers the next layer's weight load.

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>

#include "frugal/core/error.hpp"

namespace frugal::schedule {

/// Per-token cost model of one layer: a chunk of c tokens takes
/// max(min_chunk_seconds, per_token_seconds * c) (below saturation the hardware costs the
/// same as a saturating chunk) and holds c * intermediate_bytes_per_token bytes of
/// intermediate tensors.
/// @code
/// frugal::schedule::chunk_cost_model m{.per_token_seconds = 2e-5, .min_chunk_seconds = 4e-4,
///                            .intermediate_bytes_per_token = 1 << 20};
/// @endcode
struct chunk_cost_model {
    double per_token_seconds = 0.0;
    double min_chunk_seconds = 0.0;
    double intermediate_bytes_per_token = 0.0;

    /// Compute time of one chunk of `c` tokens.
    [[nodiscard]] double chunk_seconds(std::size_t c) const noexcept {
        return std::max(min_chunk_seconds, per_token_seconds * static_cast<double>(c));
    }
    /// Compute time of a layer over `tokens` tokens in chunks of `c` (the last one partial).
    [[nodiscard]] double layer_seconds(std::size_t tokens, std::size_t c) const noexcept {
        const std::size_t full = tokens / c, rest = tokens % c;
        return static_cast<double>(full) * chunk_seconds(c) + (rest > 0 ? chunk_seconds(rest) : 0.0);
    }
};

/// The chosen chunk: size, number of chunks, the layer's compute time, its wall time
/// max(compute, next layer's load), and one chunk's intermediate bytes.
struct chunk_plan {
    std::size_t chunk = 0, chunks = 0;
    double layer_compute_seconds = 0.0, layer_seconds = 0.0;
    double intermediate_bytes = 0.0;
};

/// The smallest chunk whose layer wall time max(compute, `next_load_seconds`) is the best
/// any chunk within `memory_limit_bytes` achieves: when the next layer's load dominates,
/// chunks shrink until the compute just fills the load window (the load stays hidden);
/// when compute dominates, the smallest chunk that saturates the hardware. Throws on zero
/// tokens, negative or non-finite costs, a zero per-token cost model, or a limit below
/// one token's intermediates.
/// @code
/// auto p = frugal::schedule::plan_chunks(model, 20 * 512, /*next layer load*/ 0.08, 256 << 20);
/// @endcode
[[nodiscard]] inline chunk_plan plan_chunks(const chunk_cost_model& m, std::size_t tokens, double next_load_seconds,
                                            double memory_limit_bytes) {
    FRUGAL_CHECK(tokens > 0, "chunk plan: zero tokens");
    FRUGAL_CHECK(std::isfinite(m.per_token_seconds) && m.per_token_seconds >= 0.0 &&
                     std::isfinite(m.min_chunk_seconds) && m.min_chunk_seconds >= 0.0 &&
                     m.per_token_seconds + m.min_chunk_seconds > 0.0,
                 "chunk plan: per-token cost ", m.per_token_seconds, " and chunk floor ", m.min_chunk_seconds,
                 " (must be >= 0, not both zero)");
    FRUGAL_CHECK(std::isfinite(m.intermediate_bytes_per_token) && m.intermediate_bytes_per_token > 0.0,
                 "chunk plan: intermediate bytes per token ", m.intermediate_bytes_per_token, " (must be > 0)");
    FRUGAL_CHECK(std::isfinite(next_load_seconds) && next_load_seconds >= 0.0, "chunk plan: next layer load ",
                 next_load_seconds, " s (must be >= 0)");
    FRUGAL_CHECK(std::isfinite(memory_limit_bytes) && memory_limit_bytes >= m.intermediate_bytes_per_token,
                 "chunk plan: memory limit ", memory_limit_bytes, " bytes is below one token's intermediates (",
                 m.intermediate_bytes_per_token, " bytes)");
    const auto fits = static_cast<std::size_t>(std::min(
        static_cast<double>(tokens), std::floor(memory_limit_bytes / m.intermediate_bytes_per_token)));
    auto wall = [&](std::size_t c) { return std::max(m.layer_seconds(tokens, c), next_load_seconds); };
    // The layer time is not monotone in c (partial last chunks), so every size is scored:
    // O(tokens) evaluations of a closed form.
    double best = wall(1);
    for (std::size_t c = 2; c <= fits; ++c) best = std::min(best, wall(c));
    std::size_t c = 1;
    while (wall(c) > best * (1.0 + 1e-12)) ++c;
    return {c, (tokens + c - 1) / c, m.layer_seconds(tokens, c), wall(c),
            static_cast<double>(c) * m.intermediate_bytes_per_token};
}

}  // namespace frugal::schedule
