#pragma once
/// @file
/// Vector loops of the reference backend through xsimd, for the instruction set the unit is
/// compiled for (`xsimd::default_arch`, a template argument so that units built with
/// different -m flags instantiate different functions).

#include <cstddef>
#include <span>

#include "frugal/backend/eigen/diagnostics.hpp"
FRUGAL_EIGEN_DIAGNOSTICS_PUSH
#include <xsimd/xsimd.hpp>
FRUGAL_EIGEN_DIAGNOSTICS_POP

#include "frugal/core/error.hpp"

// (GCC 12.0-12.2: see diagnostics.hpp.)
FRUGAL_EIGEN_DIAGNOSTICS_PUSH
namespace frugal::eigen {

/// Dot product of two equally long float spans, accumulated in float SIMD lanes of `Arch`.
/// @code
/// float s = frugal::eigen::dot(std::span<const float>(x), std::span<const float>(y));
/// @endcode
template <class Arch = xsimd::default_arch>
[[nodiscard]] float dot(std::span<const float> x, std::span<const float> y) {
    FRUGAL_CHECK(x.size() == y.size(), "dot: lengths ", x.size(), " and ", y.size(), " differ");
    using batch = xsimd::batch<float, Arch>;
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
FRUGAL_EIGEN_DIAGNOSTICS_POP
