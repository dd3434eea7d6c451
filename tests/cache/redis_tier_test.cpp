// The Redis tier against a real redis-server started by the test on a free loopback port.
// Oracles: the bytes put (round trips), a second process's reads of the first's writes, the
// server's own LRU eviction (what it dropped is a miss, what it kept is exact), damaged
// values written behind the tier's back (misses, never wrong data), and a server killed
// in the middle of a pipeline and restarted empty (misses within the timeout, then normal).
#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <random>
#include <span>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <frugal/backend/redis/redis_tier.hpp>
#include <frugal/cache/tiered_prefix_tree.hpp>
#include <frugal/cache/shared_documents.hpp>
#include <frugal/cache/tiered_semantic_cache.hpp>

#include "frugal_test_errors.hpp"
#include "frugal_test_redis.hpp"
#include "host_pages.hpp"

namespace {

using namespace frugal::cache;
using frugal::testing::error_of;
using frugal::testing::redis_server;

const tier_namespace ns{.model = "test-1b", .dtype = "bf16", .layout = "nhd", .page_tokens = 4};

std::vector<tier_key> keys_for(std::size_t chunks, int salt) {
    std::vector<int> tokens;
    for (std::size_t i = 0; i < chunks * ns.page_tokens; ++i) tokens.push_back(static_cast<int>(i * 13 + salt));
    return chunk_keys<int>(ns, tokens);
}
struct pages {
    std::vector<std::vector<std::byte>> data;
    explicit pages(std::size_t n, std::size_t bytes, std::uint32_t seed) {
        std::mt19937 rng(seed);
        for (std::size_t i = 0; i < n; ++i) {
            data.emplace_back(bytes);
            for (auto& b : data.back()) b = std::byte(rng());
        }
    }
    std::vector<std::span<const std::byte>> in() const { return {data.begin(), data.end()}; }
};
struct buffers {
    std::vector<std::vector<std::byte>> data;
    buffers(std::size_t n, std::size_t bytes) : data(n, std::vector<std::byte>(bytes)) {}
    std::vector<std::span<std::byte>> out() { return {data.begin(), data.end()}; }
};

// A server of the test's own; CI must run these tests, elsewhere they skip with the reason.
#define FRUGAL_NEED_SERVER(server)                                                             \
    do {                                                                                       \
        if (!(server).running()) {                                                             \
            if (std::getenv("CI") != nullptr) FAIL() << "redis-server did not start (CI must run the Redis tests)"; \
            GTEST_SKIP() << "redis-server did not start (install Debian's redis-server: scripts/setup.sh)";      \
        }                                                                                      \
    } while (0)

redis_options on(const redis_server& s) { return {.port = s.port(), .timeout = std::chrono::milliseconds(300)}; }

TEST(RedisTier, RoundTripsAndLoadsTheLongestRun) {
    redis_server server;
    FRUGAL_NEED_SERVER(server);
    redis_tier tier(ns, on(server));
    ASSERT_TRUE(tier.connected());
    const auto keys = keys_for(200, 1);  // several pipelines of 64
    const pages p(200, 2048, 1);
    const auto in = p.in();
    tier.put(std::span(keys).first(150), std::span(in).first(150));
    EXPECT_EQ(tier.exists_prefix(keys), 150u);
    buffers b(200, 2048);
    const auto out = b.out();
    EXPECT_EQ(tier.get(keys, out), 150u);
    for (std::size_t i = 0; i < 150; ++i) ASSERT_EQ(b.data[i], p.data[i]) << i;
    EXPECT_EQ(tier.stats().puts, 150u);
    tier.put(std::span(keys).first(1), std::span(in).first(1));  // SET NX: an existing key stays
    EXPECT_EQ(tier.stats().puts, 150u);
    // A buffer of another size misses without counting the value as damaged.
    buffers small(1, 2047);
    EXPECT_EQ(tier.get(std::span(keys).first(1), small.out()), 0u);
    EXPECT_EQ(tier.stats().refused, 0u);
    // Another namespace sees nothing.
    tier_namespace other = ns;
    other.layout = "hnd";
    redis_tier foreign(other, on(server));
    EXPECT_EQ(foreign.exists_prefix(keys), 0u);
    EXPECT_NE(error_of([&] { (void)tier.get(keys, std::span(out).first(3)); }).find("200 keys but 3 buffers"),
              std::string::npos);
    EXPECT_NE(error_of([] { redis_tier t(ns, {.port = 0}); }).find("port 0 out of range"), std::string::npos);
}

TEST(RedisTier, TwoProcessesShareOneServer) {
    redis_server server;
    FRUGAL_NEED_SERVER(server);
    const auto keys = keys_for(32, 2);
    const pages p(32, 4096, 2);
    const pid_t child = fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
        redis_tier writer(ns, on(server));
        writer.put(keys, p.in());
        _exit(writer.stats().puts == 32 ? 0 : 1);
    }
    int status = 0;
    waitpid(child, &status, 0);
    ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    redis_tier reader(ns, on(server));
    buffers b(32, 4096);
    EXPECT_EQ(reader.get(keys, b.out()), 32u);
    for (std::size_t i = 0; i < 32; ++i) ASSERT_EQ(b.data[i], p.data[i]);
}

