#pragma once
/// @file
/// Retrieval drafter over two suffix automata (CoordGen 2.2/4.1, SAM-Decoding): the
/// request's own context and a persistent history of past outputs. Chain drafts up to K
/// tokens; tree drafts of the most probable continuations within a token budget.

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

/// Drafting policy. The defaults are the ones `frugal-bench draft` reports
/// (docs/drafting.md explains each choice).
struct drafter_config {
    std::size_t max_draft = 10;      ///< K: longest chain draft, deepest tree path
    std::size_t tree_budget = 64;    ///< most nodes in a tree draft
    std::uint32_t min_match = 1;     ///< shortest suffix match allowed to draft
    /// A source whose match is shorter than the other source's by more than this is
    /// ignored (a much longer match is much stronger evidence, as SAM-Decoding chooses).
    std::uint32_t match_margin = 8;
    double context_weight = 2.0;     ///< weight of the context against the history (1) when both match
    /// Pseudo-count of "a continuation never seen": a token's probability at a node is
    /// count / (total + escape), so evidence from few occurrences decays with depth.
    double escape = 1.0;
    /// Chain drafts stop once the estimated probability of the whole path drops below this.
    double min_path_score = 0.002;
    /// A match state with more continuations than this is not drafted from: its
    /// probability is spread over too many tokens to pay for scanning them (this keeps a
    /// step's cost independent of the vocabulary).
    std::size_t max_fanout = 64;
    /// Also draft from each match's suffix-link back-off (the next shorter match, with more
    /// occurrences). It adds 0.4% (chain) and 2.6% (tree) MAT on the bundled file; its states
    /// are the frequent, scattered ones, so past the caches each step pays a few more
    /// memory round trips (docs/drafting.md, scaling). Off: the step cost stays flat.
    bool backoff = true;
    std::uint64_t vocab_size = 0;    ///< tokens must lie in [0, vocab_size); 0: any non-negative value
};

