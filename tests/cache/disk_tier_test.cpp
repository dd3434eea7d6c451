// The disk tier. Oracles: the bytes put (round trips), an LRU model of which files remain
// under the budget, damaged files read as misses (never wrong data), a writer killed with
// SIGKILL in the middle of its writes (every file left is whole), and a second process
// reading what the first wrote.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <random>
#include <span>
#include <string>
#include <vector>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <frugal/cache/disk_tier.hpp>
#include <frugal/core/record_frame.hpp>

#include "frugal_test_errors.hpp"
#include "temp_files.hpp"

namespace {

using namespace frugal::cache;
using frugal::testing::error_of;

const tier_namespace ns{.model = "test-1b", .dtype = "bf16", .layout = "nhd", .page_tokens = 4};

struct pages {
    std::vector<std::vector<std::byte>> data;
    std::vector<std::span<const std::byte>> views() const {
        std::vector<std::span<const std::byte>> v;
        for (const auto& d : data) v.emplace_back(d);
        return v;
    }
};
pages make_pages(std::size_t n, std::size_t bytes, std::uint32_t seed) {
    std::mt19937 rng(seed);
    pages p;
    for (std::size_t i = 0; i < n; ++i) {
        p.data.emplace_back(bytes);
        for (auto& b : p.data.back()) b = std::byte(rng());
    }
    return p;
}
std::vector<tier_key> keys_for(std::size_t chunks, int salt) {
    std::vector<int> tokens;
    for (std::size_t i = 0; i < chunks * ns.page_tokens; ++i) tokens.push_back(static_cast<int>(i * 7 + salt));
    return chunk_keys<int>(ns, tokens);
}

using DiskTier = frugal::cache_model::temp_files;

TEST(ChunkKeys, ChainedOverThePrefixAndTheNamespace) {
    const std::vector<int> a{1, 2, 3, 4, 5, 6, 7, 8, 9}, b{1, 2, 3, 4, 5, 6, 7, 9};
    const auto ka = chunk_keys<int>(ns, a), kb = chunk_keys<int>(ns, b);
    ASSERT_EQ(ka.size(), 2u);  // the partial third chunk has no key
    ASSERT_EQ(kb.size(), 2u);
    EXPECT_EQ(ka[0], kb[0]);   // the same first chunk
    EXPECT_NE(ka[1], kb[1]);   // a different second one
    const std::vector<int> c{9, 9, 9, 9, 5, 6, 7, 8};
    EXPECT_NE(chunk_keys<int>(ns, c)[1], ka[1]);  // the same chunk after another parent
    tier_namespace other = ns;
    other.dtype = "fp16";
    EXPECT_NE(chunk_keys<int>(other, a)[0], ka[0]);
    EXPECT_NE(error_of([] { (void)chunk_keys<int>(tier_namespace{}, std::vector<int>{1}); }).find("page_tokens"),
              std::string::npos);
}

TEST_F(DiskTier, RoundTripsAndLoadsTheLongestRun) {
    disk_tier<> tier(dir, ns, 1 << 20);
    const auto keys = keys_for(6, 0);
    const auto p = make_pages(6, 1000, 1);
    const auto views = p.views();
    tier.put(std::span(keys).first(4), std::span(views).first(4));
    EXPECT_EQ(tier.exists_prefix(keys), 4u);
    std::vector<std::vector<std::byte>> got(6, std::vector<std::byte>(1000));
    std::vector<std::span<std::byte>> out(got.begin(), got.end());
    EXPECT_EQ(tier.get(keys, out), 4u);
    for (std::size_t i = 0; i < 4; ++i) EXPECT_EQ(got[i], p.data[i]) << i;
    // A hole ends the run: chunk 5 alone is not reachable past the missing 4.
    tier.put(std::span(keys).subspan(5, 1), std::span(views).subspan(5, 1));
    EXPECT_EQ(tier.exists_prefix(keys), 4u);
    // A buffer of another size is a miss, not a partial read.
    std::vector<std::byte> small(999);
    const std::vector<std::span<std::byte>> wrong{small};
    EXPECT_EQ(tier.get(std::span(keys).first(1), wrong), 0u);
    // Reopened, the files are adopted and read back.
    disk_tier<> again(dir, ns, 1 << 20);
    EXPECT_EQ(again.size(), 5u);
    EXPECT_EQ(again.get(keys, out), 4u);
    EXPECT_EQ(got[3], p.data[3]);
    // Another namespace sees none of them.
    tier_namespace other = ns;
    other.model = "test-8b";
    disk_tier<> foreign(dir, other, 1 << 20);
    EXPECT_EQ(foreign.exists_prefix(keys), 0u);
}

TEST_F(DiskTier, KeepsTheBudgetByItsPolicy) {
    const std::size_t frame = frugal::record_header::bytes + 1000 + frugal::record_header::checksum_bytes;
    disk_tier<lru_policy> tier(dir, ns, 3 * frame);
    const auto keys = keys_for(5, 1);
    const auto p = make_pages(5, 1000, 2);
    const auto views = p.views();
    std::vector<std::byte> buf(1000);
    const std::vector<std::span<std::byte>> one{buf};
    for (std::size_t i = 0; i < 3; ++i) tier.put(std::span(keys).subspan(i, 1), std::span(views).subspan(i, 1));
    ASSERT_EQ(tier.get(std::span(keys).first(1), one), 1u);  // 0 becomes the most recent
    tier.put(std::span(keys).subspan(3, 1), std::span(views).subspan(3, 1));  // evicts 1, the LRU
    tier.put(std::span(keys).subspan(4, 1), std::span(views).subspan(4, 1));  // evicts 2
    EXPECT_EQ(tier.size(), 3u);
    EXPECT_LE(tier.bytes(), 3 * frame);
    for (std::size_t i = 0; i < 5; ++i)
        EXPECT_EQ(std::filesystem::exists(tier.path_of(keys[i])), i == 0 || i >= 3) << i;
    EXPECT_EQ(tier.stats().evictions, 2u);
    const auto puts = tier.stats().puts;
    tier.put(std::span(keys).first(1), std::span(views).first(1));  // an existing key keeps its file
    EXPECT_EQ(tier.stats().puts, puts);
    const std::vector<std::byte> huge(4 * frame);
    const std::vector<std::span<const std::byte>> too_big{huge};
    EXPECT_NE(error_of([&] { tier.put(std::span(keys).first(1), too_big); }).find("does not fit the budget"), std::string::npos);
    EXPECT_NE(error_of([&] { tier.put(keys, too_big); }).find("5 keys but 1 values"), std::string::npos);
    EXPECT_NE(error_of([&] { disk_tier<> zero(dir, ns, 0); }).find("byte_budget must be > 0"), std::string::npos);
}

TEST_F(DiskTier, DamagedOrForeignFilesAreMissesNeverWrongData) {
    disk_tier<> tier(dir, ns, 1 << 20);
    const auto keys = keys_for(1, 2);
    const auto p = make_pages(1, 512, 3);
    std::vector<std::byte> got(512);
    const std::vector<std::span<std::byte>> out{got};
    const auto path = tier.path_of(keys[0]);
    auto put_fresh = [&] {
        std::filesystem::remove(path);
        tier.put(keys, p.views());
        return read(path);
    };
    const std::string good = put_fresh();
    // Truncated, a flipped payload byte, a flipped checksum byte, another key's frame.
    std::string truncated = good.substr(0, good.size() - 3), flipped = good, bad_sum = good, foreign = good;
    flipped[frugal::record_header::bytes + 100] ^= 1;
    bad_sum[good.size() - 1] ^= 1;
    foreign[20] ^= 1;  // inside key_high
    for (const std::string& damaged : {truncated, flipped, bad_sum, foreign, good + "x", std::string("FRKV")}) {
        put_fresh();
        write(path, damaged);
        const auto refused = tier.stats().refused;
        EXPECT_EQ(tier.get(keys, out), 0u);
        EXPECT_EQ(tier.stats().refused, refused + 1);
        EXPECT_FALSE(std::filesystem::exists(path));  // deleted: it can never become whole
    }
    put_fresh();
    ASSERT_EQ(tier.get(keys, out), 1u);
    EXPECT_EQ(got, p.data[0]);
}

TEST_F(DiskTier, AWriterKilledMidWriteLeavesOnlyWholeEntries) {
    const auto keys = keys_for(400, 3);
    const auto p = make_pages(1, 64 << 10, 4);
    for (int round = 0; round < 3; ++round) {
        std::filesystem::remove_all(dir);
        const pid_t child = fork();
        ASSERT_GE(child, 0);
        if (child == 0) {
            disk_tier<> writer(dir, ns, std::size_t{1} << 30, round == 2);
            for (const auto& k : keys) writer.put(std::span(&k, 1), p.views());
            _exit(0);
        }
        usleep(static_cast<useconds_t>(20000 + 15000 * round));
        kill(child, SIGKILL);
        int status = 0;
        waitpid(child, &status, 0);
        disk_tier<> reader(dir, ns, std::size_t{1} << 30);  // also removes the dead writer's temporary file
        std::vector<std::byte> got(64 << 10);
        const std::vector<std::span<std::byte>> out{got};
        std::size_t whole = 0;
        for (const auto& k : keys) {
            if (!std::filesystem::exists(reader.path_of(k))) continue;
            ASSERT_EQ(reader.get(std::span(&k, 1), out), 1u) << "round " << round;
            ASSERT_EQ(got, p.data[0]);
            ++whole;
        }
        EXPECT_EQ(reader.stats().refused, 0u);
        EXPECT_EQ(whole, reader.size());
        for (auto it = std::filesystem::recursive_directory_iterator(dir); it != std::filesystem::recursive_directory_iterator(); ++it)
            EXPECT_EQ(it->path().string().find(".tmp."), std::string::npos) << it->path();
    }
}

TEST_F(DiskTier, TwoProcessesShareTheDirectory) {
    const auto keys = keys_for(8, 4);
    const auto p = make_pages(8, 4096, 5);
    const pid_t child = fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
        disk_tier<> writer(dir, ns, 1 << 20);
        writer.put(keys, p.views());
        _exit(0);
    }
    int status = 0;
    waitpid(child, &status, 0);
    ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    disk_tier<> reader(dir, ns, 1 << 20);
    std::vector<std::vector<std::byte>> got(8, std::vector<std::byte>(4096));
    std::vector<std::span<std::byte>> out(got.begin(), got.end());
    EXPECT_EQ(reader.exists_prefix(keys), 8u);
    EXPECT_EQ(reader.get(keys, out), 8u);
    for (std::size_t i = 0; i < 8; ++i) EXPECT_EQ(got[i], p.data[i]);
}

