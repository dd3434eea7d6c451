#include <frugal/attention/dtype.hpp>

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "conversion_inputs.hpp"

// The block conversions against the scalar ones (the oracle: `bfloat16`/`float16`'s
// `to_float` and `from_float`, themselves checked against exact values in
// batch_attention_test.cpp), bit for bit, on every path this CPU runs.

namespace {

namespace fa = frugal::attention;

std::uint32_t bits_of(float x) { return std::bit_cast<std::uint32_t>(x); }

TEST(Conversions, EveryPathTheCpuRunsGivesTheScalarBits) {
    const auto patterns = frugal::testing::all_half_patterns();
    std::vector<fa::bfloat16> b(patterns.size());
    std::vector<fa::float16> h(patterns.size());
    for (std::size_t i = 0; i < patterns.size(); ++i) b[i].bits = h[i].bits = patterns[i];
    const auto x = frugal::testing::rounding_sweep();
    int paths = 0;
    for (const char* isa : {"scalar", "sse2", "avx2", "avx512"}) {
        const fa::detail::conversion_kernels* k = fa::detail::conversion_kernels_for(isa);
        if (k == nullptr) {
            std::printf("[ note ] no %s path on this CPU or build\n", isa);
            continue;
        }
        ++paths;
        EXPECT_STREQ(k->isa, isa);
        // From the second element on, so that the vector loads are unaligned too.
        std::vector<float> wide(patterns.size());
        k->bf16_to_floats(b.data() + 1, wide.data() + 1, b.size() - 1);
        for (std::size_t i = 1; i < b.size(); ++i) ASSERT_EQ(bits_of(wide[i]), bits_of(b[i].to_float())) << isa << " bf16 " << i;
        k->f16_to_floats(h.data() + 1, wide.data() + 1, h.size() - 1);
        for (std::size_t i = 1; i < h.size(); ++i) ASSERT_EQ(bits_of(wide[i]), bits_of(h[i].to_float())) << isa << " fp16 " << i;
        std::vector<fa::bfloat16> xb(x.size());
        std::vector<fa::float16> xh(x.size());
        k->floats_to_bf16(x.data() + 1, xb.data() + 1, x.size() - 1);
        k->floats_to_f16(x.data() + 1, xh.data() + 1, x.size() - 1);
        for (std::size_t i = 1; i < x.size(); ++i) {
            ASSERT_EQ(xb[i].bits, fa::bfloat16::from_float(x[i]).bits) << isa << " " << std::hex << bits_of(x[i]);
            ASSERT_EQ(xh[i].bits, fa::float16::from_float(x[i]).bits) << isa << " " << std::hex << bits_of(x[i]);
        }
        // Short calls are all tail.
        for (std::size_t n = 0; n < 20; ++n) {
            std::vector<float> out(n, -1.0f);
            k->bf16_to_floats(b.data() + 0x3f80, out.data(), n);
            for (std::size_t i = 0; i < n; ++i) ASSERT_EQ(bits_of(out[i]), bits_of(b[0x3f80 + i].to_float())) << isa << " n " << n;
        }
    }
#if defined(__x86_64__) && !defined(__CUDACC__) && (defined(__GNUC__) || defined(__clang__))
    EXPECT_GE(paths, 2);  // scalar and SSE2 at least
#endif
}

TEST(Conversions, TheBlockConversionsTakeTheWidestPathTheCpuRuns) {
    const char* want = "scalar";
    for (const char* isa : {"sse2", "avx2", "avx512"})
        if (fa::detail::conversion_kernels_for(isa) != nullptr) want = isa;
    EXPECT_STREQ(fa::conversion_isa(), want);
    // and to_floats / from_floats go through it
    const std::vector<float> x = {1.0f, -2.5f, 3.14159f, 1e-40f, 65520.0f, NAN, 0.1f, 7.0f, 9.0f};
    std::vector<fa::bfloat16> b(x.size());
    std::vector<fa::float16> h(x.size());
    fa::from_floats(x.data(), b.data(), x.size());
    fa::from_floats(x.data(), h.data(), x.size());
    std::vector<float> back_b(x.size()), back_h(x.size());
    fa::to_floats(b.data(), back_b.data(), b.size());
    fa::to_floats(h.data(), back_h.data(), h.size());
    for (std::size_t i = 0; i < x.size(); ++i) {
        EXPECT_EQ(b[i].bits, fa::bfloat16::from_float(x[i]).bits) << i;
        EXPECT_EQ(h[i].bits, fa::float16::from_float(x[i]).bits) << i;
        EXPECT_EQ(bits_of(back_b[i]), bits_of(b[i].to_float())) << i;
        EXPECT_EQ(bits_of(back_h[i]), bits_of(h[i].to_float())) << i;
    }
}

TEST(Conversions, NaNsBehaveAsTheHardwareConversionsDo) {
    // fp16 -> fp32 quiets a signaling NaN and keeps its payload (vcvtph2ps, IEEE 754).
    EXPECT_EQ(bits_of(fa::float16{0x7c01}.to_float()), 0x7fc02000u);
    EXPECT_EQ(bits_of(fa::float16{0xfe00}.to_float()), 0xffc00000u);
    EXPECT_EQ(bits_of(fa::float16{0x7c00}.to_float()), 0x7f800000u);  // infinity stays
    // fp32 -> fp16 keeps the top of the payload, quiet (vcvtps2ph).
    EXPECT_EQ(fa::float16::from_float(std::bit_cast<float>(0x7fc12000u)).bits, 0x7e09);
    EXPECT_EQ(fa::float16::from_float(std::bit_cast<float>(0xff800001u)).bits, 0xfe00);
    // fp32 -> bf16 likewise (vcvtneps2bf16); bf16 -> fp32 is a shift.
    EXPECT_EQ(fa::bfloat16::from_float(std::bit_cast<float>(0x7f800001u)).bits, 0x7fc0);
    EXPECT_EQ(bits_of(fa::bfloat16{0x7f81}.to_float()), 0x7f810000u);
}

}  // namespace
