// Every policy against a brute-force reference simulator on random operation sequences,
// pinning, byte budgets and the eviction callback.
#include <algorithm>
#include <cstdint>
#include <functional>
#include <limits>
#include <map>
#include <random>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include <frugal/cache/count_min_sketch.hpp>
#include <frugal/cache/counting_bloom_filter.hpp>
#include <frugal/cache/gdsf_policy.hpp>
#include <frugal/cache/lfu_policy.hpp>
#include <frugal/cache/lru_policy.hpp>
#include <frugal/cache/wtinylfu_policy.hpp>

#include "exact_sketch.hpp"
#include "policy_driver.hpp"

namespace {

using frugal::cache::eviction_reason;
using frugal::cache::put_result;

enum class kind { lru, lfu, lfuda, gdsf, wtinylfu };

// Exact frequencies (exact_sketch.hpp) let the reference check W-TinyLFU's segment logic
// exactly; the sketches are tested on their own below.
using frugal::cache_model::exact_sketch;

struct value_weigher {  // the value is the weight
    std::size_t operator()(int, int v) const { return static_cast<std::size_t>(v); }
};

// The reference: a vector of entries, every decision by a linear scan over it.
class reference {
public:
    reference(kind k, std::size_t capacity) : kind_(k), capacity_(capacity) {
        // W-TinyLFU with libCacheSim's WTinyLFU.c defaults: 1% window, SLRU main region 1:4.
        window_max_ = std::max<std::size_t>(1, static_cast<std::size_t>(static_cast<double>(capacity) * 0.01));
        main_max_ = capacity > window_max_ ? capacity - window_max_ : 0;
        probation_max_ = static_cast<std::size_t>(0.2 * static_cast<double>(main_max_));
        protected_max_ = static_cast<std::size_t>(0.8 * static_cast<double>(main_max_));
    }
    std::vector<std::pair<int, eviction_reason>> log;

