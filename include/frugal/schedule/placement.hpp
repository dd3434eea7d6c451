#pragma once
/// @file
/// HyperGen's size-aware parameter placement (section 3.1): which weight fragments
/// stay resident on the device under an allocation limit. Smallest-first as in the paper,
/// and two 0/1 knapsack objectives: bytes kept, and bytes transferred per forward pass.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <numeric>
#include <span>
#include <vector>

#include "frugal/core/error.hpp"
#include "frugal/schedule/timeline.hpp"

namespace frugal::schedule {

/// One weight fragment: its size and the blocks that use it in a forward pass. A fragment
/// that is not resident is transferred once for every block that uses it.
/// @code
/// frugal::schedule::fragment qkv_bias{.bytes = 14336, .blocks = {3}};
/// frugal::schedule::fragment tied_embedding{.bytes = 720'000'000, .blocks = {0, 49}};
/// @endcode
struct fragment {
    std::uint64_t bytes = 0;
    std::vector<std::size_t> blocks;
};

/// What to maximize under the allocation limit.
enum class placement_objective : std::uint8_t {
    smallest_first,  ///< the paper: ascending size until the next fragment does not fit
    bytes_kept,      ///< 0/1 knapsack: most resident bytes
    transfer,        ///< 0/1 knapsack: fewest bytes transferred per forward pass
};

/// A placement: the resident fragments (ascending ids), their bytes, the bytes transferred
/// per forward pass for the others, and whether the knapsack was solved exactly (false:
/// greedy by value per byte, used when the exact table would exceed its cell budget).
struct placement {
    std::vector<std::size_t> resident;
    std::uint64_t resident_bytes = 0;
    std::uint64_t transfer_bytes_per_pass = 0;
    bool exact = true;
};

namespace detail {
inline void check_fragments(std::span<const fragment> fragments, std::uint64_t limit) {
    FRUGAL_CHECK(!fragments.empty(), "placement: empty fragment list");
    FRUGAL_CHECK(limit > 0, "placement: zero allocation limit");
    std::uint64_t smallest = std::numeric_limits<std::uint64_t>::max();
    for (std::size_t i = 0; i < fragments.size(); ++i) {
        FRUGAL_CHECK(fragments[i].bytes > 0, "placement: fragment ", i, " has zero bytes");
        FRUGAL_CHECK(!fragments[i].blocks.empty(), "placement: fragment ", i, " is used by no block");
        smallest = std::min(smallest, fragments[i].bytes);
    }
    FRUGAL_CHECK(limit >= smallest, "placement: allocation limit ", limit, " bytes is smaller than the smallest fragment (",
                 smallest, " bytes)");
}

inline std::uint64_t uses(const fragment& f) { return f.blocks.size(); }

inline placement finish_placement(std::span<const fragment> fragments, std::vector<std::size_t> resident, bool exact) {
    std::sort(resident.begin(), resident.end());
    placement out{std::move(resident), 0, 0, exact};
    std::vector<bool> kept(fragments.size(), false);
    for (std::size_t i : out.resident) {
        kept[i] = true;
        out.resident_bytes += fragments[i].bytes;
    }
    for (std::size_t i = 0; i < fragments.size(); ++i)
        if (!kept[i]) out.transfer_bytes_per_pass += fragments[i].bytes * uses(fragments[i]);
    return out;
}

// 0/1 knapsack maximizing value under `limit` bytes. Exact by dynamic programming over
// capacity in units of the gcd of the sizes when (units + 1) * items fits `max_cells`;
// otherwise greedy by value per byte, then the better of that and the best single item.
inline placement knapsack(std::span<const fragment> fragments, std::uint64_t limit,
                          const std::vector<std::uint64_t>& value, std::uint64_t max_cells) {
    std::vector<std::size_t> items;
    std::uint64_t unit = 0;
    for (std::size_t i = 0; i < fragments.size(); ++i)
        if (fragments[i].bytes <= limit) {
            items.push_back(i);
            unit = std::gcd(unit, fragments[i].bytes);
        }
    const std::uint64_t cap = limit / unit;
    if (cap < max_cells / items.size()) {  // (cap + 1) * items <= max_cells
        const std::size_t width = static_cast<std::size_t>(cap) + 1;
        std::vector<std::uint64_t> best(width, 0);
        std::vector<bool> take(items.size() * width, false);
        for (std::size_t k = 0; k < items.size(); ++k) {
            const auto w = static_cast<std::size_t>(fragments[items[k]].bytes / unit);
            const std::uint64_t v = value[items[k]];
            for (std::size_t c = width; c-- > w;)
                if (best[c - w] + v > best[c]) {
                    best[c] = best[c - w] + v;
                    take[k * width + c] = true;
                }
        }
        std::vector<std::size_t> chosen;
        std::size_t c = width - 1;
        for (std::size_t k = items.size(); k-- > 0;)
            if (take[k * width + c]) {
                chosen.push_back(items[k]);
                c -= static_cast<std::size_t>(fragments[items[k]].bytes / unit);
            }
        return finish_placement(fragments, std::move(chosen), true);
    }
    std::vector<std::size_t> order = items;
    std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
                return static_cast<double>(value[a]) / static_cast<double>(fragments[a].bytes) >
               static_cast<double>(value[b]) / static_cast<double>(fragments[b].bytes);
    });
    std::vector<std::size_t> chosen;
    std::uint64_t used = 0, total = 0;
    for (std::size_t i : order)
        if (used + fragments[i].bytes <= limit) {
            chosen.push_back(i);
            used += fragments[i].bytes;
            total += value[i];
        }
    const auto single = std::max_element(items.begin(), items.end(),
                                         [&](std::size_t a, std::size_t b) { return value[a] < value[b]; });
    if (value[*single] > total) chosen = {*single};
    return finish_placement(fragments, std::move(chosen), false);
}
}  // namespace detail

