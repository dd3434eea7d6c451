// What a serving engine relies on: expiry with a fake clock, every exit through the eviction
// callback, the prefix tree's request locks, page keys, namespaces and evict(bytes), the QA
// bank's persistence against corrupt files, and the regressions of the reliability review
// (sizes that wrap, NaN costs, sketches sized per byte, lost slots).
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <map>
#include <span>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "frugal_test_errors.hpp"

#include <frugal/cache/embedding_row_cache.hpp>
#include <frugal/cache/gdsf_policy.hpp>
#include <frugal/cache/lru_policy.hpp>
#include <frugal/cache/prefix_tree.hpp>
#include <frugal/cache/s3fifo_policy.hpp>
#include <frugal/cache/semantic_cache.hpp>
#include <frugal/cache/wtinylfu_policy.hpp>

#include "temp_files.hpp"

namespace {

namespace fc = frugal::cache;
using fc::eviction_reason;
using fc::put_result;

struct fake_clock {
    std::chrono::steady_clock::time_point now{};
    fc::expiry::clock_type fn() {
        return [this] { return now; };
    }
};

template <class C>
concept can_expire = requires(C& c) { c.set_expiry(fc::expiry{}); };

TEST(CacheExpiry, TimeToLiveAfterWriteAndAfterAccessWithAFakeClock) {
    using namespace std::chrono_literals;
    fake_clock clock;
    std::vector<std::pair<int, eviction_reason>> log;
    fc::expiring_cache<int, int, fc::lru_policy> c(10);
    c.set_eviction_callback([&](const int& k, int&, eviction_reason r) { log.emplace_back(k, r); });
    c.set_expiry({.ttl = 10s, .after_access = false, .clock = clock.fn()});
    c.put(1, 1);
    clock.now += 6s;
    c.put(2, 2);
    EXPECT_NE(c.get(1), nullptr) << "6 s old";
    clock.now += 5s;  // 1 is 11 s old (an access does not extend it), 2 is 5 s old
    EXPECT_FALSE(c.contains(1)) << "expired: absent to every lookup";
    EXPECT_EQ(std::as_const(c).peek(1), nullptr);
    EXPECT_TRUE(c.contains(2));
    std::vector<int> seen;
    c.for_each([&](const int& k, const int&) { seen.push_back(k); });
    EXPECT_EQ(seen, std::vector<int>{2});
    EXPECT_EQ(c.size(), 2u) << "held until a lookup or purge removes it";
    EXPECT_TRUE(log.empty());
    EXPECT_EQ(c.get(1), nullptr);
    EXPECT_NE(c.get(2), nullptr);
    EXPECT_EQ(log, (std::vector<std::pair<int, eviction_reason>>{{1, eviction_reason::expired}}));
    EXPECT_EQ(c.stats().evicted(eviction_reason::expired), 1u);
    EXPECT_EQ(c.stats().misses, 1u);

    c.set_expiry({.ttl = 10s, .after_access = true, .clock = clock.fn()});
    c.put(3, 3);
    for (int i = 0; i < 5; ++i) {
        clock.now += 8s;
        ASSERT_NE(c.get(3), nullptr) << "each access gives it 10 s more";
    }
    ASSERT_NE(c.pin(3), nullptr);
    clock.now += 60s;
    EXPECT_NE(c.get(3), nullptr) << "pinned entries do not expire";
    c.unpin(3);
    clock.now += 60s;
    EXPECT_EQ(c.purge_expired(), 2u) << "2 (written, never refreshed) and 3";
    EXPECT_EQ(c.size(), 0u);
    EXPECT_THROW(c.set_expiry({.ttl = -1s}), frugal::invalid_argument);
    static_assert(sizeof(fc::lru_cache<std::uint64_t, std::uint32_t>::node_type) + 8 ==
                      sizeof(fc::expiring_cache<std::uint64_t, std::uint32_t, fc::lru_policy>::node_type),
                  "only caches with expiry carry a deadline");
    static_assert(!can_expire<fc::lru_cache<int, int>> && can_expire<decltype(c)>);
}

TEST(CacheOwnership, EveryExitGoesThroughTheCallbackWithItsReason) {
    std::map<eviction_reason, int> seen;
    int live = 0;  // values handed to the cache and not yet released by the callback
    {
        auto weigh = [](const int&, const int& v) { return static_cast<std::size_t>(v); };
        fc::expiring_cache<int, int, fc::lru_policy, decltype(weigh)> c(10, weigh);
        c.set_eviction_callback([&](const int&, int&, eviction_reason r) {
            ++seen[r];
            --live;
        });
        auto put = [&](int k, int w) {
            ++live;
            return c.put(k, w);
        };
        put(1, 4);
        put(2, 4);
        put(3, 4);                                  // capacity: 1 goes
        EXPECT_EQ(put(4, 11), put_result::rejected);  // rejected: heavier than the budget
        put(2, 3);                                  // replaced: the old value of 2
        c.erase(3);                                 // erased
        put(5, 1);
        put(6, 1);
        ASSERT_NE(c.pin(5), nullptr);
        c.clear();                                  // cleared: 2 and 6; 5 stays pinned
        c.set_expiry({.ttl = std::chrono::nanoseconds(1)});
        put(7, 1);
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
        EXPECT_EQ(c.get(7), nullptr);               // expired
        // destroyed: 5, still pinned when the cache goes away
    }
    EXPECT_EQ(live, 0) << "every value given to the cache came back through the callback";
    EXPECT_EQ(seen[eviction_reason::capacity], 1);
    EXPECT_EQ(seen[eviction_reason::rejected], 1);
    EXPECT_EQ(seen[eviction_reason::replaced], 1);
    EXPECT_EQ(seen[eviction_reason::erased], 1);
    EXPECT_EQ(seen[eviction_reason::cleared], 2);
    EXPECT_EQ(seen[eviction_reason::expired], 1);
    EXPECT_EQ(seen[eviction_reason::destroyed], 1);
}

TEST(CacheReliability, SizesThatWouldWrapAreRefused) {
    auto weigh = [](const int&, const std::size_t& v) { return v; };
    fc::lru_cache<int, std::size_t, decltype(weigh)> c(100, weigh);
    c.put(1, 10);
    ASSERT_NE(c.pin(1), nullptr);
    EXPECT_EQ(c.put(2, std::numeric_limits<std::size_t>::max()), put_result::rejected) << "issue 23, item 6";
    EXPECT_EQ(c.put(3, std::numeric_limits<std::size_t>::max() - 5), put_result::rejected);
    EXPECT_EQ(c.weight(), 10u);
    EXPECT_EQ(c.size(), 1u);
    fc::lru_cache<int, std::size_t, decltype(weigh)> huge(std::numeric_limits<std::size_t>::max(), weigh);
    EXPECT_EQ(huge.put(1, std::numeric_limits<std::size_t>::max()), put_result::inserted);
    EXPECT_EQ(huge.put(2, 1), put_result::inserted) << "the first is evicted, no wrap";
    EXPECT_EQ(huge.weight(), 1u);
}

TEST(CacheReliability, NonFiniteCostsAreRefusedAndZeroWeightsKeepTheClockFinite) {
    fc::gdsf_cache<int, int> g(4);
    const std::string nan_msg =
        frugal::testing::error_of<frugal::invalid_argument>([&] { g.put(1, 1, std::numeric_limits<double>::quiet_NaN()); });
    EXPECT_NE(nan_msg.find("miss cost nan"), std::string::npos) << nan_msg;
    EXPECT_THROW(g.put(1, 1, std::numeric_limits<double>::infinity()), frugal::invalid_argument);
    EXPECT_THROW(g.put(1, 1, -1.0), frugal::invalid_argument);
    EXPECT_EQ(g.size(), 0u);
    auto zero = [](const int&, const int&) { return std::size_t{0}; };
    fc::gdsf_cache<int, int, decltype(zero)> z(1, zero);  // every entry weighs 0: they pile up
    auto unit = [](const int&, const int& v) { return static_cast<std::size_t>(v); };
    fc::gdsf_cache<int, int, decltype(unit)> u(3, unit);
    for (int k = 0; k < 50; ++k) {
        z.put(k, 0, 0.0);  // 0 / 0 would be NaN
        u.put(k, k % 2, k % 3 == 0 ? 0.0 : 1e308);
    }
    EXPECT_TRUE(std::isfinite(z.policy().clock()));
    EXPECT_TRUE(std::isfinite(u.policy().clock()));
    EXPECT_LE(u.weight(), 3u);
}

TEST(CacheReliability, WTinyLfuSizesItsSketchByEntriesNotBytes) {
    // Issue 23, item 8: a 256 MiB byte budget of 64 KiB entries holds 4096 entries; the sketch
    // is sized for at most 65536 entries, not 2^28 bytes.
    auto bytes = [](const int&, const int&) { return std::size_t{64} << 10; };
    fc::wtinylfu_cache<int, int, decltype(bytes)> c(std::size_t{256} << 20, bytes);
    for (int k = 0; k < 10000; ++k)
        if (c.get(k % 5000) == nullptr) c.put(k % 5000, k);
    EXPECT_LE(c.policy().sketch().capacity(), 65536u);
    EXPECT_NO_THROW((fc::wtinylfu_cache<int, int>(std::numeric_limits<std::size_t>::max())));
    fc::wtinylfu_cache<int, int> big(std::size_t{1} << 20);
    EXPECT_EQ(big.policy().sketch().capacity(), 65536u) << "grown only as entries come";
    for (int k = 0; k < 200000; ++k) big.put(k, k);
    EXPECT_GE(big.policy().sketch().capacity(), 200000u);
}

TEST(CacheReliability, AdaptiveWTinyLfuWindowClimbsWithByteWeights) {
    // Byte weights of 1..8 KiB under a 4 MiB budget: a recency-heavy phase (a sliding window of
    // fresh keys) must move the window away from its 1% start, where the fixed policy stays.
    auto bytes = [](const std::uint64_t& k, const int&) { return static_cast<std::size_t>(1 + k % 8) << 10; };
    using adaptive = fc::basic_cache<std::uint64_t, int, fc::adaptive_wtinylfu_policy, decltype(bytes)>;
    using fixed = fc::basic_cache<std::uint64_t, int, fc::wtinylfu_policy<>, decltype(bytes)>;
    adaptive a(std::size_t{4} << 20, bytes);
    fixed f(std::size_t{4} << 20, bytes);
    const std::size_t start = a.policy().window_capacity();
    std::uint64_t next = 0;
    for (int i = 0; i < 400000; ++i) {
        // Recency: mostly the 300 most recent keys, a new key every third request.
        const std::uint64_t k = i % 3 == 0 ? next++ : next - 1 - (static_cast<std::uint64_t>(i) * 2654435761u) % std::min<std::uint64_t>(next, 300);
        if (a.get(k) == nullptr) a.put(k, 0);
        if (f.get(k) == nullptr) f.put(k, 0);
    }
    EXPECT_NE(a.policy().window_capacity(), start) << "the hill climber moved the window";
    EXPECT_EQ(f.policy().window_capacity(), start);
    EXPECT_NE(a.stats().hits, f.stats().hits);
    EXPECT_GE(a.stats().hit_ratio(), f.stats().hit_ratio());
}

using tree = fc::prefix_tree<std::uint64_t, int, fc::lru_policy>;
using value = fc::chunk_value<int>;
std::vector<value> chunks(std::size_t n, std::size_t bytes, int first_handle = 0) {
    std::vector<value> v;
    for (std::size_t i = 0; i < n; ++i) v.push_back({first_handle + static_cast<int>(i), bytes});
    return v;
}

TEST(PrefixTreeServing, ALockedPathSurvivesAnyPressureAndExhaustionIsARefusal) {
    std::vector<std::pair<int, eviction_reason>> left;
    tree t(frugal::memory_budget(10));
    t.set_eviction_callback([&](const std::uint64_t&, int& h, std::size_t, eviction_reason r) { left.emplace_back(h, r); });
    const std::vector<std::uint64_t> req{1, 2, 3};
    auto lock = t.match(req);
    ASSERT_EQ(lock.length(), 0u);
    auto r = t.insert(lock, req, chunks(3, 2, 100));  // the request's prefill, kept locked
    EXPECT_EQ(r.cached, 3u);
    EXPECT_EQ(lock.length(), 3u);
    EXPECT_EQ(t.locked_bytes(), 6u);
    for (std::uint64_t k = 10; k < 200; ++k) t.insert(std::vector<std::uint64_t>{k}, chunks(1, 2, static_cast<int>(k)));
    EXPECT_EQ(t.cached_length(req), 3u) << "other requests' inserts never evict a locked path";
    const std::size_t before = left.size();
    r = t.insert(std::vector<std::uint64_t>{500}, chunks(1, 5, 500));
    EXPECT_EQ(r.cached, 0u) << "5 bytes do not fit beside 6 locked: refused";
    EXPECT_EQ(left.size(), before) << "and refused before evicting anything";
    r = t.insert(std::vector<std::uint64_t>{501}, chunks(1, 11, 501));
    EXPECT_EQ(r.cached, 0u) << "issue 23, item 7: larger than the whole budget";
    EXPECT_EQ(left.size(), before);
    // Extending the lock: the request's next chunks join it.
    const std::vector<std::uint64_t> longer{1, 2, 3, 4};
    r = t.insert(lock, longer, chunks(4, 2, 100));
    EXPECT_EQ(r.existing, 3u);
    EXPECT_EQ(r.cached, 4u);
    EXPECT_EQ(t.locked_bytes(), 8u);
    EXPECT_THROW(t.insert(lock, std::vector<std::uint64_t>{9, 9, 9, 9}, chunks(4, 1)), frugal::invalid_argument)
        << "the lock must cover a prefix of the sequence";
    lock.release();
    EXPECT_EQ(t.locked_bytes(), 0u);
    r = t.insert(std::vector<std::uint64_t>{600}, chunks(1, 9, 600));
    EXPECT_EQ(r.cached, 1u) << "released: evictable again";
    EXPECT_EQ(t.cached_length(req), 0u);
}

TEST(PrefixTreeServing, ChunksOfSizeMaxAreRefusedNotWrapped) {
    tree t(frugal::memory_budget(100));
    t.insert(std::vector<std::uint64_t>{1}, chunks(1, 10));
    auto r = t.insert(std::vector<std::uint64_t>{2}, std::vector<value>{{0, std::numeric_limits<std::size_t>::max()}});
    EXPECT_EQ(r.cached, 0u);
    EXPECT_EQ(t.bytes(), 10u);
    EXPECT_EQ(t.size(), 1u) << "nothing evicted for it";
}

TEST(PrefixTreeServing, PageKeysMatchAtPageGranularityWithinAChunk) {
    // Two prompts share a 40-token document chunk but diverge at token 37: with pages of 8
    // tokens they share 4 pages, and a third prompt under another adapter shares none.
    std::vector<int> a(64), b(64);
    for (int i = 0; i < 64; ++i) a[static_cast<std::size_t>(i)] = b[static_cast<std::size_t>(i)] = i * 7 % 31;
    b[37] = 999;
    const auto ka = fc::page_keys(std::span<const int>(a), 8), kb = fc::page_keys(std::span<const int>(b), 8);
    ASSERT_EQ(ka.size(), 8u);
    ASSERT_EQ(kb.size(), 8u);
    tree t(frugal::memory_budget(1000));
    t.insert(ka, chunks(ka.size(), 1));
    EXPECT_EQ(t.cached_length(kb), 4u) << "pages 0-3 (tokens 0-31) equal; page 4 holds token 37";
    const auto other_adapter = fc::page_keys(std::span<const int>(a), 8, 42);
    EXPECT_EQ(t.cached_length(other_adapter), 0u);
    EXPECT_EQ(fc::page_keys(std::span<const int>(a.data(), 7), 8).size(), 0u) << "a partial page has no key";
    // Brute force: two prefixes get equal keys exactly when their tokens are equal.
    for (std::size_t p = 0; p < 8; ++p)
        EXPECT_EQ(ka[p] == kb[p], std::equal(a.begin(), a.begin() + static_cast<long>(8 * (p + 1)), b.begin())) << p;
    EXPECT_THROW(fc::page_keys(std::span<const int>(a), 0), frugal::invalid_argument);
}

TEST(PrefixTreeServing, NamespacesSeparateEqualSequences) {
    tree t(frugal::memory_budget(100));
    const std::vector<std::uint64_t> s{5, 6};
    t.insert(s, chunks(2, 1, 10), /*model A*/ 1);
    EXPECT_EQ(t.cached_length(s, 1), 2u);
    EXPECT_EQ(t.cached_length(s, 2), 0u);
    EXPECT_EQ(t.cached_length(s), 0u);
    t.insert(s, chunks(2, 1, 20), 2);
    auto m = t.match(s, 2);
    ASSERT_EQ(m.length(), 2u);
    EXPECT_EQ(m.handle(0), 20);
    EXPECT_EQ(m.namespace_key(), 2u);
    EXPECT_EQ(t.size(), 4u);
}

TEST(PrefixTreeServing, EvictBytesFreesAtLeastThatMuchAndReportsIt) {
    std::vector<int> left;
    tree t(frugal::memory_budget(100));
    t.set_eviction_callback([&](const std::uint64_t&, int& h, std::size_t) { left.push_back(h); });
    for (std::uint64_t k = 0; k < 10; ++k) t.insert(std::vector<std::uint64_t>{k}, chunks(1, 3, static_cast<int>(k)));
    auto r = t.evict(7);
    EXPECT_EQ(r.chunks, 3u);
    EXPECT_EQ(r.bytes, 9u);
    EXPECT_EQ(left, (std::vector<int>{0, 1, 2})) << "least recent first";
    auto lock = t.match(std::vector<std::uint64_t>{9});
    r = t.evict(1000);
    EXPECT_EQ(r.chunks, 6u) << "all but the locked chunk";
    EXPECT_EQ(t.size(), 1u);
}

TEST(PrefixTreeServing, EveryChunkLeavesThroughTheCallback) {
    std::map<eviction_reason, int> seen;
    int live = 0;
    {
        tree t(frugal::memory_budget(6));
        t.set_eviction_callback([&](const std::uint64_t&, int&, std::size_t, eviction_reason r) {
            ++seen[r];
            --live;
        });
        for (std::uint64_t k = 0; k < 5; ++k) live += static_cast<int>(t.insert(std::vector<std::uint64_t>{k, k + 100}, chunks(2, 1)).cached);
        auto lock = t.match(std::vector<std::uint64_t>{4});
        t.clear();
        EXPECT_EQ(t.size(), 1u) << "the locked chunk stays";
        lock.release();
        live += static_cast<int>(t.insert(std::vector<std::uint64_t>{7}, chunks(1, 1)).cached);
    }
    EXPECT_EQ(live, 0);
    EXPECT_EQ(seen[eviction_reason::capacity], 4);
    EXPECT_EQ(seen[eviction_reason::cleared], 5);
    EXPECT_EQ(seen[eviction_reason::destroyed], 2);
}

using CacheFiles = frugal::cache_model::temp_files;

using bank = fc::semantic_cache<std::string>;
std::vector<float> unit(std::size_t dim, std::size_t hot) {
    std::vector<float> v(dim, 0.01f);
    v[hot % dim] = 1.0f;
    return v;
}

TEST_F(CacheFiles, SemanticCacheRoundTripsAndRejectsCorruptFiles) {
    bank b(100, 8, 0.95);
    for (std::size_t i = 0; i < 6; ++i) {
        auto id = b.insert("question " + std::to_string(i), unit(8, i), i % 2 == 0 ? std::optional<std::string>("answer " + std::to_string(i)) : std::nullopt,
                           {static_cast<std::uint32_t>(i), 7u}, 0.5f);
        ASSERT_TRUE(id);
    }
    const auto file = dir / "bank.bin";
    b.save(file);
    bank loaded(100, 8, 0.95);
    loaded.load(file);
    ASSERT_EQ(loaded.size(), 6u);
    for (std::size_t i = 0; i < 6; ++i) {
        auto h = loaded.lookup("question " + std::to_string(i), unit(8, i));
        ASSERT_TRUE(h);
        EXPECT_TRUE(h->exact);
        EXPECT_EQ(h->entry->answer.has_value(), i % 2 == 0);
        if (h->entry->answer) {
            EXPECT_EQ(*h->entry->answer, "answer " + std::to_string(i));
        }
        EXPECT_EQ(h->entry->chunks, (std::vector<std::uint32_t>{static_cast<std::uint32_t>(i), 7u}));
        EXPECT_EQ(h->entry->refresh_floor, 0.5f);
        auto similar = loaded.lookup("reworded " + std::to_string(i), unit(8, i));
        ASSERT_TRUE(similar) << "the embeddings came back too";
        EXPECT_EQ(similar->entry->query, "question " + std::to_string(i));
    }
    const std::string good = read(file);
    auto expect_corrupt = [&](const std::string& bytes, const char* what) {
        write(dir / "bad.bin", bytes);
        bank t(100, 8, 0.95);
        t.insert("kept", unit(8, 1));
        EXPECT_THROW(t.load(dir / "bad.bin"), frugal::runtime_error) << what;
        EXPECT_EQ(t.size(), 1u) << what << ": a failed load leaves the bank unchanged";
        EXPECT_TRUE(t.lookup("kept", unit(8, 1))) << what;
    };
    expect_corrupt(good.substr(0, good.size() - 3), "truncated");
    expect_corrupt("", "empty");
    std::string flipped = good;
    flipped[50] = static_cast<char>(flipped[50] ^ 0x21);
    expect_corrupt(flipped, "flipped byte");
    for (std::size_t cut : {std::size_t{10}, std::size_t{33}, good.size() / 2}) expect_corrupt(good.substr(0, cut), "cut");
    bank wide(100, 16, 0.95);
    EXPECT_THROW(wide.load(file), frugal::runtime_error) << "dimension differs";
    EXPECT_THROW(loaded.load(dir / "missing.bin"), frugal::runtime_error);
    bank small(2, 8, 0.95);
    small.load(file);
    EXPECT_EQ(small.size(), 2u) << "entries beyond the capacity are evicted as they come back";
}

TEST_F(CacheFiles, PrefixTreeSaveLeavesNoTemporaryAndLoadRejectsWrappingSizes) {
    tree t(frugal::memory_budget(100));
    t.insert(std::vector<std::uint64_t>{1, 2}, chunks(2, 5));
    const auto file = dir / "tree.bin";
    t.save(file);
    for (const auto& e : std::filesystem::directory_iterator(dir)) EXPECT_EQ(e.path(), file) << "a temporary was left";
    // A record whose bytes, added to the others, would wrap: refused as over the budget even
    // with a valid checksum.
    std::string bytes = read(file);
    const std::size_t record = 40 + sizeof(std::uint64_t) + sizeof(int), bytes_at = 28 + record + 16 + 8 + 4;
    const std::uint64_t huge = std::numeric_limits<std::uint64_t>::max() - 2;
    std::memcpy(bytes.data() + bytes_at, &huge, 8);
    const std::uint64_t sum = frugal::fnv1a(std::string_view(bytes).substr(0, bytes.size() - 8));
    std::memcpy(bytes.data() + bytes.size() - 8, &sum, 8);
    write(dir / "wrap.bin", bytes);
    tree u(frugal::memory_budget(100));
    const std::string msg = frugal::testing::error_of<frugal::runtime_error>([&] { u.load(dir / "wrap.bin"); });
    EXPECT_NE(msg.find("more than 100 bytes"), std::string::npos) << msg;
    EXPECT_EQ(u.size(), 0u);
}

// A row store whose reads fail for odd rows (a file that shrank after it was opened).
struct flaky_store {
    std::size_t rows() const { return 64; }
    std::size_t cols() const { return 4; }
    void read_row(std::size_t r, std::span<float> out) {
        if (r % 2 == 1) FRUGAL_FAIL(frugal::runtime_error, "flaky_store: row ", r, " is gone");
        for (auto& x : out) x = static_cast<float>(r);
    }
};
static_assert(fc::row_store<flaky_store>);

TEST(EmbeddingRowCache, AFailedReadKeepsItsSlot) {
    fc::embedding_row_cache<flaky_store> c(flaky_store{}, 4);
    for (int round = 0; round < 3; ++round)
        for (std::size_t r = 0; r < 20; ++r) {  // well over capacity + 1 failures
            if (r % 2 == 1) {
                EXPECT_THROW((void)c.row(r), frugal::runtime_error);
            } else {
                EXPECT_EQ(c.row(r)[0], static_cast<float>(r));
            }
        }
    EXPECT_EQ(c.row(0)[3], 0.0f);
}

TEST_F(CacheFiles, EmbeddingRowCacheRefusesSizesThatWrap) {
    const auto file = dir / "rows.f32";
    write(file, std::string(64, '\0'));
    const std::string cols = frugal::testing::error_of<frugal::invalid_argument>([&] { fc::row_file(file, std::size_t{1} << 62); });
    EXPECT_NE(cols.find("bytes of a row"), std::string::npos) << "issue 23, item 3: " << cols;
    const std::string cap = frugal::testing::error_of<frugal::invalid_argument>(
        [&] { fc::embedding_row_cache<fc::row_file> c(fc::row_file(file, 4), std::numeric_limits<std::size_t>::max()); });
    EXPECT_NE(cap.find("capacity + 1"), std::string::npos) << cap;
}

}  // namespace
