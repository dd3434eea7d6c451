#pragma once
/// @file
/// How much to draft for a batch: the drafted nodes of every request, each with the chance
/// that the model accepts it, weighed against the engine's verification cost, so that the
/// batch's expected tokens per unit of time is the largest it can be.

#include <algorithm>
#include <bit>
#include <cmath>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include <boost/sort/pdqsort/pdqsort.hpp>

#include "frugal/core/error.hpp"
#include "frugal/draft/verification_cost.hpp"
#include "frugal/draft/verify.hpp"

namespace frugal::draft {

/// A drafted node offered to `choose_draft_size`: the chance that the model accepts it
/// (its calibrated path probability), its request's index in the batch and its index in
/// the request's tree (parents before children).
struct draft_candidate {
    double probability = 0;
    std::uint32_t request = 0, node = 0;
};

/// What a batch verifies and emits besides the drafts being chosen: `tokens` verified (one
/// per request, its last token, plus whatever else the step runs) and `expected` tokens
/// emitted (one per request: the model's own token).
struct batch_load {
    std::size_t tokens = 0;
    double expected = 0;
};

namespace detail {
// Puts the `count` highest probabilities first, highest first, ties in the given order: one
// integer key per candidate, its probability's float bits (order-preserving for values
// >= 0) inverted above its position; the top keys are selected, then sorted by pdqsort
// (fast on the nearly sorted runs best-first trees give). A float key ranks two
// probabilities closer than float precision as equal, so they keep the given order (a
// parent before its child); the expected tokens are still summed in double.
inline void sort_best_first(std::span<draft_candidate> candidates, std::size_t count) {
    // Per-thread scratch: a step loop sorts every step, from any thread.
    thread_local std::vector<std::uint64_t> keys;
    thread_local std::vector<draft_candidate> given;
    keys.resize(candidates.size());
    for (std::size_t i = 0; i < candidates.size(); ++i) {
        const auto bits = std::bit_cast<std::uint32_t>(static_cast<float>(candidates[i].probability));
        keys[i] = std::uint64_t{~bits} << 32 | i;
    }
    const auto top = keys.begin() + static_cast<std::ptrdiff_t>(std::min(count, keys.size()));
    if (top != keys.end()) std::nth_element(keys.begin(), top, keys.end());
    boost::sort::pdqsort_branchless(keys.begin(), top);
    given.assign(candidates.begin(), candidates.end());
    for (std::size_t i = 0; i < keys.size(); ++i) candidates[i] = given[keys[i] & 0xffffffffu];
}
}  // namespace detail

/// Chooses the drafts to verify: returns the count m of candidates to keep, the m that
/// maximises the batch's expected tokens per ms, (`base.expected` + the m highest
/// probabilities) / `cost.step_ms(base.tokens + m)`, and moves those m first, highest
/// first (ties in the given order); ties of the rate keep fewer. The expected number of
/// accepted draft tokens of a tree is the sum of its nodes' path probabilities, and a
/// node's path probability is at most its parent's, so the best m form a tree for each
/// request and no other choice of m nodes does better. Below the cost's knee every node
/// with a chance is kept; past it a node is kept only while its probability beats the
/// tokens per verified token of what is kept; with an infinite cost nothing is. Only the
/// m whose step could still beat drafting nothing are examined: with every candidate
/// accepted, no larger m can.
///
/// Errors (`frugal::invalid_argument`): a probability outside [0, 1] or NaN; a cost that
/// is NaN, zero or negative, or smaller for more tokens (each named with its token count).
/// @code
/// std::vector<frugal::draft::draft_candidate> c = ...;   // every request's nodes
/// std::size_t m = frugal::draft::choose_draft_size(std::span(c), {.tokens = 32, .expected = 32},
///                                                  frugal::draft::roofline_cost::h100_7b());
/// // verify c[0..m)
/// @endcode
template <verification_cost C>
std::size_t choose_draft_size(std::span<draft_candidate> candidates, batch_load base, const C& cost) {
    double all = base.expected;
    for (const draft_candidate& c : candidates) {
        FRUGAL_CHECK(c.probability >= 0 && c.probability <= 1, "choose_draft_size: probability ", c.probability,
                     " of node ", c.node, " of request ", c.request, " outside [0, 1]");
        all += c.probability;
    }
    FRUGAL_CHECK(std::isfinite(base.expected) && base.expected >= 0, "choose_draft_size: base expected tokens ",
                 base.expected, " must be finite and >= 0");
    double previous = 0;
    auto step_ms = [&](std::size_t tokens) {
        const double ms = static_cast<double>(cost.step_ms(tokens));
        FRUGAL_CHECK(ms > 0, "verification cost: step_ms(", tokens, ") = ", ms, " (must be > 0 and not NaN)");
        FRUGAL_CHECK(ms >= previous, "verification cost decreases: step_ms(", tokens, ") = ", ms, " < step_ms(",
                     tokens - 1, ") = ", previous);
        previous = ms;
        return ms;
    };
    thread_local std::vector<double> ms;  // step_ms(base.tokens + m), per thread as above
    ms.assign(1, step_ms(base.tokens));
    if (std::isinf(ms[0])) return 0;  // nothing can be verified
    const double none = base.expected / ms[0];
    // The m whose step could beat `none` if every candidate were accepted.
    while (ms.size() <= candidates.size()) {
        const double next = step_ms(base.tokens + ms.size());
        if (none > 0 && all / next <= none) break;
        ms.push_back(next);
    }
    const std::size_t reach = ms.size() - 1;
    detail::sort_best_first(candidates, reach);
    double expected = base.expected, best = none;
    std::size_t keep = 0;
    for (std::size_t m = 1; m <= reach; ++m) {
        expected += candidates[m - 1].probability;
        const double r = expected / ms[m];
        if (r > best) best = r, keep = m;
    }
    return keep;
}

/// Writes into `out` the nodes of `tree` with `keep[i]` set (a node kept must have its
/// parent kept), in the tree's order, with probabilities `probability[i]` (e.g. calibrated).
/// @code
/// frugal::draft::keep_nodes(tree, keep, calibrated, sized);
/// @endcode
template <std::integral Token>
void keep_nodes(const draft_tree<Token>& tree, std::span<const char> keep, std::span<const double> probability,
                draft_tree<Token>& out) {
    out.clear();
    thread_local std::vector<std::int32_t> index;  // node -> its index in `out`; per thread: no allocation per call
    index.assign(tree.size(), -1);
    for (std::size_t i = 0; i < tree.size(); ++i) {
        if (!keep[i]) continue;
        const std::int32_t parent = tree.parents[i];
        const std::int32_t kept_parent = parent < 0 ? -1 : index[static_cast<std::size_t>(parent)];
        FRUGAL_CHECK(parent < 0 || kept_parent >= 0, "keep_nodes: node ", i, " kept without its parent ", parent);
        index[i] = out.push(kept_parent, tree.tokens[i], static_cast<float>(std::clamp(probability[i], 0.0, 1.0)));
    }
}

}  // namespace frugal::draft
