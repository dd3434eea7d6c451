#pragma once
// Inputs for the block conversions' tests: every 16-bit pattern, and fp32 values that
// reach every branch of the roundings (each exponent and sign; ties to even for bf16 and
// fp16, one unit either side; fp16 subnormals and overflow; infinities; quiet and
// signaling NaNs with payloads), in an odd count so that every path's tail runs too.

#include <bit>
#include <cstdint>
#include <random>
#include <vector>

namespace frugal::testing {

inline std::vector<std::uint16_t> all_half_patterns() {
    std::vector<std::uint16_t> bits(65536 + 7);
    for (std::size_t i = 0; i < bits.size(); ++i) bits[i] = static_cast<std::uint16_t>(i);
    return bits;
}

inline std::vector<float> rounding_sweep() {
    std::vector<float> out;
    std::mt19937 rng(34);
    const std::uint32_t mantissas[] = {0,       1,       0x7fffff, 0x400000, 0x3fffff, 0x7fff,  0x8000,  0x8001,
                                       0x18000, 0x17fff, 0x18001,  0x0fff,   0x1000,   0x1001,  0x3000,  0x2fff,
                                       0x3001,  0x7fe000, 0x7ff000, 0x7ff001, 0x7fefff, 0x000200, 0x002000, 0x400001};
    for (std::uint32_t sign : {0u, 0x80000000u})
        for (std::uint32_t e = 0; e < 256; ++e) {
            for (std::uint32_t m : mantissas) out.push_back(std::bit_cast<float>(sign | e << 23 | m));
            for (int k = 0; k < 40; ++k) out.push_back(std::bit_cast<float>(sign | e << 23 | (static_cast<std::uint32_t>(rng()) & 0x7fffffu)));
        }
    for (int k = 0; k < 100000; ++k) out.push_back(std::bit_cast<float>(static_cast<std::uint32_t>(rng())));
    out.resize(out.size() | 1);  // odd
    return out;
}

}  // namespace frugal::testing
