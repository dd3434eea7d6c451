// The QA bank against a brute-force cosine search in double precision, the Eigen scan
// against the scalar one, and PerCache's scheduler work lists on hand-built banks.
#include <algorithm>
#include <cmath>
#include <map>
#include <cstdint>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "frugal_test_errors.hpp"
#include "frugal_test_fixtures.hpp"

#include <frugal/backend/eigen/similarity_scan.hpp>
#include <frugal/cache/percache_scheduler.hpp>
#include <frugal/cache/semantic_cache.hpp>

namespace {

std::vector<float> random_vector(std::mt19937& rng, std::size_t dim) {
    std::normal_distribution<float> d;
    std::vector<float> v(dim);
    for (auto& x : v) x = d(rng);
    return v;
}

double cosine(const std::vector<float>& a, const std::vector<float>& b) {
    double ab = 0, aa = 0, bb = 0;
    for (std::size_t i = 0; i < a.size(); ++i) {
        ab += double(a[i]) * b[i];
        aa += double(a[i]) * a[i];
        bb += double(b[i]) * b[i];
    }
    return ab / std::sqrt(aa * bb);
}

template <class Index>
void lookup_matches_brute_force() {
    constexpr std::size_t dim = 24;
    std::mt19937 rng(11);
    frugal::cache::semantic_cache<int, std::uint32_t, Index> bank(1000, 0.5, Index(dim));
    std::vector<std::vector<float>> stored;
    for (int i = 0; i < 200; ++i) {
        stored.push_back(random_vector(rng, dim));
        bank.insert("q" + std::to_string(i), stored.back(), i);
    }
    int hits = 0;
    for (int t = 0; t < 300; ++t) {
        // Queries near a stored vector (hits) or random (mostly misses).
        std::vector<float> q = random_vector(rng, dim);
        if (t % 2 == 0) {
            const auto& base = stored[rng() % stored.size()];
            for (std::size_t i = 0; i < dim; ++i) q[i] = base[i] + 0.6f * q[i];
        }
        std::size_t best = 0;
        double best_sim = -2;
        for (std::size_t i = 0; i < stored.size(); ++i)
            if (double s = cosine(q, stored[i]); s > best_sim) best_sim = s, best = i;
        const auto hit = bank.lookup("text that never matches", q);
        if (std::abs(best_sim - 0.5) < 1e-4) continue;  // too close to tau to judge in float
        ASSERT_EQ(hit.has_value(), best_sim >= 0.5) << "query " << t << " best cosine " << best_sim;
        if (hit) {
            ++hits;
            EXPECT_EQ(*hit->entry->answer, static_cast<int>(best));
            EXPECT_NEAR(hit->similarity, best_sim, 1e-4);
            EXPECT_FALSE(hit->exact);
        }
    }
    EXPECT_GT(hits, 100);
}

TEST(SemanticCache, LookupMatchesBruteForceCosine) { lookup_matches_brute_force<frugal::retrieve::flat_similarity_index<>>(); }
TEST(SemanticCache, EigenScanMatchesBruteForceCosine) { lookup_matches_brute_force<frugal::eigen::flat_similarity_index>(); }

TEST(SemanticCache, AnEmbeddingDimensionNoVectorCouldHoldIsNamed) {
    // It failed deep in std::vector ("cannot create std::vector larger than max_size()").
    const std::string msg = frugal::testing::error_of(
        [] { frugal::cache::semantic_cache<std::string> bank(8, std::size_t(1) << 62, 0.9); });
    EXPECT_NE(msg.find("embedding dimension 4611686018427387904 is outside [1, 1048576]"), std::string::npos) << msg;
}

TEST(SemanticCache, AnEmbeddingOfAnotherSizeOrNoDirectionIsRefusedOnEveryPath) {
    std::mt19937 rng(3);
    frugal::cache::semantic_cache<std::string> bank(4, 8, 0.9);
    bank.insert("known", random_vector(rng, 8));
    // "known" is found by its text, before the index is asked: the embedding is checked anyway.
    const std::string msg = frugal::testing::error_of([&] { (void)bank.lookup("known", std::vector<float>(7, 1.0f)); });
    EXPECT_NE(msg.find("semantic_cache::lookup: the embedding has 7 values, the bank's dimension is 8"), std::string::npos)
        << msg;
    EXPECT_THROW((void)bank.lookup("known", std::vector<float>(8, NAN)), frugal::invalid_argument);
    EXPECT_NE(frugal::testing::error_of([&] { bank.insert("new", std::vector<float>(9, 1.0f)); })
                  .find("semantic_cache::insert: the embedding has 9 values"),
              std::string::npos);
    EXPECT_EQ(bank.size(), 1u);
}

TEST(SemanticCache, ExactTextTauAndEviction) {
    std::mt19937 rng(2);
    frugal::cache::semantic_cache<std::string> bank(3, 8, 0.99);
    const auto a = random_vector(rng, 8), b = random_vector(rng, 8);
    const auto id = *bank.insert("what is my flight time", a);
    auto exact = bank.lookup("what is my flight time", b);  // different embedding, same text
    ASSERT_TRUE(exact);
    EXPECT_TRUE(exact->exact);
    EXPECT_FALSE(exact->entry->answer.has_value()) << "stored without an answer (prefill only)";
    EXPECT_TRUE(bank.set_answer(id, "9:40"));
    EXPECT_EQ(*bank.lookup("what is my flight time", b)->entry->answer, "9:40");
    // tau adjustable at runtime: a moderately similar query misses at 0.99, hits at -1.
    std::vector<float> near = a;
    near[0] += 1.5f;
    EXPECT_FALSE(bank.lookup("when do I fly", near));
    bank.set_tau(-1.0);
    EXPECT_TRUE(bank.lookup("when do I fly", near));
    EXPECT_THROW(bank.set_tau(1.5), frugal::invalid_argument);
    EXPECT_THROW((void)bank.lookup("x", std::vector<float>(8, 0.0f)), frugal::invalid_argument);
    EXPECT_THROW((void)bank.lookup("x", std::vector<float>(7, 1.0f)), frugal::invalid_argument);
    // Capacity 3 through the LRU core: the oldest unused entry goes, with its text and slot.
    bank.insert("b", b);
    bank.insert("c", random_vector(rng, 8));
    (void)bank.lookup("what is my flight time", a);  // touch
    bank.insert("d", random_vector(rng, 8));
    EXPECT_EQ(bank.size(), 3u);
    bank.set_tau(0.999);
    EXPECT_FALSE(bank.lookup("b", b)) << "'b' was least recently used: evicted with its text and vector";
    EXPECT_TRUE(bank.lookup("what is my flight time", a));
    EXPECT_FALSE(bank.set_answer(1, "gone"));
}

// The byte-budgeted bank against a brute-force model: a list of (text, bytes) in LRU order,
// bytes = 4 x dim + query + answer, every eviction the front of the list, an entry larger
// than the whole budget refused, setting an answer a replacement (one access, regrown).
TEST(SemanticCache, ByteBudgetMatchesBruteForceLru) {
    constexpr std::size_t dim = 4, budget = 400;
    struct model_entry {
        std::string text;
        std::size_t bytes;
    };
    std::vector<model_entry> model;  // least recently used first
    auto model_bytes = [&] {
        std::size_t t = 0;
        for (auto& e : model) t += e.bytes;
        return t;
    };
    auto model_find = [&](const std::string& t) {
        return std::find_if(model.begin(), model.end(), [&](const model_entry& e) { return e.text == t; });
    };
    // Adds (or re-adds) `text` as most recent after making room; false when refused.
    auto model_admit = [&](const std::string& text, std::size_t bytes) {
        if (bytes > budget) return false;
        while (model_bytes() + bytes > budget) model.erase(model.begin());
        model.push_back({text, bytes});
        return true;
    };

    frugal::cache::semantic_cache<std::string> bank(frugal::memory_budget(budget), dim, 0.999);
    std::map<std::string, frugal::cache::semantic_cache<std::string>::entry_id> ids;
    std::mt19937 rng(7);
    std::uniform_int_distribution<int> text_of(0, 11), length(0, 420), op(0, 9);
    int refused = 0;
    for (int step = 0; step < 3000; ++step) {
        const std::string text = "q" + std::to_string(text_of(rng));
        const auto vector = random_vector(rng, dim);
        const int o = op(rng);
        if (o < 4) {  // insert, replacing any entry with the same text
            const std::string answer(static_cast<std::size_t>(length(rng)), 'a');
            const std::size_t bytes = 4 * dim + text.size() + answer.size();
            if (auto it = model_find(text); it != model.end()) model.erase(it);
            const bool admitted = model_admit(text, bytes);
            refused += !admitted;
            const auto id = bank.insert(text, vector, answer);
            ASSERT_EQ(id.has_value(), admitted) << "step " << step;
            if (id) ids[text] = *id;
        } else if (o < 7) {  // exact-text lookup: a hit is an access
            auto it = model_find(text);
            const bool hit = it != model.end();
            if (hit) {
                const model_entry e = *it;
                model.erase(it);
                model.push_back(e);
            }
            ASSERT_EQ(bank.lookup(text, vector).has_value(), hit) << "step " << step;
        } else if (ids.count(text)) {  // set a new answer: the entry is replaced, regrown
            const std::string answer(static_cast<std::size_t>(length(rng)) * 2, 'b');
            auto it = model_find(text);
            bool stored = false;
            if (it != model.end()) {
                model.erase(it);
                stored = model_admit(text, 4 * dim + text.size() + answer.size());
            }
            refused += it != model.end() && !stored;
            ASSERT_EQ(bank.set_answer(ids[text], answer), stored) << "step " << step;
        }
        ASSERT_EQ(bank.weight(), model_bytes()) << "step " << step;
        ASSERT_LE(bank.weight(), budget);
        ASSERT_EQ(bank.size(), model.size());
    }
    for (const auto& e : model) EXPECT_TRUE(bank.lookup(e.text, random_vector(rng, dim))) << e.text;
    EXPECT_GT(refused, 10) << "answers up to 420 and 840 bytes: some entries exceed the 400-byte budget";
    EXPECT_GT(bank.stats().evicted(frugal::cache::eviction_reason::capacity), 100u);
}

TEST(PerCacheScheduler, PopulationStrategyFollowsTheCutoff) {
    EXPECT_EQ(frugal::cache::choose_population(0.90, 0.88), frugal::cache::population_strategy::prefill_only);
    EXPECT_EQ(frugal::cache::choose_population(0.85, 0.88), frugal::cache::population_strategy::prefill_and_decode);
    EXPECT_EQ(frugal::cache::choose_population(0.88, 0.88), frugal::cache::population_strategy::prefill_and_decode);
    EXPECT_THROW((void)frugal::cache::choose_population(NAN, 0.88), frugal::invalid_argument);
}

TEST(PerCacheScheduler, ConversionAndRefreshWorkLists) {
    using bank_type = frugal::cache::semantic_cache<std::string, std::uint32_t>;
    bank_type bank(10, 2, 0.9);
    const std::vector<float> x{1, 0}, y{0, 1}, xy{1, 1};
    const auto q0 = *bank.insert("q0", x, std::nullopt, {1, 2}, 0.8f);
    const auto q1 = *bank.insert("q1", y, std::string("a1"), {1, 3}, 0.95f);
    const auto q2 = *bank.insert("q2", xy, std::nullopt, {4}, 2.0f);
    EXPECT_EQ(frugal::cache::decode_worklist(bank), (std::vector<bank_type::entry_id>{q0, q2}));

    // Knowledge bank holds chunk sequence {1, 2} only, 10 of 16 bytes used, 4 bytes per chunk.
    frugal::cache::prefix_tree<std::uint32_t, int> tree(frugal::memory_budget(16));
    tree.insert(std::vector<std::uint32_t>{1, 2},
                std::vector<frugal::cache::chunk_value<int>>{{0, 5}, {1, 5}});
    auto bytes = [](std::uint32_t) { return 4; };
    // q0 is complete; q1 misses chunk 3 (4 bytes), q2 misses chunk 4 (4 bytes): 6 free bytes.
    EXPECT_EQ(frugal::cache::reprefill_worklist(bank, tree, bytes), (std::vector<bank_type::entry_id>{q1}));
    tree.set_budget(frugal::memory_budget(18));
    EXPECT_EQ(frugal::cache::reprefill_worklist(bank, tree, bytes), (std::vector<bank_type::entry_id>{q1, q2}));

    // A new chunk along x: cosine 1 with q0 (> 0.8), 0 with q1, 0.707 with q2 (< 2).
    const std::vector<float> chunks{3, 0, 0, -2};
    EXPECT_EQ(frugal::cache::refresh_worklist(bank, frugal::matrix_view<const float>(chunks.data(), 2, 2)),
              (std::vector<bank_type::entry_id>{q0}));

    std::vector<std::string> populated;
    const auto n = frugal::cache::populate_predicted(
        [](std::size_t stride) { return std::vector<std::string>(stride + 2, "p"); }, 3,
        frugal::cache::population_strategy::prefill_only,
        [&](const std::string& q, frugal::cache::population_strategy s) {
            EXPECT_EQ(s, frugal::cache::population_strategy::prefill_only);
            populated.push_back(q);
        });
    EXPECT_EQ(n, 3u);
    EXPECT_EQ(populated.size(), 3u);
    EXPECT_THROW(frugal::cache::populate_predicted([](std::size_t) { return std::vector<int>{}; }, 0,
                                            frugal::cache::population_strategy::prefill_only, [](int, auto) {}),
                 frugal::invalid_argument);
}

// A file written by the build that defined format version 1 (tests/fixtures) loads into
// the same bank: texts, answers, chunk ids, refresh floors and embeddings.
TEST(SemanticCacheFormat, ReadsAFileOfVersion1) {
    const auto fixture = frugal::testing::fixture_path("semantic_cache_v1.bin");
    using bank_t = frugal::cache::semantic_cache<std::string>;
    bank_t sample(10, 4, 0.9);
    for (int i = 0; i < 6; ++i) {
        const std::vector<float> e{float(i + 1), float(i % 3), 1.0f, -float(i)};
        sample.insert("question " + std::to_string(i), e,
                      i % 2 == 0 ? std::optional<std::string>("answer " + std::to_string(i)) : std::nullopt,
                      std::vector<std::uint32_t>(std::size_t(i), std::uint32_t(i * 11)), 0.25f * float(i));
    }
    if (frugal::testing::writing_fixtures()) sample.save(fixture);
    bank_t loaded(10, 4, 0.9);
    loaded.load(fixture);
    ASSERT_EQ(loaded.size(), sample.size());
    std::map<std::string, const bank_t::entry_type*> by_text;
    loaded.for_each([&](const bank_t::entry_id&, const bank_t::entry_type& e) { by_text[e.query] = &e; });
    sample.for_each([&](const bank_t::entry_id&, const bank_t::entry_type& e) {
        const auto* l = by_text.at(e.query);
        EXPECT_EQ(l->answer, e.answer);
        EXPECT_EQ(l->chunks, e.chunks);
        EXPECT_EQ(l->refresh_floor, e.refresh_floor);
        const auto a = loaded.embedding(*l), b = sample.embedding(e);
        EXPECT_TRUE(std::equal(a.begin(), a.end(), b.begin(), b.end())) << e.query;
    });
}

}  // namespace
