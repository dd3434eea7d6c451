#include <frugal/schedule/placement.hpp>

#include <gtest/gtest.h>

#include <random>
#include <vector>

namespace {

using frugal::schedule::fragment;
using frugal::schedule::placement_objective;

std::vector<fragment> random_fragments(std::mt19937& rng, std::size_t n) {
    std::uniform_int_distribution<std::uint64_t> size(1, 40), uses(1, 3);
    std::uniform_int_distribution<std::size_t> block(0, 5);
    std::vector<fragment> out;
    for (std::size_t i = 0; i < n; ++i) {
        fragment f{size(rng) * 512, {}};
        for (std::uint64_t u = uses(rng); u-- > 0;) f.blocks.push_back(block(rng));
        out.push_back(f);
    }
    return out;
}

struct best_subsets {
    std::uint64_t bytes = 0, transfer = UINT64_MAX;
};

// The oracle: every subset of fragments.
best_subsets brute_force(const std::vector<fragment>& f, std::uint64_t limit) {
    best_subsets best;
    for (std::uint32_t mask = 0; mask < (1u << f.size()); ++mask) {
        std::uint64_t bytes = 0, transfer = 0;
        for (std::size_t i = 0; i < f.size(); ++i) {
            if (mask >> i & 1u) bytes += f[i].bytes;
            else transfer += f[i].bytes * f[i].blocks.size();
        }
        if (bytes > limit) continue;
        best.bytes = std::max(best.bytes, bytes);
        best.transfer = std::min(best.transfer, transfer);
    }
    return best;
}

// Independent recount of a placement's claims from its resident set.
void expect_consistent(const std::vector<fragment>& f, const frugal::schedule::placement& p, std::uint64_t limit) {
    std::uint64_t bytes = 0, transfer = 0;
    std::vector<bool> kept(f.size());
    for (std::size_t i : p.resident) kept.at(i) = true;
    for (std::size_t i = 0; i < f.size(); ++i) {
        if (kept[i]) bytes += f[i].bytes;
        else transfer += f[i].bytes * f[i].blocks.size();
    }
    EXPECT_EQ(p.resident_bytes, bytes);
    EXPECT_EQ(p.transfer_bytes_per_pass, transfer);
    EXPECT_LE(bytes, limit);
}

TEST(Placement, KnapsackObjectivesMatchBruteForce) {
    std::mt19937 rng(5);
    for (int trial = 0; trial < 40; ++trial) {
        const auto f = random_fragments(rng, 4 + trial % 9);
        const std::uint64_t limit = std::uniform_int_distribution<std::uint64_t>(40 * 512, 160 * 512)(rng) + 37;
        const auto oracle = brute_force(f, limit);
        const auto kept = frugal::schedule::place_fragments(f, limit, placement_objective::bytes_kept);
        const auto moved = frugal::schedule::place_fragments(f, limit, placement_objective::transfer);
        EXPECT_TRUE(kept.exact);
        EXPECT_EQ(kept.resident_bytes, oracle.bytes) << "trial " << trial;
        EXPECT_EQ(moved.transfer_bytes_per_pass, oracle.transfer) << "trial " << trial;
        expect_consistent(f, kept, limit);
        expect_consistent(f, moved, limit);
        const auto small = frugal::schedule::place_fragments(f, limit, placement_objective::smallest_first);
        expect_consistent(f, small, limit);
        EXPECT_GE(small.transfer_bytes_per_pass, oracle.transfer);
    }
}

TEST(Placement, GreedyFallbackIsFeasibleAndWithinHalf) {
    std::mt19937 rng(9);
    for (int trial = 0; trial < 30; ++trial) {
        const auto f = random_fragments(rng, 10);
        const std::uint64_t limit = 60 * 512;
        const auto oracle = brute_force(f, limit);
        const auto g = frugal::schedule::place_fragments(f, limit, placement_objective::bytes_kept, /*max_cells*/ 8);
        EXPECT_FALSE(g.exact);
        expect_consistent(f, g, limit);
        EXPECT_GE(2 * g.resident_bytes, oracle.bytes);
    }
}

TEST(Placement, SmallestFirstIsThePapersRule) {
    // Ascending sizes 1, 2, 3, 10 with limit 7: keeps 1, 2, 3 (6 bytes) and stops at 10,
    // where the knapsack would keep 1 + 2 + 3 too; with limit 12 it keeps 1, 2, 3 and
    // stops at 10, while the knapsack keeps 2 + 10.
    const std::vector<fragment> f = {{10, {0}}, {1, {0}}, {3, {1}}, {2, {1}}};
    const auto a = frugal::schedule::place_fragments(f, 7, placement_objective::smallest_first);
    EXPECT_EQ(a.resident, (std::vector<std::size_t>{1, 2, 3}));
    const auto b = frugal::schedule::place_fragments(f, 12, placement_objective::smallest_first);
    EXPECT_EQ(b.resident_bytes, 6u);
    EXPECT_EQ(b.transfer_bytes_per_pass, 10u);
    EXPECT_EQ(frugal::schedule::place_fragments(f, 12, placement_objective::bytes_kept).resident_bytes, 12u);
}

TEST(Placement, SharedFragmentIsWorthMoreToTheTransferObjective) {
    // A 6-byte fragment used by three blocks saves 18 bytes per pass; two 5-byte ones used
    // once save 10. Limit 10: bytes_kept keeps the two 5s, transfer keeps the shared one.
    const std::vector<fragment> f = {{6, {0, 1, 2}}, {5, {0}}, {5, {1}}};
    EXPECT_EQ(frugal::schedule::place_fragments(f, 10, placement_objective::bytes_kept).resident,
              (std::vector<std::size_t>{1, 2}));
    const auto t = frugal::schedule::place_fragments(f, 10, placement_objective::transfer);
    EXPECT_EQ(t.resident, (std::vector<std::size_t>{0}));
    EXPECT_EQ(t.transfer_bytes_per_pass, 10u);
}

TEST(Placement, TimelineReplaysTransfersAndMemory) {
    // Blocks 0, 1, 2 compute 1 s each; fragments A (4 B, block 0), B (2 B, blocks 1 and 2),
    // R (3 B, block 2). Limit 2: only B fits and it saves 4 B per pass -> resident.
    // At 2 B/s: A loads [0,2), block 0 computes [2,3); R may load once block 0 is done
    // (two-block window): [3,4.5); block 1 computes [3,4), block 2 waits for R: [4.5,5.5).
    // Bytes: B (2) + A (4) = 6 until t = 3, then A is freed before R (3) is acquired.
    const std::vector<fragment> f = {{4, {0}}, {2, {1, 2}}, {3, {2}}};
    const auto p = frugal::schedule::place_fragments(f, 2, placement_objective::transfer);
    ASSERT_EQ(p.resident, (std::vector<std::size_t>{1}));
    EXPECT_EQ(p.transfer_bytes_per_pass, 7u);
    const std::vector<double> compute = {1, 1, 1};
    const auto r = frugal::schedule::placement_timeline(f, p, compute, 2.0).simulate();
    EXPECT_DOUBLE_EQ(r.makespan, 5.5);
    EXPECT_DOUBLE_EQ(r.busy_time(frugal::schedule::resource::io) * 2.0, double(p.transfer_bytes_per_pass));
    EXPECT_EQ(r.peak_resident_bytes, 6u);
}

TEST(Placement, RejectsBadInput) {
    const std::vector<fragment> f = {{10, {0}}, {20, {1}}};
    EXPECT_THROW((void)frugal::schedule::place_fragments({}, 10, placement_objective::transfer), frugal::invalid_argument);
    EXPECT_THROW((void)frugal::schedule::place_fragments(f, 0, placement_objective::transfer), frugal::invalid_argument);
    EXPECT_THROW((void)frugal::schedule::place_fragments(f, 9, placement_objective::smallest_first), frugal::invalid_argument);
    const std::vector<fragment> unused = {{10, {}}};
    EXPECT_THROW((void)frugal::schedule::place_fragments(unused, 10, placement_objective::bytes_kept), frugal::invalid_argument);
    const std::vector<fragment> empty_fragment = {{0, {0}}};
    EXPECT_THROW((void)frugal::schedule::place_fragments(empty_fragment, 10, placement_objective::bytes_kept),
                 frugal::invalid_argument);
}

}  // namespace
