#pragma once
/// @file
/// Retrieval drafter over suffix automata (CoordGen 2.2/4.1, SAM-Decoding, SuffixDecoding):
/// the request's own context and the live history of past outputs. Chain drafts and tree
/// drafts whose nodes carry probabilities, with a length that follows the evidence.

#include <algorithm>
#include <array>
#include <cmath>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <limits>
#include <memory>
#include <optional>
#include <span>
#include <type_traits>
#include <vector>

#include "frugal/core/error.hpp"
#include "frugal/draft/acceptance_calibrator.hpp"
#include "frugal/draft/draft_size.hpp"
#include "frugal/draft/history.hpp"
#include "frugal/draft/suffix_automaton.hpp"
#include "frugal/draft/verify.hpp"

namespace frugal::draft {

/// Drafting policy. docs/drafting.md explains the probability model and how the defaults
/// were measured.
struct drafter_config {
    std::size_t max_draft = 32;      ///< chain: most tokens in a chain draft (K)
    std::size_t tree_depth = 64;     ///< tree: deepest path of a tree draft
    std::size_t tree_budget = 64;    ///< tree: most nodes in a tree draft
    std::uint32_t min_match = 1;     ///< shortest suffix match a source drafts from
    /// Evidence scale of the context (prompt plus accepted tokens): a match of length l
    /// whose continuations were seen n times in all predicts a continuation seen c times
    /// with probability c / (n + context_escape / l).
    double context_escape = 2.0;
    /// The same for the history of past outputs, where short matches are weaker evidence.
    double history_escape = 8.0;
    /// No node is drafted whose path probability (the product of the probabilities from
    /// the root) is below this: it sets how far a draft goes on thin evidence.
    double min_path_score = 0.002;
    /// A match state with more continuations than this is not drafted from: its
    /// probability is spread over too many tokens to pay for scanning them (this keeps a
    /// step's cost independent of the vocabulary).
    std::size_t max_fanout = 64;
    /// Also draft from each match's suffix-link back-off (the next shorter match, with
    /// more occurrences), which gets the probability mass the longer match leaves.
    bool backoff = true;
    std::uint64_t vocab_size = 0;    ///< tokens must lie in [0, vocab_size); 0: any non-negative value.
                                     ///< History tokens outside it are never drafted.
};

/// A request's drafter: its context (prompt plus accepted tokens, an automaton it owns) and
/// the newest snapshot of an optional `live_history`. Movable, so an engine can keep one per
/// request in any container (`speculator` does).
///
/// Feed it the prompt with `begin()` and every accepted token (bonus included) with
/// `accept()`: amortized O(1) per token. Each draft first moves to the history's newest
/// snapshot if there is one (an atomic load when there is none), then consults up to eight
/// sources: the longest suffix match in the context and in each history generation, each
/// one's suffix-link back-off, and two resume points of a copy that broke off. A source whose match has length l and whose
/// continuations were seen n times in all predicts a continuation seen c times with
/// probability c / (n + escape / l): long matches and frequent agreeing continuations are
/// strong evidence, short or ambiguous ones weak. The sources are consulted from the
/// strongest (largest l / escape) down, each getting the probability the previous ones
/// left (their escape), so a node's children's probabilities sum to at most 1. Deeper in a
/// draft the match is longer by the drafted tokens, so a long copy gets more, not less,
/// confident. `chain()` follows the most probable token, `tree()` expands the most probable
/// paths best-first; both stop below `min_path_score`.
///
/// Sized for serving: `chain(cost)` and `tree(cost)` keep only the part of the draft that
/// pays for its verification under the engine's `verification_cost` (`choose_draft_size`),
/// with the probabilities of an optional `acceptance_calibrator`, which the drafter then
/// also teaches: each accepted token decides the nodes of the earlier drafts it reaches
/// (the drafted tokens at its position under the path accepted so far), which are
/// reported to it as the token arrives.
/// @code
/// frugal::draft::drafter<int> d({.max_draft = 16}, &history);
/// d.begin(prompt);
/// while (!done) {
///     const auto& draft = d.chain();                                // verify with the model
///     auto r = frugal::draft::verify_chain<int>(draft.tokens, model_argmax);
///     d.accept(std::span(draft.tokens).first(r.accepted)); d.accept(r.bonus);
/// }
/// @endcode
template <std::integral Token>
class drafter {
public:
    /// A drafter with `config` and, optionally, a history and a calibrator that must outlive it.
    explicit drafter(drafter_config config = {}, const live_history<Token>* history = nullptr,
                     acceptance_calibrator* calibrator = nullptr)
        : config_(config), history_(history), calibrator_(calibrator) {
        FRUGAL_CHECK(config_.max_draft >= 1, "drafter: max_draft must be >= 1, got ", config_.max_draft);
        FRUGAL_CHECK(config_.tree_depth >= 1, "drafter: tree_depth must be >= 1, got ", config_.tree_depth);
        FRUGAL_CHECK(config_.tree_budget >= 1 && config_.tree_budget <= max_tree_budget,
                     "drafter: tree_budget must be in [1, ", max_tree_budget, "], got ", config_.tree_budget);
        FRUGAL_CHECK(config_.min_match >= 1, "drafter: min_match must be >= 1, got ", config_.min_match);
        FRUGAL_CHECK(std::isfinite(config_.context_escape) && config_.context_escape > 0,
                     "drafter: context_escape must be finite and > 0, got ", config_.context_escape);
        FRUGAL_CHECK(std::isfinite(config_.history_escape) && config_.history_escape > 0,
                     "drafter: history_escape must be finite and > 0, got ", config_.history_escape);
        FRUGAL_CHECK(config_.min_path_score >= 0 && config_.min_path_score < 1,
                     "drafter: min_path_score must be in [0, 1), got ", config_.min_path_score);
    }

