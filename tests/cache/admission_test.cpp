// Admission in front of any policy: LRU, SIEVE and S3-FIFO behind TinyLFU against the
// brute-force models of policy_model.hpp (TinyLFU with a map of exact counts) on random operation
// sequences and on get-or-put traces (skewed and cyclic scans), every eviction and refusal
// compared; admit_all against the plain models; the concepts; TinyLFU's counting rules by their
// statement; scan resistance against the plain policies; and every policy's victim() stable when
// asked twice, which the composition relies on.
#include <cstddef>
#include <cstdint>
#include <random>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include <frugal/cache/admission_policy.hpp>
#include <frugal/cache/admitted_policy.hpp>
#include <frugal/cache/arc_policy.hpp>
#include <frugal/cache/basic_cache.hpp>
#include <frugal/cache/count_min_sketch.hpp>
#include <frugal/cache/counting_bloom_filter.hpp>
#include <frugal/cache/gdsf_policy.hpp>
#include <frugal/cache/lfu_policy.hpp>
#include <frugal/cache/lirs_policy.hpp>
#include <frugal/cache/lru_policy.hpp>
#include <frugal/cache/s3fifo_policy.hpp>
#include <frugal/cache/sieve_policy.hpp>
#include <frugal/cache/tinylfu_admission.hpp>
#include <frugal/cache/two_queue_policy.hpp>
#include <frugal/cache/wtinylfu_policy.hpp>
#include <frugal/core/hash.hpp>

#include "exact_sketch.hpp"
#include "policy_driver.hpp"
#include "policy_model.hpp"

namespace {

namespace fc = frugal::cache;
using frugal::cache::eviction_reason;
using frugal::cache_model::admission;
using frugal::cache_model::exact_sketch;
using frugal::cache_model::kind;

template <class Policy>
using exact_tinylfu = fc::admitted_policy<fc::tinylfu_admission<exact_sketch>, Policy>;
template <class Policy>
using tinylfu = fc::admitted_policy<fc::tinylfu_admission<>, Policy>;
template <class Policy>
using probe_state = typename Policy::template state<fc::detail::policy_probe_node<Policy>>;

// ---- the concepts ------------------------------------------------------------------------
struct no_record {
    explicit no_record(std::size_t) {}
    bool admit(std::size_t, std::size_t) { return true; }
    void hold(std::size_t) {}
    void set_capacity(std::size_t) {}
};
struct int_admit : no_record {
    using no_record::no_record;
    void record(std::size_t) {}
    int admit(std::size_t, std::size_t) { return 1; }
};
struct no_capacity_constructor {
    void record(std::size_t) {}
    bool admit(std::size_t, std::size_t) { return true; }
    void hold(std::size_t) {}
    void set_capacity(std::size_t) {}
};
static_assert(fc::admission_policy<fc::admit_all> && fc::admission_policy<fc::tinylfu_admission<>> &&
              fc::admission_policy<fc::tinylfu_admission<fc::count_min_sketch>> &&
              fc::admission_policy<fc::tinylfu_admission<exact_sketch>>);
static_assert(!fc::admission_policy<no_record> && !fc::admission_policy<int_admit> &&
              !fc::admission_policy<no_capacity_constructor> && !fc::admission_policy<int>);

struct no_halve {
    static constexpr std::size_t max_capacity = 1;
    explicit no_halve(std::size_t) {}
    void increment(std::size_t) {}
    unsigned estimate(std::size_t) const { return 0; }
    void resize(std::size_t) {}
    std::size_t capacity() const { return 1; }
};
static_assert(fc::frequency_sketch<fc::counting_bloom_filter> && fc::frequency_sketch<fc::count_min_sketch> &&
              fc::frequency_sketch<exact_sketch>);
static_assert(!fc::frequency_sketch<no_halve> && !fc::frequency_sketch<int>);

static_assert(fc::cache_policy<tinylfu<fc::lru_policy>> && fc::cache_policy<tinylfu<fc::sieve_policy>> &&
              fc::cache_policy<tinylfu<fc::s3fifo_policy>> && fc::cache_policy<fc::admitted_policy<fc::admit_all, fc::arc_policy>>);
static_assert(fc::screens_newcomers<probe_state<tinylfu<fc::lru_policy>>>);
static_assert(!fc::screens_newcomers<probe_state<fc::lru_policy>>);
// The policy's own newcomer hook passes through, and only where the policy has one.
static_assert(fc::expects_newcomers<probe_state<tinylfu<fc::s3fifo_policy>>>);
static_assert(!fc::expects_newcomers<probe_state<tinylfu<fc::sieve_policy>>>);

// ---- against the models ------------------------------------------------------------------
struct value_weigher {  // the value is the weight
    std::size_t operator()(int, int v) const { return static_cast<std::size_t>(v); }
};

template <class Policy>
struct checked_cache {
    checked_cache(kind k, std::size_t capacity, admission a) : cache(capacity), ref(k, capacity, a) {
        cache.set_eviction_callback([this](const int& key, int&, eviction_reason r) { log.emplace_back(key, r); });
    }
    std::vector<std::pair<int, eviction_reason>> log;  // outlives the cache: its destructor reports
    fc::basic_cache<int, int, Policy, value_weigher> cache;
    frugal::cache_model::model ref;
    frugal::cache_model::checked_pair<decltype(cache), frugal::cache_model::model> pair{cache, ref, log, {}};

