// S3-FIFO, SIEVE, ARC, LIRS and 2Q against the brute-force models of policy_model.hpp on random
// operation sequences with byte weights, pins, replacements and erasures (every eviction and
// its reason compared), plus behaviours each paper names.
#include <algorithm>
#include <cstdint>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include <frugal/cache/arc_policy.hpp>
#include <frugal/cache/lirs_policy.hpp>
#include <frugal/cache/lru_policy.hpp>
#include <frugal/cache/s3fifo_policy.hpp>
#include <frugal/cache/sieve_policy.hpp>
#include <frugal/cache/two_queue_policy.hpp>

#include "policy_driver.hpp"
#include "policy_model.hpp"

namespace {

using frugal::cache::eviction_reason;
using frugal::cache::put_result;
using frugal::cache_model::kind;

struct value_weigher {  // the value is the weight
    std::size_t operator()(int, int v) const { return static_cast<std::size_t>(v); }
};

template <class Policy>
void run_against_model(kind k, std::uint32_t seed, std::size_t capacity, int max_weight, int keys) {
    SCOPED_TRACE(testing::Message() << "seed " << seed << " capacity " << capacity << " max weight " << max_weight);
    std::vector<std::pair<int, eviction_reason>> log;  // outlives the cache: its destructor reports
    frugal::cache::basic_cache<int, int, Policy, value_weigher> cache(capacity);
    frugal::cache_model::model ref(k, capacity);
    cache.set_eviction_callback([&](const int& key, int&, eviction_reason r) { log.emplace_back(key, r); });
    std::mt19937 rng(seed);
    std::uniform_int_distribution<int> key_dist(0, keys - 1), weight_dist(1, max_weight), op_dist(0, 99);
    frugal::cache_model::checked_pair<decltype(cache), frugal::cache_model::model> pair{cache, ref, log, {}};
    for (int step = 0; step < 4000; ++step) {
        const int op = op_dist(rng);
        // Skewed keys: half the requests go to the first eighth, so that entries are reused.
        const int key = op % 2 == 0 ? key_dist(rng) % std::max(1, keys / 8) : key_dist(rng);
        const std::string failure = pair.step(op, key, [&] { return std::pair<int, double>(weight_dist(rng), 1.0); });
        ASSERT_EQ(failure, "") << "step " << step;
    }
    std::vector<int> held;
    for (int key = 0; key < keys; ++key)
        if (cache.contains(key)) held.push_back(key);
    EXPECT_EQ(held, ref.keys());
    EXPECT_GT(cache.stats().evicted(eviction_reason::capacity), 100u) << "the sequence must exercise eviction";
}

template <class Policy>
void run_suite(kind k) {
    for (std::uint32_t seed = 1; seed <= 3; ++seed) {
        run_against_model<Policy>(k, seed, 12, 1, 60);    // entries
        run_against_model<Policy>(k, seed, 40, 6, 80);    // byte weights
        run_against_model<Policy>(k, seed, 200, 1, 600);  // large enough for 1% and 10% shares
        run_against_model<Policy>(k, seed, 9, 12, 40);    // objects larger than the budget
    }
}

TEST(QueuePolicies, S3FifoMatchesModel) { run_suite<frugal::cache::s3fifo_policy>(kind::s3fifo); }
TEST(QueuePolicies, S3FifoWarmMainMatchesModel) { run_suite<frugal::cache::s3fifo_warm_main_policy>(kind::s3fifo_warm_main); }
TEST(QueuePolicies, SieveMatchesModel) { run_suite<frugal::cache::sieve_policy>(kind::sieve); }
TEST(QueuePolicies, ArcMatchesModel) { run_suite<frugal::cache::arc_policy>(kind::arc); }
TEST(QueuePolicies, LirsMatchesModel) { run_suite<frugal::cache::lirs_policy>(kind::lirs); }
TEST(QueuePolicies, TwoQueueMatchesModel) { run_suite<frugal::cache::two_queue_policy>(kind::two_queue); }

// A loop over 1.5x the capacity: LRU never hits; LIRS and S3-FIFO keep a part of the loop. ARC
// does not: every entry is seen once, T1 fills the cache and case IV.A of the paper deletes
// its LRU entry without a ghost, so it behaves as LRU.
template <class Cache>
double loop_hit_ratio() {
    Cache c(1000);
    for (int pass = 0; pass < 20; ++pass)
        for (int k = 0; k < 1500; ++k)
            if (c.get(k) == nullptr) c.put(k, k);
    return c.stats().hit_ratio();
}
using lru = frugal::cache::lru_cache<int, int>;
using lirs = frugal::cache::lirs_cache<int, int>;
using arc = frugal::cache::arc_cache<int, int>;
using s3fifo = frugal::cache::s3fifo_cache<int, int>;
TEST(QueuePolicies, ScanResistanceOnALoopLargerThanTheCache) {
    EXPECT_EQ(loop_hit_ratio<lru>(), 0.0);
    EXPECT_GT(loop_hit_ratio<lirs>(), 0.5) << "LIRS keeps ~99% of the capacity as LIR";
    EXPECT_EQ(loop_hit_ratio<arc>(), 0.0);
    EXPECT_GT(loop_hit_ratio<s3fifo>(), 0.0);
}

TEST(QueuePolicies, OneHitWondersLeaveS3FifoFromTheSmallQueue) {
    // 900 hot keys seen twice, then a stream of keys seen once: the hot ones reach the main
    // queue and survive the stream (S3-FIFO's quick demotion), where LRU loses them.
    frugal::cache::s3fifo_cache<int, int> s(1000);
    frugal::cache::lru_cache<int, int> l(1000);
    auto request = [](auto& c, int k) {
        if (c.get(k) == nullptr) c.put(k, k);
    };
    for (int round = 0; round < 3; ++round)
        for (int k = 0; k < 800; ++k) {
            request(s, k);
            request(l, k);
        }
    for (int k = 100000; k < 103000; ++k) {
        request(s, k);
        request(l, k);
    }
    int s_hot = 0, l_hot = 0;
    for (int k = 0; k < 800; ++k) {
        s_hot += s.contains(k) ? 1 : 0;
        l_hot += l.contains(k) ? 1 : 0;
    }
    EXPECT_EQ(l_hot, 0);
    EXPECT_EQ(s_hot, 800);
}

TEST(QueuePolicies, ArcAdaptsItsTargetTowardTheGhostThatHits) {
    // Keys evicted from T1 and requested again (B1 hits) raise p, the target size of T1.
    frugal::cache::arc_cache<int, int> c(100);
    for (int k = 0; k < 100; ++k) c.put(k, k);
    for (int k = 0; k < 50; ++k) ASSERT_NE(c.get(k), nullptr);  // 0..49 to T2
    for (int k = 100; k < 150; ++k) c.put(k, k);                 // |T1| > p = 0: 50..99 to B1
    EXPECT_EQ(c.policy().target_t1(), 0.0);
    for (int k = 50; k < 60; ++k) {
        ASSERT_EQ(c.get(k), nullptr);
        c.put(k, k);
    }
    EXPECT_EQ(c.policy().target_t1(), 10.0) << "ten B1 hits, |B2| = 0 < |B1|: +1 each";
    EXPECT_EQ(c.policy().t2_weight(), 60u) << "ghost hits enter T2";
}

}  // namespace
