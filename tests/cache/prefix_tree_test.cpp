// prefix_tree against a brute-force reference (a map from full prefixes to nodes, every
// eviction by a scan over all leaves), pinning, budgets and persistence.
#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <cstring>
#include <string_view>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "frugal_test_errors.hpp"
#include "frugal_test_fixtures.hpp"

#include <frugal/cache/gdsf_policy.hpp>
#include <frugal/cache/lru_policy.hpp>
#include <frugal/cache/prefix_tree.hpp>
#include <frugal/core/hash.hpp>

#include "prefix_tree_model.hpp"
#include "temp_files.hpp"

namespace {

using kind = frugal::cache_model::tree_kind;
using frugal::cache_model::reference_tree;
using frugal::cache_model::seq;
using value = frugal::cache::chunk_value<int>;

using frugal::testing::error_of;

template <class Policy>
std::map<seq, int> contents_of(frugal::cache::prefix_tree<int, int, Policy>& tree, const std::vector<seq>& candidates) {
    std::map<seq, int> c;
    for (const auto& s : candidates) {
        auto m = tree.match(s);
        for (std::size_t i = 0; i < m.length(); ++i) c[seq(s.begin(), s.begin() + static_cast<long>(i) + 1)] = m.handle(i);
    }
    return c;
}

// Budget 60: a handful of nodes, constant eviction. Budget 1500 over 8 chunk ids: hundreds
// of nodes, so the node index grows, rehashes and reuses erased slots many times.
template <class Policy>
void run_against_reference(kind k, std::uint32_t seed, std::size_t budget = 60, int chunk_ids = 4) {
    SCOPED_TRACE(testing::Message() << "seed " << seed << " budget " << budget);
    std::vector<int> log;  // outlives the tree: its destructor reports
    frugal::cache::prefix_tree<int, int, Policy> tree{frugal::memory_budget(budget)};
    reference_tree ref(k, budget);
    tree.set_eviction_callback([&](const int&, int& handle, std::size_t) { log.push_back(handle); });
    std::mt19937 rng(seed);
    std::uniform_int_distribution<int> chunk(0, chunk_ids - 1), len(1, 6), bytes(1, 12), op(0, 9);
    int next_handle = 0;
    std::vector<std::pair<typename frugal::cache::prefix_tree<int, int, Policy>::prefix_match, std::vector<seq>>> held;
    std::vector<seq> seen;
    for (int step = 0; step < 1500; ++step) {
        seq s(static_cast<std::size_t>(len(rng)));
        for (auto& c : s) c = chunk(rng);
        seen.push_back(s);
        const int o = op(rng);
        if (o < 4) {
            std::vector<value> v(s.size());
            for (auto& x : v) x = value{next_handle++, static_cast<std::size_t>(bytes(rng)), double(1 + rng() % 3)};
            auto got = tree.insert(s, v);
            auto want = ref.insert(s, v);
            ASSERT_EQ(got.existing, want.first) << "step " << step;
            ASSERT_EQ(got.cached, want.second) << "step " << step;
        } else if (o < 8 || held.size() > 4) {
            if (!held.empty() && o >= 6) {
                const std::size_t i = rng() % held.size();
                held[i].first.release();
                ref.release(held[i].second);
                held.erase(held.begin() + static_cast<long>(i));
            } else {
                std::vector<seq> paths;
                const std::size_t want = ref.match(s, paths);
                auto m = tree.match(s);
                ASSERT_EQ(m.length(), want) << "step " << step;
                if (o < 6) {
                    held.emplace_back(std::move(m), paths);
                } else {
                    m.release();
                    ref.release(paths);
                }
            }
        }
        ASSERT_EQ(log, ref.log) << "step " << step;
        ASSERT_EQ(tree.bytes(), ref.bytes());
        if (held.empty()) {
            ASSERT_LE(tree.bytes(), tree.budget());
        }
    }
    for (auto& [m, paths] : held) {
        m.release();
        ref.release(paths);
    }
    EXPECT_GT(tree.evictions(), 50u) << "the sequence must exercise eviction";
    EXPECT_EQ(ref.contents(), contents_of(tree, seen));
}

TEST(PrefixTree, LfuMatchesReference) {
    for (std::uint32_t s = 1; s <= 4; ++s) run_against_reference<frugal::cache::lfu_policy>(kind::lfu, s);
    run_against_reference<frugal::cache::lfu_policy>(kind::lfu, 5, 1500, 8);
}
TEST(PrefixTree, LruMatchesReference) {
    for (std::uint32_t s = 1; s <= 4; ++s) run_against_reference<frugal::cache::lru_policy>(kind::lru, s);
    run_against_reference<frugal::cache::lru_policy>(kind::lru, 5, 1500, 8);
}
TEST(PrefixTree, GdsfMatchesReference) {
    for (std::uint32_t s = 1; s <= 4; ++s) run_against_reference<frugal::cache::gdsf_policy>(kind::gdsf, s);
    run_against_reference<frugal::cache::gdsf_policy>(kind::gdsf, 5, 1500, 8);
}

TEST(PrefixTree, LruRanksALeafByItsLastAccessAsSglangDoes) {
    // Oracle: SGLang's RadixCache rule, worked by hand: the victim is the evictable leaf whose
    // last access is oldest, and a parent left a leaf by an eviction keeps its own time.
    std::vector<int> evicted;
    frugal::cache::prefix_tree<int, int, frugal::cache::lru_policy> tree(frugal::memory_budget(4));
    tree.set_eviction_callback([&](const int&, int& h, std::size_t) { evicted.push_back(h); });
    ASSERT_EQ(tree.insert(seq{1, 2, 3}, std::vector<value>{{10, 1}, {11, 1}, {12, 1}}).cached, 3u);  // times 1-3
    ASSERT_EQ(tree.insert(seq{7}, std::vector<value>{{70, 1}}).cached, 1u);                          // time 4
    tree.match(seq{7}).release();                                                                  // 7: time 5
    tree.match(seq{1, 2, 3}).release();                                                            // 1-3: times 6-8
    tree.match(seq{7}).release();                                                                  // 7: time 9
    // {1,2,3} (8) is the oldest leaf; then {1,2} (7) and {1} (6), each left a leaf by the
    // eviction before it and older than {7} (9). Reattaching them as most recent would
    // evict {7} second.
    ASSERT_EQ(tree.insert(seq{8}, std::vector<value>{{80, 3}}).cached, 1u);
    EXPECT_EQ(evicted, (std::vector<int>{12, 11, 10}));
    EXPECT_EQ(tree.cached_length(seq{7}), 1u);
}

TEST(PrefixTree, PinnedPrefixSurvivesAndOnlyLeavesAreEvicted) {
    std::vector<int> evicted;  // outlives the tree: its destructor reports
    frugal::cache::prefix_tree<int, int> tree(frugal::memory_budget(10));
    const seq a{1, 2, 3};
    std::vector<value> v{{10, 3}, {11, 3}, {12, 3}};
    ASSERT_EQ(tree.insert(a, v).cached, 3u);
    auto m = tree.match(seq{1, 2});
    ASSERT_EQ(m.length(), 2u);
    tree.set_eviction_callback([&](const int&, int& h, std::size_t) { evicted.push_back(h); });
    // 9 bytes used, 6 pinned. A new branch of 2 x 3 bytes: only the leaf {1,2,3} can go.
    auto r = tree.insert(seq{7, 8}, std::vector<value>{{20, 3}, {21, 3}});
    EXPECT_EQ(r.cached, 1u) << "the second chunk does not fit beside the pinned prefix";
    EXPECT_EQ(evicted, std::vector<int>{12});
    EXPECT_EQ(m.handle(1), 11);
    m.release();
    EXPECT_THROW((void)m.handle(0), frugal::out_of_range);
    EXPECT_THROW(tree.insert(a, std::vector<value>{{1, 1}}), frugal::invalid_argument);
    EXPECT_THROW(tree.insert(seq{4}, std::vector<value>{{1, 0}}), frugal::invalid_argument);
}

TEST(PrefixTree, LargeTreeOnHugePageBlocksEvictsInOrderAndKeepsTheRest) {
    // 200k chunks: the node pool's blocks and the index grow past 2 MiB, onto huge pages.
    // Under LRU with distinct one-chunk sequences, the first 50k inserted are the ones
    // evicted, in insertion order; every other chunk stays findable.
    constexpr int total = 200000, kept = 150000;
    std::vector<int> evicted;  // outlives the tree: its destructor reports
    frugal::cache::prefix_tree<int, int, frugal::cache::lru_policy> tree{frugal::memory_budget(kept)};
    tree.set_eviction_callback([&](const int& id, int& handle, std::size_t) {
        EXPECT_EQ(id, handle);
        evicted.push_back(handle);
    });
    for (int i = 0; i < total; ++i) ASSERT_EQ(tree.insert(seq{i}, std::vector<value>{{i, 1}}).cached, 1u);
    ASSERT_EQ(evicted.size(), std::size_t{total - kept});
    for (int i = 0; i < total - kept; ++i) ASSERT_EQ(evicted[static_cast<std::size_t>(i)], i);
    EXPECT_EQ(tree.size(), std::size_t{kept});
    EXPECT_EQ(tree.bytes(), std::size_t{kept});
    for (int i = 0; i < total; i += 997) EXPECT_EQ(tree.cached_length(seq{i}), i < total - kept ? 0u : 1u) << i;
}

using PrefixTreeFiles = frugal::cache_model::temp_files;

TEST_F(PrefixTreeFiles, SaveLoadRoundTripsAndCorruptFilesAreClearErrors) {
    frugal::cache::prefix_tree<int, int> tree(frugal::memory_budget(1000));
    const std::vector<seq> seqs{{1, 2, 3}, {1, 2, 4}, {5}, {1, 6}};
    int h = 0;
    for (const auto& s : seqs) {
        std::vector<value> v;
        for (std::size_t i = 0; i < s.size(); ++i) v.push_back({h++, 5 + i, 2.0});
        tree.insert(s, v);
    }
    const auto file = dir / "index.bin";
    tree.save(file);
    EXPECT_FALSE(std::filesystem::exists(file.string() + ".tmp"));
    frugal::cache::prefix_tree<int, int> loaded(frugal::memory_budget(1000));
    loaded.load(file);
    EXPECT_EQ(loaded.size(), tree.size());
    EXPECT_EQ(loaded.bytes(), tree.bytes());
    EXPECT_EQ(contents_of(loaded, seqs), contents_of(tree, seqs));

    const std::string good = read(file);
    auto expect_corrupt = [&](const std::string& bytes, const char* what) {
        write(dir / "bad.bin", bytes);
        frugal::cache::prefix_tree<int, int> t(frugal::memory_budget(1000));
        t.insert(seq{9}, std::vector<value>{{99, 1}});
        EXPECT_THROW(t.load(dir / "bad.bin"), frugal::runtime_error) << what;
        EXPECT_EQ(t.size(), 1u) << what << ": a failed load leaves the tree unchanged";
    };
    expect_corrupt(good.substr(0, good.size() - 5), "truncated");
    std::string flipped = good;
    flipped[40] = static_cast<char>(flipped[40] ^ 0x5a);
    expect_corrupt(flipped, "flipped byte");
    std::string magic = good;
    magic[0] = 'X';
    expect_corrupt(magic, "bad magic");
    expect_corrupt("", "empty");
    frugal::cache::prefix_tree<int, int> small(frugal::memory_budget(10));
    EXPECT_THROW(small.load(file), frugal::runtime_error) << "over budget";
    frugal::cache::prefix_tree<int, std::uint64_t> wide(frugal::memory_budget(1000));
    EXPECT_THROW(wide.load(file), frugal::runtime_error) << "handle size differs";
    EXPECT_THROW(loaded.load(dir / "missing.bin"), frugal::runtime_error);
    try {  // a folder is not an index (it used to escape as std::ios_base::failure)
        loaded.load(dir);
        FAIL() << "a folder loaded";
    } catch (const frugal::runtime_error& e) {
        EXPECT_NE(std::string(e.what()).find("not a regular file"), std::string::npos) << e.what();
    }
}

TEST_F(PrefixTreeFiles, NamespacedTreesLoadWhatTheySave) {
    // Every chunk of a namespaced sequence carries its namespace; load used to refuse any
    // child with a namespace, so a saved multi-tenant tree could not be read back.
    frugal::cache::prefix_tree<int, int> tree(frugal::memory_budget(1000));
    const std::vector<seq> seqs{{1, 2, 3}, {1, 2, 4}, {5, 6}};
    int h = 0;
    for (const std::uint64_t ns : {0ull, 7ull, 0xffffffffffffull})
        for (const auto& s : seqs) {
            std::vector<value> v;
            for (std::size_t i = 0; i < s.size(); ++i) v.push_back({h++, 3, 1.0});
            tree.insert(s, v, ns);
        }
    tree.save(dir / "ns.bin");
    frugal::cache::prefix_tree<int, int> loaded(frugal::memory_budget(1000));
    loaded.load(dir / "ns.bin");
    EXPECT_EQ(loaded.size(), tree.size());
    for (const std::uint64_t ns : {0ull, 7ull, 0xffffffffffffull, 8ull})
        for (const auto& s : seqs) {
            EXPECT_EQ(loaded.cached_length(s, ns), tree.cached_length(s, ns)) << ns;
            auto a = loaded.match(s, ns), b = tree.match(s, ns);
            for (std::size_t i = 0; i < a.length(); ++i) EXPECT_EQ(a.handle(i), b.handle(i));
        }

    // A record whose namespace differs from its parent's, and a frequency an access could
    // wrap, with the checksum made valid again: both are corrupt files, named.
    const std::string good = read(dir / "ns.bin");
    constexpr std::size_t header = 28, record = 40 + 2 * sizeof(int);
    const auto rewrite = [&](std::size_t at, std::uint64_t value) {
        std::string bytes = good;
        std::memcpy(bytes.data() + at, &value, 8);
        const std::uint64_t sum = frugal::fnv1a(std::string_view(bytes).substr(0, bytes.size() - 8));
        std::memcpy(bytes.data() + bytes.size() - 8, &sum, 8);
        write(dir / "bad.bin", bytes);
    };
    std::size_t child = 0;  // the first record with a parent
    for (std::size_t i = 0;; ++i) {
        std::uint64_t parent = 0;
        std::memcpy(&parent, good.data() + header + i * record, 8);
        if (parent != ~std::uint64_t{0}) {
            child = i;
            break;
        }
    }
    std::uint64_t ns = 0;
    std::memcpy(&ns, good.data() + header + child * record + 8, 8);
    rewrite(header + child * record + 8, ns + 1);
    const auto ns_msg = error_of([&] { loaded.load(dir / "bad.bin"); });
    EXPECT_NE(ns_msg.find("has namespace key " + std::to_string(ns + 1)), std::string::npos) << ns_msg;
    rewrite(header + 40, ~std::uint64_t{0});
    const auto freq_msg = error_of([&] { loaded.load(dir / "bad.bin"); });
    EXPECT_NE(freq_msg.find("frequency 18446744073709551615"), std::string::npos) << freq_msg;
    EXPECT_EQ(loaded.size(), tree.size()) << "a failed load leaves the tree unchanged";
}

TEST(PrefixTree, ALockStaysWithTheTreeThatMadeIt) {
    // Adopting another tree's (released) lock let the lock outlive the tree it pinned: the
    // Python binding keeps a lock's maker alive, not the tree that adopted it.
    frugal::cache::prefix_tree<int, int> a(frugal::memory_budget(100)), b(frugal::memory_budget(100));
    b.insert(seq{1, 2, 3}, std::vector<value>{{1, 1}, {2, 1}, {3, 1}});
    auto m = b.match(seq{1, 2, 3});
    m.release();
    const std::vector<value> v{{4, 1}, {5, 1}, {6, 1}};
    const auto msg = error_of([&] { a.insert(m, seq{1, 2, 3}, v); });
    EXPECT_NE(msg.find("the lock belongs to another tree"), std::string::npos) << msg;
    EXPECT_EQ(a.size(), 0u);
    // Its own tree takes it back; a lock never used yet is anyone's.
    EXPECT_EQ(b.insert(m, seq{1, 2, 3, 4}, std::vector<value>{{1, 1}, {2, 1}, {3, 1}, {4, 1}}).cached, 4u);
    typename frugal::cache::prefix_tree<int, int>::prefix_match fresh;
    EXPECT_EQ(a.insert(fresh, seq{1}, std::vector<value>{{7, 1}}).cached, 1u);
}

// A file written by the build that defined format version 2 (tests/fixtures) loads into
// the same tree: every sequence's cached length, handles and namespace, and LFU's counts.
TEST(PrefixTreeFormat, ReadsAFileOfVersion2) {
    const auto fixture = frugal::testing::fixture_path("prefix_tree_v2.bin");
    const std::vector<seq> seqs{{1, 2, 3}, {1, 2, 4, 5}, {7}, {7, 8, 9, 10}};
    frugal::cache::prefix_tree<int, int> sample(frugal::memory_budget(1000));
    int h = 100;
    for (const std::uint64_t ns : {0ull, 42ull})
        for (const auto& s : seqs) {
            std::vector<value> v;
            for (std::size_t i = 0; i < s.size(); ++i) v.push_back({h++, 8 + i, 0.5 * double(i)});
            sample.insert(s, v, ns);
        }
    for (int i = 0; i < 3; ++i) (void)sample.match(seqs[1]);  // counts for LFU
    if (frugal::testing::writing_fixtures()) sample.save(fixture);
    frugal::cache::prefix_tree<int, int> loaded(frugal::memory_budget(1000));
    loaded.load(fixture);
    EXPECT_EQ(loaded.size(), sample.size());
    EXPECT_EQ(loaded.bytes(), sample.bytes());
    for (const std::uint64_t ns : {0ull, 42ull, 5ull})
        for (const auto& s : seqs) {
            auto a = loaded.match(s, ns), b = sample.match(s, ns);
            ASSERT_EQ(a.length(), b.length()) << ns;
            for (std::size_t i = 0; i < a.length(); ++i) EXPECT_EQ(a.handle(i), b.handle(i));
        }
    // The most accessed path outlives the others under pressure, as in the sample.
    for (auto* t : {&loaded, &sample}) {
        t->set_budget(frugal::memory_budget(8 + 9 + 10 + 11));
        EXPECT_EQ(t->cached_length(seqs[1]), 4u);
        EXPECT_EQ(t->size(), 4u);
    }
}

}  // namespace
