// hot_set against a brute-force recomputation from the full access history; the embedding
// row cache against the table file and an independent LRU simulation.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <list>
#include <map>
#include <random>
#include <set>
#include <vector>

#include <gtest/gtest.h>

#include <frugal/cache/embedding_row_cache.hpp>
#include <frugal/rag/hot_set.hpp>

#include "frugal_test_temp.hpp"

namespace {

TEST(HotSet, TopGcMatchesBruteForceDecayedCounts) {
    constexpr std::size_t gc = 5, period = 7;
    constexpr double decay = 0.6;
    frugal::rag::hot_set<int> hot(gc, period, decay);
    std::vector<std::pair<std::size_t, int>> history;  // (step, id)
    std::set<int> resident;
    std::mt19937 rng(4);
    std::size_t recomputations = 0;
    for (std::size_t step = 0; step < 400; ++step) {
        const int hot_base = static_cast<int>(step / 100) * 10;  // the hot spot shifts
        for (int a = 0; a < 6; ++a) {
            const int id = rng() % 3 == 0 ? static_cast<int>(rng() % 60) : hot_base + static_cast<int>(rng() % 8);
            hot.record(id);
            history.emplace_back(step, id);
        }
        const auto plan = hot.step();
        if ((step + 1) % period != 0) {
            ASSERT_FALSE(plan);
            continue;
        }
        ASSERT_TRUE(plan);
        ++recomputations;
        // Brute force: an access in period p weighs decay^(k - p) at recomputation k.
        const std::size_t k = step / period;
        std::map<int, double> f;
        for (auto [s, id] : history) f[id] += std::pow(decay, static_cast<double>(k - s / period));
        std::vector<std::pair<double, int>> ranked;
        for (auto [id, v] : f) ranked.emplace_back(v, id);
        std::sort(ranked.begin(), ranked.end(), [&](auto& a, auto& b) {
            if (std::abs(a.first - b.first) > 1e-9) return a.first > b.first;
            if (resident.count(a.second) != resident.count(b.second)) return resident.count(a.second) > 0;
            return a.second < b.second;
        });
        std::set<int> want;
        for (std::size_t i = 0; i < std::min(gc, ranked.size()); ++i) want.insert(ranked[i].second);
        std::set<int> after = resident;
        for (int id : plan->to_evict) ASSERT_EQ(after.erase(id), 1u) << "evicts a non-resident id " << id;
        for (int id : plan->to_load) ASSERT_TRUE(after.insert(id).second) << "loads a resident id " << id;
        ASSERT_EQ(after, want) << "recomputation " << k;
        for (int id : want) EXPECT_TRUE(hot.contains(id));
        resident = after;
    }
    EXPECT_EQ(recomputations, 400 / period);
    EXPECT_THROW(frugal::rag::hot_set<int>(0, 1, 0.5), frugal::invalid_argument);
    EXPECT_THROW(frugal::rag::hot_set<int>(1, 1, 1.5), frugal::invalid_argument);
}

class EmbeddingRows : public ::testing::Test {
protected:
    std::filesystem::path file = frugal::testing::temp_path_for_test("frugal_rows");
    void TearDown() override { std::filesystem::remove(file); }
    static float value(std::size_t r, std::size_t c) { return static_cast<float>(r) * 100.0f + static_cast<float>(c); }
    void write_table(std::size_t rows, std::size_t cols) {
        std::ofstream out(file, std::ios::binary);
        for (std::size_t r = 0; r < rows; ++r)
            for (std::size_t c = 0; c < cols; ++c) {
                const float v = value(r, c);
                out.write(reinterpret_cast<const char*>(&v), sizeof v);
            }
    }
};

TEST_F(EmbeddingRows, GatherReadsTheTableAndMissesLikeAnLru) {
    constexpr std::size_t rows = 500, cols = 6, capacity = 32;
    write_table(rows, cols);
    frugal::cache::embedding_row_cache cache(frugal::cache::row_file(file, cols), capacity);
    std::mt19937 rng(8);
    std::vector<std::int32_t> tokens(2000);
    for (auto& t : tokens) t = static_cast<std::int32_t>(rng() % 4 == 0 ? rng() % rows : rng() % 20);
    std::vector<float> out(tokens.size() * cols);
    cache.gather(std::span<const std::int32_t>(tokens), frugal::matrix_view<float>(out.data(), tokens.size(), cols));
    for (std::size_t i = 0; i < tokens.size(); ++i)
        for (std::size_t c = 0; c < cols; ++c) ASSERT_EQ(out[i * cols + c], value(static_cast<std::size_t>(tokens[i]), c));
    std::list<std::int32_t> lru;  // independent LRU count of misses
    std::uint64_t misses = 0;
    for (auto t : tokens) {
        auto it = std::find(lru.begin(), lru.end(), t);
        if (it != lru.end()) {
            lru.erase(it);
        } else {
            ++misses;
            if (lru.size() == capacity) lru.pop_front();
        }
        lru.push_back(t);
    }
    EXPECT_EQ(cache.reads(), misses);
    EXPECT_LT(cache.reads(), tokens.size() / 2);
    EXPECT_THROW((void)cache.row(rows), frugal::out_of_range);
    const std::vector<std::int32_t> bad{-1};
    std::vector<float> one(cols);
    EXPECT_THROW(cache.gather(std::span<const std::int32_t>(bad), frugal::matrix_view<float>(one.data(), 1, cols)),
                 frugal::out_of_range);
}

TEST_F(EmbeddingRows, RaggedFileIsAClearError) {
    write_table(3, 5);
    EXPECT_THROW(frugal::cache::row_file(file, 4), frugal::runtime_error);
    EXPECT_THROW(frugal::cache::row_file(file.string() + ".missing", 4), frugal::runtime_error);
}

}  // namespace
