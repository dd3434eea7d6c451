// progressive_rank over a scripted model whose scores follow hand-built trajectories: the
// layers and chunks it runs, the candidates it computes, and its result.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
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
static_assert(frugal::prune::progressive_model<scripted_model>);
struct no_score {
    std::size_t layers() const { return 1; }
    void embed(std::span<const std::size_t>) {}
    void forward(std::size_t, std::span<const std::size_t>) {}
};
static_assert(!frugal::prune::progressive_model<no_score>);

TEST(ProgressiveRank, PrunesBeforeLayersAndStopsWhenTheTopKIsComplete) {
    // 6 candidates, 4 layers, K = 2. After layer 1 the scores split {0,1} high / rest low:
    // with threshold 0.5 the second decision terminates, so layers 2-4 never run.
    scripted_model m;
    m.table = {{0.5f, 0.52f, 0.9f, 0.9f, 0.9f}, {0.5f, 0.49f, 0.91f, 0.9f, 0.9f}, {0.5f, 0.5f, 0.1f, 0.1f, 0.1f},
               {0.5f, 0.51f, 0.12f, 0.1f, 0.1f}, {0.5f, 0.48f, 0.11f, 0.1f, 0.1f}, {0.5f, 0.5f, 0.09f, 0.1f, 0.1f}};
    frugal::prune::cluster_pruner pruner({.threshold = 0.5, .confirmations = 0});
    const auto r = frugal::prune::progressive_rank(m, 6, 2, pruner, {.chunk_size = 4});
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
    frugal::prune::cluster_pruner never({.threshold = std::numeric_limits<double>::infinity()});
    const auto r = frugal::prune::progressive_rank(m, 3, 2, never);
    EXPECT_EQ(r.layers.size(), 2u);
    EXPECT_EQ(r.candidate_layers_skipped, 0u);
    EXPECT_EQ(r.top, (std::vector<std::size_t>{1, 2}));
    EXPECT_EQ(r.scores, (std::vector<float>{0.9f, 0.5f}));
    EXPECT_EQ(m.calls.size(), 2u);  // one chunk per layer (chunk_size 0)
}

// The chunk an exhaustive search picks for `active` candidates: among chunks whose
// intermediates fit the limit, the smallest one with the least layer wall time
// max(compute, next load), compute being the sum over chunks of max(floor, c * per).
std::size_t brute_force_chunk(const frugal::prune::chunk_planning& p, std::size_t active, double load) {
    const auto compute = [&](std::size_t c) {
        double t = 0.0;
        for (std::size_t b = 0; b < active; b += c)
            t += std::max(p.cost.min_chunk_seconds, p.cost.per_token_seconds * double(std::min(c, active - b)));
        return t;
    };
    std::size_t best_c = 0;
    double best = std::numeric_limits<double>::infinity();
    for (std::size_t c = 1; c <= active && double(c) * p.cost.intermediate_bytes_per_token <= p.memory_limit_bytes; ++c) {
        const double wall = std::max(compute(c), load);
        if (wall < best * (1.0 - 1e-9)) {
            best = wall;
            best_c = c;
        }
    }
    return best_c;
}

TEST(ProgressiveRank, PlannedChunksFitMemoryCoverTheNextLoadAndFollowThePrunedBatch) {
    // 20 candidates, 5 layers, K = 5. After layer 0 ten scores are high and ten low: the
    // decision before layer 1 drops the low ten, so layers 1-4 run on ten.
    scripted_model m;
    m.table.assign(20, std::vector<float>(6, 0.5f));
    for (std::size_t c = 0; c < 20; ++c)
        for (std::size_t l = 1; l <= 5; ++l) m.table[c][l] = (c < 10 ? 0.9f : 0.1f) + 0.001f * float(c);
    // saturation at 4 candidates (4 ms per chunk below), 6 MiB of intermediates each, 32 MiB
    // for one chunk (at most 5 candidates), 10 ms to load a layer
    const frugal::prune::chunk_planning plan{
        .cost = {.per_token_seconds = 1e-3, .min_chunk_seconds = 4e-3, .intermediate_bytes_per_token = 6.0 * (1 << 20)},
        .next_layer_load_seconds = 0.010,
        .memory_limit_bytes = 32.0 * (1 << 20)};
    frugal::prune::cluster_pruner pruner({.threshold = 0.5, .confirmations = 0});
    const auto r = frugal::prune::progressive_rank(m, 20, 5, pruner, {.planning = plan});
    ASSERT_EQ(r.layers.size(), 5u);
    EXPECT_EQ(r.layers[0].active, 20u);
    EXPECT_EQ(r.layers[1].active, 10u);
    std::size_t call = 0;
    for (const auto& st : r.layers) {
        const double load = st.layer + 1 < 5 ? plan.next_layer_load_seconds : 0.0;
        EXPECT_EQ(st.chunk_size, brute_force_chunk(plan, st.active, load)) << "layer " << st.layer;
        EXPECT_LE(double(st.chunk_size) * plan.cost.intermediate_bytes_per_token, plan.memory_limit_bytes);
        EXPECT_EQ(st.chunks, (st.active + st.chunk_size - 1) / st.chunk_size);
        for (std::size_t c = 0; c < st.chunks; ++c, ++call) {
            ASSERT_LT(call, m.calls.size());
            EXPECT_EQ(m.calls[call].first, st.layer);
            EXPECT_LE(m.calls[call].second.size(), st.chunk_size);
        }
    }
    // by hand: 20 active -> chunks of 4 (5 x 4 ms = 20 ms of compute covers the 10 ms load;
    // 1-3 would compute longer, 5 no faster); 10 active -> chunks of 5 (2 x 5 ms = the load)
    EXPECT_EQ(r.layers[0].chunk_size, 4u);
    EXPECT_EQ(r.layers[1].chunk_size, 5u);
    EXPECT_EQ(r.layers[4].chunk_size, 5u);  // last layer: nothing to hide, fastest compute
    // the override ignores the plan
    scripted_model m2 = m;
    m2.calls.clear();
    const auto fixed = frugal::prune::progressive_rank(m2, 20, 5, pruner, {.planning = plan, .chunk_size = 3});
    for (const auto& st : fixed.layers) EXPECT_EQ(st.chunk_size, 3u);
}

TEST(ProgressiveRank, BadInput) {
    scripted_model m;
    m.table = {{0.f, 0.1f}, {0.f, 0.2f}};
    frugal::prune::cluster_pruner pruner;
    EXPECT_THROW((void)frugal::prune::progressive_rank(m, 2, 3, pruner), frugal::invalid_argument);
    EXPECT_THROW((void)frugal::prune::progressive_rank(m, 2, 0, pruner), frugal::invalid_argument);
    EXPECT_THROW((void)frugal::prune::progressive_rank(m, 0, 1, pruner), frugal::invalid_argument);
    // a memory limit below one candidate's intermediates
    const frugal::prune::chunk_planning tight{.cost = {.per_token_seconds = 1e-3, .intermediate_bytes_per_token = 100.0},
                                       .next_layer_load_seconds = 0.0,
                                       .memory_limit_bytes = 50.0};
    EXPECT_THROW((void)frugal::prune::progressive_rank(m, 2, 1, pruner, {.planning = tight}), frugal::invalid_argument);
}

}  // namespace
