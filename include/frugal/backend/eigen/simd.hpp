#pragma once
/// @file
/// Vector loops of the reference backend through xsimd (the ISA chosen at compile time).

#include <cstddef>
#include <span>

#include <xsimd/xsimd.hpp>

#include "frugal/core/error.hpp"

namespace frugal::eigen {

/// Dot product of two equally long float spans, accumulated in float SIMD lanes.
/// @code
/// float s = frugal::eigen::dot(std::span<const float>(x), std::span<const float>(y));
/// @endcode
[[nodiscard]] inline float dot(std::span<const float> x, std::span<const float> y) {
    FRUGAL_CHECK(x.size() == y.size(), "dot: lengths ", x.size(), " and ", y.size(), " differ");
    using batch = xsimd::batch<float>;
    constexpr std::size_t lanes = batch::size;
    const std::size_t n = x.size();
    const std::size_t vec_end = n - n % lanes;
    batch acc(0.0f);
    for (std::size_t i = 0; i < vec_end; i += lanes) {
        acc = xsimd::fma(batch::load_unaligned(x.data() + i), batch::load_unaligned(y.data() + i), acc);
    }
    float sum = xsimd::hadd(acc);
    for (std::size_t i = vec_end; i < n; ++i) sum += x[i] * y[i];
    return sum;
}

}  // namespace frugal::eigen