TEST(RedisTier, WhatTheServerEvictsIsAMissAndWhatItKeepsIsExact) {
    redis_server server({"--maxmemory", "4mb", "--maxmemory-policy", "allkeys-lru"});
    FRUGAL_NEED_SERVER(server);
    redis_tier tier(ns, on(server));
    const auto keys = keys_for(400, 3);  // 400 x 16 KiB: four times the server's memory
    const pages p(400, 16384, 3);
    const auto in = p.in();
    for (std::size_t i = 0; i < keys.size(); ++i) tier.put(std::span(keys).subspan(i, 1), std::span(in).subspan(i, 1));
    buffers b(1, 16384);
    std::size_t kept = 0;
    for (std::size_t i = 0; i < keys.size(); ++i) {
        const std::size_t n = tier.get(std::span(keys).subspan(i, 1), b.out());
        if (n == 1) {
            ASSERT_EQ(b.data[0], p.data[i]) << i;
            ++kept;
        }
    }
    EXPECT_GT(kept, 0u);
    EXPECT_LT(kept, keys.size());  // the server evicted some: they are misses
    EXPECT_LT(tier.exists_prefix(keys), keys.size());
    EXPECT_EQ(tier.stats().refused, 0u);
}

TEST(RedisTier, DamagedValuesAreMissesNeverWrongData) {
    redis_server server;
    FRUGAL_NEED_SERVER(server);
    redis_tier tier(ns, on(server));
    const auto keys = keys_for(1, 4);
    const pages p(1, 1000, 4);
    tier.put(keys, p.in());
    const std::string key = tier.key_of(keys[0]);
    const timeval tv{1, 0};
    redisContext* raw = redisConnectWithTimeout("127.0.0.1", server.port(), tv);
    ASSERT_TRUE(raw != nullptr && raw->err == 0);
    auto value = [&] {
        auto* r = static_cast<redisReply*>(redisCommand(raw, "GET %b", key.data(), key.size()));
        std::string v(r->str, r->len);
        freeReplyObject(r);
        return v;
    };
    auto set = [&](const std::string& v) {
        freeReplyObject(redisCommand(raw, "SET %b %b", key.data(), key.size(), v.data(), v.size()));
    };
    const std::string good = value();
    std::string flipped = good, foreign = good;
    flipped[frugal::record_header::bytes + 10] ^= 1;
    foreign[9] ^= 1;  // the namespace
    buffers b(1, 1000);
    for (const std::string& damaged : {good.substr(0, good.size() - 1), flipped, foreign, good + "x", std::string("junk")}) {
        set(damaged);
        const auto refused = tier.stats().refused;
        EXPECT_EQ(tier.get(keys, b.out()), 0u);
        EXPECT_EQ(tier.stats().refused, refused + 1);
    }
    set(good);
    EXPECT_EQ(tier.get(keys, b.out()), 1u);
    EXPECT_EQ(b.data[0], p.data[0]);
    // A key of another type (a list) fails the batch: a miss, and the tier reconnects.
    freeReplyObject(redisCommand(raw, "DEL %b", key.data(), key.size()));
    freeReplyObject(redisCommand(raw, "LPUSH %b x", key.data(), key.size()));
    EXPECT_EQ(tier.get(keys, b.out()), 0u);
    redisFree(raw);
}

