// PLD, verification and the drafter against hand-built cases, brute force and the
// published PLD reference of ../shared/data/drafting/README.md.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include <frugal/draft/drafter.hpp>
#include <frugal/draft/history.hpp>
#include <frugal/draft/calibration.hpp>
#include <frugal/sim/prompt_lookup.hpp>
#include <frugal/draft/reuse.hpp>
#include <frugal/draft/verify.hpp>

#include "frugal_test_data.hpp"
#include "replay.hpp"

namespace {

using namespace frugal::draft;
using frugal::sim::prompt_lookup_draft;

std::vector<int> v(std::span<const int> s) { return {s.begin(), s.end()}; }

// ---- PLD -------------------------------------------------------------------------------

TEST(PromptLookup, HandCases) {
    const std::vector<int> ctx{1, 2, 3, 9, 9, 1, 2, 3};
    EXPECT_EQ(v(prompt_lookup_draft<int>(ctx, 3, 2)), (std::vector<int>{9, 9}));
    // All K tokens must lie inside the context: the trigram at 0 with K = 5 ends at 0 + 3 + 5 = 8, inside.
    EXPECT_EQ(v(prompt_lookup_draft<int>(ctx, 3, 5)), (std::vector<int>{9, 9, 1, 2, 3}));
    // K = 6 does not fit for any n: bigram "2 3" at 1 -> 3 + 6 = 9 > 8; unigram "3" at 2 -> 9 > 8.
    EXPECT_TRUE(prompt_lookup_draft<int>(ctx, 3, 6).empty());
    // The earliest match wins, falling back from n = 3 to n = 1.
    const std::vector<int> c2{7, 5, 8, 7, 5, 6, 4, 4, 4, 5};
    EXPECT_EQ(v(prompt_lookup_draft<int>(c2, 3, 2)), (std::vector<int>{8, 7}));
    // A continuation may not start inside the final n-gram: "4 4" ending the context.
    const std::vector<int> c3{4, 4, 4};
    EXPECT_EQ(v(prompt_lookup_draft<int>(c3, 3, 1)), (std::vector<int>{4}));  // n = 1: idx 0 -> starts at 1 < 2
    EXPECT_TRUE(prompt_lookup_draft<int>(std::vector<int>{}, 3, 1).empty());
    EXPECT_TRUE(prompt_lookup_draft<int>(std::vector<int>{5}, 3, 1).empty());
    EXPECT_THROW((void)prompt_lookup_draft<int>(ctx, 0, 2), frugal::invalid_argument);
    EXPECT_THROW((void)prompt_lookup_draft<int>(ctx, 3, 0), frugal::invalid_argument);
}

// ---- verification ------------------------------------------------------------------------

TEST(Verify, ChainEdgeCases) {
    const std::vector<int> draft{4, 5, 6};
    auto r = verify_chain<int>(draft, std::vector<int>{4, 5, 6, 7});  // full acceptance
    EXPECT_EQ(r.accepted, 3u);
    EXPECT_EQ(r.bonus, 7);
    r = verify_chain<int>(draft, std::vector<int>{9, 5, 6, 7});  // rejection at the first token
    EXPECT_EQ(r.accepted, 0u);
    EXPECT_EQ(r.bonus, 9);
    r = verify_chain<int>(draft, std::vector<int>{4, 8, 6, 7});
    EXPECT_EQ(r.accepted, 1u);
    EXPECT_EQ(r.bonus, 8);
    r = verify_chain<int>(std::vector<int>{}, std::vector<int>{3});  // empty draft: just the model's token
    EXPECT_EQ(r.accepted, 0u);
    EXPECT_EQ(r.bonus, 3);
    EXPECT_THROW((void)verify_chain<int>(draft, std::vector<int>{4, 5, 6}), frugal::invalid_argument);
}

TEST(Verify, TreeEdgeCases) {
    draft_tree<int> t;
    t.push(-1, 10);  // 0
    t.push(-1, 20);  // 1
    t.push(0, 11);   // 2
    t.push(1, 21);   // 3
    t.push(1, 22);   // 4
    t.push(4, 23);   // 5
    // predictions: after context, then after each node
    auto r = verify_tree(t, std::span<const int>(std::vector<int>{20, 11, 22, 0, 0, 23, 99}));
    EXPECT_EQ(r.path, (std::vector<std::int32_t>{1, 4, 5}));
    EXPECT_EQ(r.accepted, 3u);
    EXPECT_EQ(r.bonus, 99);
    r = verify_tree(t, std::span<const int>(std::vector<int>{30, 0, 0, 0, 0, 0, 0}));  // reject at the root
    EXPECT_TRUE(r.path.empty());
    EXPECT_EQ(r.bonus, 30);
    r = verify_tree(t, std::span<const int>(std::vector<int>{10, 12, 0, 0, 0, 0, 0}));
    EXPECT_EQ(r.path, (std::vector<std::int32_t>{0}));
    EXPECT_EQ(r.bonus, 12);
    const draft_tree<int> empty;
    r = verify_tree(empty, std::span<const int>(std::vector<int>{5}));
    EXPECT_EQ(r.accepted, 0u);
    EXPECT_EQ(r.bonus, 5);
    EXPECT_THROW((void)verify_tree(t, std::span<const int>(std::vector<int>{1})), frugal::invalid_argument);
    EXPECT_THROW(t.push(7, 1), frugal::out_of_range);
    draft_tree<int> bad;
    bad.tokens = {1, 2};
    bad.parents = {1, -1};  // a parent after its child
    EXPECT_THROW((void)verify_tree(bad, std::span<const int>(std::vector<int>{1, 2, 3})), frugal::out_of_range);
}

TEST(Verify, ChainPathAndEmittedTokensStopAtTheFirstEos) {
    constexpr int eos = 2;
    draft_tree<int> chain;
    for (int t : {4, eos, 6}) chain.push(std::int32_t(chain.size()) - 1, t);
    // The model accepts "4 EOS 6" and would continue: everything after the EOS is dropped.
    auto r = verify_chain<int>(chain.tokens, std::vector<int>{4, eos, 6, 7});
    EXPECT_EQ(r.path, (std::vector<std::int32_t>{0, 1, 2}));
    auto out = emitted_tokens(chain, r, eos);
    EXPECT_EQ(out.tokens, (std::vector<int>{4, eos}));
    EXPECT_TRUE(out.finished);
    // EOS as the bonus token: emitted, and the request ends.
    r = verify_chain<int>(chain.tokens, std::vector<int>{eos, 0, 0, 0});
    out = emitted_tokens(chain, r, eos);
    EXPECT_EQ(out.tokens, (std::vector<int>{eos}));
    EXPECT_TRUE(out.finished);
    // No EOS: the accepted tokens and the bonus.
    r = verify_chain<int>(chain.tokens, std::vector<int>{4, 9, 0, 0});
    out = emitted_tokens(chain, r, eos);
    EXPECT_EQ(out.tokens, (std::vector<int>{4, 9}));
    EXPECT_FALSE(out.finished);
    // A tree: the accepted path "20 eos" ends the request before its bonus.
    draft_tree<int> t;
    t.push(-1, 10);
    t.push(-1, 20);
    t.push(1, eos);
    t.push(2, 30);
    r = verify_tree(t, std::span<const int>(std::vector<int>{20, 0, eos, 30, 40}));
    out = emitted_tokens(t, r, eos);
    EXPECT_EQ(out.tokens, (std::vector<int>{20, eos}));
    EXPECT_TRUE(out.finished);
    verify_result<int> wrong;
    wrong.path = {7};
    EXPECT_THROW((void)emitted_tokens(t, wrong, eos), frugal::out_of_range);
}

TEST(Verify, TreeProbabilitiesAndScore) {
    draft_tree<int> t;
    t.push(-1, 42, 0.9f);
    t.push(0, 7, 0.5f);
    t.push(-1, 13, 0.1f);
    EXPECT_FLOAT_EQ(t.path_probabilities[1], 0.45f);
    EXPECT_NEAR(t.score, 0.9 + 0.45 + 0.1, 1e-6);
    EXPECT_THROW(t.push(0, 1, 1.5f), frugal::invalid_argument);
    EXPECT_THROW(t.push(0, 1, std::nanf("")), frugal::invalid_argument);
    t.clear();
    EXPECT_EQ(t.score, 0.0);
    EXPECT_TRUE(t.probabilities.empty());
}

// ---- drafter -------------------------------------------------------------------------------

// Does `s` occur in `text`?
bool occurs(const std::vector<int>& text, const std::vector<int>& s) {
    return std::search(text.begin(), text.end(), s.begin(), s.end()) != text.end();
}

// A history holding `docs`, published.
std::unique_ptr<live_history<int>> history_of(const std::vector<std::vector<int>>& docs) {
    auto h = std::make_unique<live_history<int>>(1 << 16);
    for (const auto& d : docs) h->add(d);
    h->publish();
    return h;
}

TEST(Drafter, ChainCopiesTheRepeatedContinuation) {
    drafter<int> d({.max_draft = 4});
    d.begin(std::vector<int>{1, 2, 3, 4, 5, 6, 7, 9, 1, 2, 3});
    EXPECT_EQ(d.context_match(), 3u);
    EXPECT_EQ(v(d.chain().tokens), (std::vector<int>{4, 5, 6, 7}));
    d.accept(std::vector<int>{4, 5});
    EXPECT_EQ(v(d.chain().tokens), (std::vector<int>{6, 7, 9, 1}));
    EXPECT_EQ(v(d.output()), (std::vector<int>{4, 5}));
}

TEST(Drafter, ChainPrefersTheMostFrequentContinuation) {
    // "8" was followed by 1 twice and by 2 once; the chain takes 1.
    drafter<int> d({.max_draft = 1});
    d.begin(std::vector<int>{8, 1, 5, 8, 2, 6, 8, 1, 7, 8});
    EXPECT_EQ(v(d.chain().tokens), (std::vector<int>{1}));
}

TEST(Drafter, DeepChainFollowsALongUniqueCopy) {
    // 300 distinct tokens, then the first 20 again: a unique copy that a model keeps
    // copying. The chain follows it for all 64 tokens (each one lengthens the match, so the
    // evidence grows instead of decaying), and a 100-deep tree holds the 100-token path.
    std::vector<int> text(300);
    for (int i = 0; i < 300; ++i) text[std::size_t(i)] = 1000 + i;
    std::vector<int> prompt = text;
    prompt.insert(prompt.end(), text.begin(), text.begin() + 20);
    drafter<int> d({.max_draft = 64, .tree_depth = 100, .tree_budget = 100});
    d.begin(prompt);
    EXPECT_EQ(v(d.chain().tokens), std::vector<int>(text.begin() + 20, text.begin() + 84));
    const auto& t = d.tree();
    ASSERT_EQ(t.size(), 100u);
    for (std::size_t i = 0; i < t.size(); ++i) {
        EXPECT_EQ(t.parents[i], std::int32_t(i) - 1);
        EXPECT_EQ(t.tokens[i], text[20 + i]);
    }
    // Probabilities rise along the copy, and the score is the sum of the path probabilities.
    double path = 1, score = 0;
    for (std::size_t i = 0; i < t.size(); ++i) {
        if (i > 0) {
            EXPECT_GE(t.probabilities[i], t.probabilities[i - 1]);
        }
        path *= t.probabilities[i];
        score += path;
    }
    EXPECT_NEAR(t.score, score, 1e-3 * score);
}

TEST(Drafter, NoMatchNoDraft) {
    drafter<int> d;
    d.begin(std::vector<int>{1, 2, 3});
    EXPECT_TRUE(d.chain().empty());
    EXPECT_TRUE(d.tree().empty());
    d.begin(std::vector<int>{});
    EXPECT_TRUE(d.chain().empty());
}

TEST(Drafter, HistoryDraftsWhatTheContextLacks) {
    const auto history = history_of({{40, 41, 42, 43, 44}, {50, 51}});
    drafter<int> d({.max_draft = 3, .history_escape = 1.0}, history.get());
    d.begin(std::vector<int>{1, 2, 40, 41});
    EXPECT_EQ(d.history_match(), 2u);
    EXPECT_EQ(v(d.chain().tokens), (std::vector<int>{42, 43, 44}));
    d.begin(std::vector<int>{7, 50, 51});
    EXPECT_TRUE(d.chain().empty());  // a continuation never crosses into another document
}

TEST(Drafter, HistoryTokensOutsideTheVocabularyAreNeverDrafted) {
    // The history is shared with other engines (another tokenizer, or corrupt data): its
    // tokens are not checked on the way in, so the drafter filters what it drafts from it.
    const auto history = history_of({{1, 2, 3, 500, 501, 502, 503}, {1, 2, 3, -7}, {1, 2, 3, 4, 9}});
    drafter<int> d({.max_draft = 4, .tree_budget = 16, .history_escape = 1.0, .vocab_size = 10}, history.get());
    d.begin(std::vector<int>{1, 2, 3});
    EXPECT_EQ(d.history_match(), 3u);
    EXPECT_EQ(v(d.chain().tokens), (std::vector<int>{4, 9}));
    for (const int t : d.tree().tokens) EXPECT_TRUE(t >= 0 && t < 10) << t;
    EXPECT_FALSE(d.tree().empty());
    drafter<int> any({.max_draft = 4, .history_escape = 1.0}, history.get());  // no vocabulary: non-negative only
    any.begin(std::vector<int>{1, 2, 3});
    for (const int t : any.tree().tokens) EXPECT_GE(t, 0);
}

TEST(Drafter, BackoffDraftsWhereTheLongestMatchEnds) {
    // "1 2 3" ends a history document (nothing follows it); its back-off "2 3" was
    // followed by 4 in the other document.
    const auto history = history_of({{1, 2, 3}, {2, 3, 4}});
    drafter<int> with({.max_draft = 1, .history_escape = 1.0}, history.get());
    with.begin(std::vector<int>{1, 2, 3});
    EXPECT_EQ(with.history_match(), 3u);
    EXPECT_EQ(v(with.chain().tokens), (std::vector<int>{4}));
    drafter<int> without({.max_draft = 1, .history_escape = 1.0, .backoff = false}, history.get());
    without.begin(std::vector<int>{1, 2, 3});
    EXPECT_TRUE(without.chain().empty());
}

TEST(Drafter, ResumesACopyAfterAnEdit) {
    // The prompt holds a long passage; the output copies it, then an edit: one token
    // replaced, or one inserted. Right after it no suffix of the output occurs before, but
    // the tree holds both ways the copy can resume: past the replaced token, and at it.
    std::vector<int> passage(40);
    for (int i = 0; i < 40; ++i) passage[std::size_t(i)] = 100 + i;
    drafter<int> d({.tree_depth = 5, .tree_budget = 20});
    d.begin(passage);
    d.accept(std::span<const int>(passage).first(12));  // copying: matched 12 tokens
    d.accept(999);                                      // the edit
    EXPECT_EQ(d.context_match(), 0u);
    const auto& t = d.tree();
    std::vector<std::vector<int>> paths(t.size());
    for (std::size_t i = 0; i < t.size(); ++i) {
        if (t.parents[i] >= 0) paths[i] = paths[std::size_t(t.parents[i])];
        paths[i].push_back(t.tokens[i]);
    }
    auto holds = [&](std::size_t from) {
        return std::find(paths.begin(), paths.end(),
                         std::vector<int>(passage.begin() + std::ptrdiff_t(from),
                                          passage.begin() + std::ptrdiff_t(from + 5))) != paths.end();
    };
    EXPECT_TRUE(holds(13));  // substitution: the copy goes on after the replaced token
    EXPECT_TRUE(holds(12));  // insertion: the copy goes on where it stopped
    // Once the output follows one of them, the copy resumes with growing confidence.
    d.accept(std::span<const int>(passage).subspan(13, 2));
    EXPECT_EQ(v(d.chain().tokens).front(), passage[15]);
    // Without a long copy before the divergence there is nothing to resume.
    drafter<int> short_copy({.tree_depth = 5, .tree_budget = 20});
    short_copy.begin(passage);
    short_copy.accept(std::span<const int>(passage).first(3));
    short_copy.accept(999);
    EXPECT_TRUE(short_copy.tree().empty());
}

// The root distribution by brute force: the documented model over the context alone
// (sources: the longest suffix that occurred before, and its back-off, the longest
// shorter suffix with more occurrences), from the raw text.
std::map<int, double> brute_root(const std::vector<int>& text, const drafter_config& c) {
    const std::size_t n = text.size();
    auto ends_of = [&](std::size_t len) {  // earlier end positions of the last `len` tokens
        std::vector<std::size_t> ends;
        for (std::size_t e = len - 1; e + 1 < n; ++e)
            if (std::equal(text.end() - std::ptrdiff_t(len), text.end(), text.begin() + std::ptrdiff_t(e + 1 - len)))
                ends.push_back(e);
        return ends;
    };
    std::size_t match = 0;
    while (match + 1 < n && !ends_of(match + 1).empty()) ++match;
    std::vector<std::size_t> lengths;
    if (match >= c.min_match) lengths.push_back(match);
    if (c.backoff && match > 0) {
        const std::size_t count = ends_of(match).size();
        for (std::size_t k = match - 1; k >= 1; --k)
            if (ends_of(k).size() > count) {
                if (k >= c.min_match) lengths.push_back(k);
                break;
            }
    }
    std::map<int, double> p;
    double mass = 1;
    for (std::size_t len : lengths) {
        if (mass < c.min_path_score || mass < 0.01) break;
        std::map<int, double> next;
        double total = 0;
        for (std::size_t e : ends_of(len)) next[text[e + 1]] += 1, total += 1;
        const double esc = c.context_escape / double(len);
        for (const auto& [t, k] : next) p[t] += mass * k / (total + esc);
        mass *= esc / (total + esc);
    }
    return p;
}

TEST(Drafter, RootProbabilitiesMatchTheModelByBruteForce) {
    std::mt19937 rng(11);
    for (int round = 0; round < 300; ++round) {
        std::uniform_int_distribution<int> tok(0, 1 + round % 6);
        std::vector<int> text(std::size_t(2 + rng() % 60));
        for (auto& t : text) t = tok(rng);
        const drafter_config c{.tree_depth = 1, .tree_budget = 1000, .context_escape = 0.5 + round % 3,
                               .min_path_score = 0.0, .backoff = round % 2 == 0};
        drafter<int> d(c);
        d.begin(text);
        const auto& t = d.tree();
        const auto want = brute_root(text, c);
        ASSERT_EQ(t.size(), want.size()) << "round " << round;
        double sum = 0;
        for (std::size_t i = 0; i < t.size(); ++i) {
            ASSERT_TRUE(want.contains(t.tokens[i])) << "round " << round;
            EXPECT_NEAR(t.probabilities[i], want.at(t.tokens[i]), 1e-5) << "round " << round;
            sum += t.probabilities[i];
        }
        EXPECT_LE(sum, 1.0 + 1e-6);
    }
}

TEST(Drafter, TreeIsValidAndEveryPathOccurred) {
    std::mt19937 rng(1);
    std::uniform_int_distribution<int> tok(0, 5);
    std::vector<int> hist_text, ctx;
    for (int i = 0; i < 300; ++i) hist_text.push_back(tok(rng));
    for (int i = 0; i < 200; ++i) ctx.push_back(tok(rng));
    const auto history = history_of({hist_text});
    drafter<int> d({.max_draft = 5, .tree_depth = 5, .tree_budget = 24}, history.get());
    d.begin(std::span<const int>(ctx).first(100));
    for (std::size_t step = 100; step < 200; ++step) {
        const auto& t = d.tree();
        ASSERT_LE(t.size(), 24u);
        std::vector<std::vector<int>> path(t.size());
        std::vector<double> child_sum(t.size() + 1, 0.0);  // [0]: the root's children
        for (std::size_t i = 0; i < t.size(); ++i) {
            ASSERT_LT(t.parents[i], std::int32_t(i));
            if (t.parents[i] >= 0) path[i] = path[std::size_t(t.parents[i])];
            path[i].push_back(t.tokens[i]);
            ASSERT_LE(path[i].size(), 5u);
            child_sum[std::size_t(t.parents[i] + 1)] += t.probabilities[i];
            // Best first: path probabilities never increase.
            if (i > 0) {
                EXPECT_LE(t.path_probabilities[i], t.path_probabilities[i - 1] * (1 + 1e-6));
            }
            // Siblings are distinct tokens.
            for (std::size_t j = 0; j < i; ++j)
                EXPECT_FALSE(t.parents[j] == t.parents[i] && t.tokens[j] == t.tokens[i]);
            // The last context token followed by the path occurred in the context or history.
            std::vector<int> s{ctx[step - 1]};
            s.insert(s.end(), path[i].begin(), path[i].end());
            const std::vector<int> seen(ctx.begin(), ctx.begin() + std::ptrdiff_t(step));
            EXPECT_TRUE(occurs(seen, s) || occurs(hist_text, s)) << "node " << i << " at step " << step;
        }
        for (double sum : child_sum) EXPECT_LE(sum, 1.0 + 1e-6);  // a node's children: at most 1
        // The chain is the tree's first (most probable) path prefix.
        const auto chain = v(d.chain().tokens);
        if (!chain.empty()) {
            EXPECT_EQ(chain.front(), t.tokens.front());
        }
        d.accept(ctx[step]);
    }
}

TEST(Drafter, MovedDraftersKeepDrafting) {
    // One drafter per request in a vector that reallocates: each keeps its context.
    const auto history = history_of({{5, 6, 7, 8}});
    std::vector<drafter<int>> requests;
    for (int r = 0; r < 20; ++r) {
        requests.emplace_back(drafter_config{.max_draft = 2, .history_escape = 1.0}, history.get());
        requests.back().begin(std::vector<int>{r + 100, r + 200, 9, r + 100});
    }
    drafter<int> moved = std::move(requests[3]);
    requests[3] = std::move(requests[4]);
    EXPECT_EQ(v(moved.chain().tokens), (std::vector<int>{203, 9}));
    EXPECT_EQ(v(requests[3].chain().tokens), (std::vector<int>{204, 9}));
    moved.accept(std::vector<int>{203, 5});
    EXPECT_EQ(v(moved.chain().tokens), (std::vector<int>{6, 7}));  // from the history
}

TEST(Drafter, BadInput) {
    EXPECT_THROW(drafter<int>({.max_draft = 0}), frugal::invalid_argument);
    EXPECT_THROW(drafter<int>({.tree_depth = 0}), frugal::invalid_argument);
    EXPECT_THROW(drafter<int>({.tree_budget = 0}), frugal::invalid_argument);
    EXPECT_THROW(drafter<int>({.min_match = 0}), frugal::invalid_argument);
    EXPECT_THROW(drafter<int>({.context_escape = -1}), frugal::invalid_argument);
    EXPECT_THROW(drafter<int>({.min_path_score = 1.0}), frugal::invalid_argument);
    EXPECT_THROW(drafter<int>({.min_path_score = std::nan("")}), frugal::invalid_argument);
    // Issue 23, item 9: an infinite escape would make every score NaN.
    for (double bad : {std::numeric_limits<double>::infinity(), std::nan(""), 0.0}) {
        try {
            drafter<int> d({.context_escape = bad});
            ADD_FAILURE() << "no error for context_escape = " << bad;
        } catch (const frugal::invalid_argument& e) {
            EXPECT_NE(std::string(e.what()).find("context_escape"), std::string::npos) << e.what();
        }
        EXPECT_THROW(drafter<int>({.history_escape = bad}), frugal::invalid_argument);
    }
    drafter<int> d({.vocab_size = 100});
    EXPECT_THROW(d.accept(-3), frugal::out_of_range);
    EXPECT_THROW(d.accept(100), frugal::out_of_range);
    EXPECT_NO_THROW(d.accept(99));
    drafter<std::uint16_t> u({.vocab_size = 10});
    EXPECT_THROW(u.accept(std::uint16_t{10}), frugal::out_of_range);
    // Issue 23, item 10: an 8-bit token is printed as a number, not as a raw character.
    drafter<std::int8_t> small({.vocab_size = 10});
    try {
        small.accept(std::int8_t{65});
        ADD_FAILURE() << "no error for token 65";
    } catch (const frugal::out_of_range& e) {
        EXPECT_NE(std::string(e.what()).find("token 65 outside"), std::string::npos) << e.what();
    }
    try {
        small.accept(std::int8_t{-7});
        ADD_FAILURE() << "no error for token -7";
    } catch (const frugal::out_of_range& e) {
        EXPECT_NE(std::string(e.what()).find("negative token -7"), std::string::npos) << e.what();
    }
}

// ---- the offline simulator on the shared data ------------------------------------------

std::map<std::string, frugal::testing::replay_stats> replay_pld(const std::vector<frugal::testing::token_record>& data) {
    std::map<std::string, frugal::testing::replay_stats> out;
    std::vector<int> context;
    draft_tree<int> tree;
    for (const auto& rec : data) {
        auto s = frugal::testing::replay_record(
            rec, [&](std::span<const int> p) { context.assign(p.begin(), p.end()); },
            [&]() -> const draft_tree<int>& {
                tree.clear();
                for (int t : prompt_lookup_draft<int>(context, 3, 10)) tree.push(std::int32_t(tree.size()) - 1, t);
                return tree;
            },
            [&](std::span<const int> a) { context.insert(context.end(), a.begin(), a.end()); });
        out["all"].merge(s);
        out[rec.category].merge(s);
    }
    return out;
}

TEST(PromptLookup, ReproducesThePublishedMat) {
    FRUGAL_SHARED_DATA_OR_SKIP(file, "drafting/specbench_vicuna7b.tok");
    const auto data = frugal::testing::read_tok_file(file);
    ASSERT_EQ(data.size(), 480u);
    const auto stats = replay_pld(data);
    // ../shared/data/drafting/README.md, K = 10: micro MAT 1.669 over 42,128 steps.
    EXPECT_EQ(stats.at("all").steps, 42128u);
    EXPECT_NEAR(stats.at("all").mat(), 1.669, 0.0005);
    const std::map<std::string, double> published{
        {"summarization", 2.712}, {"extraction", 2.158}, {"math_reasoning", 1.801}, {"math", 1.760},
        {"roleplay", 1.729},      {"rag", 1.718},        {"coding", 1.445},         {"qa", 1.417},
        {"humanities", 1.368},    {"stem", 1.366},       {"reasoning", 1.325},      {"writing", 1.169},
        {"translation", 1.106}};
    for (const auto& [category, mat] : published) EXPECT_NEAR(stats.at(category).mat(), mat, 0.0005) << category;
}

// ---- draft reuse (CoordGen 3.4, Eq. 3) ---------------------------------------------------

namespace reuse_cases {
using frugal::draft::draft_reuse;
using frugal::draft::draft_segment;
using frugal::draft::reusable_segment;

TEST(DraftReuse, LongestAgreeingSegmentAfterTheRejection) {
    // a b c d e f vs a X c d Y f Z: rejected at 1; runs after it: [2, 4) and [5, 6).
    const std::vector<int> draft{1, 2, 3, 4, 5, 6};
    EXPECT_EQ(reusable_segment<int>(draft, std::vector<int>{1, 9, 3, 4, 9, 6, 9}), (draft_segment{2, 4}));
    // Full acceptance: nothing to reuse.
    EXPECT_TRUE(reusable_segment<int>(draft, std::vector<int>{1, 2, 3, 4, 5, 6, 7}).empty());
    // Rejection at the first token, the rest agrees ("missing" case of Table 2).
    EXPECT_EQ(reusable_segment<int>(draft, std::vector<int>{9, 2, 3, 4, 5, 6, 7}), (draft_segment{1, 6}));
    // Nothing after the rejection agrees ("redundant").
    EXPECT_TRUE(reusable_segment<int>(draft, std::vector<int>{1, 9, 9, 9, 9, 9, 9}).empty());
    // Ties: the earliest run.
    EXPECT_EQ(reusable_segment<int>(draft, std::vector<int>{9, 2, 9, 4, 9, 6, 9}), (draft_segment{1, 2}));
    // Empty draft.
    EXPECT_TRUE(reusable_segment<int>(std::vector<int>{}, std::vector<int>{5}).empty());
    EXPECT_THROW((void)reusable_segment<int>(draft, std::vector<int>{1}), frugal::invalid_argument);
}

TEST(DraftReuse, OfferedAtLeastOnceThenBoundedByTheThreshold) {
    draft_reuse<int> reuse(8);
    const std::vector<int> draft{1, 2, 3, 4, 5, 6};
    reuse.observe(draft, std::vector<int>{9, 2, 3, 4, 5, 6, 7});  // keeps {2..6}: 5 tokens
    ASSERT_EQ(reuse.size(), 1u);
    // First offer: always, even past the threshold (6 fresh + 5 > 8).
    auto extra = reuse.offer(6);
    ASSERT_EQ(extra.size(), 1u);
    EXPECT_EQ(std::vector<int>(extra[0].begin(), extra[0].end()), (std::vector<int>{2, 3, 4, 5, 6}));
    // Later steps: kept while fresh + reused <= 8.
    EXPECT_EQ(reuse.offer(3).size(), 1u);
    EXPECT_EQ(reuse.offer(4).size(), 0u);  // 4 + 5 > 8: discarded
    EXPECT_EQ(reuse.size(), 0u);
    reuse.observe(draft, std::vector<int>{1, 2, 3, 4, 5, 6, 7});  // full acceptance keeps nothing
    EXPECT_EQ(reuse.size(), 0u);
    EXPECT_THROW(draft_reuse<int>(0), frugal::invalid_argument);
}
}  // namespace reuse_cases

// ---- in-context calibration (CoordGen 3.3) ----------------------------------------------

namespace calibration_cases {
using frugal::draft::calibrated_source;
using frugal::draft::drafter;
using frugal::draft::token_prediction;

// Figure 9: "Clinton 's security detail has arrived at Des Moines".
enum : int { clinton = 1, s_ = 2, security = 3, detail = 4, has = 5, arrived = 6, at = 7, des = 8, moines = 9,
             been = 20, in = 21, dot = 22, filler = 30 };

std::vector<token_prediction<int>> figure9_predictions() {
    std::vector<token_prediction<int>> p(9 * 3, {filler, 0.05f});
    auto set = [&](std::size_t pos, std::vector<token_prediction<int>> row) {
        std::copy(row.begin(), row.end(), p.begin() + std::ptrdiff_t(pos * 3));
    };
    set(0, {{has, 0.3f}, {arrived, 0.5f}, {s_, 0.2f}});  // after "Clinton", unsorted on purpose
    set(1, {{security, 0.9f}, {filler, 0.05f}, {filler, 0.05f}});
    set(4, {{arrived, 0.6f}, {been, 0.3f}, {filler, 0.05f}});
    set(5, {{at, 0.7f}, {in, 0.2f}, {dot, 0.1f}});
    return p;
}

TEST(Calibration, SampleAndSearchBuildsTheExpectedTree) {
    const std::vector<int> context{clinton, s_, security, detail, has, arrived, at, des, moines};
    const auto preds = figure9_predictions();
    calibrated_source<int> cal(context, preds, 3, {.max_depth = 2, .max_nodes = 32, .min_prob = 0.15f});
    const auto& t = cal.tree(clinton);
    EXPECT_EQ(t.tokens, (std::vector<int>{arrived, at, in, has, arrived, been, s_, security}));
    EXPECT_EQ(t.parents, (std::vector<std::int32_t>{-1, 0, 0, -1, 3, 3, -1, 6}));
    calibrated_source<int> small(context, preds, 3, {.max_depth = 2, .max_nodes = 3, .min_prob = 0.15f});
    EXPECT_EQ(small.tree(clinton).tokens, (std::vector<int>{arrived, at, in}));
    EXPECT_TRUE(cal.tree(been).empty());  // not in the context
}

TEST(Calibration, DrafterTreeMergesTheCalibratedTree) {
    // The context ends with "Clinton" again: the automaton drafts "'s security detail"
    // (its earlier continuation); the calibrated tree (above) comes first and the shared
    // path "'s security" appears once, with "detail" below it.
    const std::vector<int> sentence{clinton, s_, security, detail, has, arrived, at, des, moines};
    const auto preds = figure9_predictions();
    calibrated_source<int> cal(sentence, preds, 3, {.max_depth = 2, .max_nodes = 32, .min_prob = 0.15f});
    std::vector<int> context = sentence;
    context.insert(context.end(), {dot, clinton});
    drafter<int> d({.max_draft = 3, .tree_depth = 3, .tree_budget = 12});
    d.begin(context);
    EXPECT_EQ(d.tree().tokens, (std::vector<int>{s_, security, detail}));
    const auto& merged = d.tree(cal.tree(clinton));
    EXPECT_EQ(merged.tokens, (std::vector<int>{arrived, at, in, has, arrived, been, s_, security, detail}));
    EXPECT_EQ(merged.parents, (std::vector<std::int32_t>{-1, 0, 0, -1, 3, 3, -1, 6, 7}));
    // A budget smaller than the calibrated tree keeps its first nodes (parents first).
    drafter<int> small({.max_draft = 3, .tree_depth = 3, .tree_budget = 5});
    small.begin(context);
    const auto& cut = small.tree(cal.tree(clinton));
    EXPECT_EQ(cut.tokens, (std::vector<int>{arrived, at, in, has, arrived}));
    EXPECT_EQ(cut.parents, (std::vector<std::int32_t>{-1, 0, 0, -1, 3}));
    // An empty extra tree gives the automaton's own tree.
    EXPECT_EQ(d.tree(frugal::draft::draft_tree<int>{}).tokens, (std::vector<int>{s_, security, detail}));
    frugal::draft::draft_tree<int> bad;
    bad.tokens = {1, 2};
    bad.parents = {-1, 1};  // a node cannot be its own parent
    EXPECT_THROW((void)d.tree(bad), frugal::invalid_argument);
    bad.parents = {-1};
    EXPECT_THROW((void)d.tree(bad), frugal::invalid_argument);
}

TEST(Calibration, BadInput) {
    const std::vector<int> context{clinton, s_};
    std::vector<token_prediction<int>> preds(5, {filler, 0.1f});
    EXPECT_THROW(calibrated_source<int>(context, preds, 3), frugal::invalid_argument);
    preds.resize(6);
    preds[2].prob = 1.5f;
    EXPECT_THROW(calibrated_source<int>(context, preds, 3), frugal::invalid_argument);
    EXPECT_THROW(calibrated_source<int>(context, preds, 0), frugal::invalid_argument);
    preds[2].prob = 0.5f;
    EXPECT_THROW(calibrated_source<int>(context, preds, 3, {.min_prob = std::nanf("")}), frugal::invalid_argument);
    EXPECT_NO_THROW(calibrated_source<int>(context, preds, 3));
}
}  // namespace calibration_cases


}  // namespace
