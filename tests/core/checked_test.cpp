// Overflow-checked sizes against an unsigned __int128 oracle, and the hash functions
// against published FNV-1a vectors.
#include <frugal/core/checked.hpp>
#include <frugal/core/hash.hpp>

#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <random>
#include <string>

namespace {

__extension__ typedef unsigned __int128 wide;  // the oracle's exact arithmetic

TEST(Checked, AddAndMulAgreeWithWideArithmetic) {
    std::mt19937_64 rng(5);
    const std::uint64_t max = std::numeric_limits<std::uint64_t>::max();
    for (int i = 0; i < 20000; ++i) {
        const int shift_a = static_cast<int>(rng() % 64), shift_b = static_cast<int>(rng() % 64);
        const std::uint64_t a = rng() >> shift_a, b = rng() >> shift_b;
        const wide sum = static_cast<wide>(a) + b, product = static_cast<wide>(a) * b;
        if (sum > max) EXPECT_THROW((void)frugal::checked_add(a, b, "sum"), frugal::invalid_argument);
        else EXPECT_EQ(frugal::checked_add(a, b, "sum"), static_cast<std::uint64_t>(sum));
        if (product > max) EXPECT_THROW((void)frugal::checked_mul(a, b, "product"), frugal::invalid_argument);
        else EXPECT_EQ(frugal::checked_mul(a, b, "product"), static_cast<std::uint64_t>(product));
    }
}

TEST(Checked, MessageNamesTheQuantityAndTheOperands) {
    try {
        (void)frugal::checked_product("KV pool bytes", std::size_t{1} << 40, std::size_t{1} << 20, std::size_t{16});
        FAIL() << "expected a throw";
    } catch (const frugal::invalid_argument& e) {
        const std::string what = e.what();
        EXPECT_NE(what.find("KV pool bytes"), std::string::npos) << what;
        EXPECT_NE(what.find("1152921504606846976 x 16"), std::string::npos) << what;
    }
    EXPECT_EQ(frugal::checked_product("ok", std::size_t{3}, 4u, std::size_t{5}), 60u);
}

TEST(Checked, CastRejectsNegativeAndTooLargeValues) {
    EXPECT_EQ(frugal::checked_cast<std::size_t>(std::int64_t{42}, "n"), 42u);
    EXPECT_THROW((void)frugal::checked_cast<std::size_t>(std::int64_t{-1}, "n"), frugal::invalid_argument);
    EXPECT_THROW((void)frugal::checked_cast<std::uint32_t>(std::uint64_t{1} << 32, "n"), frugal::invalid_argument);
    EXPECT_THROW((void)frugal::checked_cast<std::int8_t>(200, "n"), frugal::invalid_argument);
}

TEST(Hash, Fnv1aMatchesPublishedVectors) {
    EXPECT_EQ(frugal::fnv1a(std::string_view("")), 0xcbf29ce484222325ull);
    EXPECT_EQ(frugal::fnv1a(std::string_view("a")), 0xaf63dc4c8601ec8cull);
    EXPECT_EQ(frugal::fnv1a(std::string_view("foobar")), 0x85944171f73967e8ull);
    const unsigned char bytes[] = {'f', 'o', 'o', 'b', 'a', 'r'};
    EXPECT_EQ(frugal::fnv1a(std::span<const unsigned char>(bytes)), 0x85944171f73967e8ull);
}

TEST(Hash, MixSpreadsConsecutiveKeysOverLowBits) {
    // Identity hashes of 0..4095 must fill most of 4096 buckets after mixing (a poor mixer
    // leaves many empty); the oracle is the expected occupancy of a random map, 1 - 1/e.
    std::vector<int> used(4096);
    for (std::uint64_t k = 0; k < 4096; ++k) used[frugal::hash_mix(k << 12) & 4095] = 1;
    int filled = 0;
    for (int u : used) filled += u;
    EXPECT_GT(filled, 2400);  // 1 - 1/e = 63% of 4096 = 2589 expected
    EXPECT_NE(frugal::hash_combine(frugal::hash_combine(0, 1), 2), frugal::hash_combine(frugal::hash_combine(0, 2), 1));
}

}  // namespace
