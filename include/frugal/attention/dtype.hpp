#pragma once
/// @file
/// Storage types of attention tensors (fp32, bf16, fp16), their exact conversions to and
/// from fp32, and block conversions that use F16C / AVX2 / AVX512-BF16 when compiled for them
/// (SSE2 on any other x86-64).

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "frugal/attention/host_device.hpp"

#if !defined(__CUDACC__) && (defined(__F16C__) || defined(__AVX2__) || defined(__AVX512BF16__))
#include <immintrin.h>
#elif !defined(__CUDACC__) && defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace frugal::attention {

/// The element format of Q, K, V and the output; arithmetic is always fp32.
enum class storage_dtype : unsigned char { f32, bf16, f16 };

/// The name of a dtype, as the bench and error messages print it ("f32", "bf16", "f16").
/// @code
/// const char* name = frugal::attention::dtype_name(frugal::attention::storage_dtype::bf16);  // "bf16"
/// @endcode
[[nodiscard]] constexpr const char* dtype_name(storage_dtype d) noexcept {
    return d == storage_dtype::f32 ? "f32" : d == storage_dtype::bf16 ? "bf16" : "f16";
}

/// A bfloat16 value (1 sign, 8 exponent, 7 mantissa bits) as stored by engines and
/// PyTorch's `torch.bfloat16`; layout-compatible with `__bf16` and `uint16_t`.
/// @code
/// auto x = frugal::attention::bfloat16::from_float(1.5f);
/// float y = x.to_float();   // 1.5
/// @endcode
struct bfloat16 {
    std::uint16_t bits = 0;

    /// Round to nearest even; NaN stays NaN (quiet), infinities and signs are kept.
    [[nodiscard]] FRUGAL_HOST_DEVICE static bfloat16 from_float(float f) noexcept {
        std::uint32_t u = 0;
        std::memcpy(&u, &f, sizeof u);
        if ((u & 0x7fffffffu) > 0x7f800000u) return {static_cast<std::uint16_t>((u >> 16) | 0x0040u)};
        u += 0x7fffu + ((u >> 16) & 1u);
        return {static_cast<std::uint16_t>(u >> 16)};
    }
    /// Exact.
    [[nodiscard]] FRUGAL_HOST_DEVICE float to_float() const noexcept {
        const std::uint32_t u = std::uint32_t{bits} << 16;
        float f = 0;
        std::memcpy(&f, &u, sizeof f);
        return f;
    }
};

/// An IEEE binary16 value (1 sign, 5 exponent, 10 mantissa bits); layout-compatible
/// with `_Float16`, `__half` and `uint16_t`.
/// @code
/// auto x = frugal::attention::float16::from_float(0.1f);
/// float y = x.to_float();   // 0.0999755859375
/// @endcode
struct float16 {
    std::uint16_t bits = 0;

    /// Round to nearest even, overflow to infinity, gradual underflow to subnormals.
    [[nodiscard]] FRUGAL_HOST_DEVICE static float16 from_float(float f) noexcept {
        std::uint32_t u = 0;
        std::memcpy(&u, &f, sizeof u);
        const auto sign = static_cast<std::uint16_t>((u >> 16) & 0x8000u);
        const std::uint32_t a = u & 0x7fffffffu;
        if (a > 0x7f800000u) return {static_cast<std::uint16_t>(sign | 0x7e00u)};  // NaN
        if (a >= 0x477ff000u) return {static_cast<std::uint16_t>(sign | 0x7c00u)};  // rounds to >= 65520: inf
        if (a >= 0x38800000u) {                                                     // normal half
            const std::uint32_t r = a + 0x0fffu + ((a >> 13) & 1u) - 0x38000000u;
            return {static_cast<std::uint16_t>(sign | (r >> 13))};
        }
        if (a < 0x33000000u) return {sign};  // below half the smallest subnormal: +-0
        // Subnormal half: mantissa with the implicit bit, shifted right with round to nearest even.
        const std::uint32_t e = a >> 23, m = (a & 0x7fffffu) | 0x800000u;
        const std::uint32_t shift = 126u - e;  // 14..24
        const std::uint32_t half = 1u << (shift - 1), rest = m & ((1u << shift) - 1u);
        std::uint32_t h = m >> shift;
        if (rest > half || (rest == half && (h & 1u))) ++h;
        return {static_cast<std::uint16_t>(sign | h)};
    }
    /// Exact.
    [[nodiscard]] FRUGAL_HOST_DEVICE float to_float() const noexcept {
        const std::uint32_t sign = std::uint32_t{bits & 0x8000u} << 16, e = (bits >> 10) & 0x1fu, m = bits & 0x3ffu;
        std::uint32_t u = 0;
        if (e == 0x1f) {
            u = sign | 0x7f800000u | (m << 13);
        } else if (e != 0) {
            u = sign | ((e + 112u) << 23) | (m << 13);
        } else if (m != 0) {  // subnormal: normalize
            std::uint32_t mm = m, ee = 113;
            while ((mm & 0x400u) == 0) {
                mm <<= 1;
                --ee;
            }
            u = sign | (ee << 23) | ((mm & 0x3ffu) << 13);
        } else {
            u = sign;
        }
        float f = 0;
        std::memcpy(&f, &u, sizeof f);
        return f;
    }
};

