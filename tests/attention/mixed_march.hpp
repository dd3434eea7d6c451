#pragma once
// The block conversions of units compiled with different -march flags, linked into one
// program (mixed_march_unit.cpp, built once per level; mixed_march_test.cpp drives them).

#include <cstddef>
#include <cstdint>

namespace frugal::testing {

/// Buffers of one unit's run: `n16` 16-bit patterns converted to fp32 both ways (as bf16 and
/// as fp16), `n32` fp32 values rounded to bf16 and to fp16 (bits).
struct mixed_march_io {
    const std::uint16_t* half_bits;
    std::size_t n16;
    const float* floats;
    std::size_t n32;
    float* from_bf16;
    float* from_f16;
    std::uint16_t* to_bf16;
    std::uint16_t* to_f16;
};

// Each converts with `frugal::attention::to_floats` / `from_floats` and returns the path
// its unit's conversions took (`conversion_isa()`).
const char* convert_x86_64_v1(const mixed_march_io& io);  // -march=x86-64
const char* convert_x86_64_v3(const mixed_march_io& io);  // -march=x86-64-v3
const char* convert_x86_64_v4(const mixed_march_io& io);  // -march=x86-64-v4

}  // namespace frugal::testing
