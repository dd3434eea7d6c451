#pragma once
/// @file
/// Retrieval drafter over two suffix automata (CoordGen 2.2/4.1, SAM-Decoding): the
/// request's own context and a persistent history of past outputs. Chain drafts up to K
/// tokens; tree drafts of the most frequent continuations within a token budget.

#include <algorithm>
#include <array>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "frugal/core/error.hpp"
#include "frugal/draft/suffix_automaton.hpp"
#include "frugal/draft/verify.hpp"

namespace frugal::draft {

/// Drafting policy. Defaults are the ones `frugal-bench draft` reports.
struct drafter_config {
    std::size_t max_draft = 10;        ///< K: longest chain draft, deepest tree path
    std::size_t tree_budget = 64;      ///< most nodes in a tree draft
    std::uint32_t min_match = 1;       ///< shortest suffix match allowed to draft
    std::uint32_t history_bias = 1;    ///< chain: history wins only when its match is longer by more than this
    std::uint64_t vocab_size = 0;      ///< tokens must lie in [0, vocab_size); 0: any value of the type
};

/// A drafter over the request's context (prompt plus accepted tokens, an automaton it
/// owns) and an optional history automaton of past outputs (CoordGen's history
/// similarity; owned by the caller, read-only here).
///
/// Feed it the prompt with `begin()` and every accepted token (bonus included) with
/// `accept()`; each costs amortized O(1) per token. `chain()` copies the
/// continuation of the longest suffix match (the context unless the history's match is
/// longer by more than `history_bias`, as SAM-Decoding chooses), most recent occurrence
/// first, cut to a length that grows with the match length. `tree()` expands the
/// continuations of both sources best-first by their occurrence-count probability.
/// Neither depends on the context length.
/// @code
/// frugal::draft::drafter<int> d({.max_draft = 8});
/// d.begin(prompt);
/// while (!done) {
///     auto draft = d.chain();                       // verify with the model
///     auto r = frugal::draft::verify_chain<int>(draft, model_predictions);
///     d.accept(std::span(draft).first(r.accepted)); d.accept(r.bonus);
/// }
/// @endcode
template <std::integral Token>
class drafter {
public:
    /// A drafter with `config` and, optionally, a history automaton that must outlive it.
    explicit drafter(drafter_config config = {}, const suffix_automaton<Token>* history = nullptr)
        : config_(config), history_(history), hist_matcher_(history ? *history : context_) {
        FRUGAL_CHECK(config_.max_draft >= 1, "drafter: max_draft must be >= 1, got ", config_.max_draft);
        FRUGAL_CHECK(config_.tree_budget >= 1, "drafter: tree_budget must be >= 1, got ", config_.tree_budget);
        FRUGAL_CHECK(config_.min_match >= 1, "drafter: min_match must be >= 1, got ", config_.min_match);
    }

    drafter(const drafter&) = delete;
    drafter& operator=(const drafter&) = delete;

    /// Starts a request: the context becomes `prompt`; the history is re-matched from scratch.
    void begin(std::span<const Token> prompt) {
        context_.clear();
        hist_matcher_.reset();
        context_.reserve(prompt.size() + 1024);
        accept(prompt);
    }

    /// Appends accepted tokens (never rejected draft tokens) to the context.
    void accept(std::span<const Token> tokens) {
        for (Token t : tokens) accept(t);
    }
    /// Appends one accepted token.
    void accept(Token token) {
        check_token(token);
        context_.append(token);  // also finds the longest suffix that occurred before
        if (history_ != nullptr) hist_matcher_.advance(token);
    }

    /// A chain draft of up to `max_draft` tokens (empty when no suffix of the context of
    /// length >= `min_match` occurred before). The span stays valid until the next call.
    [[nodiscard]] std::span<const Token> chain() {
        chain_.clear();
        const std::uint32_t lc = context_.repeat_length();
        const std::uint32_t lh = history_ != nullptr ? hist_matcher_.length() : 0;
        const bool use_history = lh > lc + config_.history_bias;
        const std::uint32_t len = use_history ? lh : lc;
        if (len < config_.min_match) return {};
        const auto& sam = use_history ? *history_ : context_;
        const std::uint32_t end = use_history ? hist_matcher_.last_end() : context_.repeat_end();
        const auto cont = sam.continuation(end, config_.max_draft);
        chain_.assign(cont.begin(), cont.end());
        return chain_;
    }

