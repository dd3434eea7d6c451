#pragma once
/// @file
/// An online suffix automaton over any integral token type (CoordGen 4.1, SAM-Decoding),
/// with per-state occurrence counts and first/last end positions kept exact as tokens
/// arrive, and a matcher that tracks the longest suffix match across decode steps.

#include <algorithm>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <span>
#include <type_traits>
#include <utility>
#include <vector>

#include "frugal/core/assert.hpp"
#include "frugal/core/error.hpp"
#include "frugal/core/huge_page_allocator.hpp"

namespace frugal::draft {

/// Index of a state in a suffix_automaton.
using state_id = std::uint32_t;
/// Sentinel for "no state" (the root's suffix link, a missing transition).
inline constexpr state_id no_state = std::numeric_limits<state_id>::max();
/// Sentinel for "no position" (the root's end positions).
inline constexpr std::uint32_t no_position = std::numeric_limits<std::uint32_t>::max();

/// The suffix automaton (Blumer et al.) of a growing token sequence, built online.
///
/// Every distinct substring of the text is a path from the root; the state it ends in
/// records `length` (its longest string), the suffix `link`, and exact endpos statistics:
/// `count` (occurrences), `first_end` and `last_end` (index of the last token of the
/// earliest and of the most recent occurrence), so a drafter can pick the earliest, the
/// most recent or the most frequent continuation (CoordGen 4.1; SAM-Decoding).
///
/// The text may be split into documents (`begin_document()`, a generalized automaton):
/// no substring crosses a boundary. A state is one cache-line record holding its scalars
/// and, inline, its first few transitions (sorted by token); a state with more spills
/// them to a sorted array of its own. A walk over states reads one line per state, and
/// the records are trivially copyable, so growing the state array is a memcpy.
///
/// Complexity: the automaton itself is amortized O(1) per `append` (at most 2n states,
/// 3n transitions). Keeping `count` and `last_end` exact online means adding the new end
/// position to every state on the suffix-link path of the new prefix: O(d) per append,
/// where d is the number of distinct endpos classes among the text's suffixes, at most
/// two more than the length of the longest suffix that occurred before. On natural
/// text d is a small constant (measured by `frugal-bench draft`); on periodic text of
/// period p it grows as n / p. `append(span)` then adds a batch's end positions in one
/// pass over the union of their paths, O(B + n / p) for B tokens instead of O(B n / p).
/// @code
/// frugal::draft::suffix_automaton<int> sam;
/// sam.append(std::vector<int>{5, 7, 5, 7, 9});
/// auto s = sam.find(std::vector<int>{5, 7});   // state of "5 7"
/// assert(sam.count(s) == 2 && sam.first_end(s) == 1 && sam.last_end(s) == 3);
/// @endcode
template <std::integral Token>
class suffix_automaton {
public:
    using token_type = Token;

    /// The root state (the empty string).
    static constexpr state_id root = 0;

    /// An empty automaton holding one document.
    suffix_automaton() { clear(); }

    /// Removes every token and state.
    void clear() {
        meta_.clear();
        spill_.clear();
        text_.clear();
        documents_.assign(1, 0);
        for (Token t : root_tokens_) root_dense_[static_cast<std::size_t>(t)] = no_state;
        root_tokens_.clear();
        meta_.push_back(node{});
        last_ = root;
        repeat_ = root;
        repeat_end_ = no_position;
    }

    /// Reserves room for `tokens` tokens (2 * tokens states).
    void reserve(std::size_t tokens) {
        text_.reserve(tokens);
        meta_.reserve(2 * tokens + 1);
    }

    /// Starts a new document: later substrings never span the boundary.
    /// @code
    /// sam.append(first_response); sam.begin_document(); sam.append(second_response);
    /// @endcode
    void begin_document() {
        if (documents_.back() != text_.size()) documents_.push_back(static_cast<std::uint32_t>(text_.size()));
        last_ = root;
        repeat_ = root;
        repeat_end_ = no_position;
    }