    drafter(drafter&&) noexcept = default;
    drafter& operator=(drafter&&) noexcept = default;
    drafter(const drafter&) = delete;
    drafter& operator=(const drafter&) = delete;

    /// Starts a request: the context becomes `prompt`, matched against the newest history.
    /// @code
    /// drafter.begin(prompt_tokens);
    /// @endcode
    void begin(std::span<const Token> prompt) {
        for (Token t : prompt) check_token(t);
        watched_.clear();
        context_.clear();
        context_.reserve(prompt.size() + 1024);
        snapshot_.reset();
        for (auto& m : matchers_) m.reset();
        prompt_size_ = prompt.size();
        resume_ = {};
        context_.append(prompt);
        refresh();
    }

    /// Appends accepted tokens (never rejected draft tokens) to the context.
    /// @code
    /// drafter.accept(std::span(draft.tokens).first(result.accepted)); drafter.accept(result.bonus);
    /// @endcode
    void accept(std::span<const Token> tokens) {
        for (Token t : tokens) check_token(t);
        if (!watched_.empty()) follow(tokens);
        track_resume(tokens);
        context_.append(tokens);  // one batch: shared suffix-link paths are updated once
        for (auto& m : matchers_)
            if (m) m->advance(tokens);
    }
    /// Appends one accepted token.
    void accept(Token token) { accept(std::span<const Token>(&token, 1)); }

    /// A chain draft of at most `max_draft` tokens: the most probable token at each step,
    /// while the path probability stays at or above `min_path_score` (empty when nothing
    /// matches). A path: `parents[i] == i - 1`. Valid until the next draft call.
    /// @code
    /// std::span<const int> tokens = drafter.chain().tokens;
    /// @endcode
    [[nodiscard]] const draft_tree<Token>& chain() {
        refresh();
        draft_.clear();
        cursors_.clear();
        cursor at = root_cursor();
        double path = 1.0;
        for (std::size_t depth = 0; depth < config_.max_draft; ++depth) {
            gather(at, path);
            const auto best = std::max_element(merged_.begin(), merged_.end(),
                                               [](const weighted& a, const weighted& b) { return a.p < b.p; });
            if (best == merged_.end() || path * best->p < threshold()) break;
            draft_.push(static_cast<std::int32_t>(depth) - 1, best->token, best->p);
            path *= best->p;
            at = step(at, best->token);
        }
        watch();
        return draft_;
    }

    /// The prefix of `chain()` that pays for its verification under `cost`, given what the
    /// `rest` of the batch verifies and emits (nothing: this request is the batch); its
    /// probabilities are the calibrated ones. Valid until the next draft call.
    /// @code
    /// const auto& d = drafter.chain(frugal::draft::roofline_cost::h100_7b(), {.tokens = 31, .expected = 31});
    /// @endcode
    template <verification_cost C>
    [[nodiscard]] const draft_tree<Token>& chain(const C& cost, batch_load rest = {}) {
        (void)chain();
        return sized(cost, rest);
    }

