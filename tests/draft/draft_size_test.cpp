// Drafts sized for serving. Oracles: brute force over every prefix-closed choice of nodes
// on small batches of trees (the size choice is the optimum of its model), a counting
// oracle for the calibrator (decided nodes walked independently, the correction's formula
// from those counts, and the true acceptance rate it converges to), a drafter told an
// infinite verification cost drafts nothing, and bad cost models named.
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include <frugal/core/thread_pool.hpp>
#include <frugal/draft/acceptance_calibrator.hpp>
#include <frugal/draft/draft_size.hpp>
#include <frugal/draft/drafter.hpp>
#include <frugal/draft/speculator.hpp>
#include <frugal/draft/verification_cost.hpp>

#include "frugal_test_errors.hpp"

namespace {

using namespace frugal::draft;
using frugal::testing::error_of;

constexpr double inf = std::numeric_limits<double>::infinity();

// A random tree of `n` nodes whose probabilities shrink down every path (as calibrated
// path probabilities do): conditional probabilities in (0, 1), path = product.
struct random_tree {
    std::vector<std::int32_t> parents;
    std::vector<double> path;
};
random_tree make_tree(std::mt19937& rng, std::size_t n) {
    std::uniform_real_distribution<double> u(0.01, 0.99);
    random_tree t;
    for (std::size_t i = 0; i < n; ++i) {
        const std::int32_t parent = i == 0 ? -1 : static_cast<std::int32_t>(rng() % (i + 1)) - 1;
        t.parents.push_back(parent);
        t.path.push_back(u(rng) * (parent < 0 ? 1.0 : t.path[static_cast<std::size_t>(parent)]));
    }
    return t;
}

// The best rate over every choice of nodes that keeps each kept node's parent.
template <class C>
double brute_force_best(const std::vector<random_tree>& batch, batch_load base, const C& cost) {
    std::vector<std::pair<std::size_t, std::size_t>> nodes;  // (request, node)
    for (std::size_t r = 0; r < batch.size(); ++r)
        for (std::size_t i = 0; i < batch[r].path.size(); ++i) nodes.emplace_back(r, i);
    double best = 0;
    for (std::uint32_t mask = 0; mask < (1u << nodes.size()); ++mask) {
        std::vector<std::vector<char>> kept(batch.size());
        for (std::size_t r = 0; r < batch.size(); ++r) kept[r].assign(batch[r].path.size(), 0);
        for (std::size_t k = 0; k < nodes.size(); ++k)
            if (mask >> k & 1) kept[nodes[k].first][nodes[k].second] = 1;
        bool closed = true;
        double expected = base.expected;
        std::size_t count = 0;
        for (std::size_t r = 0; r < batch.size(); ++r)
            for (std::size_t i = 0; i < kept[r].size(); ++i) {
                if (!kept[r][i]) continue;
                const std::int32_t p = batch[r].parents[i];
                closed = closed && (p < 0 || kept[r][static_cast<std::size_t>(p)]);
                expected += batch[r].path[i];
                ++count;
            }
        if (!closed) continue;
        best = std::max(best, expected / cost.step_ms(base.tokens + count));
    }
    return best;
}

TEST(DraftSize, ChoiceIsTheBruteForceOptimumOverPrefixClosedDrafts) {
    std::mt19937 rng(11);
    std::uniform_real_distribution<double> u(0, 1);
    for (int trial = 0; trial < 300; ++trial) {
        const std::size_t requests = 1 + rng() % 3;
        std::vector<random_tree> batch;
        std::size_t total = 0;
        for (std::size_t r = 0; r < requests; ++r) {
            const std::size_t n = rng() % 6;
            if (total + n > 13) break;
            batch.push_back(make_tree(rng, n));
            total += n;
        }
        std::vector<draft_candidate> c;
        for (std::size_t r = 0; r < batch.size(); ++r)
            for (std::size_t i = 0; i < batch[r].path.size(); ++i)
                c.push_back({batch[r].path[i], static_cast<std::uint32_t>(r), static_cast<std::uint32_t>(i)});
        const batch_load base{batch.size(), double(batch.size())};
        // A roofline whose knee falls anywhere from no draft to all of them, and a measured
        // curve with a plateau and steps.
        const roofline_cost roof(1.0 + 3 * u(rng), 0.05 + u(rng));
        const measured_cost steps({{1, 1.0 + u(rng)}, {3, 2.5}, {5, 2.5}, {8, 4.0 + 4 * u(rng)}, {12, 9.0}});
        for (int which = 0; which < 2; ++which) {
            std::vector<draft_candidate> chosen = c;
            const std::size_t m =
                which == 0 ? choose_draft_size(std::span(chosen), base, roof) : choose_draft_size(std::span(chosen), base, steps);
            double expected = base.expected;
            std::vector<std::vector<char>> kept(batch.size());
            for (std::size_t r = 0; r < batch.size(); ++r) kept[r].assign(batch[r].path.size(), 0);
            for (std::size_t k = 0; k < m; ++k) {
                expected += chosen[k].probability;
                kept[chosen[k].request][chosen[k].node] = 1;
            }
            for (std::size_t r = 0; r < batch.size(); ++r)
                for (std::size_t i = 0; i < kept[r].size(); ++i) {
                    const std::int32_t p = batch[r].parents[i];
                    ASSERT_TRUE(!kept[r][i] || p < 0 || kept[r][static_cast<std::size_t>(p)])
                        << "trial " << trial << ": node " << i << " kept without its parent";
                }
            const double got = which == 0 ? expected / roof.step_ms(base.tokens + m) : expected / steps.step_ms(base.tokens + m);
            const double want = which == 0 ? brute_force_best(batch, base, roof) : brute_force_best(batch, base, steps);
            ASSERT_NEAR(got, want, 1e-6 * want) << "trial " << trial << " cost " << which << " m " << m;
        }
    }
}

TEST(DraftSize, BelowTheKneeEveryChanceIsDraftedAndPastItNothingWeak) {
    std::vector<draft_candidate> c{{0.9, 0, 0}, {0.5, 0, 1}, {0.01, 0, 2}};
    const roofline_cost cost(4.0, 0.01);  // knee at 400 tokens
    EXPECT_EQ(choose_draft_size(std::span(c), {1, 1.0}, cost), 3u);
    // 1000 tokens already verified (past the knee, 10 ms): a node pays only if its chance
    // beats the tokens per verified token, 1000 / 1000 here; none does.
    std::vector<draft_candidate> d{{0.9, 0, 0}, {0.5, 0, 1}};
    EXPECT_EQ(choose_draft_size(std::span(d), {1000, 1000.0}, cost), 0u);
    // Fewer expected tokens per verified one (a batch of prefills): the 0.9 node pays.
    EXPECT_EQ(choose_draft_size(std::span(d), {1000, 700.0}, cost), 1u);
}

struct infinite_cost {
    double step_ms(std::size_t) const { return inf; }
};
struct infinite_beyond {  // verifies one token per request, nothing more
    std::size_t base;
    double step_ms(std::size_t tokens) const { return tokens > base ? inf : 1.0; }
};
struct bad_cost {
    double value;
    std::size_t from;
    double step_ms(std::size_t tokens) const { return tokens >= from ? value : 5.0; }
};

std::vector<int> repetitive_prompt() {
    std::vector<int> p;
    for (int r = 0; r < 6; ++r)
        for (int t : {5, 6, 7, 8, 9, 10, 11, 12}) p.push_back(t);
    p.push_back(5);
    return p;
}

TEST(DraftSize, AnInfiniteVerificationCostDraftsNothing) {
    const auto prompt = repetitive_prompt();
    drafter<int> d({.max_draft = 8, .tree_depth = 8, .tree_budget = 16});
    d.begin(prompt);
    ASSERT_GT(d.tree().size(), 0u);  // there is something to draft
    EXPECT_EQ(d.tree(infinite_cost{}).size(), 0u);
    EXPECT_EQ(d.chain(infinite_cost{}).size(), 0u);
    EXPECT_EQ(d.tree(infinite_beyond{1}).size(), 0u);
    speculator<int> spec({.max_draft = 8, .tree_depth = 8, .tree_budget = 16});
    for (request_id id : {1, 2}) spec.start(id, prompt);
    const std::vector<request_id> ids{1, 2};
    for (const auto* t : spec.propose(ids, infinite_beyond{2})) EXPECT_EQ(t->size(), 0u);
    for (const auto* t : spec.propose(ids, infinite_cost{})) EXPECT_EQ(t->size(), 0u);
}

TEST(DraftSize, ABatchOfOneBelowTheKneeGetsTheWholeDraft) {
    const auto prompt = repetitive_prompt();
    const drafter_config config{.max_draft = 8, .tree_depth = 8, .tree_budget = 16};
    drafter<int> plain(config);
    plain.begin(prompt);
    const auto whole = plain.tree();
    acceptance_calibrator cal;
    drafter<int> d(config, nullptr, &cal);
    d.begin(prompt);
    const auto& sized = d.tree(roofline_cost::h100_7b());
    ASSERT_EQ(sized.size(), whole.size());
    EXPECT_EQ(sized.tokens, whole.tokens);
    EXPECT_EQ(sized.parents, whole.parents);
    // Past the knee (a batch of 1000 others, each emitting one token a step) only what is
    // worth its verification remains: a prefix-closed part of the tree.
    const auto& small = d.tree(roofline_cost::h100_7b(), {.tokens = 1000, .expected = 1000});
    EXPECT_LT(small.size(), whole.size());
}

TEST(DraftSize, BadCostModelsAreNamed) {
    std::vector<draft_candidate> c{{0.9, 0, 0}, {0.8, 0, 1}};
    auto choose = [&](const auto& cost) { return error_of<frugal::invalid_argument>([&] { (void)choose_draft_size(std::span(c), {1, 1.0}, cost); }); };
    EXPECT_NE(choose(bad_cost{std::nan(""), 2}).find("step_ms(2) = nan"), std::string::npos) << choose(bad_cost{std::nan(""), 2});
    EXPECT_NE(choose(bad_cost{-1.0, 1}).find("step_ms(1) = -1"), std::string::npos);
    EXPECT_NE(choose(bad_cost{0.0, 1}).find("step_ms(1) = 0"), std::string::npos);
    EXPECT_NE(choose(bad_cost{2.0, 2}).find("decreases: step_ms(2) = 2 < step_ms(1) = 5"), std::string::npos)
        << choose(bad_cost{2.0, 2});
    std::vector<draft_candidate> nan_p{{std::nan(""), 0, 0}};
    EXPECT_NE(error_of<frugal::invalid_argument>([&] { (void)choose_draft_size(std::span(nan_p), {1, 1.0}, roofline_cost::h100_7b()); })
                  .find("probability nan"),
              std::string::npos);
    EXPECT_NE(error_of<frugal::invalid_argument>([] { roofline_cost(-1, 0.1); }).find("weights_ms must be finite and > 0, got -1"),
              std::string::npos);
    EXPECT_NE(error_of<frugal::invalid_argument>([] { roofline_cost(4, std::nan("")); }).find("ms_per_token"), std::string::npos);
    EXPECT_NE(error_of<frugal::invalid_argument>([] { roofline_cost::from_hardware(14e9, 0, 1, 1); }).find("bytes_per_s"),
              std::string::npos);
    EXPECT_NE(error_of<frugal::invalid_argument>([] { measured_cost({}); }).find("no points"), std::string::npos);
    EXPECT_NE(error_of<frugal::invalid_argument>([] { measured_cost({{1, 5.0}, {8, 4.0}}); })
                  .find("time decreases from 5 ms at 1 tokens to 4 ms at 8"),
              std::string::npos);
    EXPECT_NE(error_of<frugal::invalid_argument>([] { measured_cost({{8, 5.0}, {8, 6.0}}); }).find("not more than"),
              std::string::npos);
    EXPECT_NE(error_of<frugal::invalid_argument>([] { measured_cost({{1, -2.0}}); }).find("-2 ms"), std::string::npos);
}

TEST(DraftSize, MeasuredCostInterpolatesAndExtends) {
    const measured_cost cost({{4, 10.0}, {8, 10.0}, {16, 18.0}});
    EXPECT_DOUBLE_EQ(cost.step_ms(1), 10.0);
    EXPECT_DOUBLE_EQ(cost.step_ms(6), 10.0);
    EXPECT_DOUBLE_EQ(cost.step_ms(12), 14.0);
    EXPECT_DOUBLE_EQ(cost.step_ms(32), 34.0);  // the last segment's slope, 1 ms a token
    EXPECT_DOUBLE_EQ(roofline_cost::h100_7b().step_ms(1), 1e3 * 14e9 / 3.35e12);
    EXPECT_DOUBLE_EQ(roofline_cost::h100_7b().step_ms(1000), 1e3 * 1000 * 14e9 / 5e14);
}

// Which nodes of `tree` the emitted tokens decide, and how, walked from the root.
std::vector<int> decided(const draft_tree<int>& tree, const std::vector<int>& emitted) {
    std::vector<int> verdict(tree.size(), -1);  // -1 undecided, 0 rejected, 1 accepted
    for (std::size_t i = 0; i < tree.size(); ++i) {
        std::vector<std::size_t> path{i};
        for (std::int32_t p = tree.parents[i]; p >= 0; p = tree.parents[static_cast<std::size_t>(p)])
            path.push_back(static_cast<std::size_t>(p));
        const std::size_t depth = path.size();
        if (depth > emitted.size()) continue;
        bool parent_on_path = true;
        for (std::size_t k = 1; k < path.size(); ++k)
            parent_on_path = parent_on_path && tree.tokens[path[k]] == emitted[depth - 1 - k];
        if (parent_on_path) verdict[i] = tree.tokens[i] == emitted[depth - 1];
    }
    return verdict;
}

TEST(AcceptanceCalibrator, CountsWhatTheEmittedTokensDecide) {
    std::mt19937 rng(5);
    for (int trial = 0; trial < 200; ++trial) {
        draft_tree<int> tree;
        for (int i = 0; i < 12; ++i) tree.push(i == 0 ? -1 : static_cast<std::int32_t>(rng() % (i + 1)) - 1, int(rng() % 3), 0.5f);
        std::vector<int> emitted(rng() % 6);
        for (auto& t : emitted) t = int(rng() % 3);
        acceptance_calibrator cal;
        cal.observe(tree, std::span<const int>(emitted));
        std::size_t want = 0;
        for (int v : decided(tree, emitted)) want += v >= 0;
        ASSERT_EQ(cal.observations(), want) << "trial " << trial;
    }
}

TEST(AcceptanceCalibrator, CorrectionFollowsItsCounts) {
    // One cell (q = 0.5, depth 1): 300 observations, 240 accepted. The formula's factor,
    // pulled toward the bin's factor over all depths (the same counts here), then to 1.
    acceptance_calibrator cal;
    for (int i = 0; i < 300; ++i) cal.observe(0.5, 1, i % 5 != 0);
    const double m = acceptance_calibrator::prior_mass, accepted = 240, q_sum = 150;
    const double coarse = (accepted + m) / (q_sum + m);
    const double fine = (accepted + m * coarse) / (q_sum + m);
    EXPECT_NEAR(cal.table().probability(0.5, 1), 0.5 * fine, 1e-12);
    // An unseen depth in the same bin takes the bin's factor; an unseen bin is untouched.
    EXPECT_NEAR(cal.table().probability(0.5, 20), 0.5 * coarse, 1e-12);
    EXPECT_DOUBLE_EQ(cal.table().probability(0.05, 1), 0.05);
    EXPECT_DOUBLE_EQ(acceptance_table{}.probability(0.3, 4), 0.3);
    cal.clear();
    EXPECT_EQ(cal.observations(), 0u);
}

TEST(AcceptanceCalibrator, ConvergesToTheTrueAcceptanceRate) {
    // A drafter that says 0.5 where the model accepts 80% and 0.9 where it accepts 30%.
    std::mt19937 rng(9);
    std::bernoulli_distribution hi(0.8), lo(0.3);
    acceptance_calibrator cal;
    for (int i = 0; i < 20000; ++i) {
        cal.observe(0.5, 2, hi(rng));
        cal.observe(0.9, 2, lo(rng));
    }
    EXPECT_NEAR(cal.table().probability(0.5, 2), 0.8, 0.02);
    EXPECT_NEAR(cal.table().probability(0.9, 2), 0.3, 0.02);
}

TEST(AcceptanceCalibrator, DrafterReportsEveryDraftAsItsTokensArrive) {
    // The drafter's incremental reports equal observing each draft by hand with every
    // token accepted after it, up to the request's end.
    std::mt19937 rng(2);
    std::vector<int> text;
    for (int i = 0; i < 400; ++i) text.push_back(i % 37 < 30 ? i % 30 : int(rng() % 40));
    const drafter_config config{.max_draft = 6, .tree_depth = 6, .tree_budget = 12};
    acceptance_calibrator live, by_hand;
    drafter<int> d(config, nullptr, &live);
    const std::span<const int> prompt = std::span<const int>(text).first(100);
    d.begin(prompt);
    std::vector<draft_tree<int>> drafts;
    std::vector<std::size_t> drafted_at;
    for (std::size_t pos = 100; pos < text.size();) {
        drafts.push_back(d.tree());
        drafted_at.push_back(pos);
        const std::size_t n = std::min<std::size_t>(1 + rng() % 4, text.size() - pos);
        // Accepted in two calls (the accepted draft tokens, then the bonus), as engines do.
        d.accept(std::span<const int>(text).subspan(pos, n - 1));
        d.accept(text[pos + n - 1]);
        pos += n;
    }
    for (std::size_t k = 0; k < drafts.size(); ++k) {
        const auto rest = std::span<const int>(text).subspan(drafted_at[k]);
        by_hand.observe(drafts[k], rest);
    }
    EXPECT_GT(live.observations(), 0u);
    EXPECT_EQ(live.observations(), by_hand.observations());
    for (double q : {0.1, 0.3, 0.6, 0.9, 0.99})
        for (std::size_t depth : {1, 2, 4, 6}) EXPECT_DOUBLE_EQ(live.table().probability(q, depth), by_hand.table().probability(q, depth));
}

TEST(DraftSize, SpeculatorSizesTheSameOnAnyExecutor) {
    std::mt19937 rng(4);
    std::vector<std::vector<int>> prompts(12);
    for (auto& p : prompts)
        for (int i = 0; i < 200; ++i) p.push_back(i % 23 < 18 ? i % 18 : int(rng() % 30));
    const drafter_config config{.max_draft = 8, .tree_depth = 8, .tree_budget = 24};
    speculator<int> serial(config), parallel(config);
    std::vector<request_id> ids;
    for (std::size_t i = 0; i < prompts.size(); ++i) {
        serial.start(i, prompts[i]);
        parallel.start(i, prompts[i]);
        ids.push_back(i);
    }
    frugal::thread_pool pool(3);
    const roofline_cost cost(4.0, 0.2);  // knee at 20 tokens: a batch of 12 drafts a little
    for (int step = 0; step < 20; ++step) {
        const auto a = serial.propose(ids, cost);
        const auto b = parallel.propose(ids, pool, cost);
        for (std::size_t i = 0; i < ids.size(); ++i) {
            ASSERT_EQ(a[i]->tokens, b[i]->tokens) << "step " << step << " request " << i;
            ASSERT_EQ(a[i]->parents, b[i]->parents);
            ASSERT_EQ(a[i]->probabilities, b[i]->probabilities);
        }
        for (std::size_t i = 0; i < ids.size(); ++i) {
            const int next = prompts[i][std::size_t(step) % 18];
            serial.append(ids[i], std::span<const int>(&next, 1));
            parallel.append(ids[i], std::span<const int>(&next, 1));
        }
    }
    EXPECT_EQ(serial.calibrator().observations(), parallel.calibrator().observations());
}

}  // namespace
