// PLD, verification and the drafter against hand-built cases, brute force and the
// published PLD reference of ../shared/data/drafting/README.md.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <map>
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
#include "frugal_test_temp.hpp"

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

// ---- drafter -------------------------------------------------------------------------------

// Does `s` occur in `text`?
bool occurs(const std::vector<int>& text, const std::vector<int>& s) {
    return std::search(text.begin(), text.end(), s.begin(), s.end()) != text.end();
}

TEST(Drafter, ChainCopiesTheRepeatedContinuation) {
    drafter<int> d({.max_draft = 4});
    d.begin(std::vector<int>{1, 2, 3, 4, 5, 6, 7, 9, 1, 2, 3});
    EXPECT_EQ(d.context_match(), 3u);
    EXPECT_EQ(v(d.chain()), (std::vector<int>{4, 5, 6, 7}));
    d.accept(std::vector<int>{4, 5});
    EXPECT_EQ(v(d.chain()), (std::vector<int>{6, 7, 9, 1}));
}

TEST(Drafter, ChainPrefersTheMostFrequentContinuation) {
    // "8" was followed by 1 twice and by 2 once; the chain takes 1.
    drafter<int> d({.max_draft = 1});
    d.begin(std::vector<int>{8, 1, 5, 8, 2, 6, 8, 1, 7, 8});
    EXPECT_EQ(v(d.chain()), (std::vector<int>{1}));
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
    suffix_automaton<int> history;
    history.append(std::vector<int>{40, 41, 42, 43, 44});
    history.begin_document();
    history.append(std::vector<int>{50, 51});
    drafter<int> d({.max_draft = 3}, &history);
    d.begin(std::vector<int>{1, 2, 40, 41});
    EXPECT_EQ(d.history_match(), 2u);
    EXPECT_EQ(v(d.chain()), (std::vector<int>{42, 43, 44}));
    d.begin(std::vector<int>{7, 50, 51});
    EXPECT_TRUE(d.chain().empty());  // a continuation never crosses into another document
}

TEST(Drafter, BackoffDraftsWhereTheLongestMatchEnds) {
    // "1 2 3" ends a history document (nothing follows it); its back-off "2 3" was
    // followed by 4 in the other document.
    suffix_automaton<int> history;
    history.append(std::vector<int>{1, 2, 3});
    history.begin_document();
    history.append(std::vector<int>{2, 3, 4});
    drafter<int> with({.max_draft = 1}, &history);
    with.begin(std::vector<int>{1, 2, 3});
    EXPECT_EQ(with.history_match(), 3u);
    EXPECT_EQ(v(with.chain()), (std::vector<int>{4}));
    drafter<int> without({.max_draft = 1, .backoff = false}, &history);
    without.begin(std::vector<int>{1, 2, 3});
    EXPECT_TRUE(without.chain().empty());
}

TEST(Drafter, TreeIsValidAndEveryPathOccurred) {
    std::mt19937 rng(1);
    std::uniform_int_distribution<int> tok(0, 5);
    std::vector<int> hist_text, ctx;
    for (int i = 0; i < 300; ++i) hist_text.push_back(tok(rng));
    for (int i = 0; i < 200; ++i) ctx.push_back(tok(rng));
    suffix_automaton<int> history;
    history.append(std::span<const int>(hist_text));
    drafter<int> d({.max_draft = 5, .tree_budget = 24}, &history);
    d.begin(std::span<const int>(ctx).first(100));
    for (std::size_t step = 100; step < 200; ++step) {
        const auto& t = d.tree();
        ASSERT_LE(t.size(), 24u);
        std::vector<std::vector<int>> path(t.size());
        for (std::size_t i = 0; i < t.size(); ++i) {
            ASSERT_LT(t.parents[i], std::int32_t(i));
            if (t.parents[i] >= 0) path[i] = path[std::size_t(t.parents[i])];
            path[i].push_back(t.tokens[i]);
            ASSERT_LE(path[i].size(), 5u);
            // Siblings are distinct tokens.
            for (std::size_t j = 0; j < i; ++j)
                EXPECT_FALSE(t.parents[j] == t.parents[i] && t.tokens[j] == t.tokens[i]);
            // The last context token followed by the path occurred in the context or history.
            std::vector<int> s{ctx[step - 1]};
            s.insert(s.end(), path[i].begin(), path[i].end());
            const std::vector<int> seen(ctx.begin(), ctx.begin() + std::ptrdiff_t(step));
            EXPECT_TRUE(occurs(seen, s) || occurs(hist_text, s)) << "node " << i << " at step " << step;
        }
        // The chain is the tree's first (most probable) path prefix.
        const auto chain = v(d.chain());
        if (!chain.empty()) {
            EXPECT_EQ(chain.front(), t.tokens.front());
        }
        d.accept(ctx[step]);
    }
}

