// The QA bank over a tier, on the disk tier (the Redis tests share one across processes).
// Oracles: the entries inserted (texts, answers, embeddings), which of them had answers,
// and records damaged or written by a bank of another shape behind the tier's back.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include <gtest/gtest.h>

#include <frugal/cache/disk_tier.hpp>
#include <frugal/cache/tiered_semantic_cache.hpp>

#include "temp_files.hpp"

namespace {

using namespace frugal::cache;

const tier_namespace answers{.model = "test-1b", .dtype = "answers", .layout = "text", .page_tokens = 1};
constexpr std::size_t dim = 16;

using bank_t = tiered_semantic_cache<disk_tier<>, std::string>;

// Query i: its text, a random unit-ish embedding, and its answer.
struct corpus {
    std::vector<std::string> texts, replies;
    std::vector<std::vector<float>> embeddings;
    explicit corpus(std::size_t n, std::uint32_t seed) {
        std::mt19937 rng(seed);
        std::normal_distribution<float> g;
        for (std::size_t i = 0; i < n; ++i) {
            texts.push_back("question " + std::to_string(i) + " of " + std::to_string(seed));
            replies.push_back("answer " + std::to_string(i * 7 + seed));
            embeddings.emplace_back(dim);
            for (auto& x : embeddings.back()) x = g(rng);
        }
    }
};

class TieredSemanticCache : public frugal::cache_model::temp_files {};

TEST_F(TieredSemanticCache, AnswersSurviveARestartAndUnansweredEntriesDoNot) {
    const corpus c(30, 1);
    {
        disk_tier<> tier(dir, answers, 1 << 20);
        bank_t bank(tier, answers, std::size_t{100}, dim, 0.95);
        for (std::size_t i = 0; i < 30; ++i)
            bank.insert(c.texts[i], c.embeddings[i], i < 20 ? std::optional(c.replies[i]) : std::nullopt);
        EXPECT_EQ(bank.stats().writes, 20u);
    }
    disk_tier<> tier(dir, answers, 1 << 20);  // a new process
    bank_t bank(tier, answers, std::size_t{100}, dim, 0.95);
    EXPECT_EQ(bank.restore(), 20u);
    EXPECT_EQ(bank.memory().size(), 20u);
    for (std::size_t i = 0; i < 30; ++i) {
        std::vector<float> near = c.embeddings[i];
        near[0] += 0.01f;  // a paraphrase: found by similarity, not by text
        const auto h = bank.lookup("a paraphrase of " + c.texts[i], near);
        if (i < 20) {
            ASSERT_TRUE(h && h->entry->answer) << i;
            EXPECT_EQ(*h->entry->answer, c.replies[i]);
            EXPECT_FALSE(h->exact);
        } else {
            EXPECT_FALSE(h) << i;
        }
    }
}

TEST_F(TieredSemanticCache, AnAnswerMemoryEvictedIsFoundInTheTierByItsText) {
    const corpus c(20, 2);
    disk_tier<> tier(dir, answers, 1 << 20);
    bank_t bank(tier, answers, std::size_t{5}, dim, 0.95);  // memory: 5 entries
    for (std::size_t i = 0; i < 20; ++i) bank.insert(c.texts[i], c.embeddings[i], c.replies[i]);
    ASSERT_EQ(bank.memory().size(), 5u);
    const auto h = bank.lookup(c.texts[0], c.embeddings[0]);
    ASSERT_TRUE(h && h->entry->answer);
    EXPECT_EQ(*h->entry->answer, c.replies[0]);
    EXPECT_TRUE(h->exact);
    EXPECT_EQ(bank.stats().tier_hits, 1u);
    EXPECT_FALSE(bank.lookup("never asked", corpus(1, 99).embeddings[0]).has_value());  // neither has it
    EXPECT_EQ(bank.stats().tier_hits, 1u);
}

TEST_F(TieredSemanticCache, SetAnswerWritesTheEntry) {
    const corpus c(3, 3);
    disk_tier<> tier(dir, answers, 1 << 20);
    bank_t bank(tier, answers, std::size_t{10}, dim, 0.95);
    const auto id = bank.insert(c.texts[0], c.embeddings[0]);  // prefill-only: not shared yet
    ASSERT_TRUE(id);
    EXPECT_FALSE(tier.read(answer_key(answers, c.texts[0])).has_value());
    EXPECT_TRUE(bank.set_answer(*id, c.replies[0]));
    disk_tier<> other_tier(dir, answers, 1 << 20);
    bank_t other(other_tier, answers, std::size_t{10}, dim, 0.95);
    const auto h = other.lookup(c.texts[0], c.embeddings[1]);
    ASSERT_TRUE(h && h->entry->answer);
    EXPECT_EQ(*h->entry->answer, c.replies[0]);
}

TEST_F(TieredSemanticCache, DamagedForeignOrMisshapenRecordsAreMisses) {
    const corpus c(4, 4);
    disk_tier<> tier(dir, answers, 1 << 20);
    {
        bank_t bank(tier, answers, std::size_t{10}, dim, 0.95);
        for (std::size_t i = 0; i < 3; ++i) bank.insert(c.texts[i], c.embeddings[i], c.replies[i]);
    }
    {  // a bank of another dimension on the same namespace writes text 3
        tiered_semantic_cache<disk_tier<>, std::string> wide(tier, answers, std::size_t{10}, dim * 2, 0.95);
        std::vector<float> e(dim * 2, 1.0f);
        wide.insert(c.texts[3], e, c.replies[3]);
    }
    std::string file = read(tier.path_of(answer_key(answers, c.texts[1])));
    file[file.size() / 2] ^= 0x40;  // flip a byte of text 1's record
    write(tier.path_of(answer_key(answers, c.texts[1])), file);

    bank_t bank(tier, answers, std::size_t{10}, dim, 0.95);
    EXPECT_EQ(bank.restore(), 2u);  // texts 0 and 2
    EXPECT_EQ(bank.stats().refused, 1u);  // text 3's shape (text 1's frame is refused by the tier itself)
    EXPECT_FALSE(bank.lookup(c.texts[1], std::vector<float>(dim, 1.0f)).has_value());
    EXPECT_FALSE(bank.lookup(c.texts[3], std::vector<float>(dim, 1.0f)).has_value());
    const auto h = bank.lookup(c.texts[2], c.embeddings[2]);
    ASSERT_TRUE(h && h->entry->answer);
    EXPECT_EQ(*h->entry->answer, c.replies[2]);
}

TEST_F(TieredSemanticCache, AStorageThatFailsKeepsTheAnswerInMemoryAndCountsTheFailure) {
    const corpus c(2, 6);
    disk_tier<> tier(dir, answers, 1 << 20);
    bank_t bank(tier, answers, std::size_t{10}, dim, 0.95);
    std::filesystem::remove_all(tier.directory());
    write(tier.directory(), "not a folder");  // every write now fails in the storage
    ASSERT_TRUE(bank.insert(c.texts[0], c.embeddings[0], c.replies[0]).has_value());
    EXPECT_EQ(bank.stats().writes, 0u);
    EXPECT_EQ(bank.stats().write_failures, 1u);
    const auto h = bank.lookup(c.texts[0], c.embeddings[1]);
    ASSERT_TRUE(h && h->entry->answer);
    EXPECT_EQ(*h->entry->answer, c.replies[0]);
}

TEST_F(TieredSemanticCache, AnotherNamespaceSeesNothing) {
    const corpus c(2, 5);
    tier_namespace other = answers;
    other.model = "test-8b";
    disk_tier<> tier(dir, answers, 1 << 20), other_tier(dir, other, 1 << 20);
    bank_t bank(tier, answers, std::size_t{10}, dim, 0.95), foreign(other_tier, other, std::size_t{10}, dim, 0.95);
    bank.insert(c.texts[0], c.embeddings[0], c.replies[0]);
    EXPECT_EQ(foreign.restore(), 0u);
    EXPECT_FALSE(foreign.lookup(c.texts[0], c.embeddings[0]).has_value());
    EXPECT_NE(answer_key(answers, c.texts[0]), answer_key(other, c.texts[0]));
    EXPECT_NE(answer_key(answers, ""), answer_key(answers, std::string(1, '\0')));
}

TEST_F(TieredSemanticCache, EveryCutOfAnEntryRecordIsRefused) {
    const corpus c(1, 6);
    disk_tier<> tier(dir, answers, 1 << 20);
    bank_t bank(tier, answers, std::size_t{10}, dim, 0.95);
    const auto id = bank.insert(c.texts[0], c.embeddings[0], c.replies[0], {1, 2, 3}, 0.5f);
    const std::string record = bank.memory().entry_record(*bank.memory().find(*id));
    const auto back = bank.memory().parse_entry_record(record);
    EXPECT_EQ(back.entry.query, c.texts[0]);
    EXPECT_EQ(back.entry.answer, c.replies[0]);
    EXPECT_EQ(back.entry.chunks, (std::vector<std::uint32_t>{1, 2, 3}));
    EXPECT_EQ(back.entry.refresh_floor, 0.5f);
    const auto unit = bank.memory().embedding(*bank.memory().find(*id));
    EXPECT_TRUE(std::equal(unit.begin(), unit.end(), back.embedding.begin(), back.embedding.end()));
    for (std::size_t cut = 0; cut < record.size(); ++cut)
        EXPECT_THROW((void)bank.memory().parse_entry_record(std::string_view(record).substr(0, cut)), frugal::runtime_error)
            << cut;
    EXPECT_THROW((void)bank.memory().parse_entry_record(record + "x"), frugal::runtime_error);
}

}  // namespace