    /// The part of `tree()` that pays for its verification under `cost` (its best nodes by
    /// calibrated path probability), given what the `rest` of the batch verifies and emits.
    /// Valid until the next draft call.
    /// @code
    /// const auto& t = drafter.tree(frugal::draft::roofline_cost::h100_7b());  // a batch of one: deep
    /// @endcode
    template <verification_cost C>
    [[nodiscard]] const draft_tree<Token>& tree(const C& cost, batch_load rest = {}) {
        (void)tree();
        return sized(cost, rest);
    }

    /// The last draft's nodes' probabilities as the calibrator corrects them now (the
    /// drafter's own without one): per node, `conditional` given its parent and `path`
    /// from the root.
    void calibrated(std::vector<double>& conditional, std::vector<double>& path) const {
        (calibrator_ != nullptr ? calibrator_->table() : acceptance_table{}).calibrate(draft_, conditional, path);
    }
    /// The last draft as drafted, before any sizing (what `chain()`/`tree()` returned).
    [[nodiscard]] const draft_tree<Token>& last_draft() const noexcept { return draft_; }
    /// The calibrator this drafter reports to (null: none).
    [[nodiscard]] acceptance_calibrator* calibrator() const noexcept { return calibrator_; }

    /// A tree draft of at most `tree_budget` nodes and depth `tree_depth`: the most probable
    /// paths, expanded best-first, flattened as a parent-index array (`draft_tree`). Nodes
    /// come in order of decreasing path probability, so the first m nodes are the best
    /// m-node tree. Valid until the next draft call.
    /// @code
    /// const auto& t = drafter.tree();  // t.tokens, t.parents -> tree-attention mask; t.score
    /// @endcode
    [[nodiscard]] const draft_tree<Token>& tree() { return grow_tree(nullptr); }

    /// A tree draft that also holds the nodes of `extra`, another source's tree rooted
    /// after the last accepted token: CoordGen 3.3's calibrated tree
    /// (`calibrated_source::tree(last token)`), or kept segments of draft reuse. `extra`'s
    /// nodes come first (in its order, as many as `tree_budget` allows, with `extra`'s
    /// probabilities, or 0 where it has none), then the best-first expansion fills the rest;
    /// a path both offer appears once, and the expansion continues below it.
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
    /// The tokens accepted since `begin` (the request's output so far).
    [[nodiscard]] std::span<const Token> output() const noexcept { return context_.text().subspan(prompt_size_); }
    /// Length of the current suffix match in the context (0: none).
    [[nodiscard]] std::uint32_t context_match() const noexcept { return context_.repeat_length(); }
    /// Length of the longest current suffix match in the history snapshot in use (0: none).
    [[nodiscard]] std::uint32_t history_match() const noexcept {
        std::uint32_t l = 0;
        for (const auto& m : matchers_)
            if (m) l = std::max(l, m->length());
        return l;
    }
    /// The history snapshot in use (null without a history).
    [[nodiscard]] const std::shared_ptr<const history_snapshot<Token>>& snapshot() const noexcept { return snapshot_; }
    /// The configuration.
    [[nodiscard]] const drafter_config& config() const noexcept { return config_; }

    /// Largest `tree_budget` (node indices are 32-bit).
    static constexpr std::size_t max_tree_budget = std::size_t{1} << 30;

private:
    // Slots: 0 context, 1 young history, 2 old history; 3..5 their suffix-link back-offs;
    // 6 and 7 the context's resume points (insertion, substitution).
    static constexpr std::size_t automata = 3, slots = 2 * automata + 2;
    static constexpr std::size_t resume_slot = 2 * automata;
    // A copy that breaks off after at least this many matched tokens leaves resume points.
    static constexpr std::uint32_t resume_min = 8;
    // A source left less than this share of the probability by the stronger ones is not
    // read: it could move no token's probability by more, and on a large history each
    // source read costs a cache miss per node.
    static constexpr double min_source_mass = 0.01;
    // A resume point not followed within this many accepted tokens is dropped.
    static constexpr std::uint32_t resume_wait = 32;
    struct resume_point {
        state_id state = no_state;
        std::uint32_t matched = 0;   // length of the matched string (to follow splits)
        std::uint32_t evidence = 0;  // tokens confirmed since the break, plus one
        std::uint32_t waited = 0;
        bool followed = false;
    };
    // A new generation outside a matcher's lineage is matched against this many of the
    // context's last tokens (a longer match is found again as it continues).
    static constexpr std::size_t rematch_window = 256;
    // A carried-over match shorter than this is also looked for afresh over as many tokens.
    static constexpr std::size_t regrow_window = 32;

