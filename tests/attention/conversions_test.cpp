#include <frugal/attention/dtype.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <tuple>
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

// --- 8-bit K/V elements ----------------------------------------------------------------

// An 8-bit float code decoded from the format's definition in double: (-1)^s 2^(e - bias)
// (1 + m / 2^mbits), or 2^(1 - bias) m / 2^mbits for e = 0; NaN (and, for E5M2, infinity)
// where the format puts them.
double decode_fp8(std::uint8_t code, int ebits, int mbits) {
    const int bias = (1 << (ebits - 1)) - 1, e = (code >> mbits) & ((1 << ebits) - 1), m = code & ((1 << mbits) - 1);
    const double sign = (code & 0x80) != 0 ? -1.0 : 1.0;
    if (ebits == 4 && (code & 0x7f) == 0x7f) return std::numeric_limits<double>::quiet_NaN();
    if (ebits == 5 && e == 31) return m == 0 ? sign * std::numeric_limits<double>::infinity() : std::numeric_limits<double>::quiet_NaN();
    const double frac = double(m) / double(1 << mbits);
    return sign * (e == 0 ? std::ldexp(frac, 1 - bias) : std::ldexp(1.0 + frac, e - bias));
}

// The code nearest to x among the finite codes (ties to the even code), saturating at the
// largest finite value: a brute-force oracle for from_float.
std::uint8_t nearest_fp8(float x, int ebits, int mbits) {
    if (std::isnan(x)) return 0;  // (NaNs are checked apart)
    const double largest = ebits == 4 ? 448.0 : 57344.0;
    if (std::abs(double(x)) >= largest) x = std::copysign(float(largest), x);  // saturation
    std::uint8_t best = 0;
    double best_err = std::numeric_limits<double>::infinity();
    for (int c = 0; c < 256; ++c) {
        const double v = decode_fp8(std::uint8_t(c), ebits, mbits);
        if (!std::isfinite(v) || std::signbit(v) != std::signbit(x)) continue;  // rounding keeps the sign
        const double err = std::abs(v - double(x));
        if (err < best_err || (err == best_err && (c & 1) == 0)) best = std::uint8_t(c), best_err = err;
    }
    return best;
}

TEST(Conversions, Fp8CodesDecodeAsTheirFormatsDefineThem) {
    for (int c = 0; c < 256; ++c) {
        const auto code = std::uint8_t(c);
        const double e4 = decode_fp8(code, 4, 3), e5 = decode_fp8(code, 5, 2);
        const float g4 = fa::float8_e4m3{code}.to_float(), g5 = fa::float8_e5m2{code}.to_float();
        EXPECT_EQ(std::isnan(g4), std::isnan(e4)) << c;
        EXPECT_EQ(std::isnan(g5), std::isnan(e5)) << c;
        EXPECT_EQ(std::signbit(g4), std::signbit(e4) || (std::isnan(e4) && c >= 0x80)) << c;
        if (!std::isnan(e4)) { EXPECT_EQ(double(g4), e4) << c; }
        if (!std::isnan(e5)) { EXPECT_EQ(double(g5), e5) << c; }
    }
    EXPECT_EQ(fa::float8_e4m3{0x7e}.to_float(), 448.0f);
    EXPECT_EQ(fa::float8_e4m3{0x01}.to_float(), 0x1p-9f);
    EXPECT_EQ(fa::float8_e5m2{0x7b}.to_float(), 57344.0f);
    EXPECT_EQ(fa::float8_e5m2{0x01}.to_float(), 0x1p-16f);
}

TEST(Conversions, Fp8RoundingIsNearestEvenAndSaturates) {
    std::vector<float> x = frugal::testing::rounding_sweep();
    std::mt19937 rng(3);
    std::uniform_real_distribution<float> exponent(-20.0f, 18.0f);
    for (int i = 0; i < 20000; ++i) x.push_back((i % 2 ? -1.0f : 1.0f) * std::exp2(exponent(rng)));
    // Every midpoint between neighbouring codes, and a hair either side of it.
    for (int ebits : {4, 5}) {
        const int mbits = 7 - ebits;
        std::vector<double> v;
        for (int c = 0; c < 128; ++c)
            if (const double d = decode_fp8(std::uint8_t(c), ebits, mbits); std::isfinite(d)) v.push_back(d);
        std::sort(v.begin(), v.end());
        for (std::size_t i = 0; i + 1 < v.size(); ++i) {
            const auto mid = float((v[i] + v[i + 1]) / 2);
            x.insert(x.end(), {mid, std::nextafter(mid, 0.0f), std::nextafter(mid, 1e9f), -mid});
        }
    }
    x.insert(x.end(), {INFINITY, -INFINITY, 1e30f, -1e30f, 449.0f, 464.0f, 480.0f, 57344.0f, 61440.0f, 0.0f, -0.0f});
    for (float f : x) {
        if (std::isnan(f)) continue;
        ASSERT_EQ(fa::float8_e4m3::from_float(f).bits, nearest_fp8(f, 4, 3)) << f;
        ASSERT_EQ(fa::float8_e5m2::from_float(f).bits, nearest_fp8(f, 5, 2)) << f;
    }
    EXPECT_TRUE(std::isnan(fa::float8_e4m3::from_float(NAN).to_float()));
    EXPECT_TRUE(std::isnan(fa::float8_e5m2::from_float(-NAN).to_float()));
}