    bool pinned(int key) const {
        auto* e = find(key);
        return e != nullptr && e->pins > 0;
    }
    bool get(int key) {
        entry* e = find(key);
        if (e == nullptr) return false;
        if (e->pins == 0) touch(*e);
        return true;
    }
    put_result put(int key, int value, double cost) {
        const auto w = static_cast<std::size_t>(value);
        std::size_t pinned_total = 0;
        for (auto& e : entries_)
            if (e.pins > 0) pinned_total += e.weight;
        if (find(key) != nullptr) {
            log.emplace_back(key, eviction_reason::replaced);
            if (pinned_total + w > capacity_) {
                erase_entry(key);
                log.emplace_back(key, eviction_reason::rejected);
                return put_result::rejected;
            }
            // The entry keeps its history: out of reach of the eviction that makes room
            // (weight 0, counted as pinned), then back in its place and accessed once.
            entry* e = find(key);
            e->weight = 0;
            e->pins = 1;
            while (total() + w > capacity_) {
                const int v = victim();
                if (v == none) break;
                if (kind_ == kind::lfuda || kind_ == kind::gdsf) clock_ = find(v)->priority;
                log.emplace_back(v, eviction_reason::capacity);
                erase_entry(v);
            }
            e = find(key);
            e->weight = w;
            e->pins = 0;
            e->cost = cost;
            e->stamp = ++time_;
            if (e->segment == leaving) e->segment = window;
            touch(*e);
            return put_result::replaced;
        }
        if (pinned_total + w > capacity_) {
            log.emplace_back(key, eviction_reason::rejected);
            return put_result::rejected;
        }
        entry n{key, w, 0, 1, 0, 0, cost, window};
        // Room is made among the residents first; the newcomer is always admitted.
        while (total() + w > capacity_) {
            int v = victim();
            if (v == none) break;
            if (kind_ == kind::lfuda || kind_ == kind::gdsf) clock_ = find(v)->priority;
            log.emplace_back(v, eviction_reason::capacity);
            erase_entry(v);
        }
        add(n);
        return put_result::inserted;
    }
    bool erase(int key) {
        if (find(key) == nullptr) return false;
        log.emplace_back(key, eviction_reason::erased);
        erase_entry(key);
        return true;
    }
    bool pin(int key) {
        entry* e = find(key);
        if (e == nullptr) return false;
        if (e->pins == 0) touch(*e);
        ++e->pins;
        return true;
    }
    void unpin(int key) {
        entry* e = find(key);
        if (--e->pins == 0) {
            e->stamp = ++time_;
            e->priority = priority(*e);
            if (e->segment == leaving) e->segment = window;
        }
    }
    std::vector<int> keys() const {
        std::vector<int> k;
        for (auto& e : entries_) k.push_back(e.key);
        std::sort(k.begin(), k.end());
        return k;
    }
    std::size_t total() const {
        std::size_t t = 0;
        for (auto& e : entries_) t += e.weight;
        return t;
    }

private:
    static constexpr int none = std::numeric_limits<int>::min();
    enum seg { window = 0, probation = 1, protect = 2, leaving = 3 };
    struct entry {
        int key;
        std::size_t weight;
        std::uint32_t pins;
        std::uint64_t freq, stamp;
        double priority, cost;
        int segment;
    };
    entry* find(int key) {
        for (auto& e : entries_)
            if (e.key == key) return &e;
        return nullptr;
    }
    const entry* find(int key) const { return const_cast<reference*>(this)->find(key); }
    void erase_entry(int key) {
        entries_.erase(std::find_if(entries_.begin(), entries_.end(), [&](auto& e) { return e.key == key; }));
    }
    void add(entry n) {
        n.stamp = ++time_;
        if (kind_ == kind::wtinylfu) ++counts_[n.key];
        n.priority = priority(n);
        entries_.push_back(n);
    }
    double priority(const entry& e) const {
        if (kind_ == kind::lfuda) return clock_ + static_cast<double>(e.freq);
        if (kind_ == kind::gdsf) return clock_ + static_cast<double>(e.freq) * (e.cost / static_cast<double>(e.weight));
        return 0;
    }
    void touch(entry& e) {
        ++e.freq;
        e.stamp = ++time_;
        e.priority = priority(e);
        if (kind_ != kind::wtinylfu) return;
        if (e.segment == window) return;  // window hits are not counted
        if (e.segment == leaving) {       // evicted in libCacheSim: inserted again
            e.segment = window;
            ++counts_[e.key];
            return;
        }
        if (e.segment == probation) {
            e.segment = protect;
            while (seg_weight(protect) > protected_max_) {
                entry* d = oldest(protect);
                d->segment = probation;
                d->stamp = ++time_;
            }
            while (seg_weight(probation) > probation_max_) leave(*oldest(probation));
        }
        ++counts_[e.key];
        if (++main_hits_ >= 32 * main_max_) {
            main_hits_ = 0;
            for (auto& [k, c] : counts_) c >>= 1;
        }
    }
    void leave(entry& e) {
        e.segment = leaving;
        e.stamp = ++time_;
    }
    entry* main_victim() {
        entry* v = oldest(probation);
        return v != nullptr ? v : oldest(protect);
    }
    // Into the lowest main segment with room (probation, after making room, when none has).
    void enter_main(entry& c) {
        if (seg_weight(probation) + c.weight <= probation_max_) {
            c.segment = probation;
        } else if (seg_weight(protect) + c.weight <= protected_max_) {
            c.segment = protect;
        } else {
            while (seg_weight(probation) + seg_weight(protect) + c.weight > main_max_) {
                entry* v = main_victim();
                if (v == nullptr) break;
                leave(*v);
            }
            c.segment = probation;
        }
        c.stamp = ++time_;
    }
    std::size_t seg_weight(int s) const {
        std::size_t t = 0;
        for (auto& e : entries_)
            if (e.pins == 0 && e.segment == s) t += e.weight;
        return t;
    }
    entry* oldest(int s) {
        entry* best = nullptr;
        for (auto& e : entries_)
            if (e.pins == 0 && e.segment == s && (best == nullptr || e.stamp < best->stamp)) best = &e;
        return best;
    }
    int victim() {
        if (kind_ == kind::wtinylfu) return tinylfu_victim();
        entry* best = nullptr;
        for (auto& e : entries_) {
            if (e.pins > 0) continue;
            auto rank = [&](const entry& x) {
                if (kind_ == kind::lru) return std::pair<double, std::uint64_t>(0, x.stamp);
                if (kind_ == kind::lfu) return std::pair<double, std::uint64_t>(static_cast<double>(x.freq), x.stamp);
                return std::pair<double, std::uint64_t>(x.priority, x.stamp);
            };
            if (best == nullptr || rank(e) < rank(*best)) best = &e;
        }
        return best == nullptr ? none : best->key;
    }
    // libCacheSim's WTinyLFU_evict: window entries leave the window in turn, into the main
    // region while it has room, else in place of its victim when strictly more frequent; the
    // first one that is not ends the round, as does an empty window (one main victim then).
    // The entries the round evicts wait in `leaving` and go first.
    int tinylfu_victim() {
        if (oldest(leaving) == nullptr) {
            for (;;) {
                entry* cand = oldest(window);
                if (cand == nullptr) {
                    if (entry* mv = main_victim()) leave(*mv);
                    break;
                }
                if (seg_weight(probation) + seg_weight(protect) + cand->weight <= main_max_) {
                    enter_main(*cand);
                    ++counts_[cand->key];
                    continue;
                }
                entry* mv = main_victim();
                if (mv != nullptr && counts_[cand->key] > counts_[mv->key]) {
                    leave(*mv);
                    enter_main(*cand);
                    ++counts_[cand->key];
                    continue;
                }
                leave(*cand);
                ++counts_[cand->key];
                break;
            }
        }
        entry* e = oldest(leaving);
        return e == nullptr ? none : e->key;
    }