    // Where each source stands after a draft path: at a state of its automaton or, once the
    // matched string occurs only once, at that occurrence in the text, whose continuation is
    // then read contiguously instead of state by state (the same counts: one occurrence,
    // one continuation).
    struct cursor {
        std::array<state_id, slots> state{};        // no_state: text mode
        std::array<std::uint32_t, slots> length{};  // match length (the evidence); 0: inactive
        std::array<std::uint32_t, slots> end{};     // text mode: end of the single occurrence
        std::array<std::uint32_t, slots> stop{};    // text mode: end of its document
    };
    struct weighted {
        Token token;
        double p;
    };
    struct candidate {
        double score;
        double p;
        std::int32_t parent;
        Token token;
        std::uint32_t depth;
        bool operator<(const candidate& o) const noexcept { return score < o.score; }
    };

    [[nodiscard]] const suffix_automaton<Token>& automaton(std::size_t slot) const noexcept {
        if (slot >= resume_slot) return context_;
        const std::size_t a = slot % automata;
        if (a == 0) return context_;
        return a == 1 ? snapshot_->young_generation().automaton : snapshot_->old_generation().automaton;
    }
    [[nodiscard]] double escape(std::size_t slot) const noexcept {
        return slot >= resume_slot || slot % automata == 0 ? config_.context_escape : config_.history_escape;
    }
    [[nodiscard]] double threshold() const noexcept {
        return std::max(config_.min_path_score, std::numeric_limits<double>::min());
    }

    // Moves to the history's newest snapshot: a generation of the same lineage keeps the
    // match (it only grew; a short one is also looked for afresh), another is matched
    // afresh over the last rematch_window tokens.
    void refresh() {
        if (history_ == nullptr || (snapshot_ && snapshot_->version() == history_->version())) return;
        auto next = history_->snapshot();
        for (std::size_t g = 1; g < automata; ++g) {
            const auto& gen = g == 1 ? next->young_generation() : next->old_generation();
            const auto* before = snapshot_ ? (g == 1 ? &snapshot_->young_generation() : &snapshot_->old_generation())
                                           : nullptr;
            auto& m = matchers_[g];
            const auto text = context_.text();
            if (m && before != nullptr && before->lineage == gen.lineage) {
                m->rebind(gen.automaton);
                if (m->length() >= regrow_window) continue;
                // The new documents may hold a longer match than the one carried over.
                suffix_matcher<Token> fresh(gen.automaton);
                fresh.advance(text.last(std::min(text.size(), regrow_window)));
                if (fresh.length() > m->length()) m = fresh;
            } else {
                m.emplace(gen.automaton);
                m->advance(text.last(std::min(text.size(), rematch_window)));
            }
        }
        snapshot_ = std::move(next);
    }

    // Puts `slot` of `c` at state `s` with match length `length` (text mode when the
    // matched string occurs once).
    void enter(cursor& c, std::size_t slot, state_id s, std::uint32_t length) const {
        const auto& sam = automaton(slot);
        c.length[slot] = length;
        c.state[slot] = s;
        if (sam.count(s) != 1) return;
        const std::uint32_t e = sam.last_end(s);
        c.state[slot] = no_state;
        c.end[slot] = e;
        c.stop[slot] = static_cast<std::uint32_t>(e + 1 + sam.continuation(e, sam.size()).size());
    }

    [[nodiscard]] cursor root_cursor() {
        cursor root;
        auto use = [&](std::size_t slot, state_id s, std::uint32_t length) {
            if (length < config_.min_match) return;
            enter(root, slot, s, length);
            if (!config_.backoff) return;
            const auto& sam = automaton(slot);
            const state_id up = sam.link(s);
            if (up != no_state && sam.length(up) >= config_.min_match) enter(root, slot + automata, up, sam.length(up));
        };
        use(0, context_.repeat_state(), context_.repeat_length());
        for (std::size_t g = 1; g < automata; ++g)
            if (matchers_[g]) use(g, matchers_[g]->state(), matchers_[g]->length());
        for (std::size_t r = 0; r < resume_.size(); ++r) {
            resume_point& h = resume_[r];
            if (h.state == no_state) continue;
            while (h.state != suffix_automaton<Token>::root && h.matched <= context_.length(context_.link(h.state)))
                h.state = context_.link(h.state);  // follow splits made by later appends
            enter(root, resume_slot + r, h.state, h.evidence);
        }
        return root;
    }