    std::uint64_t refused() const {
        std::uint64_t n = 0;
        for (const auto& [key, why] : log) n += why == eviction_reason::rejected ? 1 : 0;
        return n;
    }
};

// Random gets, puts, erasures, pins and unpins with byte weights, as queue_policies_test.cpp.
template <class Policy>
void random_operations(kind k, admission a, std::uint32_t seed, std::size_t capacity, int max_weight, int keys) {
    SCOPED_TRACE(testing::Message() << "seed " << seed << " capacity " << capacity << " max weight " << max_weight);
    checked_cache<Policy> c(k, capacity, a);
    std::mt19937 rng(seed);
    std::uniform_int_distribution<int> key_dist(0, keys - 1), weight_dist(1, max_weight), op_dist(0, 99);
    for (int step = 0; step < 4000; ++step) {
        const int op = op_dist(rng);
        const int key = op % 2 == 0 ? key_dist(rng) % std::max(1, keys / 8) : key_dist(rng);
        const std::string failure = c.pair.step(op, key, [&] { return std::pair<int, double>(weight_dist(rng), 1.0); });
        ASSERT_EQ(failure, "") << "step " << step;
    }
    std::vector<int> held;
    for (int key = 0; key < keys; ++key)
        if (c.cache.contains(key)) held.push_back(key);
    EXPECT_EQ(held, c.ref.keys());
    EXPECT_GT(c.cache.stats().evicted(eviction_reason::capacity), 50u) << "the sequence must exercise eviction";
    if (a == admission::tinylfu) {
        EXPECT_GT(c.refused(), 50u) << "the sequence must exercise refusals";
    }
}

// A get for each key of the trace and a put of unit weight after each miss.
template <class Policy>
void replay(kind k, admission a, std::size_t capacity, const std::vector<int>& trace) {
    checked_cache<Policy> c(k, capacity, a);
    const auto unit = [] { return std::pair<int, double>(1, 1.0); };
    for (std::size_t i = 0; i < trace.size(); ++i) {
        std::string failure = c.pair.step(0, trace[i], unit);
        if (failure.empty() && !c.ref.contains(trace[i])) failure = c.pair.step(60, trace[i], unit);
        ASSERT_EQ(failure, "") << "request " << i;
    }
    EXPECT_GT(c.cache.stats().evicted(eviction_reason::capacity) + c.refused(), 50u) << "decisions to compare";
}

std::vector<int> skewed_trace(std::uint32_t seed, int keys, int n) {
    std::mt19937 rng(seed);
    std::vector<double> w;
    for (int k = 1; k <= keys; ++k) w.push_back(1.0 / k);  // Zipf, exponent 1
    std::discrete_distribution<int> dist(w.begin(), w.end());
    std::vector<int> t;
    for (int i = 0; i < n; ++i) t.push_back(dist(rng));
    return t;
}
// Cyclic scans over `loop` keys, between bursts of a small hot set.
std::vector<int> scan_trace(int loop, int passes) {
    std::vector<int> t;
    for (int p = 0; p < passes; ++p) {
        for (int k = 0; k < loop; ++k) t.push_back(1000 + k);
        for (int r = 0; r < 3; ++r)
            for (int h = 0; h < 5; ++h) t.push_back(h);
    }
    return t;
}

template <class Policy>
void model_suite(kind k, admission a) {
    for (std::uint32_t seed = 1; seed <= 3; ++seed) {
        random_operations<Policy>(k, a, seed, 12, 1, 60);    // entries
        random_operations<Policy>(k, a, seed, 40, 6, 80);    // byte weights
        random_operations<Policy>(k, a, seed, 200, 1, 600);  // large enough for S3-FIFO's 10%
        random_operations<Policy>(k, a, seed, 9, 12, 40);    // objects larger than the budget
        replay<Policy>(k, a, 50, skewed_trace(seed, 400, 6000));
    }
    replay<Policy>(k, a, 40, scan_trace(60, 100));   // a loop 1.5 x the cache
    replay<Policy>(k, a, 100, scan_trace(400, 20));  // a loop 4 x the cache: halvings on the way
}

TEST(Admission, TinyLfuLruMatchesModel) { model_suite<exact_tinylfu<fc::lru_policy>>(kind::lru, admission::tinylfu); }
TEST(Admission, TinyLfuSieveMatchesModel) { model_suite<exact_tinylfu<fc::sieve_policy>>(kind::sieve, admission::tinylfu); }
TEST(Admission, TinyLfuS3FifoMatchesModel) {
    model_suite<exact_tinylfu<fc::s3fifo_policy>>(kind::s3fifo, admission::tinylfu);
    model_suite<exact_tinylfu<fc::s3fifo_warm_main_policy>>(kind::s3fifo_warm_main, admission::tinylfu);
}
template <class Policy>
using behind_admit_all = fc::admitted_policy<fc::admit_all, Policy>;
TEST(Admission, AdmitAllDecidesAsLru) { model_suite<behind_admit_all<fc::lru_policy>>(kind::lru, admission::none); }
TEST(Admission, AdmitAllDecidesAsSieve) { model_suite<behind_admit_all<fc::sieve_policy>>(kind::sieve, admission::none); }
TEST(Admission, AdmitAllDecidesAsS3Fifo) { model_suite<behind_admit_all<fc::s3fifo_policy>>(kind::s3fifo, admission::none); }
TEST(Admission, AdmitAllDecidesAsArc) { model_suite<behind_admit_all<fc::arc_policy>>(kind::arc, admission::none); }
TEST(Admission, AdmitAllDecidesAsLirs) { model_suite<behind_admit_all<fc::lirs_policy>>(kind::lirs, admission::none); }
TEST(Admission, AdmitAllDecidesAsTwoQueue) { model_suite<behind_admit_all<fc::two_queue_policy>>(kind::two_queue, admission::none); }

// ---- TinyLFU's rules, by their statement --------------------------------------------------
TEST(TinyLfuAdmission, AdmitsOnlyTheStrictlyMoreFrequentAndHalvesEvery32TimesTheCapacity) {
    fc::tinylfu_admission<exact_sketch> a(2);  // halves every 64 records
    const std::size_t x = 1, y = 2;
    a.record(x);
    EXPECT_FALSE(a.admit(x, x)) << "a tie refuses";
    EXPECT_TRUE(a.admit(x, y));
    EXPECT_FALSE(a.admit(y, x));
    for (int i = 0; i < 61; ++i) a.record(x);  // 62 records
    a.count(y);                                // counted, not a record: no halving yet
    a.record(y);                               // 63
    EXPECT_EQ(a.sketch().estimate(x), 62u);
    EXPECT_EQ(a.sketch().estimate(y), 2u);
    a.record(y);  // the 64th record halves
    EXPECT_EQ(a.sketch().estimate(x), 31u);
    EXPECT_EQ(a.sketch().estimate(y), 1u);
    a.set_aging_period(3);
    a.record(x);
    a.record(x);
    a.record(x);
    EXPECT_EQ(a.sketch().estimate(x), 17u) << "(31 + 3) / 2";
}

TEST(TinyLfuAdmission, SketchStartsAt65536EntriesAndGrowsWithTheEntriesHeld) {
    const std::size_t capacity = std::size_t{1} << 20;
    fc::tinylfu_admission<> a(capacity);
    EXPECT_EQ(a.sketch().capacity(), 65536u);
    a.record(7);
    a.hold(2 * 65536);
    EXPECT_EQ(a.sketch().capacity(), 65536u) << "twice its size is not past it";
    EXPECT_EQ(a.sketch().estimate(7), 1u);
    a.hold(1);  // the most held counts, not the latest
    a.hold(2 * 65536 + 1);
    EXPECT_EQ(a.sketch().capacity(), 4u * 65536 + 2) << "twice the entries held";
    EXPECT_EQ(a.sketch().estimate(7), 0u) << "resized: counts forgotten";
    a.hold(capacity + 5);
    EXPECT_EQ(a.sketch().capacity(), capacity) << "never past the capacity";
    EXPECT_EQ(fc::tinylfu_admission<>(10).sketch().capacity(), 10u);
    EXPECT_EQ(fc::tinylfu_admission<>(0).sketch().capacity(), 1u);
}

// ---- what admission buys ------------------------------------------------------------------
template <class Cache>
double loop_hit_ratio(int capacity, int loop) {
    Cache c(static_cast<std::size_t>(capacity));
    for (int pass = 0; pass < 20; ++pass)
        for (int k = 0; k < loop; ++k)
            if (c.get(k) == nullptr) c.put(k, k);
    return c.stats().hit_ratio();
}
template <class Policy>
using int_cache = fc::basic_cache<int, int, Policy>;

TEST(Admission, ACyclicScanLargerThanTheCacheKeepsHitting) {
    // Loops over 1.5 and 4 x the capacity, 20 passes: LRU and SIEVE never hit, S3-FIFO keeps a
    // part of the shorter loop. With TinyLFU in front a newcomer never beats a resident seen as
    // often, so the keys admitted in the first pass stay and hit in the 19 others: the bound
    // (capacity / loop) x 19 / 20, of which at least 90% is asked of the real sketch.
    for (int loop : {1500, 4000}) {
        SCOPED_TRACE(loop);
        const double kept = 0.9 * (1000.0 / loop) * 19 / 20;
        const double lru = loop_hit_ratio<int_cache<fc::lru_policy>>(1000, loop);
        const double sieve = loop_hit_ratio<int_cache<fc::sieve_policy>>(1000, loop);
        const double s3fifo = loop_hit_ratio<int_cache<fc::s3fifo_policy>>(1000, loop);
        EXPECT_EQ(lru, 0.0);
        EXPECT_EQ(sieve, 0.0);
        const double t_lru = loop_hit_ratio<int_cache<tinylfu<fc::lru_policy>>>(1000, loop);
        const double t_sieve = loop_hit_ratio<int_cache<tinylfu<fc::sieve_policy>>>(1000, loop);
        const double t_s3fifo = loop_hit_ratio<int_cache<tinylfu<fc::s3fifo_policy>>>(1000, loop);
        EXPECT_GT(t_lru, kept);
        EXPECT_GT(t_sieve, kept);
        EXPECT_GT(t_s3fifo, kept);
        EXPECT_GT(t_s3fifo, s3fifo);
    }
}

// 100 hot keys requested three times, then 1000 keys requested once each: the hot keys kept.
template <class Cache>
int hot_keys_kept(Cache& c) {
    const auto request = [&](int k) {
        if (c.get(k) == nullptr) c.put(k, k);
    };
    for (int k = 0; k < 300; ++k) request(k % 100);
    for (int k = 1000; k < 2000; ++k) request(k);
    int kept = 0;
    for (int k = 0; k < 100; ++k) kept += c.contains(k) ? 1 : 0;
    return kept;
}
TEST(Admission, HotKeysSurviveABurstOfOneTimeKeys) {
    fc::lru_cache<int, int> plain(100);
    EXPECT_EQ(hot_keys_kept(plain), 0);
    int_cache<tinylfu<fc::lru_policy>> lru(100);
    int_cache<tinylfu<fc::sieve_policy>> sieve(100);
    int_cache<tinylfu<fc::s3fifo_policy>> s3fifo(100);
    EXPECT_EQ(hot_keys_kept(lru), 100);
    EXPECT_EQ(hot_keys_kept(sieve), 100);
    EXPECT_EQ(hot_keys_kept(s3fifo), 100);
    EXPECT_EQ(lru.stats().evicted(eviction_reason::rejected), 1000u) << "every one-time key refused";
}

TEST(Admission, ARefusedKeyReachesTheCallbackAndEvictsNothing) {
    std::vector<std::pair<int, eviction_reason>> log;  // outlives the cache: its destructor reports
    fc::basic_cache<int, int, exact_tinylfu<fc::sieve_policy>> c(2);
    c.set_eviction_callback([&](const int& k, int&, eviction_reason r) { log.emplace_back(k, r); });
    ASSERT_EQ(c.put(1, 10), fc::put_result::inserted);
    ASSERT_NE(c.get(1), nullptr);
    ASSERT_EQ(c.put(2, 20), fc::put_result::inserted);  // room left: no comparison
    ASSERT_NE(c.get(2), nullptr);
    EXPECT_EQ(c.put(3, 30), fc::put_result::rejected);  // seen once, the victim (SIEVE's: 1) twice
    EXPECT_EQ(log, (std::vector<std::pair<int, eviction_reason>>{{3, eviction_reason::rejected}}));
    EXPECT_TRUE(c.contains(1) && c.contains(2));
    EXPECT_EQ(c.stats().insertions, 2u);
    EXPECT_EQ(c.put(3, 30), fc::put_result::rejected);  // twice: a tie
    EXPECT_EQ(c.put(3, 30), fc::put_result::inserted);  // three times beats two
    EXPECT_EQ(log.back(), std::make_pair(1, eviction_reason::capacity));
    EXPECT_TRUE(c.contains(2) && c.contains(3));
}

// A user's admission in a few lines: a key enters on its second sighting (a doorkeeper).
struct second_sighting {
    explicit second_sighting(std::size_t) {}
    void record(std::size_t h) { ++seen[h]; }
    bool admit(std::size_t candidate, std::size_t) { return seen[candidate] >= 2; }
    void hold(std::size_t) {}
    void set_capacity(std::size_t) {}
    std::unordered_map<std::size_t, int> seen;
};
static_assert(fc::admission_policy<second_sighting>);

TEST(Admission, AUserAdmissionPlugsIn) {
    fc::basic_cache<int, int, fc::admitted_policy<second_sighting, fc::lru_policy>> c(2);
    EXPECT_EQ(c.put(1, 1), fc::put_result::inserted);
    EXPECT_EQ(c.put(2, 2), fc::put_result::inserted);
    EXPECT_EQ(c.put(3, 3), fc::put_result::rejected) << "first sighting, and the cache is full";
    EXPECT_EQ(c.put(3, 3), fc::put_result::inserted);
    EXPECT_FALSE(c.contains(1)) << "LRU's victim";
}

// ---- the contract the composition relies on ---------------------------------------------
// victim() asked twice with nothing in between names the same entry, after any history.
template <class Policy>
void victim_is_stable(std::uint32_t seed) {
    using node = fc::detail::policy_probe_node<Policy>;
    std::vector<node> nodes(64);
    typename Policy::template state<node> s(20);
    std::mt19937 rng(seed);
    std::vector<bool> held(nodes.size(), false);
    for (int step = 0; step < 2000; ++step) {
        const std::size_t i = rng() % nodes.size();
        if (!held[i]) {
            nodes[i].hash = frugal::hash_mix(i);
            nodes[i].weight = 1 + rng() % 3;
            if constexpr (fc::expects_newcomers<decltype(s)>) s.expect(nodes[i].hash, nodes[i].weight);
            s.admit(nodes[i], 1.0);
            held[i] = true;
        } else if (rng() % 4 != 0) {
            s.touch(nodes[i]);
        }
        if (step % 3 == 0) {
            node* v = s.victim();
            ASSERT_NE(v, nullptr);
            ASSERT_EQ(s.victim(), v) << "step " << step;
            s.evict(*v);
            held[static_cast<std::size_t>(v - nodes.data())] = false;
        }
    }
    for (std::size_t i = 0; i < nodes.size(); ++i)
        if (held[i]) s.remove(nodes[i]);
}
template <class... Policies>
void victims_are_stable() {
    for (std::uint32_t seed = 1; seed <= 3; ++seed) (victim_is_stable<Policies>(seed), ...);
}
TEST(Admission, EveryPolicyNamesTheSameVictimWhenAskedTwice) {
    victims_are_stable<fc::lru_policy, fc::lfu_policy, fc::lfuda_policy, fc::gdsf_policy, fc::wtinylfu_policy<>,
                       fc::adaptive_wtinylfu_policy, fc::s3fifo_policy, fc::s3fifo_warm_main_policy, fc::sieve_policy,
                       fc::arc_policy, fc::lirs_policy, fc::two_queue_policy>();
}

TEST(Admission, S3FifoKeepsTheVictimItNamedWhenItsMovesOverfillTheMainQueue) {
    // Capacity 10: small share 1, main share 9. Twelve entries in the small queue, the first
    // ten hit twice: naming the victim moves those ten to the main queue (now over its share)
    // and names the eleventh; asked again, it is still the eleventh, not the main queue's head.
    using node = fc::detail::policy_probe_node<fc::s3fifo_policy>;
    std::vector<node> nodes(12);
    fc::s3fifo_policy::state<node> s(10);
    for (std::size_t i = 0; i < nodes.size(); ++i) {
        nodes[i].hash = i + 1;
        s.admit(nodes[i], 1.0);
    }
    for (std::size_t i = 0; i < 10; ++i) {
        s.touch(nodes[i]);
        s.touch(nodes[i]);
    }
    EXPECT_EQ(s.victim(), &nodes[10]);
    EXPECT_EQ(s.main_weight(), 10u);
    EXPECT_EQ(s.victim(), &nodes[10]);
    s.evict(nodes[10]);
    EXPECT_EQ(s.victim(), &nodes[0]) << "the next eviction chooses again: the main queue is over its share";
    for (node& n : nodes)
        if (&n != &nodes[10]) s.remove(n);
}

}  // namespace