    kind kind_;
    std::size_t capacity_, window_max_, main_max_, probation_max_, protected_max_;
    std::uint64_t main_hits_ = 0;
    std::vector<entry> entries_;
    std::uint64_t time_ = 0;
    double clock_ = 0;
    std::map<int, unsigned> counts_;
};

template <class Policy>
void run_against_reference(kind k, std::uint32_t seed, std::size_t capacity, int max_weight) {
    SCOPED_TRACE(testing::Message() << "seed " << seed << " capacity " << capacity << " max weight " << max_weight);
    std::vector<std::pair<int, eviction_reason>> log;  // outlives the cache: its destructor reports
    frugal::cache::basic_cache<int, int, Policy, value_weigher> cache(capacity);
    reference ref(k, capacity);
    cache.set_eviction_callback([&](const int& key, int&, eviction_reason r) { log.emplace_back(key, r); });
    std::mt19937 rng(seed);
    std::uniform_int_distribution<int> key_dist(0, 40), weight_dist(1, max_weight), op_dist(0, 99), cost_dist(1, 4);
    frugal::cache_model::checked_pair<decltype(cache), reference> pair{cache, ref, log, {}};
    for (int step = 0; step < 3000; ++step) {
        const int op = op_dist(rng);
        const int key = key_dist(rng);
        const std::string failure = pair.step(op, key, [&] {
            const int w = weight_dist(rng);
            return std::pair<int, double>(w, cost_dist(rng));
        });
        ASSERT_EQ(failure, "") << "step " << step;
    }
    std::vector<int> keys;
    for (int key = 0; key <= 40; ++key) {
        if (cache.contains(key)) keys.push_back(key);
    }
    EXPECT_EQ(keys, ref.keys());
}

template <class Policy>
void run_suite(kind k) {
    for (std::uint32_t seed = 1; seed <= 4; ++seed) {
        run_against_reference<Policy>(k, seed, 12, 1);    // entries
        run_against_reference<Policy>(k, seed, 20, 6);    // weights
        run_against_reference<Policy>(k, seed, 150, 9);   // large enough for a real W-TinyLFU window
        run_against_reference<Policy>(k, seed, 5, 8);     // objects larger than the budget
    }
}

TEST(CachePolicies, LruMatchesReference) { run_suite<frugal::cache::lru_policy>(kind::lru); }
TEST(CachePolicies, LfuMatchesReference) { run_suite<frugal::cache::lfu_policy>(kind::lfu); }
TEST(CachePolicies, LfudaMatchesReference) { run_suite<frugal::cache::lfuda_policy>(kind::lfuda); }
TEST(CachePolicies, GdsfMatchesReference) { run_suite<frugal::cache::gdsf_policy>(kind::gdsf); }
TEST(CachePolicies, WTinyLfuMatchesReference) { run_suite<frugal::cache::wtinylfu_policy<exact_sketch>>(kind::wtinylfu); }

TEST(CacheCore, PinnedEntrySurvivesPressureAndExhaustionRefuses) {
    std::vector<eviction_reason> reasons;  // outlives the cache: its destructor reports
    frugal::cache::lru_cache<int, int> c(3);
    for (int k = 0; k < 3; ++k) c.put(k, k);
    ASSERT_NE(c.pin(0), nullptr);
    ASSERT_NE(c.pin(0), nullptr);  // reference counted
    for (int k = 10; k < 100; ++k) c.put(k, k);
    EXPECT_TRUE(c.contains(0));
    c.unpin(0);
    for (int k = 100; k < 110; ++k) c.put(k, k);
    EXPECT_TRUE(c.contains(0)) << "still pinned once";
    EXPECT_EQ(c.pins(0), 1u);
    // Pin everything: a new key is refused, the budget holds.
    ASSERT_NE(c.pin(108), nullptr);
    ASSERT_NE(c.pin(109), nullptr);
    c.set_eviction_callback([&](const int&, int&, eviction_reason r) { reasons.push_back(r); });
    EXPECT_EQ(c.put(500, 1), put_result::rejected);
    EXPECT_FALSE(c.contains(500));
    EXPECT_EQ(c.size(), 3u);
    EXPECT_EQ(reasons, std::vector<eviction_reason>{eviction_reason::rejected});
    EXPECT_THROW(c.put(108, 5), frugal::invalid_argument);
    EXPECT_THROW(c.erase(109), frugal::invalid_argument);
    EXPECT_THROW(c.unpin(1234), frugal::invalid_argument);
    c.unpin(0);
    c.unpin(0 + 108);
    EXPECT_EQ(c.put(500, 1), put_result::inserted);
}

TEST(CacheCore, ByteBudgetWithObjectsLargerThanTheBudget) {
    auto weigh = [](const int&, const std::string& s) { return s.size(); };
    frugal::cache::lru_cache<int, std::string, decltype(weigh)> c(10, weigh);
    EXPECT_EQ(c.put(1, std::string(4, 'a')), put_result::inserted);
    EXPECT_EQ(c.put(2, std::string(5, 'b')), put_result::inserted);
    EXPECT_EQ(c.put(3, std::string(11, 'c')), put_result::rejected);  // alone exceeds the budget
    EXPECT_TRUE(c.contains(1));
    EXPECT_TRUE(c.contains(2));
    EXPECT_EQ(c.put(4, std::string(10, 'd')), put_result::inserted);  // exactly the budget: evicts both
    EXPECT_EQ(c.size(), 1u);
    EXPECT_EQ(c.weight(), 10u);
    EXPECT_EQ(c.stats().evicted(eviction_reason::capacity), 2u);
    EXPECT_EQ(c.stats().evicted(eviction_reason::rejected), 1u);
}

TEST(CacheCore, ReplacingAValueKeepsItsFrequency) {
    // a: 4 accesses, b: 2. Replacing a's value is a fifth access, not a fresh entry with one:
    // the next insertion evicts b (an LFU that forgot a's history would evict a).
    frugal::cache::lfu_cache<char, int> c(2);
    c.put('a', 1);
    for (int i = 0; i < 3; ++i) (void)c.get('a');
    c.put('b', 1);
    (void)c.get('b');
    EXPECT_EQ(c.put('a', 2), put_result::replaced);
    c.put('c', 1);
    EXPECT_TRUE(c.contains('a'));
    EXPECT_FALSE(c.contains('b'));
    EXPECT_EQ(*c.peek('a'), 2);
}

TEST(CacheCore, StatisticsCountHitsMissesAndBytes) {
    auto weigh = [](const int&, const int& v) { return static_cast<std::size_t>(v); };
    frugal::cache::lfu_cache<int, int, decltype(weigh)> c(100, weigh);
    c.put(1, 7);
    (void)c.get(1);
    (void)c.get(1);
    (void)c.get(2);
    EXPECT_EQ(c.stats().hits, 2u);
    EXPECT_EQ(c.stats().misses, 1u);
    EXPECT_EQ(c.stats().bytes_hit, 14u);
    EXPECT_DOUBLE_EQ(c.stats().hit_ratio(), 2.0 / 3.0);
    c.put(1, 8);
    EXPECT_EQ(c.stats().evicted(eviction_reason::replaced), 1u);
    c.clear();
    EXPECT_EQ(c.stats().evicted(eviction_reason::cleared), 1u);
    EXPECT_EQ(c.size(), 0u);
}

TEST(CacheCore, StdUnorderedMapIndexBehavesLikeTheIntrusiveOne) {
    frugal::cache::lru_cache<std::string, int, frugal::cache::unit_weigher, std::hash<std::string>, std::equal_to<std::string>,
                      frugal::cache::map_index<std::unordered_map>>
        a(5);
    frugal::cache::lru_cache<std::string, int> b(5);
    std::mt19937 rng(3);
    for (int i = 0; i < 2000; ++i) {
        const std::string key = std::to_string(rng() % 12);
        const bool ha = a.get(key) != nullptr, hb = b.get(key) != nullptr;
        ASSERT_EQ(ha, hb);
        if (!ha) {
            a.put(key, i);
            b.put(key, i);
        }
    }
    EXPECT_EQ(a.stats().hits, b.stats().hits);
}

// Three hash values for 400 keys: long chains (or probe runs) of equal hashes, entries erased
// from their middle and ends, the index grown while they hold; the std::unordered_map index
// with the same hash is the oracle. Every `cache_index` passes the same test.
struct three_hashes {
    std::size_t operator()(int k) const noexcept { return static_cast<std::size_t>(k % 3); }
};
template <class Index>
void colliding_keys_behave_as_in_a_map() {
    frugal::cache::lru_cache<int, int, frugal::cache::unit_weigher, three_hashes, std::equal_to<int>, Index> a(300);
    frugal::cache::lru_cache<int, int, frugal::cache::unit_weigher, three_hashes, std::equal_to<int>,
                             frugal::cache::map_index<std::unordered_map>>
        b(300);
    std::mt19937 rng(11);
    for (int i = 0; i < 20000; ++i) {
        const int key = static_cast<int>(rng() % 400);
        if (rng() % 5 == 0) {
            ASSERT_EQ(a.erase(key), b.erase(key)) << "erase " << key;
            continue;
        }
        const int* va = a.get(key);
        const int* vb = b.get(key);
        ASSERT_EQ(va != nullptr, vb != nullptr) << "get " << key;
        if (va != nullptr) {
            ASSERT_EQ(*va, *vb);
        } else {
            a.put(key, i);
            b.put(key, i);
        }
        ASSERT_EQ(a.size(), b.size());
    }
    std::size_t seen = 0;
    a.for_each([&](int k, int v) {
        ++seen;
        const int* other = b.peek(k);
        ASSERT_NE(other, nullptr) << k;
        EXPECT_EQ(v, *other);
    });
    EXPECT_EQ(seen, b.size());
}

TEST(CacheCore, EveryIndexHandlesCollidingKeys) {
    colliding_keys_behave_as_in_a_map<frugal::cache::intrusive_index>();
    colliding_keys_behave_as_in_a_map<frugal::cache::slot_index>();
}

TEST(CacheCore, ShrinkingTheCapacityEvicts) {
    frugal::cache::lru_cache<int, int> c(10);
    for (int k = 0; k < 10; ++k) c.put(k, k);
    c.set_capacity(4);
    EXPECT_EQ(c.size(), 4u);
    for (int k = 6; k < 10; ++k) EXPECT_TRUE(c.contains(k));
    EXPECT_THROW(c.set_capacity(0), frugal::invalid_argument);
    EXPECT_THROW((frugal::cache::lru_cache<int, int>(0)), frugal::invalid_argument);
}

TEST(CountMinSketch, NeverUnderestimatesBeforeHalvingAndHalves) {
    frugal::cache::count_min_sketch s(1024);
    std::map<std::size_t, unsigned> truth;
    std::mt19937_64 rng(5);
    for (int i = 0; i < 5000; ++i) {  // below the 10 x 1024 reset period
        const std::size_t h = rng() % 700;
        s.increment(h);
        ++truth[h];
    }
    std::size_t exact = 0;
    for (auto [h, n] : truth) {
        EXPECT_GE(s.estimate(h), std::min(n, 15u));
        exact += s.estimate(h) == std::min(n, 15u);
    }
    EXPECT_GT(exact, truth.size() * 9 / 10) << "4 x 1024 counters for 700 items: few collisions";
    const unsigned before = s.estimate(truth.begin()->first);
    s.halve();
    EXPECT_EQ(s.estimate(truth.begin()->first), before / 2);
}

TEST(CountingBloomFilter, NeverUnderestimatesAndHalves) {
    // Oracle: exact counts. Sized for 700 entries (14.38 counters each, 10 probes), an
    // estimate is the true count plus collisions, and is exact for most items.
    frugal::cache::counting_bloom_filter f(700);
    std::map<std::size_t, unsigned> truth;
    std::mt19937_64 rng(5);
    for (int i = 0; i < 20000; ++i) {
        const std::size_t h = frugal::hash_mix(rng() % 700);
        f.increment(h);
        ++truth[h];
    }
    std::size_t exact = 0;
    for (auto [h, n] : truth) {
        EXPECT_GE(f.estimate(h), n);
        exact += f.estimate(h) == n;
    }
    EXPECT_GT(exact, truth.size() * 9 / 10);
    const auto [h0, n0] = *truth.begin();
    const unsigned before = f.estimate(h0);
    f.halve();
    EXPECT_LE(f.estimate(h0), before / 2 + 1);
    EXPECT_GE(f.estimate(h0), n0 / 2);
    EXPECT_THROW(frugal::cache::counting_bloom_filter(0), frugal::invalid_argument);
}

TEST(WTinyLfu, ResistsACyclicScanLargerThanTheCache) {
    // A loop over 1000 keys with 500 entries: LRU never hits; W-TinyLFU keeps its main region.
    frugal::cache::wtinylfu_cache<int, int> t(500);
    frugal::cache::lru_cache<int, int> l(500);
    for (int pass = 0; pass < 20; ++pass)
        for (int k = 0; k < 1000; ++k) {
            if (t.get(k) == nullptr) t.put(k, k);
            if (l.get(k) == nullptr) l.put(k, k);
        }
    EXPECT_EQ(l.stats().hits, 0u);
    EXPECT_GT(t.stats().hit_ratio(), 0.4);
}

TEST(WTinyLfu, AdaptiveWindowFollowsTheHillClimbingRule) {
    // Capacity 100: samples of 1000 requests (hits, or admissions after a miss), steps of 6.25
    // entries. The expected window sizes follow the documented rule by hand.
    frugal::cache::basic_cache<int, int, frugal::cache::adaptive_wtinylfu_policy> c(100);
    int next = 1000;
    auto sample = [&](int hits_per_2) {  // 1000 requests, hits_per_2 of every 2 are hits of key 0
        for (int i = 0; i < 1000; ++i) {
            if (i % 2 < hits_per_2) {
                ASSERT_NE(c.get(0), nullptr);
            } else {
                c.put(next++, 0);
            }
        }
    };
    EXPECT_EQ(c.policy().window_capacity(), 1u);
    c.put(0, 0);
    for (int i = 0; i < 999; ++i) ASSERT_NE(c.get(0), nullptr);
    EXPECT_EQ(c.policy().window_capacity(), 7u) << "hit ratio up from 0: grow by 6.25";
    sample(0);
    EXPECT_EQ(c.policy().window_capacity(), 1u) << "down by ~1: reverse, shrink by 6.25 (clamped at 1)";
    sample(2);
    EXPECT_EQ(c.policy().window_capacity(), 1u) << "up: keep shrinking (clamped)";
    sample(1);
    EXPECT_EQ(c.policy().window_capacity(), 7u) << "down by 0.5: reverse, grow by 6.25";
    sample(1);
    EXPECT_EQ(c.policy().window_capacity(), 13u) << "unchanged: keep growing by 6.25, the step decays to 6.125";
    sample(1);
    EXPECT_EQ(c.policy().window_capacity(), 19u) << "unchanged: keep growing by 6.125 (19.625)";
}

}  // namespace