/// A drafter over the request's context (prompt plus accepted tokens, an automaton it
/// owns) and an optional history automaton of past outputs (CoordGen's history
/// similarity; owned by the caller, read-only while a request runs).
///
/// Feed it the prompt with `begin()` and every accepted token (bonus included) with
/// `accept()`: amortized O(1) per token. Drafting looks at four sources: the longest
/// suffix match in the context and in the history and, for each, its suffix-link
/// back-off (the next shorter match, with more occurrences). A continuation token's
/// probability is the weighted mix, over the sources, of its share of the occurrence
/// counts there. `chain()` follows the most probable token up to `max_draft` deep while
/// the path probability stays above `min_path_score`, so its length adapts to the
/// evidence; `tree()` expands the most probable paths best-first within `tree_budget`
/// nodes. Neither does work that grows with the context length (docs/drafting.md,
/// scaling, says where the memory misses of a long context come from).
/// @code
/// frugal::draft::drafter<int> d({.max_draft = 8});
/// d.begin(prompt);
/// while (!done) {
///     auto draft = d.chain();                                   // verify with the model
///     auto r = frugal::draft::verify_chain<int>(draft, model_argmax);
///     d.accept(draft.first(r.accepted)); d.accept(r.bonus);
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
        FRUGAL_CHECK(config_.context_weight > 0, "drafter: context_weight must be > 0, got ", config_.context_weight);
        FRUGAL_CHECK(config_.escape >= 0, "drafter: escape must be >= 0, got ", config_.escape);
        FRUGAL_CHECK(config_.min_path_score >= 0 && config_.min_path_score < 1,
                     "drafter: min_path_score must be in [0, 1), got ", config_.min_path_score);
    }

    drafter(const drafter&) = delete;
    drafter& operator=(const drafter&) = delete;

    /// Starts a request: the context becomes `prompt`; the history is matched afresh.
    /// @code
    /// drafter.begin(prompt_tokens);
    /// @endcode
    void begin(std::span<const Token> prompt) {
        context_.clear();
        hist_matcher_.reset();
        context_.reserve(prompt.size() + 1024);
        accept(prompt);
    }

    /// Appends accepted tokens (never rejected draft tokens) to the context.
    /// @code
    /// drafter.accept(draft.first(result.accepted)); drafter.accept(result.bonus);
    /// @endcode
    void accept(std::span<const Token> tokens) {
        for (Token t : tokens) check_token(t);
        context_.append(tokens);  // one batch: shared suffix-link paths are updated once
        if (history_ != nullptr) hist_matcher_.advance(tokens);
    }
    /// Appends one accepted token.
    void accept(Token token) {
        check_token(token);
        context_.append(token);  // also finds the longest suffix that occurred before
        if (history_ != nullptr) hist_matcher_.advance(token);
    }

    /// A chain draft of at most `max_draft` tokens: the most probable continuation, cut
    /// where the path probability falls below `min_path_score` (empty when no suffix of
    /// length >= `min_match` occurred before). The span stays valid until the next call.
    /// @code
    /// std::span<const int> draft = drafter.chain();
    /// @endcode
    [[nodiscard]] std::span<const Token> chain() {
        chain_.clear();
        cursor at = root_cursor();
        double path = 1.0;
        for (std::size_t depth = 0; depth < config_.max_draft; ++depth) {
            double best = -1;
            Token best_token{};
            cursor best_next;
            expand(at, path, [&](Token token, double score, const cursor& next) {
                if (score <= best) return;
                best = score;
                best_token = token;
                best_next = next;
            });
            if (best < config_.min_path_score) break;
            chain_.push_back(best_token);
            path = best;
            at = best_next;
        }
        return chain_;
    }

    /// A tree draft of at most `tree_budget` nodes and depth `max_draft`: the most probable
    /// paths, expanded best-first, flattened as a parent-index array (`draft_tree`). The
    /// reference stays valid until the next call.
    /// @code
    /// const auto& t = drafter.tree();  // t.tokens, t.parents -> tree-attention mask
    /// @endcode
    [[nodiscard]] const draft_tree<Token>& tree() { return grow_tree(nullptr); }

    /// A tree draft that also holds the nodes of `extra`, another source's tree rooted
    /// after the last accepted token: CoordGen 3.3's calibrated tree
    /// (`calibrated_source::tree(last token)`), or kept segments of draft reuse. `extra`'s
    /// nodes come first (in its order, as many as `tree_budget` allows), then the
    /// automaton's best-first expansion fills the rest of the budget; a path both sources
    /// offer appears once, and the automaton keeps expanding below it.
    /// @code
    /// frugal::draft::calibrated_source<int> cal(prompt, prefill_topk, k);   // after the prefill
    /// const auto& t = drafter.tree(cal.tree(last_token));
    /// @endcode
    [[nodiscard]] const draft_tree<Token>& tree(const draft_tree<Token>& extra) {
        FRUGAL_CHECK(extra.parents.size() == extra.tokens.size(), "drafter::tree: extra tree has ",
                     extra.tokens.size(), " tokens but ", extra.parents.size(), " parents");
        for (std::size_t i = 0; i < extra.size(); ++i) {
            FRUGAL_CHECK(extra.parents[i] >= -1 && extra.parents[i] < static_cast<std::int32_t>(i),
                         "drafter::tree: extra node ", i, " has parent ", extra.parents[i],
                         " (must be -1 or an earlier node)");
            check_token(extra.tokens[i]);
        }
        return grow_tree(&extra);
    }

    /// The context automaton (prompt plus accepted tokens).
    [[nodiscard]] const suffix_automaton<Token>& context() const noexcept { return context_; }
    /// Length of the current suffix match in the context (0: none).
    [[nodiscard]] std::uint32_t context_match() const noexcept { return context_.repeat_length(); }
    /// Length of the current suffix match in the history (0: none or no history).
    [[nodiscard]] std::uint32_t history_match() const noexcept { return history_ ? hist_matcher_.length() : 0; }
    /// The configuration.
    [[nodiscard]] const drafter_config& config() const noexcept { return config_; }