    /// Appends one token: amortized O(1) for the automaton, plus O(d) to add the new end
    /// position to the d states on its suffix-link path (see the class comment).
    /// @code
    /// for (int t : accepted) sam.append(t);
    /// @endcode
    void append(Token token) { (void)add_end(extend(token)); }

    /// Appends every token of `tokens` in order; counts and end positions are exact when it
    /// returns. Each token's end position is added by a walk up its suffix-link path, as
    /// `append(token)` does, until a walk is longer than `long_walk` states (repetitive
    /// text, whose paths grow with the text: on a period-p text they hold n / p states);
    /// from there the batch's end positions are added in one pass over the union of their
    /// paths (each state once), so such a batch costs O(n / p) rather than O(n / p) per token.
    /// @code
    /// sam.append(std::span<const int>(prompt));
    /// @endcode
    void append(std::span<const Token> tokens) {
        if (tokens.empty()) return;
        pending_.clear();
        for (Token t : tokens.first(tokens.size() - 1)) {
            const state_id cur = extend(t);
            if (!pending_.empty() || add_end(cur) > long_walk) pending_.push_back(cur);
        }
        if (!pending_.empty()) {  // the first entry's walk is done: keep it out of the pass
            pending_.erase(pending_.begin());
            flush();
        }
        append(tokens.back());  // the last one walks, so that repeat_end() sees the others
    }

    /// Target of the transition from `s` by `token`, or `no_state`.
    /// @code
    /// auto s = sam.next(sam.root, 42);   // the state of "42", if it occurs
    /// @endcode
    [[nodiscard]] state_id next(state_id s, Token token) const noexcept {
        FRUGAL_ASSERT(s < meta_.size());
        if (s == root && dense(token)) {
            const auto i = static_cast<std::size_t>(token);
            return i < root_dense_.size() ? root_dense_[i] : no_state;
        }
        const node& n = meta_[s];
        const edge* e = edges_of(n);
        if (n.edges <= inline_edges) {  // a short sorted run: a linear scan
            for (std::uint32_t i = 0; i < n.edges; ++i)
                if (e[i].token == token) return e[i].target;
            return no_state;
        }
        const edge* it = std::lower_bound(e, e + n.edges, token, [](const edge& a, Token t) { return a.token < t; });
        return it != e + n.edges && it->token == token ? it->target : no_state;
    }

    /// The state of `pattern`, or `no_state` when it does not occur.
    /// @code
    /// auto s = sam.find(pattern); if (s != frugal::draft::no_state) n = sam.count(s);
    /// @endcode
    [[nodiscard]] state_id find(std::span<const Token> pattern) const noexcept {
        state_id s = root;
        for (Token t : pattern) {
            s = next(s, t);
            if (s == no_state) return no_state;
        }
        return s;
    }

    /// Length of the longest string of state `s`.
    [[nodiscard]] std::uint32_t length(state_id s) const { return at(s).length; }
    /// Suffix link of `s` (`no_state` for the root).
    [[nodiscard]] state_id link(state_id s) const { return at(s).link; }
    /// Number of occurrences (end positions) of the strings of `s`; the root counts every token.
    [[nodiscard]] std::uint32_t count(state_id s) const { return at(s).count; }
    /// Index of the last token of the earliest occurrence (`no_position` for the root).
    [[nodiscard]] std::uint32_t first_end(state_id s) const { return at(s).first_end; }
    /// Index of the last token of the most recent occurrence (`no_position` for an empty root).
    [[nodiscard]] std::uint32_t last_end(state_id s) const { return at(s).last_end; }
    /// Calls `fn(token, target)` for every outgoing transition of `s` (sorted by token,
    /// except the root's, which come in order of first appearance).
    /// @code
    /// sam.for_each_transition(s, [&](int token, auto target) { total += sam.count(target); });
    /// @endcode
    template <class Fn>
    void for_each_transition(state_id s, Fn&& fn) const {
        if (s == root)
            for (Token t : root_tokens_) fn(t, root_dense_[static_cast<std::size_t>(t)]);
        const node& n = at(s);
        const edge* e = edges_of(n);
        for (std::uint32_t i = 0; i < n.edges; ++i) fn(e[i].token, e[i].target);
    }
    /// Number of outgoing transitions of `s`.
    [[nodiscard]] std::size_t transition_count(state_id s) const {
        return at(s).edges + (s == root ? root_tokens_.size() : 0);
    }

