#include <frugal/attention/dtype.hpp>

#include <gtest/gtest.h>

#include <bit>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "conversion_inputs.hpp"
#include "mixed_march.hpp"

// Units built with -march=x86-64, x86-64-v3 and x86-64-v4 in one program (linked widest
// first, so that a definition the linker merges comes from the widest unit): each unit the
// CPU can run converts the same inputs, and every result is bitwise the scalar oracle's
// (`to_float` / `from_float`, computed here in a unit built for the default target). Run
// under `qemu-x86_64 -cpu qemu64` (no SSE4, AVX or AVX-512) the x86-64 unit still runs,
// and FRUGAL_EXPECT_CONVERSION_ISA names the path its conversions must take there.

namespace {

namespace fa = frugal::attention;
using frugal::testing::mixed_march_io;

struct unit {
    const char* name;
    const char* (*convert)(const mixed_march_io&);
    bool runs;  // the CPU has what the unit was compiled for
};

std::vector<unit> units() {
    __builtin_cpu_init();
    const bool v3 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("bmi") &&
                    __builtin_cpu_supports("bmi2");
    const bool v4 = v3 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                    __builtin_cpu_supports("avx512cd") && __builtin_cpu_supports("avx512dq") &&
                    __builtin_cpu_supports("avx512vl");
    return {{"x86-64", frugal::testing::convert_x86_64_v1, true},
            {"x86-64-v3", frugal::testing::convert_x86_64_v3, v3},
            {"x86-64-v4", frugal::testing::convert_x86_64_v4, v4}};
}

TEST(MixedMarch, UnitsBuiltForDifferentLevelsGiveTheScalarBits) {
    const auto half = frugal::testing::all_half_patterns();
    const auto x = frugal::testing::rounding_sweep();
    std::vector<std::uint32_t> want_bf16(half.size()), want_f16(half.size());
    for (std::size_t i = 0; i < half.size(); ++i) {
        want_bf16[i] = std::bit_cast<std::uint32_t>(fa::bfloat16{half[i]}.to_float());
        want_f16[i] = std::bit_cast<std::uint32_t>(fa::float16{half[i]}.to_float());
    }
    std::vector<std::uint16_t> want_to_bf16(x.size()), want_to_f16(x.size());
    for (std::size_t i = 0; i < x.size(); ++i) {
        want_to_bf16[i] = fa::bfloat16::from_float(x[i]).bits;
        want_to_f16[i] = fa::float16::from_float(x[i]).bits;
    }
    const char* expect = std::getenv("FRUGAL_EXPECT_CONVERSION_ISA");
    int ran = 0;
    for (const unit& u : units()) {
        if (!u.runs) {
            std::printf("[ note ] this CPU cannot run the %s unit\n", u.name);
            continue;
        }
        std::vector<float> from_bf16(half.size()), from_f16(half.size());
        std::vector<std::uint16_t> to_bf16(x.size()), to_f16(x.size());
        const char* isa = u.convert({half.data(), half.size(), x.data(), x.size(), from_bf16.data(), from_f16.data(),
                                     to_bf16.data(), to_f16.data()});
        std::printf("[ note ] the %s unit's conversions took the %s path\n", u.name, isa);
        EXPECT_STREQ(isa, fa::conversion_isa()) << u.name << ": one CPU, one path, whatever the unit's flags";
        if (expect != nullptr) {
            EXPECT_STREQ(isa, expect) << u.name;
        }
        for (std::size_t i = 0; i < half.size(); ++i) {
            ASSERT_EQ(std::bit_cast<std::uint32_t>(from_bf16[i]), want_bf16[i]) << u.name << " bf16 " << i;
            ASSERT_EQ(std::bit_cast<std::uint32_t>(from_f16[i]), want_f16[i]) << u.name << " fp16 " << i;
        }
        for (std::size_t i = 0; i < x.size(); ++i) {
            ASSERT_EQ(to_bf16[i], want_to_bf16[i]) << u.name << " " << std::hex << std::bit_cast<std::uint32_t>(x[i]);
            ASSERT_EQ(to_f16[i], want_to_f16[i]) << u.name << " " << std::hex << std::bit_cast<std::uint32_t>(x[i]);
        }
        ++ran;
    }
    EXPECT_GE(ran, 1);
}

}  // namespace