TEST(RecordFrame, ChecksumSeesEveryByteAndTheLength) {
    std::vector<std::byte> bytes(1000);
    const auto base = frugal::checksum64(bytes);
    for (std::size_t i : {std::size_t{0}, std::size_t{31}, std::size_t{32}, std::size_t{999}}) {
        auto changed = bytes;
        changed[i] = std::byte{1};
        EXPECT_NE(frugal::checksum64(changed), base) << i;
    }
    EXPECT_NE(frugal::checksum64(std::span(bytes).first(999)), base);
}

TEST(RecordFrame, CheckFrameTellsWholeForeignOtherLengthAndDamaged) {
    using frugal::frame_status;
    const frugal::record_header want{.magic = {'T', 'E', 'S', 'T'}, .version = 3, .space = 7, .key_high = 1, .key_low = 2};
    std::vector<std::byte> payload(300);
    for (std::size_t i = 0; i < payload.size(); ++i) payload[i] = std::byte(i * 7);
    const std::string frame = frugal::frame_record(want, payload);
    const auto bytes = std::as_bytes(std::span(frame));
    EXPECT_EQ(frugal::check_frame(bytes, want), frame_status::whole);
    EXPECT_EQ(frugal::check_frame(bytes, want, 300), frame_status::whole);
    EXPECT_EQ(frugal::check_frame(bytes, want, 299), frame_status::other_length);
    std::vector<frugal::record_header> others(4, want);
    others[0].version = 4;
    others[1].space = 8;
    others[2].key_low = 3;
    others[3].magic[0] = 'X';
    for (std::size_t i = 0; i < others.size(); ++i)
        EXPECT_EQ(frugal::check_frame(bytes, others[i]), frame_status::foreign) << i;
    for (std::size_t cut = 0; cut < frame.size(); cut += 13) {
        const auto status = frugal::check_frame(bytes.first(cut), want);
        EXPECT_TRUE(status == (cut < frugal::record_header::bytes + 8 ? frame_status::foreign : frame_status::damaged)) << cut;
    }
    for (std::size_t i = 0; i < frame.size(); i += 17) {
        std::string flipped = frame;
        flipped[i] ^= 0x10;
        EXPECT_NE(frugal::check_frame(std::as_bytes(std::span(flipped)), want), frame_status::whole) << i;
    }
}

