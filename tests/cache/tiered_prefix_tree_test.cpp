// The prefix tree over a tier, on the disk tier (the Redis tests run the same tree across
// processes). Oracles: every page is a function of its chunk key (host_pages::fill), so a
// page loaded from the tier is checked byte for byte; the pool counts every page taken
// and returned; the tier's own exists_prefix says what was written; a brute-force replay
// of which prefixes were inserted says how long a match must be.
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <random>
#include <span>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include <frugal/cache/disk_tier.hpp>
#include <frugal/cache/tiered_prefix_tree.hpp>

#include "frugal_test_errors.hpp"
#include "host_pages.hpp"
#include "temp_files.hpp"

namespace {

using namespace frugal::cache;
using frugal::memory_budget;
using frugal::cache_model::host_pages;
using frugal::cache_model::pages_hold;
using frugal::cache_model::serve;
using frugal::testing::error_of;

const tier_namespace ns{.model = "test-1b", .dtype = "bf16", .layout = "nhd", .page_tokens = 4};
constexpr std::size_t page_bytes = 256;

using tree_t = tiered_prefix_tree<disk_tier<>, host_pages>;

std::vector<int> tokens(std::size_t pages, int salt) {
    std::vector<int> t;
    for (std::size_t i = 0; i < pages * ns.page_tokens; ++i) t.push_back(static_cast<int>(i * 7 + 1000 * salt));
    return t;
}
// The pages an engine computes for keys[from..].
std::vector<std::uint32_t> compute(host_pages& pool, std::span<const tier_key> keys, std::size_t from) {
    std::vector<std::uint32_t> pages;
    for (std::size_t i = from; i < keys.size(); ++i) pages.push_back(pool.compute(keys[i]));
    return pages;
}

class TieredPrefixTree : public frugal::cache_model::temp_files {};

TEST_F(TieredPrefixTree, WriteThroughSharesPagesWithAnotherEngine) {
    disk_tier<> tier_a(dir, ns, 1 << 20), tier_b(dir, ns, 1 << 20);  // two processes' handles on one folder
    host_pages pool_a(64, page_bytes), pool_b(64, page_bytes);
    tree_t a(memory_budget(32 * page_bytes), tier_a, pool_a, ns), b(memory_budget(32 * page_bytes), tier_b, pool_b, ns);
    const auto keys = a.keys<int>(tokens(10, 1));
    ASSERT_EQ(keys.size(), 10u);
    serve(a, pool_a, keys);
    EXPECT_EQ(tier_b.exists_prefix(keys), 10u);  // through: written at insert

    auto hit = b.match(keys);
    EXPECT_EQ(hit.lock.length(), 10u);
    EXPECT_EQ(hit.from_tier, 10u);
    EXPECT_TRUE(pages_hold(pool_b, hit.lock, keys));
    EXPECT_EQ(pool_b.in_use(), 10u);
    hit.lock.release();

    auto again = b.match(keys);  // now in b's memory
    EXPECT_EQ(again.lock.length(), 10u);
    EXPECT_EQ(again.from_tier, 0u);
    EXPECT_EQ(b.stats().pages_from_tier, 10u);
    EXPECT_EQ(b.stats().pages_from_memory, 10u);
}

TEST_F(TieredPrefixTree, LoadsTheRunThatFollowsWhatMemoryHolds) {
    disk_tier<> tier(dir, ns, 1 << 20);
    host_pages pool(64, page_bytes), writer_pool(64, page_bytes);
    tree_t writer(memory_budget(32 * page_bytes), tier, writer_pool, ns);
    tree_t tree(memory_budget(32 * page_bytes), tier, pool, ns);
    const auto keys = tree.keys<int>(tokens(12, 2));
    serve(tree, pool, std::span(keys).first(3));   // memory: 3 pages
    serve(writer, writer_pool, std::span(keys).first(8));  // tier: 8 pages
    auto hit = tree.match(keys);
    EXPECT_EQ(hit.lock.length(), 8u);
    EXPECT_EQ(hit.from_tier, 5u);
    EXPECT_TRUE(pages_hold(pool, hit.lock, keys));
    // The rest is computed and inserted after the loaded pages.
    const auto fresh = compute(pool, keys, hit.lock.length());
    const auto r = tree.insert(hit.lock, keys, fresh);
    EXPECT_EQ(r.existing, 8u);
    EXPECT_EQ(r.cached, 12u);
    EXPECT_TRUE(pages_hold(pool, hit.lock, keys));
    EXPECT_EQ(tier.exists_prefix(keys), 12u);
}

TEST_F(TieredPrefixTree, WriteBackWritesWhatMemoryDropsAndFlushWritesTheRest) {
    disk_tier<> tier(dir, ns, 1 << 20);
    host_pages pool(16, page_bytes);
    {
        tree_t tree(memory_budget(4 * page_bytes), tier, pool, ns, {.write = write_policy::back});
        const auto first = tree.keys<int>(tokens(4, 3)), second = tree.keys<int>(tokens(4, 4)),
                   third = tree.keys<int>(tokens(2, 5));
        serve(tree, pool, first);
        EXPECT_EQ(tier.exists_prefix(first), 0u);
        EXPECT_EQ(tree.unwritten(), 4u);
        serve(tree, pool, second);  // evicts every page of `first`, leaves first: written
        EXPECT_EQ(tier.exists_prefix(first), 4u);
        EXPECT_EQ(tier.exists_prefix(second), 0u);
        EXPECT_EQ(tree.flush(), 4u);
        EXPECT_EQ(tier.exists_prefix(second), 4u);
        serve(tree, pool, third);  // two pages left unwritten, written when the tree goes
        EXPECT_EQ(tree.unwritten(), 2u);
        EXPECT_EQ(pool.in_use(), tree.memory().size());
    }
    EXPECT_EQ(tier.exists_prefix(chunk_keys<int>(ns, tokens(2, 5))), 2u);
    EXPECT_EQ(pool.in_use(), 0u);  // every page back in the pool
    EXPECT_EQ(pool.bad_releases(), 0u);
}

TEST_F(TieredPrefixTree, LockedPagesStayWhileLoadsFillTheBudget) {
    disk_tier<> tier(dir, ns, 1 << 20);
    host_pages pool(64, page_bytes), writer_pool(64, page_bytes);
    tree_t writer(memory_budget(64 * page_bytes), tier, writer_pool, ns);
    tree_t tree(memory_budget(6 * page_bytes), tier, pool, ns);
    const auto held = tree.keys<int>(tokens(4, 6)), loaded = tree.keys<int>(tokens(10, 7));
    serve(writer, writer_pool, loaded);
    auto lock = tree.match(held).lock;
    const auto fresh = compute(pool, held, 0);
    ASSERT_EQ(tree.insert(lock, held, fresh).cached, 4u);
    auto hit = tree.match(loaded);  // two pages of room beside the 4 locked
    EXPECT_EQ(hit.lock.length(), 2u);
    EXPECT_EQ(hit.from_tier, 2u);
    EXPECT_TRUE(pages_hold(pool, hit.lock, loaded));
    EXPECT_TRUE(pages_hold(pool, lock, held));
    hit.lock.release();
    lock.release();
    auto later = tree.match(loaded);  // the unlocked pages make room now
    EXPECT_EQ(later.lock.length(), 6u);
    EXPECT_TRUE(pages_hold(pool, later.lock, loaded));
    EXPECT_LE(tree.memory().bytes(), 6 * page_bytes);
}

TEST_F(TieredPrefixTree, ADamagedEntryOrAnEmptyPoolEndsTheRun) {
    disk_tier<> tier(dir, ns, 1 << 20);
    host_pages pool(64, page_bytes), writer_pool(64, page_bytes);
    tree_t writer(memory_budget(64 * page_bytes), tier, writer_pool, ns);
    tree_t tree(memory_budget(64 * page_bytes), tier, pool, ns);
    const auto keys = tree.keys<int>(tokens(8, 8));
    serve(writer, writer_pool, keys);
    std::string file = read(tier.path_of(keys[5]));  // flip a payload byte behind the tier's back
    file[file.size() / 2] ^= 0x5a;
    write(tier.path_of(keys[5]), file);
    pool.limit_allocations(3);
    auto hit = tree.match(keys);
    EXPECT_EQ(hit.lock.length(), 3u);  // three free pages
    EXPECT_TRUE(pages_hold(pool, hit.lock, keys));
    hit.lock.release();
    pool.limit_allocations(-1);
    hit = tree.match(keys);
    EXPECT_EQ(hit.lock.length(), 5u);  // page 5 is damaged: a miss, never its bytes
    EXPECT_EQ(hit.from_tier, 2u);
    EXPECT_TRUE(pages_hold(pool, hit.lock, keys));
    EXPECT_EQ(pool.in_use(), 5u);  // the page read for the damaged entry went back
}

TEST_F(TieredPrefixTree, AnotherNamespaceSeesNothing) {
    const tier_namespace other{.model = "test-1b", .dtype = "fp16", .layout = "nhd", .page_tokens = 4};
    disk_tier<> tier(dir, ns, 1 << 20), other_tier(dir, other, 1 << 20);
    host_pages pool(64, page_bytes), other_pool(64, page_bytes);
    tree_t tree(memory_budget(64 * page_bytes), tier, pool, ns), foreign(memory_budget(64 * page_bytes), other_tier, other_pool, other);
    const auto t = tokens(6, 9);
    serve(tree, pool, tree.keys<int>(t));
    auto hit = foreign.match(foreign.keys<int>(t));
    EXPECT_EQ(hit.lock.length(), 0u);
}

// Random requests over shared prefixes, three engines on one folder: every page of every
// match holds its key's contents, a match is at least as long as what the engine's own
// requests or the tier (what any engine wrote through) hold, and no page leaks.
TEST_F(TieredPrefixTree, RandomRequestsOfThreeEnginesGetOnlyRightPages) {
    std::mt19937 rng(11);
    std::vector<std::vector<tier_key>> sequences;
    for (int s = 0; s < 12; ++s) {
        auto t = tokens(3 + rng() % 10, s % 4);  // four roots, shared prefixes
        for (std::size_t i = ns.page_tokens * (1 + rng() % 3); i < t.size(); ++i) t[i] += s;  // diverge after a few pages
        sequences.push_back(chunk_keys<int>(ns, t));
    }
    std::vector<std::unique_ptr<disk_tier<>>> tiers;
    std::vector<std::unique_ptr<host_pages>> pools;
    std::vector<std::unique_ptr<tree_t>> trees;
    for (int e = 0; e < 3; ++e) {
        tiers.push_back(std::make_unique<disk_tier<>>(dir, ns, 1 << 22));
        pools.push_back(std::make_unique<host_pages>(64, page_bytes));
        trees.push_back(std::make_unique<tree_t>(memory_budget(8 * page_bytes), *tiers[e], *pools[e], ns,
                                                 tree_t::options{.write = e == 2 ? write_policy::back : write_policy::through}));
    }
    for (int step = 0; step < 300; ++step) {
        const std::size_t e = rng() % 3;
        const auto& keys = sequences[rng() % sequences.size()];
        const std::size_t in_tier = tiers[e]->exists_prefix(keys);
        auto hit = trees[e]->match(keys);
        ASSERT_TRUE(pages_hold(*pools[e], hit.lock, keys)) << step;
        ASSERT_GE(hit.lock.length(), std::min<std::size_t>(in_tier, 8)) << step;  // 8: the memory budget
        hit.lock.release();
        serve(*trees[e], *pools[e], keys);
        ASSERT_EQ(pools[e]->in_use(), trees[e]->memory().size()) << step;
    }
    trees.clear();
    for (const auto& p : pools) {
        EXPECT_EQ(p->in_use(), 0u);
        EXPECT_EQ(p->bad_releases(), 0u);
    }
}

TEST_F(TieredPrefixTree, RefusesBadInput) {
    disk_tier<> tier(dir, ns, 1 << 20);
    host_pages pool(8, page_bytes), empty_pages(8, 0);
    EXPECT_NE(error_of([&] { tree_t(memory_budget(page_bytes), tier, empty_pages, ns); }).find("0 bytes"), std::string::npos);
    tier_namespace no_pages = ns;
    no_pages.page_tokens = 0;
    EXPECT_NE(error_of([&] { tree_t(memory_budget(page_bytes), tier, pool, no_pages); }).find("page_tokens"), std::string::npos);
    tree_t tree(memory_budget(8 * page_bytes), tier, pool, ns);
    const auto keys = tree.keys<int>(tokens(3, 10));
    auto hit = tree.match(keys);
    const auto fresh = compute(pool, keys, 0);
    EXPECT_NE(error_of([&] { tree.insert(hit.lock, keys, std::span(fresh).first(2)); }).find("2 pages for 3 keys"),
              std::string::npos);
}

}  // namespace