/// Chooses the resident fragments under `limit` bytes by `objective` (HyperGen 3.1 for
/// smallest-first). The knapsack objectives are exact while the dynamic-programming
/// table has at most `max_cells` cells (sizes measured in their gcd), else greedy by
/// value per byte. Throws on an empty list, a zero limit, a limit smaller than the
/// smallest fragment, zero-byte fragments or fragments no block uses.
/// @code
/// auto p = frugal::schedule::place_fragments(fragments, 10 << 20, frugal::schedule::placement_objective::transfer);
/// // p.resident, p.transfer_bytes_per_pass
/// @endcode
[[nodiscard]] inline placement place_fragments(std::span<const fragment> fragments, std::uint64_t limit,
                                               placement_objective objective,
                                               std::uint64_t max_cells = std::uint64_t{1} << 28) {
    detail::check_fragments(fragments, limit);
    if (objective == placement_objective::smallest_first) {
        std::vector<std::size_t> order(fragments.size());
        std::iota(order.begin(), order.end(), 0);
        std::stable_sort(order.begin(), order.end(),
                         [&](std::size_t a, std::size_t b) { return fragments[a].bytes < fragments[b].bytes; });
        std::vector<std::size_t> chosen;
        std::uint64_t used = 0;
        for (std::size_t i : order) {
            if (used + fragments[i].bytes > limit) break;
            used += fragments[i].bytes;
            chosen.push_back(i);
        }
        return detail::finish_placement(fragments, std::move(chosen), true);
    }
    std::vector<std::uint64_t> value(fragments.size());
    for (std::size_t i = 0; i < fragments.size(); ++i)
        value[i] = fragments[i].bytes * (objective == placement_objective::transfer ? detail::uses(fragments[i]) : 1);
    return detail::knapsack(fragments, limit, value, max_cells);
}

/// One forward pass under `placement` on the two-resource timeline: blocks run in order
/// (`block_compute[b]` each); before block b computes, every non-resident fragment it
/// uses is transferred (bytes / `bytes_per_second`), acquiring its bytes, which block b
/// releases when it finishes. Transfers for block b start once block b - 2 has finished
/// (a two-block sliding window, as FlexGen/HyperGen prefetch the next block), so
/// `simulate()` gives the pass time, the bytes moved (I/O busy time x bandwidth) and the
/// peak device bytes (resident set included).
/// @code
/// auto t = frugal::schedule::placement_timeline(fragments, p, block_ms, 16e9 / 1e3);
/// auto r = t.simulate();  // r.makespan, r.peak_resident_bytes
/// @endcode
[[nodiscard]] inline timeline placement_timeline(std::span<const fragment> fragments, const placement& p,
                                                 std::span<const double> block_compute, double bytes_per_second) {
    FRUGAL_CHECK(bytes_per_second > 0.0, "placement timeline: bandwidth ", bytes_per_second, " (must be > 0)");
    std::vector<bool> kept(fragments.size(), false);
    for (std::size_t i : p.resident) {
        FRUGAL_CHECK_AS(frugal::out_of_range, i < fragments.size(), "placement timeline: resident id ", i, " >= ",
                        fragments.size());
        kept[i] = true;
    }
    std::vector<std::vector<std::size_t>> needs(block_compute.size());
    for (std::size_t i = 0; i < fragments.size(); ++i)
        for (std::size_t b : fragments[i].blocks) {
            FRUGAL_CHECK_AS(frugal::out_of_range, b < block_compute.size(), "placement timeline: fragment ", i,
                            " names block ", b, " of ", block_compute.size());
            if (!kept[i]) needs[b].push_back(i);
        }
    timeline t(p.resident_bytes);
    std::vector<std::size_t> compute;
    for (std::size_t b = 0; b < block_compute.size(); ++b) {
        std::vector<std::size_t> loads, window;
        if (b >= 2) window.push_back(compute[b - 2]);
        std::uint64_t bytes = 0;
        for (std::size_t i : needs[b]) {
            loads.push_back(t.add(resource::io, static_cast<double>(fragments[i].bytes) / bytes_per_second, window,
                                  fragments[i].bytes));
            bytes += fragments[i].bytes;
        }
        compute.push_back(t.add(resource::compute, block_compute[b], loads, 0, bytes));
    }
    return t;
}

}  // namespace frugal::schedule