    // Resume points: when the context's copy breaks off after a long match (the model
    // edits what it copies), the copy often resumes where it left off (an insertion) or one
    // token later (a substitution). Both are kept, advanced by the tokens that follow them
    // and dropped when not followed soon, or when a followed one breaks off in turn.
    // Walks the tokens over the automaton as it was before they are appended.
    void track_resume(std::span<const Token> tokens) {
        state_id m = context_.size() == 0 ? no_state : context_.repeat_state();
        std::uint32_t matched = context_.repeat_length();
        for (Token t : tokens) {
            for (resume_point& h : resume_) {
                if (h.state == no_state) continue;
                const state_id n = context_.next(h.state, t);
                if (n != no_state) {
                    h = {n, h.matched + 1, h.evidence + 1, 0, true};
                } else if (h.followed || ++h.waited > resume_wait) {
                    h = {};
                }
            }
            const state_id n = m == no_state ? no_state : context_.next(m, t);
            if (n != no_state) {
                m = n;
                ++matched;
                continue;
            }
            if (m != no_state && matched >= resume_min) {
                resume_[0] = {m, matched, 1, 0, false};
                resume_[1] = {};
                state_id best = no_state;
                std::uint32_t best_count = 0;
                context_.for_each_transition(m, [&](Token, state_id c) {
                    if (context_.count(c) > best_count) best = c, best_count = context_.count(c);
                });
                if (best != no_state) resume_[1] = {best, matched + 1, 1, 0, false};
            }
            m = no_state;
        }
    }

    // Fills merged_ with every continuation of `at` and its probability (the model in the
    // class comment), dropping from `at` the sources that cannot lift a node above the
    // threshold from a path of probability `path`.
    void gather(cursor& at, double path) {
        std::array<std::size_t, slots> order{};
        std::size_t active = 0;
        for (std::size_t s = 0; s < slots; ++s)
            if (at.length[s] != 0) order[active++] = s;
        // A resume point ranks by the tokens confirmed since the break (it is a guess until then).
        auto evidence = [&](std::size_t s) { return double(at.length[s] - (s >= resume_slot)) / escape(s); };
        for (std::size_t i = 1; i < active; ++i)  // insertion sort: at most `slots` entries
            for (std::size_t j = i; j > 0 && evidence(order[j]) > evidence(order[j - 1]); --j)
                std::swap(order[j], order[j - 1]);
        // Strongest source first, each taking the mass the previous ones left; a source that
        // can no longer lift a node above the threshold, or would hold less than
        // min_source_mass, is dropped from `at`, so the cursors below it skip it too.
        gathered_.clear();
        double mass = 1.0;
        std::size_t runs = 0;
        for (std::size_t k = 0; k < active; ++k) {
            const std::size_t s = order[k];
            if (path * mass < threshold() || mass < min_source_mass) {
                at.length[s] = 0;
                continue;
            }
            const auto& sam = automaton(s);
            const std::size_t first = gathered_.size();
            double total = 0;
            if (at.state[s] == no_state) {  // text mode: the one continuation, if any
                if (at.end[s] + 1 < at.stop[s]) {
                    gathered_.push_back({sam.text()[at.end[s] + 1], 1.0});
                    total = 1;
                }
            } else {
                if (sam.transition_count(at.state[s]) > config_.max_fanout) continue;
                sam.for_each_transition(at.state[s], [&](Token token, state_id child) {
                    const double c = sam.count(child);
                    total += c;
                    gathered_.push_back({token, c});
                });
            }
            if (total == 0) continue;
            ++runs;
            const double esc = escape(s) / double(at.length[s]);
            const double scale = mass / (total + esc);
            for (std::size_t i = first; i < gathered_.size(); ++i) gathered_[i].p *= scale;
            mass *= esc / (total + esc);
        }
        if (runs > 1)  // one run holds distinct tokens: only several runs need merging
            std::sort(gathered_.begin(), gathered_.end(), [](const weighted& a, const weighted& b) { return a.token < b.token; });
        merged_.clear();
        for (const weighted& w : gathered_) {
            // History documents are any engine's outputs: a token outside this request's
            // vocabulary is never drafted (the context's tokens were checked on the way in).
            if (!in_vocabulary(w.token)) continue;
            if (!merged_.empty() && merged_.back().token == w.token) {
                merged_.back().p += w.p;
            } else {
                merged_.push_back(w);
            }
        }
    }