TEST(Conversions, EightBitBlocksGiveTheScalarBitsOnEveryPath) {
    // Every code, from an odd start so the vector loads are unaligned, in a buffer long
    // enough for every vector width.
    std::vector<fa::float8_e4m3> e4(1 + 512);
    std::vector<fa::float8_e5m2> e5(e4.size());
    std::vector<std::int8_t> i8(e4.size());
    for (std::size_t i = 0; i < e4.size(); ++i) {
        e4[i].bits = e5[i].bits = std::uint8_t(i * 7 + 3);
        i8[i] = std::int8_t(std::uint8_t(i * 5 + 1));
    }
    for (const char* isa : {"scalar", "sse2", "avx2", "avx512"}) {
        const fa::detail::conversion_kernels* k = fa::detail::conversion_kernels_for(isa);
        if (k == nullptr) continue;
        std::vector<float> out(e4.size());
        for (std::size_t n : {std::size_t{512}, std::size_t{3}, std::size_t{21}}) {
            k->e4m3_to_floats(e4.data() + 1, out.data(), n);
            for (std::size_t i = 0; i < n; ++i) ASSERT_EQ(bits_of(out[i]), bits_of(e4[i + 1].to_float())) << isa << " e4m3 " << i;
            k->e5m2_to_floats(e5.data() + 1, out.data(), n);
            for (std::size_t i = 0; i < n; ++i) ASSERT_EQ(bits_of(out[i]), bits_of(e5[i + 1].to_float())) << isa << " e5m2 " << i;
            k->i8_to_floats(i8.data() + 1, out.data(), n);
            for (std::size_t i = 0; i < n; ++i) ASSERT_EQ(out[i], float(i8[i + 1])) << isa << " int8 " << i;
        }
    }
    std::vector<float> out(e4.size());
    fa::to_floats(e4.data(), out.data(), e4.size());
    for (std::size_t i = 0; i < e4.size(); ++i) ASSERT_EQ(bits_of(out[i]), bits_of(e4[i].to_float())) << i;
}

#if FRUGAL_X86_KERNELS
// The decode kernels' E4M3 loads that leave out a factor 256: every code against the exact
// conversion over 256, on each path this CPU runs.
[[gnu::target("avx2,f16c")]] void e4m3_over_256_avx2(const fa::float8_e4m3* p, float* out) {
    _mm256_storeu_ps(out, fa::detail::load_e4m3_over_256_avx2(p));
}
[[gnu::target("avx512f")]] void e4m3_over_256_avx512(const fa::float8_e4m3* p, float* out) {
    _mm512_storeu_ps(out, fa::detail::load_e4m3_over_256_avx512(p));
}

TEST(Conversions, E4m3LoadsOverTwoFiftySixAreExact) {
    std::vector<fa::float8_e4m3> codes(256);
    for (std::size_t i = 0; i < codes.size(); ++i) codes[i].bits = std::uint8_t(i);
    for (const auto& [isa, lanes, load] : {std::tuple{"avx2", std::size_t{8}, &e4m3_over_256_avx2},
                                           std::tuple{"avx512", std::size_t{16}, &e4m3_over_256_avx512}}) {
        if (fa::detail::conversion_kernels_for(isa) == nullptr) continue;
        std::vector<float> out(codes.size());
        for (std::size_t i = 0; i < codes.size(); i += lanes) load(codes.data() + i, out.data() + i);
        for (std::size_t i = 0; i < codes.size(); ++i) {
            const float want = codes[i].to_float() / 256.0f;
            if (std::isnan(want)) {
                EXPECT_TRUE(std::isnan(out[i])) << isa << " " << i;
            } else {
                EXPECT_EQ(bits_of(out[i]), bits_of(want)) << isa << " " << i;
            }
        }
    }
}
#endif

}  // namespace
