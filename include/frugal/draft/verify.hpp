#pragma once
/// @file
/// Greedy verification of chain and tree drafts against the model's predicted tokens:
/// the accepted draft tokens plus the model's bonus token.

#include <concepts>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "frugal/core/error.hpp"

namespace frugal::draft {

/// A draft tree flattened for one tree-attention forward pass: node i holds `tokens[i]`
/// and its parent `parents[i]` (-1: a child of the last accepted token); parents precede
/// their children, so the array is a valid tree-attention mask order.
/// @code
/// frugal::draft::draft_tree<int> t;
/// t.push(-1, 42); t.push(0, 7); t.push(-1, 13);   // 42 -> 7, and 13
/// @endcode
template <std::integral Token>
struct draft_tree {
    std::vector<Token> tokens;
    std::vector<std::int32_t> parents;

    /// Adds a node under `parent` (-1 or an existing node); returns its index.
    std::int32_t push(std::int32_t parent, Token token) {
        FRUGAL_CHECK_AS(frugal::out_of_range, parent >= -1 && parent < static_cast<std::int32_t>(tokens.size()),
                        "draft_tree: parent ", parent, " is not -1 or an existing node (size ", tokens.size(), ")");
        tokens.push_back(token);
        parents.push_back(parent);
        return static_cast<std::int32_t>(tokens.size() - 1);
    }
    /// Removes every node.
    void clear() noexcept {
        tokens.clear();
        parents.clear();
    }
    /// Number of nodes.
    [[nodiscard]] std::size_t size() const noexcept { return tokens.size(); }
    /// True when there are no nodes.
    [[nodiscard]] bool empty() const noexcept { return tokens.empty(); }
};

/// Outcome of verifying one draft: the accepted draft tokens (for a tree, the node
/// indices of the accepted path, root first) and the bonus token the model emitted after them.
template <std::integral Token>
struct verify_result {
    std::size_t accepted = 0;           ///< draft tokens accepted
    Token bonus{};                      ///< the model's own next token after them
    std::vector<std::int32_t> path;     ///< tree only: accepted node indices, root first
};

/// Greedy chain verification: `predictions[i]` is the model's token after the context
/// plus `draft[0..i)` (draft.size() + 1 of them). Accepts the longest prefix with
/// `draft[i] == predictions[i]`; the bonus is the prediction after it.
/// @code
/// auto r = frugal::draft::verify_chain<int>(draft, model_argmax);  // r.accepted + 1 tokens emitted
/// @endcode
template <std::integral Token>
[[nodiscard]] verify_result<Token> verify_chain(std::span<const Token> draft, std::span<const Token> predictions) {
    FRUGAL_CHECK(predictions.size() == draft.size() + 1, "verify_chain: ", predictions.size(),
                 " predictions for a draft of ", draft.size(), " tokens (need draft + 1)");
    verify_result<Token> r;
    while (r.accepted < draft.size() && draft[r.accepted] == predictions[r.accepted]) ++r.accepted;
    r.bonus = predictions[r.accepted];
    return r;
}

/// Greedy tree verification: `predictions[0]` is the model's token after the context and
/// `predictions[i + 1]` its token after node i's path (tree.size() + 1 of them). Follows
/// from the root the child whose token equals the prediction (the first such node when
/// siblings repeat a token) until none does; the bonus is the last prediction.
/// @code
/// auto r = frugal::draft::verify_tree(tree, std::span<const int>(model_argmax));
/// for (auto node : r.path) emit(tree.tokens[node]);  emit(r.bonus);
/// @endcode
template <std::integral Token>
[[nodiscard]] verify_result<Token> verify_tree(const draft_tree<Token>& tree, std::span<const Token> predictions) {
    FRUGAL_CHECK(tree.parents.size() == tree.tokens.size(), "verify_tree: ", tree.parents.size(), " parents for ",
                 tree.tokens.size(), " tokens");
    FRUGAL_CHECK(predictions.size() == tree.size() + 1, "verify_tree: ", predictions.size(),
                 " predictions for a tree of ", tree.size(), " nodes (need nodes + 1)");
    const auto n = static_cast<std::int32_t>(tree.size());
    for (std::int32_t i = 0; i < n; ++i)
        FRUGAL_CHECK_AS(frugal::out_of_range, tree.parents[i] >= -1 && tree.parents[i] < i, "verify_tree: node ", i,
                        " has parent ", tree.parents[i], " (must be -1 or an earlier node)");
    verify_result<Token> r;
    std::int32_t node = -1;
    Token want = predictions[0];
    for (std::int32_t i = 0; i < n; ++i) {
        if (tree.parents[i] != node || tree.tokens[i] != want) continue;
        node = i;
        r.path.push_back(i);
        want = predictions[static_cast<std::size_t>(i) + 1];
    }
    r.accepted = r.path.size();
    r.bonus = want;
    return r;
}

}  // namespace frugal::draft