static_assert(sizeof(bfloat16) == 2 && std::is_trivially_copyable_v<bfloat16>);
static_assert(sizeof(float16) == 2 && std::is_trivially_copyable_v<float16>);

/// Element types attention accepts for Q, K, V and the output.
template <class T>
concept storage_type = std::is_same_v<std::remove_const_t<T>, float> || std::is_same_v<std::remove_const_t<T>, bfloat16> ||
                       std::is_same_v<std::remove_const_t<T>, float16>;

/// The dtype of a storage type.
template <storage_type T>
inline constexpr storage_dtype dtype_of = std::is_same_v<std::remove_const_t<T>, float>      ? storage_dtype::f32
                                          : std::is_same_v<std::remove_const_t<T>, bfloat16> ? storage_dtype::bf16
                                                                                             : storage_dtype::f16;

/// One element as fp32 (exact).
template <storage_type T>
[[nodiscard]] FRUGAL_HOST_DEVICE inline float to_float(T x) noexcept {
    if constexpr (std::is_same_v<std::remove_const_t<T>, float>) return x; else return x.to_float();
}

/// fp32 rounded to `T` (nearest even).
template <storage_type T>
[[nodiscard]] FRUGAL_HOST_DEVICE inline T from_float(float x) noexcept {
    if constexpr (std::is_same_v<T, float>) return x; else return T::from_float(x);
}

/// Unit roundoff of a dtype: half the distance from 1 to the next value (2^-24, 2^-8, 2^-11).
/// @code
/// double u = frugal::attention::unit_roundoff(frugal::attention::storage_dtype::bf16);  // 0.00390625
/// @endcode
[[nodiscard]] constexpr double unit_roundoff(storage_dtype d) noexcept {
    return d == storage_dtype::f32 ? 0x1p-24 : d == storage_dtype::bf16 ? 0x1p-8 : 0x1p-11;
}

#if !defined(__CUDACC__) && defined(__SSE2__)
namespace detail {
/// The four bf16 values in the low 64 bits of `h` as fp32 (each moved to a float's high half).
[[nodiscard]] inline __m128 bf16x4_to_floats(__m128i h) noexcept {
    return _mm_castsi128_ps(_mm_unpacklo_epi16(_mm_setzero_si128(), h));
}
/// The four fp16 values in the low 64 bits of `h` as fp32, exactly, for x86-64 without F16C:
/// exponent and mantissa moved into place and the exponent rebiased (again for infinities and
/// NaNs); a subnormal or zero is rebuilt as a normal float minus 2^-14, which is exact.
[[nodiscard]] inline __m128 f16x4_to_floats(__m128i h) noexcept {
    const __m128i w = _mm_unpacklo_epi16(h, _mm_setzero_si128());
    const __m128i sign = _mm_slli_epi32(_mm_and_si128(w, _mm_set1_epi32(0x8000)), 16);
    const __m128i exp_mask = _mm_set1_epi32(0x7c00 << 13);
    __m128i o = _mm_slli_epi32(_mm_and_si128(w, _mm_set1_epi32(0x7fff)), 13);
    const __m128i exp = _mm_and_si128(o, exp_mask);
    o = _mm_add_epi32(o, _mm_set1_epi32((127 - 15) << 23));
    o = _mm_add_epi32(o, _mm_and_si128(_mm_cmpeq_epi32(exp, exp_mask), _mm_set1_epi32((128 - 16) << 23)));
    const __m128i tiny = _mm_cmpeq_epi32(exp, _mm_setzero_si128());
    const __m128 rebuilt = _mm_sub_ps(_mm_castsi128_ps(_mm_add_epi32(o, _mm_set1_epi32(1 << 23))),
                                      _mm_castsi128_ps(_mm_set1_epi32(113 << 23)));
    o = _mm_or_si128(_mm_and_si128(tiny, _mm_castps_si128(rebuilt)), _mm_andnot_si128(tiny, o));
    return _mm_castsi128_ps(_mm_or_si128(o, sign));
}
}  // namespace detail
#endif

