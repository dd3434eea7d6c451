// The tiered prefix tree's prefetch: a ticket loaded on another thread (with its own tier
// object) while the tree serves other requests, then matched. Runs under TSan (the threads
// binary). Oracles: pages checked byte for byte against a function of their key, the pool's
// count of pages in use, and the tier's own exists_prefix.
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <thread>
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
using frugal::cache_model::serve;
using frugal::testing::error_of;

const tier_namespace ns{.model = "test-1b", .dtype = "bf16", .layout = "nhd", .page_tokens = 4};
constexpr std::size_t page_bytes = 512;
using tree_t = tiered_prefix_tree<disk_tier<>, host_pages>;

std::vector<tier_key> keys_of(std::size_t pages, int salt) {
    std::vector<int> t;
    for (std::size_t i = 0; i < pages * ns.page_tokens; ++i) t.push_back(static_cast<int>(i * 5 + 1000 * salt));
    return chunk_keys<int>(ns, t);
}
class TieredPrefetch : public frugal::cache_model::temp_files {
protected:
    // A tier holding `keys` (written by another engine).
    void written_by_another_engine(std::span<const tier_key> keys) {
        disk_tier<> tier(dir, ns, 1 << 24);
        host_pages pool(64, page_bytes);
        tree_t writer(memory_budget(64 * page_bytes), tier, pool, ns);
        serve(writer, pool, keys);
    }
};

TEST_F(TieredPrefetch, ALoadOnAnotherThreadOverlapsTheTreesWork) {
    const auto wanted = keys_of(12, 1), other = keys_of(6, 2);
    written_by_another_engine(wanted);
    disk_tier<> tier(dir, ns, 1 << 24), io_tier(dir, ns, 1 << 24);
    host_pages pool(64, page_bytes);
    tree_t tree(memory_budget(32 * page_bytes), tier, pool, ns);
    serve(tree, pool, std::span(wanted).first(3));  // memory holds 3 pages of the request
    auto ticket = tree.prefetch(wanted);
    EXPECT_EQ(ticket.pages(), 9u);
    std::thread io([&] { ticket.load(io_tier); });
    for (int i = 0; i < 20; ++i) serve(tree, pool, other);  // the engine goes on meanwhile
    io.join();
    auto hit = tree.match(std::move(ticket));
    EXPECT_EQ(hit.lock.length(), 12u);
    EXPECT_EQ(hit.from_tier, 9u);
    EXPECT_TRUE(frugal::cache_model::pages_hold(pool, hit.lock, wanted));
    hit.lock.release();
    EXPECT_EQ(pool.in_use(), tree.memory().size());
}

TEST_F(TieredPrefetch, ATicketNoThreadLoadedLoadsAtMatchAndADroppedOneGivesItsPagesBack) {
    const auto wanted = keys_of(8, 3);
    written_by_another_engine(wanted);
    disk_tier<> tier(dir, ns, 1 << 24);
    host_pages pool(64, page_bytes);
    tree_t tree(memory_budget(32 * page_bytes), tier, pool, ns), other(memory_budget(32 * page_bytes), tier, pool, ns);
    {
        auto dropped = tree.prefetch(wanted);
        EXPECT_EQ(pool.in_use(), 8u);
    }
    EXPECT_EQ(pool.in_use(), 0u);
    auto released = tree.prefetch(wanted);
    EXPECT_EQ(pool.in_use(), 8u);
    released.release();  // as dropping it
    EXPECT_EQ(pool.in_use(), 0u);
    EXPECT_EQ(released.pages(), 0u);
    released.load(tier);  // an empty ticket loads nothing
    EXPECT_EQ(tier.stats().hits, 0u);
    auto ticket = tree.prefetch(wanted);
    auto foreign = other.prefetch(wanted);
    EXPECT_NE(error_of([&] { (void)tree.match(std::move(foreign)); }).find("another tree"), std::string::npos);
    auto hit = tree.match(std::move(ticket));  // no thread loaded it: loaded here
    EXPECT_EQ(hit.from_tier, 8u);
    EXPECT_TRUE(frugal::cache_model::pages_hold(pool, hit.lock, wanted));
    EXPECT_EQ(ticket.pages(), 0u);  // consumed
    EXPECT_NE(error_of([&] { (void)tree.match(std::move(ticket)); }).find("consumed"), std::string::npos);
}

TEST_F(TieredPrefetch, TwoThreadsRacingToLoadOneTicketLoadItOnce) {
    const auto wanted = keys_of(10, 4);
    written_by_another_engine(wanted);
    disk_tier<> tier(dir, ns, 1 << 24), a_tier(dir, ns, 1 << 24), b_tier(dir, ns, 1 << 24);
    host_pages pool(64, page_bytes);
    tree_t tree(memory_budget(32 * page_bytes), tier, pool, ns);
    for (int round = 0; round < 20; ++round) {
        auto ticket = tree.prefetch(wanted);
        std::thread a([&] { ticket.load(a_tier); }), b([&] { ticket.load(b_tier); });
        auto hit = tree.match(std::move(ticket));  // may load it here too; waits for a thread that started
        a.join();
        b.join();
        EXPECT_EQ(hit.lock.length(), 10u);
        EXPECT_TRUE(frugal::cache_model::pages_hold(pool, hit.lock, wanted));
        hit.lock.release();
        tree.evict(std::size_t{1} << 30);  // empty memory: the next round loads again
        EXPECT_EQ(pool.in_use(), 0u);
        EXPECT_EQ(a_tier.stats().hits + b_tier.stats().hits + tier.stats().hits, 10u * (round + 1));
    }
}

}  // namespace