TEST(Drafter, BadInput) {
    EXPECT_THROW(drafter<int>({.max_draft = 0}), frugal::invalid_argument);
    EXPECT_THROW(drafter<int>({.tree_budget = 0}), frugal::invalid_argument);
    EXPECT_THROW(drafter<int>({.min_match = 0}), frugal::invalid_argument);
    EXPECT_THROW(drafter<int>({.escape = -1}), frugal::invalid_argument);
    EXPECT_THROW(drafter<int>({.min_path_score = 1.0}), frugal::invalid_argument);
    drafter<int> d({.vocab_size = 100});
    EXPECT_THROW(d.accept(-3), frugal::out_of_range);
    EXPECT_THROW(d.accept(100), frugal::out_of_range);
    EXPECT_NO_THROW(d.accept(99));
    drafter<std::uint16_t> u({.vocab_size = 10});
    EXPECT_THROW(u.accept(std::uint16_t{10}), frugal::out_of_range);
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
    drafter<int> d({.max_draft = 3, .tree_budget = 12});
    d.begin(context);
    EXPECT_EQ(d.tree().tokens, (std::vector<int>{s_, security, detail}));
    const auto& merged = d.tree(cal.tree(clinton));
    EXPECT_EQ(merged.tokens, (std::vector<int>{arrived, at, in, has, arrived, been, s_, security, detail}));
    EXPECT_EQ(merged.parents, (std::vector<std::int32_t>{-1, 0, 0, -1, 3, 3, -1, 6, 7}));
    // A budget smaller than the calibrated tree keeps its first nodes (parents first).
    drafter<int> small({.max_draft = 3, .tree_budget = 5});
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

// ---- history persistence -------------------------------------------------------------------

namespace history_cases {
using frugal::draft::history_store;

std::vector<std::vector<int>> random_docs(std::uint32_t seed, std::size_t n) {
    std::mt19937 rng(seed);
    std::uniform_int_distribution<int> tok(0, 3), len(1, 30);
    std::vector<std::vector<int>> docs(n);
    for (auto& d : docs) {
        const int l = len(rng);
        for (int i = 0; i < l; ++i) d.push_back(tok(rng));
    }
    return docs;
}

// Occurrences of `p` inside the documents (never across them), by brute force.
std::size_t count_in(const std::vector<std::vector<int>>& docs, const std::vector<int>& p) {
    std::size_t n = 0;
    for (const auto& d : docs)
        for (std::size_t i = 0; i + p.size() <= d.size(); ++i)
            n += std::equal(p.begin(), p.end(), d.begin() + std::ptrdiff_t(i));
    return n;
}

void expect_holds(const history_store<int>& h, const std::vector<std::vector<int>>& docs) {
    std::size_t total = 0;
    for (const auto& d : docs) total += d.size();
    ASSERT_EQ(h.size(), total);
    ASSERT_EQ(h.documents(), docs.size());
    const std::vector<std::vector<int>> patterns{{0}, {1, 2}, {3, 3}, {0, 1, 2}, {2, 2, 2, 2}, {1, 0, 3, 1}};
    for (const auto& p : patterns) {
        const auto s = h.automaton().find(p);
        EXPECT_EQ(s == frugal::draft::no_state ? 0u : h.automaton().count(s), count_in(docs, p));
    }
}

std::filesystem::path temp_file(const char* name) {
    return frugal::testing::temp_path_for_test(std::string("frugal_draft_") + name);
}

TEST(History, SaveLoadRoundTrip) {
    const auto docs = random_docs(3, 12);
    history_store<int> h(10000);
    for (const auto& d : docs) h.add(d);
    expect_holds(h, docs);
    const auto file = temp_file("roundtrip");
    h.save(file);
    const auto back = history_store<int>::load(file);
    EXPECT_EQ(back.max_tokens(), 10000u);
    expect_holds(back, docs);
    history_store<int> empty(5);
    empty.save(file);
    EXPECT_EQ(history_store<int>::load(file).size(), 0u);
    std::filesystem::remove(file);
}

TEST(History, EvictsOldestDocumentsFirst) {
    const auto docs = random_docs(4, 40);
    history_store<int> h(100);
    std::vector<std::vector<int>> kept;
    for (const auto& d : docs) {
        h.add(d);
        // The rule: when over the bound, drop the oldest until the rest fill <= 3/4 of it.
        std::size_t total = d.size();
        for (const auto& k : kept) total += k.size();
        if (total > 100) {
            std::size_t old = total - d.size();
            const std::size_t keep_at_most = std::min<std::size_t>(100 - d.size(), 75);
            while (old > keep_at_most) {
                old -= kept.front().size();
                kept.erase(kept.begin());
            }
        }
        kept.push_back(d);
        ASSERT_LE(h.size(), 100u);
        expect_holds(h, kept);
    }
    std::vector<int> huge(250);
    for (std::size_t i = 0; i < huge.size(); ++i) huge[i] = int(i % 7);
    h.add(huge);
    expect_holds(h, {std::vector<int>(huge.end() - 100, huge.end())});
    EXPECT_THROW(history_store<int>(0), frugal::invalid_argument);
}

TEST(History, TruncatedOrCorruptFilesFailClearly) {
    history_store<int> h(1000);
    for (const auto& d : random_docs(5, 6)) h.add(d);
    const auto file = temp_file("corrupt");
    h.save(file);
    std::ifstream in(file, std::ios::binary);
    const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    in.close();
    auto write = [&](const std::string& b) { std::ofstream(file, std::ios::binary | std::ios::trunc) << b; };
    auto expect_error = [&](const char* needle) {
        try {
            (void)history_store<int>::load(file);
            ADD_FAILURE() << "no error for " << needle;
        } catch (const frugal::runtime_error& e) {
            EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
        }
    };
    for (std::size_t cut : {std::size_t{0}, std::size_t{5}, std::size_t{20}, std::size_t{50}, bytes.size() - 1}) {
        write(bytes.substr(0, cut));
        expect_error("truncated");
    }
    for (std::size_t at : {std::size_t{60}, bytes.size() / 2, bytes.size() - 12}) {  // a flipped token byte
        std::string b = bytes;
        b[at] = char(b[at] ^ 0x5a);
        write(b);
        expect_error("corrupt");
    }
    std::string b = bytes;
    b[0] = 'X';
    write(b);
    expect_error("bad magic");
    write(bytes);
    EXPECT_THROW((void)history_store<std::int64_t>::load(file), frugal::runtime_error);  // another token type
    std::filesystem::remove(file);
    EXPECT_THROW((void)history_store<int>::load(file), frugal::runtime_error);  // missing
}
}  // namespace history_cases

}  // namespace
