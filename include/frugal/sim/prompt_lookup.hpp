#pragma once
/// @file
/// Prompt Lookup Decoding (PLD), the n-gram drafting baseline: the original
/// `find_candidate_pred_tokens` of github.com/apoorvumang/prompt-lookup-decoding.

#include <algorithm>
#include <concepts>
#include <cstddef>
#include <span>

#include "frugal/core/error.hpp"

namespace frugal::sim {

/// Prompt Lookup Decoding's draft for `context` (prompt plus accepted tokens), exactly as
/// the original `find_candidate_pred_tokens`: for n = `max_ngram` down to 1, the earliest
/// position whose n tokens equal the context's last n, whose `max_draft` following tokens
/// all lie inside the context, and whose continuation starts before the final n-gram.
/// Returns those tokens as a view into `context`, or an empty span when nothing matches.
/// It rescans the whole context: O(N * max_ngram) per call, the cost frugal's suffix
/// automaton drafter removes.
/// @code
/// std::vector<int> ctx{1, 2, 3, 9, 9, 1, 2, 3};
/// auto d = frugal::sim::prompt_lookup_draft<int>(ctx, 3, 2);  // {9, 9}
/// @endcode
template <std::integral Token>
[[nodiscard]] std::span<const Token> prompt_lookup_draft(std::span<const Token> context, std::size_t max_ngram = 3,
                                                         std::size_t max_draft = 10) {
    FRUGAL_CHECK(max_ngram >= 1, "prompt_lookup_draft: max_ngram must be >= 1, got ", max_ngram);
    FRUGAL_CHECK(max_draft >= 1, "prompt_lookup_draft: max_draft must be >= 1, got ", max_draft);
    const std::size_t n_ctx = context.size();
    for (std::size_t n = std::min(max_ngram, n_ctx); n >= 1; --n) {
        const auto tail = context.last(n);
        // Valid starts: idx + n + max_draft <= N and idx + n < N - n.
        if (n_ctx < n + max_draft || n_ctx < 2 * n + 1) continue;
        const std::size_t last_idx = std::min(n_ctx - n - max_draft, n_ctx - 2 * n - 1);
        for (std::size_t idx = 0; idx <= last_idx; ++idx) {
            if (std::equal(tail.begin(), tail.end(), context.begin() + static_cast<std::ptrdiff_t>(idx)))
                return context.subspan(idx + n, max_draft);
        }
    }
    return {};
}

}  // namespace frugal::sim