    /// The longest suffix of the current document that also ends earlier (the suffix link
    /// of the newest prefix): its state, length (0: none) and the end of its most recent
    /// earlier occurrence (`no_position`: none). This is the self-match a context drafter
    /// needs, computed by `append` at no extra cost.
    /// @code
    /// sam.append(t);
    /// if (sam.repeat_length() > 0) draft = sam.continuation(sam.repeat_end(), k);
    /// @endcode
    [[nodiscard]] state_id repeat_state() const noexcept { return repeat_; }
    [[nodiscard]] std::uint32_t repeat_length() const noexcept { return meta_[repeat_].length; }
    [[nodiscard]] std::uint32_t repeat_end() const noexcept { return repeat_end_; }

    /// The state of the whole current document (the longest prefix state).
    [[nodiscard]] state_id last() const noexcept { return last_; }
    /// Number of states, root included.
    [[nodiscard]] std::size_t state_count() const noexcept { return meta_.size(); }
    /// Number of tokens appended.
    [[nodiscard]] std::size_t size() const noexcept { return text_.size(); }
    /// Every token appended, in order (documents concatenated).
    [[nodiscard]] std::span<const Token> text() const noexcept { return text_; }
    /// Start offset of each document in `text()`.
    [[nodiscard]] std::span<const std::uint32_t> document_starts() const noexcept { return documents_; }

    /// The tokens that follow an occurrence ending at `end`, up to `max_tokens` of them and
    /// never past the end of that occurrence's document.
    /// @code
    /// auto draft = sam.continuation(sam.first_end(s), 10);
    /// @endcode
    [[nodiscard]] std::span<const Token> continuation(std::uint32_t end, std::size_t max_tokens) const {
        FRUGAL_CHECK_AS(frugal::out_of_range, end < text_.size(), "suffix_automaton: end position ", end,
                        " >= text size ", text_.size());
        const auto next_doc = std::upper_bound(documents_.begin(), documents_.end(), end);
        const std::size_t stop = next_doc == documents_.end() ? text_.size() : *next_doc;
        const std::size_t n = std::min(max_tokens, stop - end - 1);
        return std::span<const Token>(text_).subspan(end + 1, n);
    }

    /// Approximate heap bytes held (states, transitions spilled to the heap, text).
    [[nodiscard]] std::size_t memory_bytes() const noexcept {
        std::size_t bytes = meta_.capacity() * sizeof(node) + spill_.capacity() * sizeof(std::vector<edge>) +
                            text_.capacity() * sizeof(Token) + documents_.capacity() * sizeof(std::uint32_t) +
                            root_dense_.capacity() * sizeof(state_id) + root_tokens_.capacity() * sizeof(Token);
        for (const auto& v : spill_) bytes += v.capacity() * sizeof(edge);
        return bytes;
    }

    /// Largest number of tokens an automaton can hold (state ids are 32-bit).
    static constexpr std::size_t max_tokens = (std::numeric_limits<state_id>::max() - 2) / 2;

private:
    struct edge {
        Token token;
        state_id target;
    };
    // As many transitions inline as fit a 64-byte record next to the 32 bytes of scalars
    // (4 for 32-bit tokens); most states have one or two. A hand-written record rather
    // than a boost::container::small_vector member: that kept the transitions in a second
    // array (two cache misses per state visited) and made growing the arrays an
    // element-by-element move.
    static constexpr std::uint32_t inline_edges =
        std::max<std::uint32_t>(1, static_cast<std::uint32_t>((64 - 8 * sizeof(std::uint32_t)) / sizeof(edge)));
    struct node {
        std::uint32_t length = 0;
        state_id link = no_state;
        std::uint32_t count = 0;
        std::uint32_t first_end = no_position;
        std::uint32_t last_end = no_position;
        std::uint32_t edges = 0;           // number of transitions
        std::uint32_t spill = no_position; // index into spill_ once edges > inline_edges
        std::uint32_t scratch = 0;         // flush(): 0 unmarked, else 1 + pending end positions below
        edge inline_edge[inline_edges];
    };
    static_assert(std::is_trivially_copyable_v<node>);