    /// A tree draft of at most `tree_budget` nodes and depth `max_draft`: the continuations
    /// of the context and history matches, most probable paths first, where a token's
    /// probability at a node is its share of the occurrence counts of the continuations
    /// there (averaged over the sources that match). The reference stays valid until the next call.
    [[nodiscard]] const draft_tree<Token>& tree() {
        tree_.clear();
        heap_.clear();
        cursor root;
        root.state[0] = context_.repeat_length() >= config_.min_match ? context_.repeat_state() : no_state;
        root.state[1] = history_ != nullptr && hist_matcher_.length() >= config_.min_match ? hist_matcher_.state()
                                                                                            : no_state;
        push_children(root, -1, 1.0, 0);
        while (!heap_.empty() && tree_.size() < config_.tree_budget) {
            std::pop_heap(heap_.begin(), heap_.end());
            const candidate c = heap_.back();
            heap_.pop_back();
            const std::int32_t node = tree_.push(c.parent, c.token);
            if (c.depth < config_.max_draft) push_children(c.next, node, c.score, c.depth);
        }
        return tree_;
    }

    /// The context automaton (prompt plus accepted tokens).
    [[nodiscard]] const suffix_automaton<Token>& context() const noexcept { return context_; }
    /// Length of the current suffix match in the context and in the history (0: none).
    [[nodiscard]] std::uint32_t context_match() const noexcept { return context_.repeat_length(); }
    [[nodiscard]] std::uint32_t history_match() const noexcept { return history_ ? hist_matcher_.length() : 0; }
    /// The configuration.
    [[nodiscard]] const drafter_config& config() const noexcept { return config_; }

private:
    struct cursor {
        std::array<state_id, 2> state{no_state, no_state};  // context, history
    };
    struct candidate {
        double score;
        std::int32_t parent;
        Token token;
        std::size_t depth;
        cursor next;
        bool operator<(const candidate& o) const noexcept { return score < o.score; }
    };

    const suffix_automaton<Token>& source(std::size_t i) const noexcept { return i == 0 ? context_ : *history_; }

    void push_children(const cursor& at, std::int32_t parent, double score, std::size_t depth) {
        std::array<double, 2> total{0, 0};
        int sources = 0;
        for (std::size_t i = 0; i < 2; ++i) {
            if (at.state[i] == no_state) continue;
            const auto& sam = source(i);
            sam.for_each_transition(at.state[i], [&](Token, state_id child) { total[i] += sam.count(child); });
            if (total[i] > 0) ++sources;
        }
        if (sources == 0) return;
        for (std::size_t i = 0; i < 2; ++i) {
            if (total[i] == 0) continue;
            const auto& sam = source(i);
            sam.for_each_transition(at.state[i], [&](Token tok, state_id child) {
                const std::size_t other = 1 - i;
                state_id other_child = no_state;
                if (at.state[other] != no_state && total[other] > 0) {
                    other_child = source(other).next(at.state[other], tok);
                    if (other < i && other_child != no_state) return;  // counted from the other source
                }
                double p = sam.count(child) / total[i];
                if (other_child != no_state) p += source(other).count(other_child) / total[other];
                candidate c{score * p / sources, parent, tok, depth + 1, {}};
                c.next.state[i] = child;
                c.next.state[other] = other_child;
                heap_.push_back(c);
                std::push_heap(heap_.begin(), heap_.end());
            });
        }
    }

    void check_token(Token token) const {
        if constexpr (std::signed_integral<Token>)
            FRUGAL_CHECK_AS(frugal::out_of_range, token >= 0, "drafter: negative token ", token);
        if (config_.vocab_size != 0)
            FRUGAL_CHECK_AS(frugal::out_of_range, static_cast<std::uint64_t>(token) < config_.vocab_size,
                            "drafter: token ", token, " outside the vocabulary of ", config_.vocab_size);
    }

    drafter_config config_;
    suffix_automaton<Token> context_;
    const suffix_automaton<Token>* history_;
    suffix_matcher<Token> hist_matcher_;
    std::vector<Token> chain_;
    draft_tree<Token> tree_;
    std::vector<candidate> heap_;
};

}  // namespace frugal::draft