TEST_F(DiskTier, ReadsValuesOfAnySizeAndListsTheNamespacesKeys) {
    const tier_namespace other{.model = "test-8b", .dtype = "bf16", .layout = "nhd", .page_tokens = 4};
    disk_tier<> tier(dir, ns, 1 << 20), foreign(dir, other, 1 << 20);
    std::vector<tier_key> keys;
    std::vector<std::string> values;
    for (std::size_t i = 0; i < 9; ++i) {
        keys.push_back({i * 977 + 1, i * 31 + 5});
        values.push_back(std::string(i * 100, static_cast<char>('a' + i)));  // sizes 0 .. 800
    }
    std::vector<std::span<const std::byte>> views;
    for (const auto& v : values) views.push_back(std::as_bytes(std::span(v)));
    tier.put(keys, views);
    foreign.put(std::span(keys).first(2), std::span(views).first(2));
    for (std::size_t i = 0; i < keys.size(); ++i) EXPECT_EQ(tier.read(keys[i]), values[i]) << i;
    EXPECT_FALSE(tier.read({123, 456}).has_value());
    auto listed = tier.keys();
    ASSERT_EQ(listed.size(), keys.size());
    for (const auto& k : keys) EXPECT_NE(std::find(listed.begin(), listed.end(), k), listed.end());
    EXPECT_EQ(foreign.keys().size(), 2u);
    std::string file = read(tier.path_of(keys[4]));
    file[file.size() / 2] ^= 1;
    write(tier.path_of(keys[4]), file);
    EXPECT_FALSE(tier.read(keys[4]).has_value());  // damaged: a miss, and the file is gone
    EXPECT_EQ(tier.keys().size(), keys.size() - 1);
    EXPECT_EQ(tier.stats().refused, 1u);
}

}  // namespace