private:
    // Sources: 0 context match, 1 history match, 2 and 3 their suffix-link back-offs.
    static constexpr std::size_t sources = 4;
    struct cursor {
        std::array<state_id, sources> state{no_state, no_state, no_state, no_state};
    };
    struct candidate {
        double score;
        std::int32_t parent;
        Token token;
        std::size_t depth;
        cursor next;
        bool operator<(const candidate& o) const noexcept { return score < o.score; }
    };

    [[nodiscard]] const suffix_automaton<Token>& source(std::size_t i) const noexcept {
        return i % 2 == 0 ? context_ : *history_;
    }

    [[nodiscard]] cursor root_cursor() {
        cursor root;
        const std::uint32_t lc = context_.repeat_length();
        const std::uint32_t lh = history_ != nullptr ? hist_matcher_.length() : 0;
        if (lc >= config_.min_match && lc + config_.match_margin >= lh) root.state[0] = context_.repeat_state();
        if (lh >= config_.min_match && lh + config_.match_margin >= lc) root.state[1] = hist_matcher_.state();
        for (std::size_t i = 2; i < sources && config_.backoff; ++i) {
            if (root.state[i - 2] == no_state) continue;
            const state_id up = source(i).link(root.state[i - 2]);
            if (source(i).length(up) >= config_.min_match) root.state[i] = up;
        }
        return root;
    }

    // Calls sink(token, score * p(token), cursor after token) for each continuation of `at`,
    // p(token) = sum_j w_j count_j(token) / (total_j + escape) / sum_j w_j.
    template <class Sink>
    void expand(const cursor& at, double score, Sink&& sink) const {
        std::array<double, sources> total{}, weight{};
        double weight_sum = 0;
        for (std::size_t i = 0; i < sources; ++i) {
            if (at.state[i] == no_state) continue;
            const auto& sam = source(i);
            if (sam.transition_count(at.state[i]) > config_.max_fanout) continue;
            sam.for_each_transition(at.state[i], [&](Token, state_id child) { total[i] += sam.count(child); });
            if (total[i] == 0) continue;
            weight[i] = i % 2 == 0 ? config_.context_weight : 1.0;
            weight_sum += weight[i];
        }
        if (weight_sum == 0) return;
        for (std::size_t i = 0; i < sources; ++i) {
            if (weight[i] == 0) continue;
            source(i).for_each_transition(at.state[i], [&](Token token, state_id) {
                cursor next;
                double p = 0;
                for (std::size_t j = 0; j < sources; ++j) {
                    if (weight[j] == 0) continue;
                    const state_id child = source(j).next(at.state[j], token);
                    if (child == no_state) continue;
                    if (j < i) return;  // already offered from an earlier source
                    next.state[j] = child;
                    p += weight[j] * source(j).count(child) / (total[j] + config_.escape);
                }
                sink(token, score * p / weight_sum, next);
            });
        }
    }

    // The node under `parent` (-1: the root) holding `token`, added if absent (first_child_
    // and next_sibling_ thread each node's children, so a lookup scans siblings only).
    std::int32_t child(std::int32_t parent, Token token) {
        auto head = [&]() -> std::int32_t& {
            return parent < 0 ? root_child_ : first_child_[static_cast<std::size_t>(parent)];
        };
        for (std::int32_t n = head(); n >= 0; n = next_sibling_[static_cast<std::size_t>(n)])
            if (tree_.tokens[static_cast<std::size_t>(n)] == token) return n;
        const std::int32_t node = tree_.push(parent, token);
        first_child_.push_back(-1);
        next_sibling_.push_back(head());
        head() = node;
        return node;
    }

    const draft_tree<Token>& grow_tree(const draft_tree<Token>* extra) {
        tree_.clear();
        heap_.clear();
        first_child_.clear();
        next_sibling_.clear();
        root_child_ = -1;
        if (extra != nullptr) {
            extra_node_.assign(extra->size(), -1);
            for (std::size_t i = 0; i < extra->size() && tree_.size() < config_.tree_budget; ++i) {
                const std::int32_t p = extra->parents[i];
                extra_node_[i] = child(p < 0 ? -1 : extra_node_[static_cast<std::size_t>(p)], extra->tokens[i]);
            }
        }
        auto push_children = [&](const cursor& at, std::int32_t parent, double score, std::size_t depth) {
            expand(at, score, [&](Token token, double s, const cursor& next) {
                heap_.push_back({s, parent, token, depth + 1, next});
                std::push_heap(heap_.begin(), heap_.end());
            });
        };
        push_children(root_cursor(), -1, 1.0, 0);
        while (!heap_.empty() && tree_.size() < config_.tree_budget) {
            std::pop_heap(heap_.begin(), heap_.end());
            const candidate c = heap_.back();
            heap_.pop_back();
            const std::int32_t node = child(c.parent, c.token);
            if (c.depth < config_.max_draft) push_children(c.next, node, c.score, c.depth);
        }
        return tree_;
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
    std::vector<std::int32_t> first_child_, next_sibling_, extra_node_;  // tree(): node links
    std::int32_t root_child_ = -1;
};

}  // namespace frugal::draft
