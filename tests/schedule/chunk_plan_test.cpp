#include <frugal/schedule/chunk_plan.hpp>
#include <frugal/schedule/timeline.hpp>

#include <gtest/gtest.h>

#include <random>

namespace {

// Oracle: every chunk size, the layer replayed on the timeline (one compute task per
// chunk holding its intermediates, the next layer's load on the I/O channel).
struct replay {
    double makespan;
    std::uint64_t peak;
};
replay replay_layer(const frugal::schedule::chunk_cost_model& m, std::size_t tokens, std::size_t c, double load) {
    frugal::schedule::timeline t;
    t.add(frugal::schedule::resource::io, load);
    for (std::size_t done = 0; done < tokens; done += c) {
        const std::size_t size = std::min(c, tokens - done);
        const double seconds = std::max(m.min_chunk_seconds, m.per_token_seconds * double(size));
        const auto bytes = static_cast<std::uint64_t>(double(size) * m.intermediate_bytes_per_token);
        t.add(frugal::schedule::resource::compute, seconds, {}, bytes, bytes);
    }
    const auto r = t.simulate();
    return {r.makespan, r.peak_resident_bytes};
}

TEST(ChunkPlan, SmallestBestChunkMatchesTimelineBruteForce) {
    std::mt19937 rng(8);
    std::uniform_real_distribution<double> u(0.0, 1.0);
    for (int trial = 0; trial < 60; ++trial) {
        const frugal::schedule::chunk_cost_model m{.per_token_seconds = 0.5 + u(rng), .min_chunk_seconds = 20 * u(rng),
                                         .intermediate_bytes_per_token = 16};
        const std::size_t tokens = 10 + trial * 3;
        const double load = 200 * u(rng);
        const double limit = 16.0 * double(1 + trial % 40);
        const auto p = frugal::schedule::plan_chunks(m, tokens, load, limit);
        double best = INFINITY;
        std::size_t smallest = 0;
        for (std::size_t c = 1; c <= tokens && 16.0 * double(c) <= limit; ++c) {
            const double ms = replay_layer(m, tokens, c, load).makespan;
            if (ms < best * (1 - 1e-9)) best = ms, smallest = c;
        }
        EXPECT_EQ(p.chunk, smallest) << "trial " << trial;
        const auto r = replay_layer(m, tokens, p.chunk, load);
        EXPECT_NEAR(p.layer_seconds, r.makespan, 1e-9 * r.makespan);
        EXPECT_LE(double(r.peak), limit);
        EXPECT_EQ(p.chunks, (tokens + p.chunk - 1) / p.chunk);
    }
}

TEST(ChunkPlan, LoadBoundLayerShrinksChunksUntilComputeFillsTheLoad) {
    // 100 tokens, 1 s per token, 10 s floor per chunk; next load 200 s. Chunks of 5 take
    // 20 * 10 = 200 s: the smallest chunk whose compute still fits under the load.
    const frugal::schedule::chunk_cost_model m{.per_token_seconds = 1, .min_chunk_seconds = 10, .intermediate_bytes_per_token = 1};
    const auto p = frugal::schedule::plan_chunks(m, 100, 200, 1000);
    EXPECT_EQ(p.chunk, 5u);
    EXPECT_DOUBLE_EQ(p.layer_seconds, 200);
    // No load: the smallest saturating chunk (10 tokens = the 10 s floor).
    EXPECT_EQ(frugal::schedule::plan_chunks(m, 100, 0, 1000).chunk, 10u);
}

TEST(ChunkPlan, RejectsBadInput) {
    const frugal::schedule::chunk_cost_model m{.per_token_seconds = 1, .min_chunk_seconds = 0, .intermediate_bytes_per_token = 8};
    EXPECT_THROW((void)frugal::schedule::plan_chunks(m, 0, 1, 100), frugal::invalid_argument);
    EXPECT_THROW((void)frugal::schedule::plan_chunks(m, 10, -1, 100), frugal::invalid_argument);
    EXPECT_THROW((void)frugal::schedule::plan_chunks(m, 10, 1, 4), frugal::invalid_argument);
    const frugal::schedule::chunk_cost_model zero{.per_token_seconds = 0, .min_chunk_seconds = 0, .intermediate_bytes_per_token = 8};
    EXPECT_THROW((void)frugal::schedule::plan_chunks(zero, 10, 1, 100), frugal::invalid_argument);
    const frugal::schedule::chunk_cost_model negative{.per_token_seconds = -1, .min_chunk_seconds = 1, .intermediate_bytes_per_token = 8};
    EXPECT_THROW((void)frugal::schedule::plan_chunks(negative, 10, 1, 100), frugal::invalid_argument);
}

}  // namespace
