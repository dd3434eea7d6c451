// The sharded wrapper under concurrent use (run under TSan via the `threads` label): values
// always belong to their key, the counters add up, capacity holds; and a single-threaded
// check of the split against per-shard LRU caches.
#include <atomic>
#include <cstdint>
#include <random>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include <frugal/cache/lfu_policy.hpp>
#include <frugal/cache/lru_policy.hpp>
#include <frugal/cache/sharded_cache.hpp>

namespace {

std::uint64_t value_of(std::uint64_t key) { return key * 2654435761u + 17; }

template <class Cache>
void hammer() {
    std::atomic<std::uint64_t> evicted{0};  // outlives the cache: its destructor reports
    frugal::cache::sharded_cache<Cache> cache(1000, 8);
    cache.set_eviction_callback([&](const std::uint64_t& k, std::uint64_t& v, frugal::cache::eviction_reason) {
        EXPECT_EQ(v, value_of(k));
        evicted.fetch_add(1, std::memory_order_relaxed);
    });
    constexpr int threads = 4, ops = 20000;
    std::atomic<std::uint64_t> wrong{0};
    std::vector<std::thread> pool;
    for (int t = 0; t < threads; ++t) {
        pool.emplace_back([&, t] {
            std::mt19937_64 rng(static_cast<std::uint64_t>(t) + 1);
            for (int i = 0; i < ops; ++i) {
                const std::uint64_t key = rng() % 3000;
                if (auto v = cache.get(key)) {
                    if (*v != value_of(key)) wrong.fetch_add(1);
                } else {
                    try {
                        cache.put(key, value_of(key));
                    } catch (const frugal::invalid_argument&) {
                        // Another thread put the key and a third pinned it meanwhile: a
                        // pinned value cannot be replaced (documented), nothing changed.
                    }
                }
                if (i % 97 == 0) cache.erase(rng() % 3000);
                if (i % 89 == 0 && cache.pin(key)) cache.unpin(key);
                if (i % 1000 == 0) (void)cache.size();
            }
        });
    }
    for (auto& th : pool) th.join();
    EXPECT_EQ(wrong.load(), 0u);
    const auto st = cache.stats();
    const std::uint64_t pins = [&] {
        std::uint64_t n = 0;  // pin() counts as an access: hits + misses include those lookups
        for (int t = 0; t < threads; ++t) n += (ops + 88) / 89;
        return n;
    }();
    EXPECT_EQ(st.hits + st.misses, static_cast<std::uint64_t>(threads) * ops + pins);
    EXPECT_LE(cache.size(), 1000u);
    // New keys in = keys present + keys out (replacements swap a value in place; unit weights
    // and short pins never reject a newcomer).
    EXPECT_EQ(st.evicted(frugal::cache::eviction_reason::rejected), 0u);
    EXPECT_EQ(st.insertions, cache.size() + st.evicted(frugal::cache::eviction_reason::capacity) +
                                 st.evicted(frugal::cache::eviction_reason::erased));
    EXPECT_EQ(evicted.load(), st.evicted(frugal::cache::eviction_reason::capacity) + st.evicted(frugal::cache::eviction_reason::erased) +
                                  st.evicted(frugal::cache::eviction_reason::replaced));
}

TEST(ShardedCache, ConcurrentLru) { hammer<frugal::cache::lru_cache<std::uint64_t, std::uint64_t>>(); }
TEST(ShardedCache, ConcurrentLfu) { hammer<frugal::cache::lfu_cache<std::uint64_t, std::uint64_t>>(); }

TEST(ShardedCache, SplitsCapacityAndRejectsBadShapes) {
    frugal::cache::sharded_cache<frugal::cache::lru_cache<int, int>> c(10, 3);
    for (int k = 0; k < 1000; ++k) c.put(k, k);
    EXPECT_EQ(c.size(), 10u);
    EXPECT_EQ(c.shard_count(), 3u);
    int seen = 0;
    for (int k = 0; k < 1000; ++k) seen += c.visit(k, [&](int& v) { EXPECT_EQ(v, k); });
    EXPECT_EQ(seen, 10);
    EXPECT_THROW((frugal::cache::sharded_cache<frugal::cache::lru_cache<int, int>>(2, 3)), frugal::invalid_argument);
    EXPECT_THROW((frugal::cache::sharded_cache<frugal::cache::lru_cache<int, int>>(2, 0)), frugal::invalid_argument);
}

}  // namespace
