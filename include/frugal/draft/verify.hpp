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

/// A draft tree flattened for one tree-attention forward pass: node i holds `tokens[i]`,
/// its parent `parents[i]` (-1: a child of the last accepted token) and `probabilities[i]`,
/// the drafter's estimate that the model emits that token once the parent's path is
/// accepted (the children of a node sum to at most 1). Parents precede their children, so
/// the array is a valid tree-attention mask order. `path_probabilities[i]` is the product
/// of the probabilities from the root to node i, and `score` their sum over the nodes: the
/// expected number of accepted draft tokens under those estimates.
/// @code
/// frugal::draft::draft_tree<int> t;
/// t.push(-1, 42, 0.9f); t.push(0, 7, 0.5f); t.push(-1, 13, 0.1f);   // 42 -> 7, and 13
/// // t.score == 0.9 + 0.45 + 0.1
/// @endcode
template <std::integral Token>
struct draft_tree {
    std::vector<Token> tokens;
    std::vector<std::int32_t> parents;
    std::vector<float> probabilities;
    std::vector<float> path_probabilities;
    double score = 0;

    /// Adds a node under `parent` (-1 or an existing node) with the probability of its token
    /// given the parent's path (in [0, 1]); returns its index.
    std::int32_t push(std::int32_t parent, Token token, float probability = 0.0f) {
        FRUGAL_CHECK_AS(frugal::out_of_range, parent >= -1 && parent < static_cast<std::int32_t>(tokens.size()),
                        "draft_tree: parent ", parent, " is not -1 or an existing node (size ", tokens.size(), ")");
        FRUGAL_CHECK(probability >= 0.0f && probability <= 1.0f, "draft_tree: probability ", probability,
                     " is not in [0, 1]");
        const float path = parent < 0 ? probability : probability * path_probabilities[static_cast<std::size_t>(parent)];
        tokens.push_back(token);
        parents.push_back(parent);
        probabilities.push_back(probability);
        path_probabilities.push_back(path);
        score += path;
        return static_cast<std::int32_t>(tokens.size() - 1);
    }
    /// Removes every node.
    void clear() noexcept {
        tokens.clear();
        parents.clear();
        probabilities.clear();
        path_probabilities.clear();
        score = 0;
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
    std::vector<std::int32_t> path;     ///< accepted node indices, root first (a chain's are 0, 1, ...)
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
    while (r.accepted < draft.size() && draft[r.accepted] == predictions[r.accepted]) {
        r.path.push_back(static_cast<std::int32_t>(r.accepted));
        ++r.accepted;
    }
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

/// The tokens one verified step emits, in order: the accepted draft tokens, then the
/// bonus token, cut right after the first `eos` (an end of sequence inside the accepted
/// draft ends the request there: nothing after it is output). `finished` says an `eos` was
/// emitted.
template <std::integral Token>
struct step_output {
    std::vector<Token> tokens;
    bool finished = false;
};

/// The output of one verification of `draft` (a tree, or a chain as a path) with result
/// `r`, under the end-of-sequence rule of `step_output`.
/// @code
/// auto out = frugal::draft::emitted_tokens(tree, r, eos);
/// drafter.accept(out.tokens); if (out.finished) stop();
/// @endcode
template <std::integral Token>
[[nodiscard]] step_output<Token> emitted_tokens(const draft_tree<Token>& draft, const verify_result<Token>& r,
                                                Token eos) {
    step_output<Token> out;
    for (const std::int32_t node : r.path) {
        FRUGAL_CHECK_AS(frugal::out_of_range, node >= 0 && static_cast<std::size_t>(node) < draft.size(),
                        "emitted_tokens: accepted node ", node, " is not in the draft of ", draft.size(), " nodes");
        out.tokens.push_back(draft.tokens[static_cast<std::size_t>(node)]);
        if (out.tokens.back() == eos) {
            out.finished = true;
            return out;
        }
    }
    out.tokens.push_back(r.bonus);
    out.finished = r.bonus == eos;
    return out;
}

}  // namespace frugal::draft
