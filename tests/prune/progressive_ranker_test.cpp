// progressive_rank over a scripted model whose scores follow hand-built trajectories: the
// layers and chunks it runs, the candidates it computes, and its result.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include <frugal/prune/progressive_ranker.hpp>

namespace {

// Scores follow table[candidate][layers done]; records every forward() call.
struct scripted_model {
    std::vector<std::vector<float>> table;  // [candidate][0..layers]: score after that many layers
    std::vector<std::size_t> done;          // layers each candidate has run
    std::vector<std::pair<std::size_t, std::vector<std::size_t>>> calls;
    std::vector<std::size_t> begun, ended;
    std::size_t layers() const { return table.front().size() - 1; }
    void embed(std::span<const std::size_t> ids) {
        done.resize(table.size(), 0);
        for (std::size_t id : ids) done[id] = 0;
    }
    void forward(std::size_t layer, std::span<const std::size_t> ids) {
        for (std::size_t id : ids) {
            EXPECT_EQ(done[id], layer) << "candidate " << id << " skipped a layer";
            ++done[id];
        }
        calls.emplace_back(layer, std::vector<std::size_t>(ids.begin(), ids.end()));
    }
    void score(std::span<const std::size_t> ids, std::span<float> out) const {
        for (std::size_t i = 0; i < ids.size(); ++i) out[i] = table[ids[i]][done[ids[i]]];
    }
    void begin_layer(std::size_t l) { begun.push_back(l); }
    void end_layer(std::size_t l) { ended.push_back(l); }
};
static_assert(frugal::progressive_model<scripted_model>);
struct no_score {
    std::size_t layers() const { return 1; }
    void embed(std::span<const std::size_t>) {}
    void forward(std::size_t, std::span<const std::size_t>) {}
};
static_assert(!frugal::progressive_model<no_score>);

TEST(ProgressiveRank, PrunesBeforeLayersAndStopsWhenTheTopKIsComplete) {
    // 6 candidates, 4 layers, K = 2. After layer 1 the scores split {0,1} high / rest low:
    // with threshold 0.5 the second decision terminates, so layers 2-4 never run.
    scripted_model m;
    m.table = {{0.5f, 0.52f, 0.9f, 0.9f, 0.9f}, {0.5f, 0.49f, 0.91f, 0.9f, 0.9f}, {0.5f, 0.5f, 0.1f, 0.1f, 0.1f},
               {0.5f, 0.51f, 0.12f, 0.1f, 0.1f}, {0.5f, 0.48f, 0.11f, 0.1f, 0.1f}, {0.5f, 0.5f, 0.09f, 0.1f, 0.1f}};
    frugal::cluster_pruner pruner({.threshold = 0.5});
    const auto r = frugal::progressive_rank(m, 6, 2, pruner, {.chunk_size = 4});
    // layer 0 and layer 1 ran on all six in chunks of 4 + 2; the decision before layer 2 ended it
    ASSERT_EQ(r.layers.size(), 2u);
    EXPECT_EQ(r.layers[0].active, 6u);
    EXPECT_EQ(r.layers[0].chunks, 2u);
    EXPECT_EQ(r.layers[1].active, 6u);
    EXPECT_FALSE(r.layers[1].triggered);  // scores after layer 0 are bundled
    EXPECT_EQ(m.calls.size(), 4u);
    EXPECT_EQ(m.calls[0].second, (std::vector<std::size_t>{0, 1, 2, 3}));
    EXPECT_EQ(m.calls[1].second, (std::vector<std::size_t>{4, 5}));
    EXPECT_EQ(r.candidate_layers_computed, 12u);
    EXPECT_EQ(r.candidate_layers_skipped, 24u - 12u);
    EXPECT_EQ(r.top, (std::vector<std::size_t>{1, 0}));  // selected in score order
    EXPECT_TRUE(std::isnan(r.scores[0]));
    EXPECT_EQ(m.begun, (std::vector<std::size_t>{0, 1}));
    EXPECT_EQ(m.ended, m.begun);
}

TEST(ProgressiveRank, WithoutPruningRunsEveryLayerAndRanksByFinalScore) {
    scripted_model m;
    m.table = {{0.f, 0.1f, 0.3f}, {0.f, 0.2f, 0.9f}, {0.f, 0.3f, 0.5f}};
    frugal::cluster_pruner never({.threshold = std::numeric_limits<double>::infinity()});
    const auto r = frugal::progressive_rank(m, 3, 2, never);
    EXPECT_EQ(r.layers.size(), 2u);
    EXPECT_EQ(r.candidate_layers_skipped, 0u);
    EXPECT_EQ(r.top, (std::vector<std::size_t>{1, 2}));
    EXPECT_EQ(r.scores, (std::vector<float>{0.9f, 0.5f}));
    EXPECT_EQ(m.calls.size(), 2u);  // one chunk per layer (chunk_size 0)
}

TEST(ProgressiveRank, ChunkSizeForAndBadInput) {
    EXPECT_EQ(frugal::chunk_size_for(64u << 20, 6u << 20, 2, 20), 10u);
    EXPECT_EQ(frugal::chunk_size_for(1u << 30, 1u << 20, 2, 20), 20u);
    EXPECT_THROW((void)frugal::chunk_size_for(1u << 20, 1u << 21, 1, 20), frugal::invalid_argument);
    EXPECT_THROW((void)frugal::chunk_size_for(1u << 20, 0, 1, 20), frugal::invalid_argument);
    scripted_model m;
    m.table = {{0.f, 0.1f}, {0.f, 0.2f}};
    frugal::cluster_pruner pruner;
    EXPECT_THROW((void)frugal::progressive_rank(m, 2, 3, pruner), frugal::invalid_argument);
    EXPECT_THROW((void)frugal::progressive_rank(m, 2, 0, pruner), frugal::invalid_argument);
    EXPECT_THROW((void)frugal::progressive_rank(m, 0, 1, pruner), frugal::invalid_argument);
}

}  // namespace