TEST(RedisTier, AServerKilledMidPipelineAndRestartedEmptyIsMissesThenNormal) {
    redis_server server;
    FRUGAL_NEED_SERVER(server);
    redis_tier tier(ns, on(server));
    const auto keys = keys_for(2000, 5);
    const pages p(2000, 8192, 5);
    tier.put(keys, p.in());
    ASSERT_EQ(tier.exists_prefix(keys), keys.size());
    buffers b(2000, 8192);
    const auto out = b.out();
    // Kill the server while a long pipelined get is in flight.
    std::thread killer([&] {
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
        server.stop();
    });
    const std::size_t n = tier.get(keys, out);
    killer.join();
    const auto in = p.in();
    for (std::size_t i = 0; i < n; ++i) ASSERT_EQ(b.data[i], p.data[i]) << i;  // what it returned is exact
    RecordProperty("loaded_before_the_kill", static_cast<int>(n));
    // Down: misses, each within the timeout (no hang), counted as errors.
    const auto t0 = std::chrono::steady_clock::now();
    EXPECT_EQ(tier.get(keys, out), 0u);
    EXPECT_EQ(tier.exists_prefix(keys), 0u);
    tier.put(std::span(keys).first(1), std::span(in).first(1));
    EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(3));
    EXPECT_GT(tier.stats().errors, 0u);
    // Restarted empty on the same port: after the backoff, misses, then puts and gets work.
    server.start();
    FRUGAL_NEED_SERVER(server);
    for (int i = 0; i < 100 && !tier.connected(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(50));
    ASSERT_TRUE(tier.connected());
    EXPECT_EQ(tier.exists_prefix(keys), 0u);
    tier.put(std::span(keys).first(10), std::span(in).first(10));
    EXPECT_EQ(tier.get(keys, out), 10u);
    for (std::size_t i = 0; i < 10; ++i) ASSERT_EQ(b.data[i], p.data[i]);
}

TEST(RedisTier, AnUnreachableServerMissesWithinTheTimeout) {
    const int port = frugal::testing::free_loopback_port();  // nothing listens there
    redis_tier tier(ns, {.port = port, .timeout = std::chrono::milliseconds(200)});
    EXPECT_FALSE(tier.connected());
    const auto keys = keys_for(3, 6);
    buffers b(3, 64);
    const auto t0 = std::chrono::steady_clock::now();
    EXPECT_EQ(tier.get(keys, b.out()), 0u);
    EXPECT_EQ(tier.exists_prefix(keys), 0u);
    EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(2));
    EXPECT_GT(tier.stats().errors, 0u);
}

// Two engine processes, each with a prefix tree in memory over the same server: a
// conversation's pages computed by one are loaded by the other (write-through), and pages a
// write-back engine held until it exited reach the server then.
TEST(RedisTier, TieredPrefixTreesInTwoProcessesServeEachOthersPages) {
    using frugal::cache_model::host_pages;
    using tree_t = tiered_prefix_tree<redis_tier, host_pages>;
    redis_server server;
    FRUGAL_NEED_SERVER(server);
    std::vector<int> turn1, turn2;
    for (int i = 0; i < 40; ++i) turn1.push_back(i * 3 + 1);
    turn2 = turn1;
    for (int i = 0; i < 24; ++i) turn2.push_back(i * 5 + 2);
    const auto keys1 = chunk_keys<int>(ns, turn1), keys2 = chunk_keys<int>(ns, turn2);  // 10 and 16 pages
    auto engine = [&](write_policy write, const std::vector<tier_key>& keys) {
        redis_tier tier(ns, on(server));
        host_pages pool(64, 1024);
        tree_t tree(frugal::memory_budget(32 * 1024), tier, pool, ns, {.write = write});
        auto hit = tree.match(keys);
        for (std::size_t i = 0; i < hit.lock.length(); ++i)
            if (!pool.holds(hit.lock.handle(i), keys[i])) return -1;
        std::vector<std::uint32_t> fresh;
        for (std::size_t i = hit.lock.length(); i < keys.size(); ++i) fresh.push_back(pool.compute(keys[i]));
        const auto r = tree.insert(hit.lock, keys, fresh);
        if (r.cached != keys.size()) return -2;
        return static_cast<int>(hit.from_tier);
    };
    auto in_child = [&](write_policy write, const std::vector<tier_key>& keys, int from_tier) {
        const pid_t child = fork();
        if (child == 0) _exit(engine(write, keys) == from_tier ? 0 : 1);
        int status = 0;
        waitpid(child, &status, 0);
        return WIFEXITED(status) && WEXITSTATUS(status) == 0;
    };
    ASSERT_TRUE(in_child(write_policy::through, keys1, 0));  // an empty server: every page computed
    EXPECT_EQ(engine(write_policy::through, keys1), 10);      // every page from the other process
    ASSERT_TRUE(in_child(write_policy::back, keys2, 10));     // turn 1 loaded, turn 2 written at exit
    redis_tier probe(ns, on(server));
    EXPECT_EQ(probe.exists_prefix(keys2), 16u);
    EXPECT_EQ(engine(write_policy::through, keys2), 16);
}