/// Converts `n` elements to fp32 (exactly). The instructions xsimd 8 does not wrap
/// (F16C's vcvtph2ps; AVX2/AVX-512 zero extension for bf16) are used when the
/// translation unit is compiled for them, SSE2 integer operations on any other x86-64;
/// the scalar loop is the portable path.
/// @code
/// frugal::attention::to_floats(page_row, row_f32, 128);
/// @endcode
template <storage_type T>
inline void to_floats(const T* src, float* dst, std::size_t n) noexcept {
    using U = std::remove_const_t<T>;
    if constexpr (std::is_same_v<U, float>) {
        std::memcpy(dst, src, n * sizeof(float));
    } else {
        std::size_t i = 0;
#if !defined(__CUDACC__) && defined(__AVX512F__)
        if constexpr (std::is_same_v<U, bfloat16>) {
            for (; i + 16 <= n; i += 16) {
                const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + i));
                // The zero-masked forms: gcc 12 reports the unmasked ones' undefined passthrough as uninitialized.
                const __m512i w = _mm512_maskz_cvtepu16_epi32(__mmask16(0xffff), h);
                _mm512_storeu_ps(dst + i, _mm512_castsi512_ps(_mm512_maskz_slli_epi32(__mmask16(0xffff), w, 16)));
            }
        }
#elif !defined(__CUDACC__) && defined(__AVX2__)
        if constexpr (std::is_same_v<U, bfloat16>) {
            for (; i + 8 <= n; i += 8) {
                const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i));
                _mm256_storeu_ps(dst + i, _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16)));
            }
        }
#elif !defined(__CUDACC__) && defined(__SSE2__)
        if constexpr (std::is_same_v<U, bfloat16>) {
            for (; i + 4 <= n; i += 4)
                _mm_storeu_ps(dst + i, detail::bf16x4_to_floats(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(src + i))));
        }
#endif
#if !defined(__CUDACC__) && defined(__AVX512F__)
        if constexpr (std::is_same_v<U, float16>) {
            for (; i + 16 <= n; i += 16)
                _mm512_storeu_ps(dst + i, _mm512_maskz_cvtph_ps(__mmask16(0xffff),
                                                                _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + i))));
        }
#elif !defined(__CUDACC__) && defined(__F16C__)
        if constexpr (std::is_same_v<U, float16>) {
            for (; i + 8 <= n; i += 8)
                _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i))));
        }
#elif !defined(__CUDACC__) && defined(__SSE2__)
        if constexpr (std::is_same_v<U, float16>) {
            for (; i + 4 <= n; i += 4)
                _mm_storeu_ps(dst + i, detail::f16x4_to_floats(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(src + i))));
        }
#endif
        for (; i < n; ++i) dst[i] = to_float(src[i]);
    }
}

/// Rounds `n` fp32 values to `T` (nearest even), with AVX512-BF16's vcvtneps2bf16 or
/// F16C's vcvtps2ph when compiled for them (vcvtneps2bf16 reads fp32 subnormals, below
/// 1.2e-38, as zero; every other value rounds as `from_float` does).
/// @code
/// frugal::attention::from_floats(row_f32, out_row, 128);
/// @endcode
template <storage_type T>
inline void from_floats(const float* src, T* dst, std::size_t n) noexcept {
    if constexpr (std::is_same_v<T, float>) {
        std::memcpy(dst, src, n * sizeof(float));
    } else {
        std::size_t i = 0;
#if !defined(__CUDACC__) && defined(__AVX512BF16__) && defined(__AVX512VL__)
        if constexpr (std::is_same_v<T, bfloat16>) {
            for (; i + 16 <= n; i += 16) {
                const __m256bh h = _mm512_maskz_cvtneps_pbh(__mmask16(0xffff), _mm512_loadu_ps(src + i));
                std::memcpy(static_cast<void*>(dst + i), &h, sizeof h);
            }
        }
#endif
#if !defined(__CUDACC__) && defined(__F16C__)
        if constexpr (std::is_same_v<T, float16>) {
            for (; i + 8 <= n; i += 8) {
                const __m128i h = _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
                _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i), h);
            }
        }
#endif
        for (; i < n; ++i) dst[i] = from_float<T>(src[i]);
    }
}

}  // namespace frugal::attention
