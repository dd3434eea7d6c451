// The request-level API: batch drafts equal those of one drafter per request (the oracle),
// on any executor; lifecycle errors name the id.
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include <frugal/core/thread_pool.hpp>
#include <frugal/draft/speculator.hpp>

namespace {

using namespace frugal::draft;

template <class Fn>
void expect_error(Fn&& fn, const std::string& needle) {
    try {
        fn();
        ADD_FAILURE() << "no error, expected one saying '" << needle << "'";
    } catch (const frugal::invalid_argument& e) {
        EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
}

TEST(Speculator, BatchDraftsEqualOneDrafterPerRequest) {
    std::mt19937 rng(3);
    std::uniform_int_distribution<int> tok(0, 7);
    live_history<int> history(1 << 12);
    for (int d = 0; d < 20; ++d) {
        std::vector<int> doc(30);
        for (auto& t : doc) t = tok(rng);
        history.add(doc);
    }
    history.publish();
    const drafter_config config{.max_draft = 6, .tree_depth = 6, .tree_budget = 16};
    frugal::thread_pool pool(3);
    for (const auto shape : {draft_shape::tree, draft_shape::chain}) {
        speculator<int> spec(config, &history);
        std::vector<drafter<int>> oracle;
        std::vector<request_id> ids;
        std::vector<std::vector<int>> outputs;
        for (request_id id = 10; id < 18; ++id) {
            std::vector<int> prompt(40);
            for (auto& t : prompt) t = tok(rng);
            spec.start(id, prompt);
            oracle.emplace_back(config, &history);
            oracle.back().begin(prompt);
            ids.push_back(id);
            outputs.emplace_back();
        }
        for (int step = 0; step < 30; ++step) {
            const auto drafts = step % 2 == 0 ? spec.propose(ids, pool, shape) : spec.propose(ids, shape);
            ASSERT_EQ(drafts.size(), ids.size());
            for (std::size_t i = 0; i < ids.size(); ++i) {
                const auto& want = shape == draft_shape::tree ? oracle[i].tree() : oracle[i].chain();
                EXPECT_EQ(drafts[i]->tokens, want.tokens);
                EXPECT_EQ(drafts[i]->parents, want.parents);
                EXPECT_EQ(drafts[i]->probabilities, want.probabilities);
                const std::vector<int> accepted{tok(rng), tok(rng)};
                spec.append(ids[i], accepted);
                oracle[i].accept(accepted);
                outputs[i].insert(outputs[i].end(), accepted.begin(), accepted.end());
            }
        }
        for (std::size_t i = 0; i < ids.size(); ++i) EXPECT_EQ(spec.stop(ids[i]), outputs[i]);
        EXPECT_EQ(spec.size(), 0u);
    }
}

TEST(Speculator, StoppedOutputsFeedTheHistory) {
    live_history<int> history(1 << 12);
    speculator<int> spec({.max_draft = 4, .history_escape = 1.0}, &history);
    spec.start(1, std::vector<int>{9, 9});
    spec.append(1, std::vector<int>{40, 41, 42, 43, 44});
    history.add(spec.stop(1));
    history.publish();
    spec.start(2, std::vector<int>{7, 40, 41});
    const auto drafts = spec.propose(std::vector<request_id>{2}, draft_shape::chain);
    EXPECT_EQ(drafts[0]->tokens, (std::vector<int>{42, 43, 44}));
    EXPECT_EQ(spec.request(2).history_match(), 2u);
    spec.start(1, std::vector<int>{5});  // an id may be started again after its stop
    EXPECT_TRUE(spec.contains(1));
}

TEST(Speculator, LifecycleErrorsNameTheId) {
    speculator<int> spec;
    spec.start(7, std::vector<int>{1, 2, 3});
    expect_error([&] { spec.start(7, std::vector<int>{4}); }, "request 7 is already started");
    expect_error([&] { spec.append(9, std::vector<int>{4}); }, "unknown request 9");
    expect_error([&] { (void)spec.propose(std::vector<request_id>{7, 9}); }, "unknown request 9");
    expect_error([&] { (void)spec.propose(std::vector<request_id>{7, 7}); }, "request 7 appears twice");
    (void)spec.stop(7);
    expect_error([&] { spec.append(7, std::vector<int>{4}); }, "request 7 was stopped");
    expect_error([&] { (void)spec.propose(std::vector<request_id>{7}); }, "request 7 was stopped");
    expect_error([&] { (void)spec.stop(7); }, "request 7 was stopped");
    EXPECT_THROW(speculator<int>({.tree_budget = 0}), frugal::invalid_argument);
    EXPECT_TRUE(spec.propose(std::vector<request_id>{}).empty());
}

TEST(Speculator, AnIdStoppedAgainIsRememberedFromItsNewestStop) {
    // Stop 7, start and stop it again, then 4,095 other stops: the newest stop of 7 is one of
    // the last 4,096, so 7 is still known as stopped (its first stop aging out used to
    // forget it).
    speculator<int> spec;
    for (int round = 0; round < 2; ++round) {
        spec.start(7, std::vector<int>{1, 2});
        (void)spec.stop(7);
    }
    for (request_id id = 100; id < 100 + 4095; ++id) {
        spec.start(id, std::vector<int>{1});
        (void)spec.stop(id);
    }
    expect_error([&] { spec.append(7, std::vector<int>{4}); }, "request 7 was stopped");
    spec.start(100 + 4095, std::vector<int>{1});  // one stop more: 7's last stop ages out
    (void)spec.stop(100 + 4095);
    expect_error([&] { spec.append(7, std::vector<int>{4}); }, "unknown request 7");
}

}  // namespace
