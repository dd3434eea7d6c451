#include <frugal/attention/masks.hpp>

#include <gtest/gtest.h>

#include <limits>

#include "attention_reference.hpp"

namespace {

using frugal::attention::attention_mask;
using frugal::attention::causal_alignment;
using frugal::attention::tile_coverage;
using frugal::testing::ref_mask;
using frugal::testing::ref_mask_spec;
using frugal::testing::ref_visible;

struct mask_case {
    attention_mask mask;
    ref_mask_spec ref;
};

std::vector<mask_case> all_masks() {
    return {
        {attention_mask::none(), {ref_mask::none}},
        {attention_mask::causal(causal_alignment::top_left), {ref_mask::top_left}},
        {attention_mask::causal(causal_alignment::bottom_right), {ref_mask::bottom_right}},
        {attention_mask::causal(causal_alignment::offset, 5), {ref_mask::offset, 5}},
        {attention_mask::causal(causal_alignment::offset, -3), {ref_mask::offset, -3}},
        {attention_mask::sliding_window(4, causal_alignment::top_left), {ref_mask::top_left, 0, 4}},
        {attention_mask::sliding_window(7, causal_alignment::bottom_right), {ref_mask::bottom_right, 0, 7}},
        {attention_mask::sliding_window(1, causal_alignment::offset, 2), {ref_mask::offset, 2, 1}},
    };
}

const std::vector<std::pair<std::int64_t, std::int64_t>> shapes = {{1, 1}, {9, 9}, {5, 17}, {17, 5}, {13, 30}};

TEST(AttentionMask, VisibleMatchesTheDefinitionForEveryAlignmentAndWindow) {
    for (const auto& [mask, ref] : all_masks())
        for (const auto& [sq, skv] : shapes)
            for (std::int64_t i = 0; i < sq; ++i)
                for (std::int64_t j = 0; j < skv; ++j)
                    ASSERT_EQ(mask.visible(i, j, sq, skv), ref_visible(ref, i, j, sq, skv))
                        << "i " << i << " j " << j << " sq " << sq << " skv " << skv << " window " << mask.window;
}

TEST(AttentionMask, BottomRightPutsTheLastQueryOnTheLastKey) {
    const auto m = attention_mask::causal(causal_alignment::bottom_right);
    EXPECT_TRUE(m.visible(3, 11, 4, 12));
    EXPECT_FALSE(m.visible(2, 11, 4, 12));
    EXPECT_TRUE(m.visible(0, 8, 4, 12));
    EXPECT_FALSE(m.visible(0, 9, 4, 12));
    // More queries than keys: the first rows see nothing.
    EXPECT_EQ(m.key_end(0, 6, 4) - m.key_begin(0, 6, 4), 0);
}

TEST(AttentionMask, TileCoverageAgreesWithBruteForce) {
    for (const auto& [mask, ref] : all_masks())
        for (const auto& [sq, skv] : shapes)
            for (std::int64_t tq : {1, 3, 4})
                for (std::int64_t tk : {1, 2, 5})
                    for (std::int64_t q0 = 0; q0 < sq; q0 += tq)
                        for (std::int64_t k0 = 0; k0 < skv; k0 += tk) {
                            const std::int64_t q1 = std::min(sq, q0 + tq), k1 = std::min(skv, k0 + tk);
                            std::int64_t seen = 0;
                            for (std::int64_t i = q0; i < q1; ++i)
                                for (std::int64_t j = k0; j < k1; ++j) seen += ref_visible(ref, i, j, sq, skv);
                            const auto c = mask.classify(q0, q1, k0, k1, sq, skv);
                            const std::int64_t all = (q1 - q0) * (k1 - k0);
                            if (c == tile_coverage::skip) { ASSERT_EQ(seen, 0); }
                            if (c == tile_coverage::full) { ASSERT_EQ(seen, all); }
                            // Skipping must be exact: a tile with no visible pair is never computed
                            // unless some row's range is empty inside it (narrow windows).
                            if (seen == 0 && mask.window == 0) { ASSERT_EQ(c, tile_coverage::skip); }
                            if (seen == all) { ASSERT_EQ(c, tile_coverage::full); }
                        }
}

TEST(AttentionMask, VisiblePairsCountsTheMask) {
    for (const auto& [mask, ref] : all_masks())
        for (const auto& [sq, skv] : shapes) {
            std::uint64_t want = 0;
            for (std::int64_t i = 0; i < sq; ++i)
                for (std::int64_t j = 0; j < skv; ++j) want += ref_visible(ref, i, j, sq, skv);
            EXPECT_EQ(mask.visible_pairs(sq, skv), want);
        }
    EXPECT_EQ(attention_mask::causal().visible_pairs(4096, 4096), 4096ull * 4097 / 2);
}

TEST(AttentionMask, ExtremeOffsetsAndWindowsSaturateInsteadOfOverflowing) {
    // Issue 23 item 4: causal(offset, INT64_MAX) and sliding_window(INT64_MAX) overflowed
    // int64 in key_begin/key_end (UB). Oracle: the definition evaluated in 128-bit integers.
    __extension__ typedef __int128 wide;
    constexpr std::int64_t big = std::numeric_limits<std::int64_t>::max(), small = std::numeric_limits<std::int64_t>::min();
    for (std::int64_t offset : {big, big - 1, small, small + 1, std::int64_t{0}})
        for (std::int64_t window : {std::int64_t{0}, std::int64_t{1}, std::int64_t{3}, big}) {
            const auto mask = window == 0 ? attention_mask::causal(causal_alignment::offset, offset)
                                          : attention_mask::sliding_window(window, causal_alignment::offset, offset);
            for (std::int64_t i = 0; i < 4; ++i)
                for (std::int64_t j = 0; j < 5; ++j) {
                    const wide d = wide(i) + offset;
                    const bool want = wide(j) <= d && (window == 0 || wide(j) > d - window);
                    ASSERT_EQ(mask.visible(i, j, 4, 5), want) << "offset " << offset << " window " << window;
                }
        }
    const auto all = attention_mask::causal(causal_alignment::offset, big);
    EXPECT_EQ(all.key_begin(3, 4, 5), 0);
    EXPECT_EQ(all.key_end(3, 4, 5), 5);
    EXPECT_EQ(attention_mask::sliding_window(big).visible_pairs(6, 9), attention_mask::causal().visible_pairs(6, 9));
}

TEST(AttentionMask, RejectsANonPositiveWindow) {
    EXPECT_THROW((void)attention_mask::sliding_window(0), frugal::invalid_argument);
    EXPECT_THROW((void)attention_mask::sliding_window(-2), frugal::invalid_argument);
}

}  // namespace
