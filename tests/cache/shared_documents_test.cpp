// Token sequences shared between replicas through the disk tier (the Redis tests share them
// across processes). Oracles: the sequences each replica published, by content; records of
// another token type, damaged, or under a key their tokens do not hash to.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <span>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include <frugal/cache/disk_tier.hpp>
#include <frugal/cache/shared_documents.hpp>

#include "temp_files.hpp"

namespace {

using namespace frugal::cache;
using seq = std::vector<int>;

const tier_namespace outputs{.model = "test-1b", .dtype = "tokens", .layout = "outputs", .page_tokens = 1};

class SharedDocuments : public frugal::cache_model::temp_files {};

std::multiset<seq> pull_all(shared_documents<disk_tier<>, int>& s) {
    std::multiset<seq> got;
    s.pull([&](std::span<const int> d) { got.emplace(d.begin(), d.end()); });
    return got;
}

TEST_F(SharedDocuments, EachReplicaPullsEveryOtherReplicasOutputsOnce) {
    constexpr std::size_t replicas = 3;
    std::vector<std::unique_ptr<disk_tier<>>> tiers;
    std::vector<std::unique_ptr<shared_documents<disk_tier<>, int>>> shared;
    for (std::size_t r = 0; r < replicas; ++r) {
        tiers.push_back(std::make_unique<disk_tier<>>(dir, outputs, 1 << 22));
        shared.push_back(std::make_unique<shared_documents<disk_tier<>, int>>(*tiers[r], outputs));
    }
    std::mt19937 rng(3);
    std::vector<std::set<seq>> own(replicas);  // what each replica produced (a set: content-addressed)
    auto produce = [&](std::size_t count) {
        for (std::size_t i = 0; i < count; ++i) {
            seq s(1 + rng() % 200);
            for (int& t : s) t = static_cast<int>(rng() % 50) - 10;  // negative ids too
            if (i % 7 == 0) s = {1, 2, 3};  // the same output from several replicas: stored once
            const std::size_t r = rng() % replicas;
            shared[r]->publish(s);
            own[r].insert(s);
        }
    };
    produce(60);
    std::vector<std::set<seq>> pulled(replicas);
    for (std::size_t r = 0; r < replicas; ++r) {
        std::set<seq> want;  // the others' outputs that it did not produce itself
        for (std::size_t o = 0; o < replicas; ++o)
            if (o != r)
                for (const seq& s : own[o])
                    if (!own[r].contains(s)) want.insert(s);
        const std::multiset<seq> got = pull_all(*shared[r]);
        EXPECT_EQ(std::set<seq>(got.begin(), got.end()), want) << "replica " << r;
        EXPECT_EQ(got.size(), want.size()) << "each once";
        EXPECT_TRUE(pull_all(*shared[r]).empty()) << "a second pull finds nothing new";
        pulled[r] = want;
    }
    produce(20);  // then only what is new arrives
    for (std::size_t r = 0; r < replicas; ++r) {
        std::set<seq> want;
        for (std::size_t o = 0; o < replicas; ++o)
            if (o != r)
                for (const seq& s : own[o])
                    if (!own[r].contains(s) && !pulled[r].contains(s)) want.insert(s);
        const std::multiset<seq> got = pull_all(*shared[r]);
        EXPECT_EQ(std::set<seq>(got.begin(), got.end()), want) << "replica " << r;
        EXPECT_EQ(got.size(), want.size());
        EXPECT_EQ(shared[r]->stats().refused, 0u);
    }
    shared[0]->publish(std::span<const int>());  // nothing to share
    EXPECT_TRUE(pull_all(*shared[1]).empty());
}

TEST_F(SharedDocuments, ForeignDamagedOrMiskeyedRecordsAreSkipped) {
    disk_tier<> tier(dir, outputs, 1 << 20);
    shared_documents<disk_tier<>, int> reader(tier, outputs);
    disk_tier<> writer_tier(dir, outputs, 1 << 20);
    shared_documents<disk_tier<>, int> writer(writer_tier, outputs);
    shared_documents<disk_tier<>, std::int64_t> wide(writer_tier, outputs);  // another token type
    const seq a{5, 6, 7}, b{8, 9, 10, 11}, c{12};
    writer.publish(a);
    writer.publish(b);
    const std::vector<std::int64_t> w{1, 2, 3};
    wide.publish(w);
    // A record of a valid shape stored under a key its tokens do not hash to.
    const tier_key wrong = chained_page_keys(std::span<const int>(c), 1, 12345).front();
    std::string record(16 + sizeof(int), '\0');
    const std::uint32_t head[2] = {sizeof(int), 1};
    const std::uint64_t count = 1;
    std::memcpy(record.data(), head, 8);
    std::memcpy(record.data() + 8, &count, 8);
    std::memcpy(record.data() + 16, c.data(), sizeof(int));
    const auto value = std::as_bytes(std::span(record));
    writer_tier.put({&wrong, 1}, {&value, 1});
    // b's file damaged behind the tier's back.
    const auto b_key = chained_page_keys(std::span<const int>(b), b.size(), outputs.id()).front();
    std::string file = read(tier.path_of(b_key));
    file[file.size() - 10] ^= 0x01;
    write(tier.path_of(b_key), file);

    std::vector<seq> got;
    EXPECT_EQ(reader.pull([&](std::span<const int> d) { got.emplace_back(d.begin(), d.end()); }), 1u);
    EXPECT_EQ(got, std::vector<seq>{a});
    EXPECT_EQ(reader.stats().refused, 3u);  // the int64 record, the miskeyed one, b's damaged file
    EXPECT_EQ(reader.stats().pulled, 1u);
    EXPECT_EQ(reader.pull([](std::span<const int>) {}), 0u) << "a refused record is not read again";
}

TEST_F(SharedDocuments, EveryCutOrChangedHeaderByteOfARecordIsRefused) {
    disk_tier<> tier(dir, outputs, 1 << 20);
    const seq doc{3, 1, 4, 1, 5, 9, 2, 6};
    const tier_key key = chained_page_keys(std::span<const int>(doc), doc.size(), outputs.id()).front();
    {
        disk_tier<> writer_tier(dir, outputs, 1 << 20);
        shared_documents<disk_tier<>, int>(writer_tier, outputs).publish(doc);
    }
    const std::string whole = *tier.read(key);
    ASSERT_EQ(whole.size(), 16 + doc.size() * sizeof(int));
    auto pulled_after_writing = [&](const std::string& record) {
        const auto value = std::as_bytes(std::span(record));
        std::filesystem::remove(tier.path_of(key));
        tier.put({&key, 1}, {&value, 1});  // a well-framed record of these bytes
        shared_documents<disk_tier<>, int> reader(tier, outputs);
        std::vector<seq> got;
        reader.pull([&](std::span<const int> d) { got.emplace_back(d.begin(), d.end()); });
        return got;
    };
    EXPECT_EQ(pulled_after_writing(whole), std::vector<seq>{doc});
    for (std::size_t n = 0; n < whole.size(); ++n)
        EXPECT_TRUE(pulled_after_writing(whole.substr(0, n)).empty()) << "cut at " << n;
    for (std::size_t at = 0; at < 16; ++at) {
        std::string changed = whole;
        changed[at] = static_cast<char>(changed[at] ^ 0x01);
        EXPECT_TRUE(pulled_after_writing(changed).empty()) << "header byte " << at;
    }
    std::string other_tokens = whole;
    other_tokens[16] = static_cast<char>(other_tokens[16] ^ 0x01);  // a valid shape, another sequence
    EXPECT_TRUE(pulled_after_writing(other_tokens).empty());
}

TEST_F(SharedDocuments, AStorageThatFailsCountsWriteFailuresAndThrowsNothing) {
    disk_tier<> tier(dir, outputs, 1 << 20);
    shared_documents<disk_tier<>, int> shared(tier, outputs);
    shared.publish(seq{1, 2, 3});
    // The namespace's folder becomes a file: every later write fails in the storage.
    std::filesystem::remove_all(tier.directory());
    write(tier.directory(), "not a folder");
    EXPECT_NO_THROW(shared.publish(seq{4, 5, 6}));
    EXPECT_EQ(shared.stats().published, 1u);
    EXPECT_EQ(shared.stats().write_failures, 1u);
}

}  // namespace