    // The cursor after `token`: every source that continues with it, one token longer.
    [[nodiscard]] cursor step(const cursor& at, Token token) const {
        cursor next;
        for (std::size_t s = 0; s < slots; ++s) {
            if (at.length[s] == 0) continue;
            if (at.state[s] == no_state) {  // text mode
                if (at.end[s] + 1 >= at.stop[s] || automaton(s).text()[at.end[s] + 1] != token) continue;
                next.state[s] = no_state;
                next.length[s] = at.length[s] + 1;
                next.end[s] = at.end[s] + 1;
                next.stop[s] = at.stop[s];
                continue;
            }
            const state_id child = automaton(s).next(at.state[s], token);
            if (child != no_state) enter(next, s, child, at.length[s] + 1);
        }
        return next;
    }

    // The node under `parent` (-1: the root) holding `token`, added if absent (first_child_
    // and next_sibling_ thread each node's children, so a lookup scans siblings only).
    std::int32_t child(std::int32_t parent, Token token, float p) {
        auto head = [&]() -> std::int32_t& {
            return parent < 0 ? root_child_ : first_child_[static_cast<std::size_t>(parent)];
        };
        for (std::int32_t n = head(); n >= 0; n = next_sibling_[static_cast<std::size_t>(n)])
            if (draft_.tokens[static_cast<std::size_t>(n)] == token) return n;
        const std::int32_t node = draft_.push(parent, token, p);
        first_child_.push_back(-1);
        next_sibling_.push_back(head());
        head() = node;
        return node;
    }

    // A draft whose nodes the accepted tokens are deciding: the node they reached.
    struct watched_draft {
        std::vector<Token> tokens;
        std::vector<std::int32_t> parents;
        std::vector<float> probabilities;
        std::int32_t at = -1;  // -1: the root
        std::uint32_t depth = 0;
    };
    // Drafts watched at once: each accepted token moves every watched draft one level
    // down, so drafts of depth <= max_watched are decided before they would be dropped.
    static constexpr std::size_t max_watched = 64;

    // Watches the new draft (with a calibrator), dropping the oldest if too many are.
    void watch() {
        if (calibrator_ == nullptr || draft_.size() == 0) return;
        if (watched_.size() == max_watched) {
            spare_.push_back(std::move(watched_.front()));
            watched_.pop_front();
        }
        watched_draft w;
        if (!spare_.empty()) w = std::move(spare_.back()), spare_.pop_back();
        w.tokens.assign(draft_.tokens.begin(), draft_.tokens.end());
        w.parents.assign(draft_.parents.begin(), draft_.parents.end());
        w.probabilities.assign(draft_.probabilities.begin(), draft_.probabilities.end());
        w.at = -1;
        w.depth = 0;
        watched_.push_back(std::move(w));
    }

    // Each accepted token decides, in every watched draft, the children of the node the
    // earlier tokens reached: reported to the calibrator as they are decided (so a long
    // copy's successes arrive no later than its failures). A draft the tokens leave is done.
    void follow(std::span<const Token> tokens) {
        std::size_t kept = 0;
        for (std::size_t i = 0; i < watched_.size(); ++i) {
            watched_draft& w = watched_[i];
            bool done = false;
            for (Token t : tokens) {
                std::int32_t next = -1;
                for (std::size_t n = w.at < 0 ? 0 : static_cast<std::size_t>(w.at) + 1; n < w.tokens.size(); ++n) {
                    if (w.parents[n] != w.at) continue;
                    const bool accepted = w.tokens[n] == t;
                    calibrator_->observe(w.probabilities[n], w.depth + 1, accepted);
                    if (accepted) next = static_cast<std::int32_t>(n);
                }
                if (next < 0) {
                    done = true;
                    break;
                }
                w.at = next;
                ++w.depth;
            }
            if (done) {
                spare_.push_back(std::move(w));
            } else if (kept != i) {
                watched_[kept++] = std::move(w);
            } else {
                ++kept;
            }
        }
        watched_.resize(kept);
    }