    const edge* edges_of(const node& n) const noexcept {
        return n.edges <= inline_edges ? n.inline_edge : spill_[n.spill].data();
    }
    edge* edges_of(node& n) noexcept { return n.edges <= inline_edges ? n.inline_edge : spill_[n.spill].data(); }

    // The root's transitions are the whole vocabulary; a sorted array would make each new
    // token an O(vocabulary) insertion, so tokens in [0, dense_limit) index a dense table.
    static constexpr std::uint64_t dense_limit = std::uint64_t{1} << 20;
    static constexpr bool dense(Token token) noexcept {
        if constexpr (std::signed_integral<Token>) {
            if (token < 0) return false;
        }
        return static_cast<std::uint64_t>(token) < dense_limit;
    }
    void add_transition(state_id s, Token token, state_id target) {
        if (s == root && dense(token)) {
            const auto i = static_cast<std::size_t>(token);
            if (i >= root_dense_.size()) root_dense_.resize(std::max<std::size_t>(i + 1, 2 * root_dense_.size()), no_state);
            root_dense_[i] = target;
            root_tokens_.push_back(token);
            return;
        }
        node& n = meta_[s];
        if (n.edges == inline_edges) {  // spill: the inline run moves to an array of its own
            if (n.spill == no_position) {
                n.spill = static_cast<std::uint32_t>(spill_.size());
                spill_.emplace_back();
            }
            spill_[n.spill].assign(n.inline_edge, n.inline_edge + inline_edges);
        }
        edge* e;
        if (n.edges >= inline_edges) {
            auto& v = spill_[n.spill];
            v.push_back({});
            e = v.data();
        } else {
            e = n.inline_edge;
        }
        std::uint32_t i = n.edges;  // insertion sort step: transitions stay sorted by token
        for (; i > 0 && token < e[i - 1].token; --i) e[i] = e[i - 1];
        e[i] = {token, target};
        ++n.edges;
    }
    void set_transition(state_id s, Token token, state_id target) {
        if (s == root && dense(token)) {
            root_dense_[static_cast<std::size_t>(token)] = target;
            return;
        }
        node& n = meta_[s];
        edge* e = edges_of(n);
        for (std::uint32_t i = 0; i < n.edges; ++i)
            if (e[i].token == token) {
                e[i].target = target;
                return;
            }
    }

    // A walk longer than this switches append(span) to the batched pass (natural text
    // walks a handful of states; the batched pass costs more per state it visits).
    static constexpr std::size_t long_walk = 64;

    // Adds the end position of the newest prefix state `cur` to every state on its
    // suffix-link path; returns how many states that was.
    std::size_t add_end(state_id cur) {
        const std::uint32_t pos = meta_[cur].last_end;
        std::size_t walked = 0;
        for (state_id s = cur; s != no_state; s = meta_[s].link, ++walked) {
            ++meta_[s].count;
            meta_[s].last_end = pos;
        }
        return walked;
    }

    // The automaton part of append: adds the token's states and transitions, sets the
    // repeat match, and returns the state of the new prefix (whose end position the caller
    // adds to its suffix-link path), with last_end already the new position.
    state_id extend(Token token) {
        FRUGAL_CHECK_AS(frugal::out_of_range, text_.size() < max_tokens,
                        "suffix_automaton: text would exceed ", max_tokens, " tokens");
        const auto pos = static_cast<std::uint32_t>(text_.size());
        text_.push_back(token);
        state_id p = last_;
        state_id cur;
        state_id q = next(p, token);
        if (q != no_state) {
            // Generalized automaton: the string already occurs in an earlier document.
            cur = meta_[q].length == meta_[p].length + 1 ? q : split(p, q, token);
            repeat_ = cur;
        } else {
            cur = new_state(meta_[p].length + 1, pos);
            while (p != no_state && (q = next(p, token)) == no_state) {
                add_transition(p, token, cur);
                p = meta_[p].link;
            }
            if (p == no_state) {
                meta_[cur].link = root;
            } else {
                meta_[cur].link = meta_[q].length == meta_[p].length + 1 ? q : split(p, q, token);
            }
            repeat_ = meta_[cur].link;
        }
        repeat_end_ = repeat_ == root ? no_position : meta_[repeat_].last_end;  // before cur's position is added
        meta_[cur].last_end = pos;  // cur may be an older state (an earlier document's)
        last_ = cur;
        return cur;
    }

