// The thread-safe QA bank under concurrent lookups, inserts, answers and erasures (run under
// TSan in the tsan preset): every hit returns the answer that was stored with its query.
#include <atomic>
#include <cstdint>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include <frugal/cache/semantic_cache.hpp>

namespace {

std::vector<float> embedding_of(int q) {
    std::vector<float> v(16, 0.0f);
    v[static_cast<std::size_t>(q) % 16] = 1.0f;
    v[static_cast<std::size_t>(q / 16) % 16] += 0.5f;
    return v;
}

TEST(SynchronizedSemanticCache, ConcurrentLookupsInsertsAndAnswersStayConsistent) {
    frugal::cache::synchronized_semantic_cache<std::string> bank(64, 16, 0.999);
    std::atomic<int> wrong{0};
    std::vector<std::thread> pool;
    for (int t = 0; t < 4; ++t)
        pool.emplace_back([&, t] {
            for (int i = 0; i < 3000; ++i) {
                const int q = (i * 7 + t * 13) % 200;
                const std::string text = "q" + std::to_string(q);
                if (auto h = bank.lookup(text, embedding_of(q))) {
                    if (h->exact && h->entry.query != text) ++wrong;
                    if (h->entry.answer && *h->entry.answer != "a" + h->entry.query.substr(1)) ++wrong;
                } else if (auto id = bank.insert(text, embedding_of(q))) {
                    bank.set_answer(*id, "a" + std::to_string(q));
                }
                if (i % 97 == 0) bank.erase(static_cast<std::uint64_t>(i));
            }
        });
    for (auto& th : pool) th.join();
    EXPECT_EQ(wrong.load(), 0);
    EXPECT_LE(bank.size(), 64u);
    // The bank still works after the storm: how many lookups hit during it depends on the
    // interleaving (a loaded machine can make it 0), so the oracle is this one, afterwards.
    const auto id = bank.insert("q-final", embedding_of(1000));
    ASSERT_TRUE(id.has_value());
    bank.set_answer(*id, "a-final");
    const auto h = bank.lookup("q-final", embedding_of(1000));
    ASSERT_TRUE(h.has_value());
    EXPECT_TRUE(h->exact);
    EXPECT_EQ(h->entry.answer, std::optional<std::string>("a-final"));
}

}  // namespace