    template <verification_cost C>
    const draft_tree<Token>& sized(const C& cost, batch_load rest) {
        calibrated(conditional_, path_);
        std::vector<draft_candidate> candidates(draft_.size());
        for (std::size_t i = 0; i < draft_.size(); ++i) candidates[i] = {path_[i], 0, static_cast<std::uint32_t>(i)};
        const std::size_t m =
            choose_draft_size(std::span(candidates), {rest.tokens + 1, rest.expected + 1.0}, cost);
        std::vector<char> keep(draft_.size(), 0);
        for (std::size_t i = 0; i < m; ++i) keep[candidates[i].node] = 1;
        keep_nodes(draft_, std::span<const char>(keep), std::span<const double>(conditional_), sized_);
        return sized_;
    }

    const draft_tree<Token>& grow_tree(const draft_tree<Token>* extra) {
        refresh();
        draft_.clear();
        heap_.clear();
        cursors_.clear();
        first_child_.clear();
        next_sibling_.clear();
        root_child_ = -1;
        if (extra != nullptr) {
            extra_node_.assign(extra->size(), -1);
            const bool with_p = extra->probabilities.size() == extra->size();
            for (std::size_t i = 0; i < extra->size() && draft_.size() < config_.tree_budget; ++i) {
                const std::int32_t p = extra->parents[i];
                extra_node_[i] = child(p < 0 ? -1 : extra_node_[static_cast<std::size_t>(p)], extra->tokens[i],
                                       with_p ? extra->probabilities[i] : 0.0f);
            }
        }
        auto push_children = [&](cursor& at, std::int32_t parent, double score, std::uint32_t depth) {
            gather(at, score);
            for (const weighted& w : merged_) {
                if (score * w.p < threshold()) continue;
                heap_.push_back({score * w.p, w.p, parent, w.token, depth + 1});
                std::push_heap(heap_.begin(), heap_.end());
            }
        };
        cursor root = root_cursor();
        push_children(root, -1, 1.0, 0);
        while (!heap_.empty() && draft_.size() < config_.tree_budget) {
            std::pop_heap(heap_.begin(), heap_.end());
            const candidate c = heap_.back();
            heap_.pop_back();
            const std::int32_t node = child(c.parent, c.token, static_cast<float>(c.p));
            const auto n = static_cast<std::size_t>(node);
            if (cursors_.size() <= n) cursors_.resize(n + 1);
            cursors_[n] = step(c.parent < 0 ? root : cursors_[static_cast<std::size_t>(c.parent)], c.token);
            if (c.depth < config_.tree_depth) push_children(cursors_[n], node, c.score, c.depth);
        }
        watch();
        return draft_;
    }

    [[nodiscard]] bool in_vocabulary(Token token) const noexcept {
        if constexpr (std::signed_integral<Token>)
            if (token < 0) return false;
        return config_.vocab_size == 0 || static_cast<std::uint64_t>(token) < config_.vocab_size;
    }

    void check_token(Token token) const {
        // Printed through a wide integer: an 8-bit token is a number, not a character.
        using wide = std::conditional_t<std::is_signed_v<Token>, long long, unsigned long long>;
        if constexpr (std::signed_integral<Token>)
            FRUGAL_CHECK_AS(frugal::out_of_range, token >= 0, "drafter: negative token ", static_cast<wide>(token));
        if (config_.vocab_size != 0)
            FRUGAL_CHECK_AS(frugal::out_of_range, static_cast<std::uint64_t>(token) < config_.vocab_size,
                            "drafter: token ", static_cast<wide>(token), " outside the vocabulary of ",
                            config_.vocab_size);
    }

    drafter_config config_;
    const live_history<Token>* history_;
    acceptance_calibrator* calibrator_;
    std::deque<watched_draft> watched_;  // drafts being decided, oldest first
    std::vector<watched_draft> spare_;   // their buffers, for reuse
    draft_tree<Token> sized_;
    std::vector<double> conditional_, path_;
    std::shared_ptr<const history_snapshot<Token>> snapshot_;
    suffix_automaton<Token> context_;
    std::size_t prompt_size_ = 0;
    std::array<std::optional<suffix_matcher<Token>>, automata> matchers_;  // [0] unused: the context's is free
    std::array<resume_point, 2> resume_{};
    draft_tree<Token> draft_;
    std::vector<weighted> gathered_, merged_;
    std::vector<candidate> heap_;
    std::vector<cursor> cursors_;  // tree(): the cursor after each node
    std::vector<std::int32_t> first_child_, next_sibling_, extra_node_;  // tree(): node links
    std::int32_t root_child_ = -1;
};

}  // namespace frugal::draft