    // Adds the end positions of the prefix states in pending_ (one per position of one
    // document, so their lengths increase) to every state on their suffix-link paths,
    // visiting each state of the union of the paths once. Each pending state starts a
    // segment that climbs its path until a state already marked (scratch = 1 + the end
    // positions below it still to pass up). A later segment can only join an earlier one
    // (a pending state's ancestors are shorter, so older), so running the segments from
    // the last to the first, each bottom-up, reaches every state after all its children:
    // its count and last_end are final and passed to its link.
    void flush() {
        if (pending_.empty()) return;
        union_.clear();
        segments_.clear();
        for (state_id v : pending_) meta_[v].scratch = 2;
        for (state_id v : pending_) {
            FRUGAL_ASSERT(segments_.empty() || meta_[v].length > meta_[union_[segments_.back()]].length);
            segments_.push_back(static_cast<std::uint32_t>(union_.size()));
            union_.push_back(v);
            for (state_id y = meta_[v].link; y != root && meta_[y].scratch == 0; y = meta_[y].link) {
                meta_[y].scratch = 1;
                union_.push_back(y);
            }
        }
        for (std::size_t k = segments_.size(); k-- > 0;) {
            const std::size_t stop = k + 1 < segments_.size() ? segments_[k + 1] : union_.size();
            for (std::size_t i = segments_[k]; i < stop; ++i) {
                node& n = meta_[union_[i]];
                const std::uint32_t add = n.scratch - 1;
                n.scratch = 0;
                n.count += add;
                node& up = meta_[n.link];
                if (n.link != root) up.scratch += add;
                up.last_end = up.last_end == no_position ? n.last_end : std::max(up.last_end, n.last_end);
            }
        }
        meta_[root].count += static_cast<std::uint32_t>(pending_.size());  // the root counts every position
        pending_.clear();
    }

    const node& at(state_id s) const {
        FRUGAL_CHECK_AS(frugal::out_of_range, s < meta_.size(), "suffix_automaton: state ", s,
                        " >= state count ", meta_.size());
        return meta_[s];
    }

    state_id new_state(std::uint32_t length, std::uint32_t end) {
        node n;
        n.length = length;
        n.first_end = end;
        n.last_end = end;
        meta_.push_back(n);
        return static_cast<state_id>(meta_.size() - 1);
    }

    // Splits q so that the strings of length <= length(p) + 1 move to a clone; redirects
    // p's suffix path to the clone. The clone inherits q's endpos (the caller's walk adds
    // the new position).
    state_id split(state_id p, state_id q, Token token) {
        const state_id clone = static_cast<state_id>(meta_.size());
        node copy = meta_[q];
        copy.length = meta_[p].length + 1;
        if (copy.edges > inline_edges) {  // the clone gets its own copy of q's spilled transitions
            copy.spill = static_cast<std::uint32_t>(spill_.size());
            spill_.push_back(spill_[meta_[q].spill]);
        } else {
            copy.spill = no_position;
        }
        meta_.push_back(copy);
        while (p != no_state && next(p, token) == q) {
            set_transition(p, token, clone);
            p = meta_[p].link;
        }
        meta_[q].link = clone;
        return clone;
    }