TEST(RedisTier, ReadsValuesOfAnySizeAndListsOnlyItsNamespace) {
    redis_server server;
    FRUGAL_NEED_SERVER(server);
    tier_namespace other = ns;
    other.model = "test-8b";
    redis_tier tier(ns, on(server)), foreign(other, on(server));
    const auto keys = keys_for(1500, 9);  // more than one SCAN batch
    std::vector<std::string> values;
    std::vector<std::span<const std::byte>> views;
    for (std::size_t i = 0; i < keys.size(); ++i) values.push_back(std::string(i % 300, static_cast<char>(i)));
    for (const auto& v : values) views.push_back(std::as_bytes(std::span(v)));
    tier.put(keys, views);
    foreign.put(std::span(keys).first(5), std::span(views).first(5));
    for (std::size_t i = 0; i < keys.size(); i += 37) EXPECT_EQ(tier.read(keys[i]), values[i]) << i;
    auto listed = tier.keys();
    EXPECT_EQ(listed.size(), keys.size());
    auto key_less = [](const tier_key& a, const tier_key& b) { return std::pair(a.high, a.low) < std::pair(b.high, b.low); };
    std::sort(listed.begin(), listed.end(), key_less);
    for (const auto& k : keys) EXPECT_TRUE(std::binary_search(listed.begin(), listed.end(), k, key_less));
    EXPECT_EQ(foreign.keys().size(), 5u);
    redisContext* c = redisConnect("127.0.0.1", server.port());  // a value cut short behind the tier's back
    ASSERT_NE(c, nullptr);
    const std::string key = tier.key_of(keys[3]);
    freeReplyObject(redisCommand(c, "SET %b %b", key.data(), key.size(), "FRKV", std::size_t{4}));
    redisFree(c);
    EXPECT_FALSE(tier.read(keys[3]).has_value());
    EXPECT_EQ(tier.stats().refused, 1u);
}

// One process answers questions into a QA bank over the server; another, started after it
// exited, rebuilds its index from the server and answers paraphrases of them.
TEST(RedisTier, AQABankInAnotherProcessRebuildsFromTheServer) {
    redis_server server;
    FRUGAL_NEED_SERVER(server);
    const tier_namespace answers{.model = "test-1b", .dtype = "answers", .layout = "text", .page_tokens = 1};
    using bank_t = tiered_semantic_cache<redis_tier, std::string>;
    constexpr std::size_t dim = 8;
    auto embedding = [](std::size_t i) {
        std::vector<float> e(dim, 0.01f);
        e[i % dim] = 1.0f;
        e[(i / dim) % dim] += 0.5f;
        return e;
    };
    const pid_t child = fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
        redis_tier tier(answers, on(server));
        bank_t bank(tier, answers, std::size_t{100}, dim, 0.999);
        for (std::size_t i = 0; i < 24; ++i) bank.insert("question " + std::to_string(i), embedding(i), "answer " + std::to_string(i));
        _exit(bank.stats().writes == 24 ? 0 : 1);
    }
    int status = 0;
    waitpid(child, &status, 0);
    ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    redis_tier tier(answers, on(server));
    bank_t bank(tier, answers, std::size_t{100}, dim, 0.999);
    EXPECT_EQ(bank.restore(), 24u);
    for (std::size_t i = 0; i < 24; ++i) {
        const auto h = bank.lookup("reworded " + std::to_string(i), embedding(i));
        ASSERT_TRUE(h && h->entry->answer) << i;
        EXPECT_EQ(*h->entry->answer, "answer " + std::to_string(i));
    }
}

TEST(RedisTier, ReplicasInTwoProcessesShareTheirOutputs) {
    redis_server server;
    FRUGAL_NEED_SERVER(server);
    const tier_namespace outputs{.model = "test-1b", .dtype = "tokens", .layout = "outputs", .page_tokens = 1};
    auto output = [](std::size_t i) {
        std::vector<int> s(1 + i * 37 % 300);
        for (std::size_t j = 0; j < s.size(); ++j) s[j] = static_cast<int>((i * 131 + j * 7) % 32000);
        return s;
    };
    const pid_t child = fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
        redis_tier tier(outputs, on(server));
        shared_documents<redis_tier, int> shared(tier, outputs);
        for (std::size_t i = 0; i < 40; ++i) shared.publish(output(i));
        _exit(shared.stats().published == 40 ? 0 : 1);
    }
    int status = 0;
    waitpid(child, &status, 0);
    ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    redis_tier tier(outputs, on(server));
    shared_documents<redis_tier, int> shared(tier, outputs);
    shared.publish(output(3));  // this replica's own: never handed back
    std::set<std::vector<int>> got;
    EXPECT_EQ(shared.pull([&](std::span<const int> d) { got.emplace(d.begin(), d.end()); }), 39u);
    std::set<std::vector<int>> want;
    for (std::size_t i = 0; i < 40; ++i)
        if (i != 3) want.insert(output(i));
    EXPECT_EQ(got, want);
    EXPECT_EQ(shared.pull([](std::span<const int>) {}), 0u);
}

}  // namespace
