#pragma once
/// @file
/// CoordGen's in-context distribution calibration (section 3.3): the prefill already
/// computed the model's next-token distribution after every context position; a token
/// tree built from it by sample/search drafts in the model's own wording.

#include <algorithm>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <span>
#include <unordered_map>
#include <vector>

#include "frugal/core/error.hpp"
#include "frugal/draft/verify.hpp"

namespace frugal::draft {

/// One of the model's top-k next-token predictions at a context position.
template <std::integral Token>
struct token_prediction {
    Token token;
    float prob;
};

/// Limits of the calibrated tree.
struct calibration_config {
    std::size_t max_depth = 4;    ///< deepest path
    std::size_t max_nodes = 32;   ///< most nodes per tree
    float min_prob = 0.1f;        ///< predictions below this are not sampled
};

/// The calibrated drafting source of CoordGen 3.3. Built from the context and, per
/// context position i, the prefill's top-k predictions for the token after
/// `context[0..i]` (caller-supplied, k per position, most probable first or not).
/// `tree(token)` runs the depth-first sample/search: *sample* the predictions (prob >=
/// `min_prob`, most probable first) at the token's first occurrence in the context, then
/// *search* each sampled token's first occurrence and sample there, down to `max_depth`,
/// within `max_nodes`. The result is a draft tree rooted after `token`.
/// @code
/// frugal::draft::calibrated_source<int> cal(context, topk, k);
/// const auto& t = cal.tree(last_accepted);   // e.g. Clinton -> arrived -> at
/// @endcode
template <std::integral Token>
class calibrated_source {
public:
    /// `predictions` holds `k` entries per context position (context.size() * k in all).
    calibrated_source(std::span<const Token> context, std::span<const token_prediction<Token>> predictions,
                      std::size_t k, calibration_config config = {})
        : config_(config), k_(k), predictions_(predictions.begin(), predictions.end()) {
        FRUGAL_CHECK(k >= 1, "calibrated_source: k must be >= 1, got ", k);
        FRUGAL_CHECK(predictions.size() == context.size() * k, "calibrated_source: ", predictions.size(),
                     " predictions for ", context.size(), " positions with k = ", k);
        FRUGAL_CHECK(config.max_depth >= 1 && config.max_nodes >= 1,
                     "calibrated_source: max_depth and max_nodes must be >= 1");
        FRUGAL_CHECK(config.min_prob >= 0.0f && config.min_prob <= 1.0f, "calibrated_source: min_prob ",
                     config.min_prob, " outside [0, 1]");
        for (const auto& p : predictions_)
            FRUGAL_CHECK(p.prob >= 0.0f && p.prob <= 1.0f, "calibrated_source: probability ", p.prob,
                         " outside [0, 1] for token ", p.token);
        for (std::size_t i = 0; i < context.size(); ++i) first_.try_emplace(context[i], i);
        for (std::size_t i = 0; i < context.size(); ++i) {  // most probable first, per position
            auto row = std::span(predictions_).subspan(i * k, k);
            std::stable_sort(row.begin(), row.end(), [](const auto& a, const auto& b) { return a.prob > b.prob; });
        }
    }

    /// The calibrated tree after `token` (empty when it is not in the context). The
    /// reference stays valid until the next call.
    [[nodiscard]] const draft_tree<Token>& tree(Token token) {
        tree_.clear();
        grow(token, -1, 1);
        return tree_;
    }

private:
    void grow(Token token, std::int32_t parent, std::size_t depth) {
        const auto at = first_.find(token);  // search
        if (at == first_.end()) return;
        for (const auto& p : std::span(predictions_).subspan(at->second * k_, k_)) {  // sample
            if (p.prob < config_.min_prob || tree_.size() >= config_.max_nodes) return;
            const std::int32_t node = tree_.push(parent, p.token, p.prob);
            if (depth < config_.max_depth) grow(p.token, node, depth + 1);
        }
    }

    calibration_config config_;
    std::size_t k_;
    std::vector<token_prediction<Token>> predictions_;
    std::unordered_map<Token, std::size_t> first_;  // first occurrence of each context token
    draft_tree<Token> tree_;
};

}  // namespace frugal::draft