    // The states and the text are walked at random: huge pages where the system allows
    std::vector<node, huge_page_allocator<node>> meta_;
    std::vector<std::vector<edge>> spill_;  // transitions of the states with more than inline_edges
    std::vector<Token, huge_page_allocator<Token>> text_;
    std::vector<std::uint32_t> documents_;
    std::vector<state_id> root_dense_;  // root transitions of tokens in [0, dense_limit)
    std::vector<Token> root_tokens_;    // the tokens with a dense root transition, in arrival order
    std::vector<state_id> pending_;     // append(span): prefix states whose end position awaits flush()
    std::vector<state_id> union_;       // flush(): the states of their paths, segment by segment
    std::vector<std::uint32_t> segments_;  // flush(): where each pending state's segment starts
    state_id last_ = root;
    state_id repeat_ = root;
    std::uint32_t repeat_end_ = no_position;
};

/// The longest suffix of a token stream that occurs in an automaton, carried across steps.
///
/// Advance it by accepted tokens only (never by rejected draft tokens). To match a
/// sequence against earlier parts of itself (the per-request context), advance the matcher
/// with a token *before* appending that token to the automaton: the match is then the
/// longest suffix with an earlier occurrence, and `last_end()`, read before the append, is
/// that earlier occurrence (`suffix_automaton::repeat_*` gives the same for free).
/// The matcher stays valid while the automaton grows (states split by later appends are
/// followed through their suffix links).
/// @code
/// frugal::draft::suffix_matcher<int> m(sam);
/// for (int t : accepted) { m.advance(t); sam.append(t); }
/// auto draft = sam.continuation(m.last_end(), 8);
/// @endcode
template <std::integral Token>
class suffix_matcher {
public:
    /// A matcher at the empty match over `automaton` (which must outlive it).
    explicit suffix_matcher(const suffix_automaton<Token>& automaton) noexcept : sam_(&automaton) {}

    /// Extends the match by `token`, shortening it through suffix links when needed.
    /// @code
    /// m.advance(bonus_token);  if (m.length() >= 2) draft = sam.continuation(m.last_end(), 8);
    /// @endcode
    void advance(Token token) noexcept {
        normalize();
        while (true) {
            if (const state_id n = sam_->next(state_, token); n != no_state) {
                state_ = n;
                ++length_;
                return;
            }
            if (state_ == suffix_automaton<Token>::root) {
                length_ = 0;
                return;
            }
            state_ = sam_->link(state_);
            length_ = sam_->length(state_);
        }
    }

    /// Extends the match by each token in order.
    void advance(std::span<const Token> tokens) noexcept {
        for (Token t : tokens) advance(t);
    }

    /// Moves the matcher to `grown`, which must extend the automaton it matched so far (a
    /// copy of it with more tokens appended, as a young history generation is): the match
    /// and its state stay valid there, as they do when an automaton grows in place.
    /// @code
    /// m.rebind(next_generation.automaton);
    /// @endcode
    void rebind(const suffix_automaton<Token>& grown) noexcept {
        sam_ = &grown;
        seen_size_ = 0;  // states may have been split: normalize() on the next look
    }

    /// Back to the empty match.
    void reset() noexcept {
        state_ = suffix_automaton<Token>::root;
        length_ = 0;
    }

    /// The state holding the matched suffix (after any splits since the last advance).
    [[nodiscard]] state_id state() noexcept {
        normalize();
        return state_;
    }
    /// Length of the matched suffix (0: no match).
    [[nodiscard]] std::uint32_t length() const noexcept { return length_; }
    /// End position of the most recent occurrence of the match in the automaton as it is
    /// now (`no_position` when there is no match). Read it before appending the matched
    /// token to the same automaton to get the earlier occurrence.
    [[nodiscard]] std::uint32_t last_end() noexcept {
        return length_ == 0 ? no_position : sam_->last_end(state());
    }
    /// The automaton matched against.
    [[nodiscard]] const suffix_automaton<Token>& automaton() const noexcept { return *sam_; }

private:
    void normalize() noexcept {
        if (seen_size_ == sam_->size()) return;  // no append since the last look: no split
        seen_size_ = sam_->size();
        while (state_ != suffix_automaton<Token>::root && length_ <= sam_->length(sam_->link(state_)))
            state_ = sam_->link(state_);
    }

    const suffix_automaton<Token>* sam_;
    state_id state_ = suffix_automaton<Token>::root;
    std::uint32_t length_ = 0;
    std::size_t seen_size_ = 0;
};

}  // namespace frugal::draft
