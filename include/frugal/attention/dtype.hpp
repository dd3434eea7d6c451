#pragma once
/// @file
/// Storage types of attention tensors (fp32, bf16, fp16; for K/V also FP8 E4M3/E5M2 and
/// int8), their exact conversions to fp32 (and from it for the 16-bit types), and block
/// conversions that run the widest vector path the CPU has (AVX-512, AVX2 + F16C or SSE2
/// on x86-64, picked at run time whatever the -m flags), with the same bits as the scalar
/// conversions on every path.

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "frugal/attention/host_device.hpp"
#include "frugal/core/cpu_features.hpp"

// The scalar conversions are inlined wherever they are called, the vector paths' tails
// included, so that those never call a copy compiled for another level either.
#if defined(__CUDACC__)
#define FRUGAL_ATTENTION_FORCE_INLINE __forceinline__
#elif defined(__GNUC__) || defined(__clang__)
#define FRUGAL_ATTENTION_FORCE_INLINE __attribute__((always_inline))
#else
#define FRUGAL_ATTENTION_FORCE_INLINE
#endif

namespace frugal::attention {

/// The element format of Q, K, V and the output (f32, bf16, f16), or of an 8-bit K/V cache
/// (fp8_e4m3, fp8_e5m2, int8: stored values times a scale, see kv_quantization.hpp);
/// arithmetic is always fp32.
enum class storage_dtype : unsigned char { f32, bf16, f16, fp8_e4m3, fp8_e5m2, int8 };

/// The name of a dtype, as the bench and error messages print it ("f32", "bf16", "f16",
/// "fp8e4m3", "fp8e5m2", "int8").
/// @code
/// const char* name = frugal::attention::dtype_name(frugal::attention::storage_dtype::bf16);  // "bf16"
/// @endcode
[[nodiscard]] constexpr const char* dtype_name(storage_dtype d) noexcept {
    switch (d) {
        case storage_dtype::f32: return "f32";
        case storage_dtype::bf16: return "bf16";
        case storage_dtype::f16: return "f16";
        case storage_dtype::fp8_e4m3: return "fp8e4m3";
        case storage_dtype::fp8_e5m2: return "fp8e5m2";
        case storage_dtype::int8: return "int8";
    }
    return "?";
}

/// A bfloat16 value (1 sign, 8 exponent, 7 mantissa bits) as stored by engines and
/// PyTorch's `torch.bfloat16`; layout-compatible with `__bf16` and `uint16_t`.
/// @code
/// auto x = frugal::attention::bfloat16::from_float(1.5f);
/// float y = x.to_float();   // 1.5
/// @endcode
struct bfloat16 {
    std::uint16_t bits = 0;

    /// Round to nearest even; infinities and signs are kept, a NaN becomes the quiet NaN
    /// with the top of its payload (as vcvtneps2bf16 does).
    [[nodiscard]] FRUGAL_HOST_DEVICE FRUGAL_ATTENTION_FORCE_INLINE static bfloat16 from_float(float f) noexcept {
        std::uint32_t u = 0;
        std::memcpy(&u, &f, sizeof u);
        if ((u & 0x7fffffffu) > 0x7f800000u) return {static_cast<std::uint16_t>((u >> 16) | 0x0040u)};
        u += 0x7fffu + ((u >> 16) & 1u);
        return {static_cast<std::uint16_t>(u >> 16)};
    }
    /// Exact (a bit shift: NaNs keep their bits).
    [[nodiscard]] FRUGAL_HOST_DEVICE FRUGAL_ATTENTION_FORCE_INLINE float to_float() const noexcept {
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

    /// Round to nearest even, overflow to infinity, gradual underflow to subnormals; a NaN
    /// becomes the quiet NaN with the top of its payload (as F16C's vcvtps2ph does).
    [[nodiscard]] FRUGAL_HOST_DEVICE FRUGAL_ATTENTION_FORCE_INLINE static float16 from_float(float f) noexcept {
        std::uint32_t u = 0;
        std::memcpy(&u, &f, sizeof u);
        const auto sign = static_cast<std::uint16_t>((u >> 16) & 0x8000u);
        const std::uint32_t a = u & 0x7fffffffu;
        if (a > 0x7f800000u) return {static_cast<std::uint16_t>(sign | 0x7e00u | ((a >> 13) & 0x3ffu))};  // NaN
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
    /// Exact; a signaling NaN becomes quiet (as F16C's vcvtph2ps and IEEE 754 do).
    [[nodiscard]] FRUGAL_HOST_DEVICE FRUGAL_ATTENTION_FORCE_INLINE float to_float() const noexcept {
        const std::uint32_t sign = std::uint32_t{bits & 0x8000u} << 16, e = (bits >> 10) & 0x1fu, m = bits & 0x3ffu;
        std::uint32_t u = 0;
        if (e == 0x1f) {
            u = sign | 0x7f800000u | (m << 13) | (m != 0 ? 0x400000u : 0u);
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

/// An FP8 E4M3 value (1 sign, 4 exponent bits of bias 7, 3 mantissa bits; no infinities,
/// NaN = all exponent and mantissa bits set): finite values up to 448, subnormals down to
/// 2^-9, relative rounding error at most 2^-4. Layout-compatible with `__nv_fp8_e4m3` and
/// `torch.float8_e4m3fn`.
/// @code
/// auto x = frugal::attention::float8_e4m3::from_float(0.3f);
/// float y = x.to_float();   // 0.3125
/// @endcode
struct float8_e4m3 {
    std::uint8_t bits = 0;

    /// Round to nearest even; values beyond 448 (infinities too) saturate to +-448, as
    /// CUDA's `__NV_SATFINITE` conversion does; a NaN stays NaN.
    [[nodiscard]] FRUGAL_HOST_DEVICE static float8_e4m3 from_float(float f) noexcept {
        std::uint32_t u = 0;
        std::memcpy(&u, &f, sizeof u);
        const auto sign = static_cast<std::uint8_t>((u >> 24) & 0x80u);
        const std::uint32_t a = u & 0x7fffffffu;
        if (a > 0x7f800000u) return {static_cast<std::uint8_t>(sign | 0x7fu)};  // NaN
        if (a >= 0x43e00000u) return {static_cast<std::uint8_t>(sign | 0x7eu)};  // >= 448: the largest finite
        if (a >= 0x3c800000u) {                                                 // >= 2^-6: normal
            const std::uint32_t r = a + 0x7ffffu + ((a >> 20) & 1u) - (120u << 23);
            return {static_cast<std::uint8_t>(sign | (r >> 20))};
        }
        return {static_cast<std::uint8_t>(sign | round_subnormal(a, 141u, 0x3a800000u))};
    }
    /// Exact.
    [[nodiscard]] FRUGAL_HOST_DEVICE float to_float() const noexcept {
        const std::uint32_t sign = std::uint32_t{bits & 0x80u} << 24, e = (bits >> 3) & 0xfu, m = bits & 0x7u;
        std::uint32_t u = 0;
        if ((bits & 0x7fu) == 0x7fu) {
            u = sign | 0x7fc00000u;
        } else if (e != 0) {
            u = sign | ((e + 120u) << 23) | (m << 20);
        } else if (m != 0) {  // m x 2^-9: normalize
            std::uint32_t mm = m, ee = 121;
            while ((mm & 0x8u) == 0) {
                mm <<= 1;
                --ee;
            }
            u = sign | (ee << 23) | ((mm & 0x7u) << 20);
        } else {
            u = sign;
        }
        float f = 0;
        std::memcpy(&f, &u, sizeof f);
        return f;
    }

    /// The subnormal (or zero, or the smallest normal when it rounds up) nearest the fp32
    /// magnitude `a`, ties to even: `a`'s significand shifted to units of the format's
    /// smallest subnormal (2^(bias_shift - 150)); magnitudes up to `zero_at` round to 0.
    [[nodiscard]] FRUGAL_HOST_DEVICE static std::uint8_t round_subnormal(std::uint32_t a, std::uint32_t bias_shift,
                                                                        std::uint32_t zero_at) noexcept {
        if (a <= zero_at) return 0;
        const std::uint32_t e = a >> 23, m = (a & 0x7fffffu) | 0x800000u;
        const std::uint32_t shift = bias_shift - e;  // at most 24 above zero_at
        const std::uint32_t half = 1u << (shift - 1), rest = m & ((1u << shift) - 1u);
        std::uint32_t h = m >> shift;
        if (rest > half || (rest == half && (h & 1u))) ++h;
        return static_cast<std::uint8_t>(h);
    }
};

/// An FP8 E5M2 value (1 sign, 5 exponent bits of bias 15, 2 mantissa bits; IEEE-style
/// infinities and NaNs): the top byte of an IEEE binary16, finite values up to 57344,
/// subnormals down to 2^-16, relative rounding error at most 2^-3. Layout-compatible with
/// `__nv_fp8_e5m2` and `torch.float8_e5m2`.
/// @code
/// auto x = frugal::attention::float8_e5m2::from_float(0.3f);
/// float y = x.to_float();   // 0.3125
/// @endcode
struct float8_e5m2 {
    std::uint8_t bits = 0;

    /// Round to nearest even; values beyond 57344 (infinities too) saturate to +-57344, as
    /// CUDA's `__NV_SATFINITE` conversion does; a NaN stays NaN.
    [[nodiscard]] FRUGAL_HOST_DEVICE static float8_e5m2 from_float(float f) noexcept {
        std::uint32_t u = 0;
        std::memcpy(&u, &f, sizeof u);
        const auto sign = static_cast<std::uint8_t>((u >> 24) & 0x80u);
        const std::uint32_t a = u & 0x7fffffffu;
        if (a > 0x7f800000u) return {static_cast<std::uint8_t>(sign | 0x7eu)};  // NaN
        if (a >= 0x47600000u) return {static_cast<std::uint8_t>(sign | 0x7bu)};  // >= 57344: the largest finite
        if (a >= 0x38800000u) {                                                 // >= 2^-14: normal
            const std::uint32_t r = a + 0xfffffu + ((a >> 21) & 1u) - (112u << 23);
            return {static_cast<std::uint8_t>(sign | (r >> 21))};
        }
        return {static_cast<std::uint8_t>(sign | float8_e4m3::round_subnormal(a, 134u, 0x37000000u))};
    }
    /// Exact (the fp16 it is the top byte of); a signaling NaN becomes quiet.
    [[nodiscard]] FRUGAL_HOST_DEVICE float to_float() const noexcept {
        return float16{static_cast<std::uint16_t>(bits << 8)}.to_float();
    }
};

static_assert(sizeof(float8_e4m3) == 1 && std::is_trivially_copyable_v<float8_e4m3>);
static_assert(sizeof(float8_e5m2) == 1 && std::is_trivially_copyable_v<float8_e5m2>);

/// Element types attention accepts for Q, K, V and the output.
template <class T>
concept storage_type = std::is_same_v<std::remove_const_t<T>, float> || std::is_same_v<std::remove_const_t<T>, bfloat16> ||
                       std::is_same_v<std::remove_const_t<T>, float16>;

/// The 8-bit element types of a quantized K/V cache: stored value x scale is the value.
template <class T>
concept quantized_kv_type = std::is_same_v<std::remove_const_t<T>, float8_e4m3> ||
                            std::is_same_v<std::remove_const_t<T>, float8_e5m2> ||
                            std::is_same_v<std::remove_const_t<T>, std::int8_t>;

/// Element types attention accepts for K and V: Q's types and the 8-bit ones.
template <class T>
concept kv_storage_type = storage_type<T> || quantized_kv_type<T>;

/// The dtype of a storage type.
template <kv_storage_type T>
inline constexpr storage_dtype dtype_of = [] {
    using U = std::remove_const_t<T>;
    if constexpr (std::is_same_v<U, float>) return storage_dtype::f32;
    else if constexpr (std::is_same_v<U, bfloat16>) return storage_dtype::bf16;
    else if constexpr (std::is_same_v<U, float16>) return storage_dtype::f16;
    else if constexpr (std::is_same_v<U, float8_e4m3>) return storage_dtype::fp8_e4m3;
    else if constexpr (std::is_same_v<U, float8_e5m2>) return storage_dtype::fp8_e5m2;
    else return storage_dtype::int8;
}();

/// One element as fp32 (exact; an 8-bit K/V element before its scale).
template <kv_storage_type T>
[[nodiscard]] FRUGAL_HOST_DEVICE inline float to_float(T x) noexcept {
    if constexpr (std::is_same_v<std::remove_const_t<T>, float>) return x;
    else if constexpr (std::is_same_v<std::remove_const_t<T>, std::int8_t>) return static_cast<float>(x);
    else return x.to_float();
}

/// fp32 rounded to `T` (nearest even).
template <storage_type T>
[[nodiscard]] FRUGAL_HOST_DEVICE inline T from_float(float x) noexcept {
    if constexpr (std::is_same_v<T, float>) return x; else return T::from_float(x);
}

/// Unit roundoff of a dtype: half the distance from 1 to the next value (2^-24, 2^-8, 2^-11,
/// 2^-4 for E4M3, 2^-3 for E5M2); for int8, the largest rounding error relative to the
/// scale's range (1/254: half a step of max|x| / 127).
/// @code
/// double u = frugal::attention::unit_roundoff(frugal::attention::storage_dtype::bf16);  // 0.00390625
/// @endcode
[[nodiscard]] constexpr double unit_roundoff(storage_dtype d) noexcept {
    switch (d) {
        case storage_dtype::f32: return 0x1p-24;
        case storage_dtype::bf16: return 0x1p-8;
        case storage_dtype::f16: return 0x1p-11;
        case storage_dtype::fp8_e4m3: return 0x1p-4;
        case storage_dtype::fp8_e5m2: return 0x1p-3;
        case storage_dtype::int8: return 1.0 / 254.0;
    }
    return 1.0;
}

// Block conversions. Hand-written because this module depends on the standard library
// alone, and xsimd 8 (the Eigen backend's vector layer) has neither 16-bit float types nor
// a way for a header to pick an instruction set at run time. Each path below is compiled
// for its own instruction set ([[gnu::target]]) whatever the unit's -m flags, and
// `detail::conversions()` picks, once per process, the widest one the CPU runs. Every path
// returns the scalar conversions' bits for every input (the integer rounding below is
// `bfloat16::from_float`'s; F16C rounds and handles NaNs as `float16` does).
namespace detail {
inline namespace FRUGAL_SIMD_ABI {

/// The conversions of one instruction set, on `n` elements.
struct conversion_kernels {
    const char* isa;  ///< "avx512", "avx2", "sse2" or "scalar"
    void (*bf16_to_floats)(const bfloat16*, float*, std::size_t) noexcept;
    void (*f16_to_floats)(const float16*, float*, std::size_t) noexcept;
    void (*floats_to_bf16)(const float*, bfloat16*, std::size_t) noexcept;
    void (*floats_to_f16)(const float*, float16*, std::size_t) noexcept;
    void (*e4m3_to_floats)(const float8_e4m3*, float*, std::size_t) noexcept;
    void (*e5m2_to_floats)(const float8_e5m2*, float*, std::size_t) noexcept;
    void (*i8_to_floats)(const std::int8_t*, float*, std::size_t) noexcept;
};

/// `n` elements of `src` as fp32 by the scalar conversion: the portable path, and every
/// vector path's tail.
template <class T>
inline void to_floats_scalar(const T* src, float* dst, std::size_t n) noexcept {
    for (std::size_t i = 0; i < n; ++i) dst[i] = to_float(src[i]);
}

inline void floats_to_bf16_scalar(const float* src, bfloat16* dst, std::size_t n) noexcept {
    for (std::size_t i = 0; i < n; ++i) dst[i] = bfloat16::from_float(src[i]);
}
inline void floats_to_f16_scalar(const float* src, float16* dst, std::size_t n) noexcept {
    for (std::size_t i = 0; i < n; ++i) dst[i] = float16::from_float(src[i]);
}

inline constexpr conversion_kernels scalar_kernels{"scalar",
                                                   to_floats_scalar<bfloat16>,
                                                   to_floats_scalar<float16>,
                                                   floats_to_bf16_scalar,
                                                   floats_to_f16_scalar,
                                                   to_floats_scalar<float8_e4m3>,
                                                   to_floats_scalar<float8_e5m2>,
                                                   to_floats_scalar<std::int8_t>};

#if FRUGAL_X86_KERNELS
// --- SSE2: every x86-64 CPU --------------------------------------------------------------

/// Four bf16 values at `p` as fp32: each moved to a float's high half.
[[nodiscard]] inline __m128 load_floats_sse2(const bfloat16* p) noexcept {
    return _mm_castsi128_ps(_mm_unpacklo_epi16(_mm_setzero_si128(), _mm_loadl_epi64(reinterpret_cast<const __m128i*>(p))));
}
/// Four fp16 values (the low halves of `w`'s lanes, the high halves zero) as fp32, exactly,
/// without F16C: exponent and mantissa moved into place and the exponent rebiased (again
/// for infinities and NaNs, which become quiet); a subnormal or zero is rebuilt as a normal
/// float minus 2^-14, which is exact.
[[nodiscard]] inline __m128 halves_to_floats_sse2(__m128i w) noexcept {
    const __m128i magnitude = _mm_and_si128(w, _mm_set1_epi32(0x7fff));
    const __m128i sign = _mm_slli_epi32(_mm_and_si128(w, _mm_set1_epi32(0x8000)), 16);
    const __m128i exp_mask = _mm_set1_epi32(0x7c00 << 13);
    __m128i o = _mm_slli_epi32(magnitude, 13);
    const __m128i exp = _mm_and_si128(o, exp_mask);
    o = _mm_add_epi32(o, _mm_set1_epi32((127 - 15) << 23));
    o = _mm_add_epi32(o, _mm_and_si128(_mm_cmpeq_epi32(exp, exp_mask), _mm_set1_epi32((128 - 16) << 23)));
    o = _mm_or_si128(o, _mm_and_si128(_mm_cmpgt_epi32(magnitude, _mm_set1_epi32(0x7c00)), _mm_set1_epi32(0x400000)));
    const __m128i tiny = _mm_cmpeq_epi32(exp, _mm_setzero_si128());
    const __m128 rebuilt = _mm_sub_ps(_mm_castsi128_ps(_mm_add_epi32(o, _mm_set1_epi32(1 << 23))),
                                      _mm_castsi128_ps(_mm_set1_epi32(113 << 23)));
    o = _mm_or_si128(_mm_and_si128(tiny, _mm_castps_si128(rebuilt)), _mm_andnot_si128(tiny, o));
    return _mm_castsi128_ps(_mm_or_si128(o, sign));
}
/// Four fp16 values at `p` as fp32.
[[nodiscard]] inline __m128 load_floats_sse2(const float16* p) noexcept {
    return halves_to_floats_sse2(_mm_unpacklo_epi16(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)), _mm_setzero_si128()));
}
/// Four bytes at `p`, each in the low byte of its lane (zero-extended), or the top byte
/// (`High`: the others zero).
template <bool High = false>
[[nodiscard]] inline __m128i load_bytes_sse2(const void* p) noexcept {
    int x = 0;
    std::memcpy(&x, p, sizeof x);
    const __m128i b = _mm_cvtsi32_si128(x), z = _mm_setzero_si128();
    if constexpr (High) return _mm_unpacklo_epi16(z, _mm_unpacklo_epi8(z, b));
    else return _mm_unpacklo_epi16(_mm_unpacklo_epi8(b, z), z);
}
/// Four E5M2 values at `p` as fp32: each the top byte of an fp16.
[[nodiscard]] inline __m128 load_floats_sse2(const float8_e5m2* p) noexcept {
    return halves_to_floats_sse2(_mm_srli_epi32(load_bytes_sse2<true>(p), 16));
}
/// Four E4M3 values at `p` as fp32: a normal's exponent rebiased in the integers, a
/// subnormal (m x 2^-9) converted from its mantissa, NaN set apart, the sign put back.
[[nodiscard]] inline __m128 load_floats_sse2(const float8_e4m3* p) noexcept {
    const __m128i x = load_bytes_sse2(p), em = _mm_and_si128(x, _mm_set1_epi32(0x7f));
    const __m128i normal = _mm_add_epi32(_mm_slli_epi32(em, 20), _mm_set1_epi32(120 << 23));
    const __m128i sub = _mm_castps_si128(_mm_mul_ps(_mm_cvtepi32_ps(em), _mm_set1_ps(0x1p-9f)));
    const __m128i tiny = _mm_cmplt_epi32(em, _mm_set1_epi32(8)), nan = _mm_cmpeq_epi32(em, _mm_set1_epi32(0x7f));
    __m128i r = _mm_or_si128(_mm_and_si128(tiny, sub), _mm_andnot_si128(tiny, normal));
    r = _mm_or_si128(_mm_andnot_si128(nan, r), _mm_and_si128(nan, _mm_set1_epi32(0x7fc00000)));
    return _mm_castsi128_ps(_mm_or_si128(r, _mm_slli_epi32(_mm_and_si128(x, _mm_set1_epi32(0x80)), 24)));
}
/// Four int8 values at `p` as fp32.
[[nodiscard]] inline __m128 load_floats_sse2(const std::int8_t* p) noexcept {
    return _mm_cvtepi32_ps(_mm_srai_epi32(load_bytes_sse2<true>(p), 24));
}
/// Four fp32 values rounded to bf16 as `bfloat16::from_float` does, each in the low half of
/// its lane, sign-extended (so that a signed pack keeps the bits).
[[nodiscard]] inline __m128i round_bf16_sse2(__m128 x) noexcept {
    const __m128i u = _mm_castps_si128(x);
    const __m128i lsb = _mm_and_si128(_mm_srli_epi32(u, 16), _mm_set1_epi32(1));
    const __m128i r = _mm_add_epi32(_mm_add_epi32(u, _mm_set1_epi32(0x7fff)), lsb);
    const __m128i nan = _mm_cmpgt_epi32(_mm_and_si128(u, _mm_set1_epi32(0x7fffffff)), _mm_set1_epi32(0x7f800000));
    const __m128i quiet = _mm_or_si128(u, _mm_set1_epi32(0x400000));
    return _mm_srai_epi32(_mm_or_si128(_mm_and_si128(nan, quiet), _mm_andnot_si128(nan, r)), 16);
}

/// `n` elements of `src` as fp32, four at a time.
template <class T>
inline void to_floats_sse2(const T* src, float* dst, std::size_t n) noexcept {
    std::size_t i = 0;
    for (; i + 4 <= n; i += 4) _mm_storeu_ps(dst + i, load_floats_sse2(src + i));
    to_floats_scalar(src + i, dst + i, n - i);
}
inline void floats_to_bf16_sse2(const float* src, bfloat16* dst, std::size_t n) noexcept {
    std::size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m128i h = _mm_packs_epi32(round_bf16_sse2(_mm_loadu_ps(src + i)), round_bf16_sse2(_mm_loadu_ps(src + i + 4)));
        _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i), h);
    }
    floats_to_bf16_scalar(src + i, dst + i, n - i);
}

inline constexpr conversion_kernels sse2_kernels{"sse2",
                                                 to_floats_sse2<bfloat16>,
                                                 to_floats_sse2<float16>,
                                                 floats_to_bf16_sse2,
                                                 floats_to_f16_scalar,
                                                 to_floats_sse2<float8_e4m3>,
                                                 to_floats_sse2<float8_e5m2>,
                                                 to_floats_sse2<std::int8_t>};

// --- AVX2 + F16C ---------------------------------------------------------------------------

/// Eight bf16 values at `p` as fp32.
[[nodiscard, gnu::target("avx2,f16c")]] inline __m256 load_floats_avx2(const bfloat16* p) noexcept {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}
/// Eight fp16 values at `p` as fp32 (vcvtph2ps).
[[nodiscard, gnu::target("avx2,f16c")]] inline __m256 load_floats_avx2(const float16* p) noexcept {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}

/// Eight E5M2 values at `p` as fp32 (the top bytes of fp16s, vcvtph2ps).
[[nodiscard, gnu::target("avx2,f16c")]] inline __m256 load_floats_avx2(const float8_e5m2* p) noexcept {
    return _mm256_cvtph_ps(_mm_slli_epi16(_mm_cvtepu8_epi16(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p))), 8));
}
/// Eight E4M3 values at `p` as fp32 (as `load_floats_sse2`).
[[nodiscard, gnu::target("avx2,f16c")]] inline __m256 load_floats_avx2(const float8_e4m3* p) noexcept {
    const __m256i x = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)));
    const __m256i em = _mm256_and_si256(x, _mm256_set1_epi32(0x7f));
    const __m256 normal = _mm256_castsi256_ps(_mm256_add_epi32(_mm256_slli_epi32(em, 20), _mm256_set1_epi32(120 << 23)));
    const __m256 sub = _mm256_mul_ps(_mm256_cvtepi32_ps(em), _mm256_set1_ps(0x1p-9f));
    const __m256i tiny = _mm256_cmpgt_epi32(_mm256_set1_epi32(8), em), nan = _mm256_cmpeq_epi32(em, _mm256_set1_epi32(0x7f));
    __m256 r = _mm256_blendv_ps(normal, sub, _mm256_castsi256_ps(tiny));
    r = _mm256_blendv_ps(r, _mm256_castsi256_ps(_mm256_set1_epi32(0x7fc00000)), _mm256_castsi256_ps(nan));
    const __m256i sign = _mm256_slli_epi32(_mm256_and_si256(x, _mm256_set1_epi32(0x80)), 24);
    return _mm256_or_ps(r, _mm256_castsi256_ps(sign));
}
/// Eight E4M3 values at `p` as fp32, divided by 256 (exactly): each code's sign, exponent
/// and mantissa moved into an fp16 of the same exponent bias gap (vcvtph2ps), the NaN codes
/// (which come out as +-1.875, above every finite code's 1.75) set apart. Four operations
/// fewer than the exact load, for kernels that fold the 256 into a scale they apply anyway.
[[nodiscard, gnu::target("avx2,f16c")]] inline __m256 load_e4m3_over_256_avx2(const float8_e4m3* p) noexcept {
    const __m128i x = _mm_cvtepi8_epi16(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)));  // sign-extended
    const __m256 f = _mm256_cvtph_ps(_mm_and_si128(_mm_slli_epi16(x, 7), _mm_set1_epi16(std::int16_t(0xbf80))));
    const __m256 abs = _mm256_andnot_ps(_mm256_set1_ps(-0.0f), f);
    return _mm256_blendv_ps(f, _mm256_set1_ps(__builtin_nanf("")), _mm256_cmp_ps(abs, _mm256_set1_ps(1.875f), _CMP_EQ_OQ));
}
/// Eight int8 values at `p` as fp32.
[[nodiscard, gnu::target("avx2,f16c")]] inline __m256 load_floats_avx2(const std::int8_t* p) noexcept {
    return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p))));
}
/// `n` elements of `src` as fp32, eight at a time.
template <class T>
[[gnu::target("avx2,f16c")]] inline void to_floats_avx2(const T* src, float* dst, std::size_t n) noexcept {
    std::size_t i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(dst + i, load_floats_avx2(src + i));
    to_floats_scalar(src + i, dst + i, n - i);
}

[[gnu::target("avx2,f16c")]] inline void floats_to_bf16_avx2(const float* src, bfloat16* dst, std::size_t n) noexcept {
    const __m256i one = _mm256_set1_epi32(1), bias = _mm256_set1_epi32(0x7fff), abs_mask = _mm256_set1_epi32(0x7fffffff);
    const __m256i inf = _mm256_set1_epi32(0x7f800000), quiet_bit = _mm256_set1_epi32(0x400000);
    std::size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m256i u = _mm256_castps_si256(_mm256_loadu_ps(src + i));
        const __m256i r = _mm256_add_epi32(_mm256_add_epi32(u, bias), _mm256_and_si256(_mm256_srli_epi32(u, 16), one));
        const __m256i nan = _mm256_cmpgt_epi32(_mm256_and_si256(u, abs_mask), inf);
        const __m256i h = _mm256_srai_epi32(_mm256_blendv_epi8(r, _mm256_or_si256(u, quiet_bit), nan), 16);
        _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i),
                         _mm_packs_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1)));
    }
    floats_to_bf16_scalar(src + i, dst + i, n - i);
}
[[gnu::target("avx2,f16c")]] inline void floats_to_f16_avx2(const float* src, float16* dst, std::size_t n) noexcept {
    std::size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m128i h = _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
        _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i), h);
    }
    floats_to_f16_scalar(src + i, dst + i, n - i);
}

inline constexpr conversion_kernels avx2_kernels{"avx2",
                                                 to_floats_avx2<bfloat16>,
                                                 to_floats_avx2<float16>,
                                                 floats_to_bf16_avx2,
                                                 floats_to_f16_avx2,
                                                 to_floats_avx2<float8_e4m3>,
                                                 to_floats_avx2<float8_e5m2>,
                                                 to_floats_avx2<std::int8_t>};

// --- AVX-512F ------------------------------------------------------------------------------
// The zero-masked forms throughout: GCC 12.0-12.2 reports the undefined pass-through operand
// of the unmasked ones as uninitialized (GCC PR 105593).

/// Sixteen bf16 values at `p` as fp32.
[[nodiscard, gnu::target("avx512f")]] inline __m512 load_floats_avx512(const bfloat16* p) noexcept {
    const __m512i w = _mm512_maskz_cvtepu16_epi32(__mmask16(0xffff), _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
    return _mm512_castsi512_ps(_mm512_maskz_slli_epi32(__mmask16(0xffff), w, 16));
}
/// Sixteen fp16 values at `p` as fp32 (vcvtph2ps).
[[nodiscard, gnu::target("avx512f")]] inline __m512 load_floats_avx512(const float16* p) noexcept {
    return _mm512_maskz_cvtph_ps(__mmask16(0xffff), _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
}

/// Sixteen E5M2 values at `p` as fp32 (the top bytes of fp16s, vcvtph2ps).
[[nodiscard, gnu::target("avx512f")]] inline __m512 load_floats_avx512(const float8_e5m2* p) noexcept {
    const __m256i h = _mm256_slli_epi16(_mm256_cvtepu8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))), 8);
    return _mm512_maskz_cvtph_ps(__mmask16(0xffff), h);
}
/// Sixteen E4M3 values at `p` as fp32 (as `load_floats_sse2`).
[[nodiscard, gnu::target("avx512f")]] inline __m512 load_floats_avx512(const float8_e4m3* p) noexcept {
    const __mmask16 all = 0xffff;
    const __m512i x = _mm512_maskz_cvtepu8_epi32(all, _mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
    const __m512i em = _mm512_and_si512(x, _mm512_set1_epi32(0x7f));
    const __m512 normal = _mm512_castsi512_ps(_mm512_add_epi32(_mm512_maskz_slli_epi32(all, em, 20), _mm512_set1_epi32(120 << 23)));
    const __m512 sub = _mm512_maskz_mul_ps(all, _mm512_maskz_cvtepi32_ps(all, em), _mm512_set1_ps(0x1p-9f));
    __m512 r = _mm512_mask_mov_ps(normal, _mm512_cmplt_epi32_mask(em, _mm512_set1_epi32(8)), sub);
    r = _mm512_mask_mov_ps(r, _mm512_cmpeq_epi32_mask(em, _mm512_set1_epi32(0x7f)), _mm512_castsi512_ps(_mm512_set1_epi32(0x7fc00000)));
    const __m512i sign = _mm512_maskz_slli_epi32(all, _mm512_and_si512(x, _mm512_set1_epi32(0x80)), 24);
    return _mm512_castsi512_ps(_mm512_or_si512(_mm512_castps_si512(r), sign));
}
/// Sixteen E4M3 values at `p` as fp32, divided by 256 (as `load_e4m3_over_256_avx2`).
[[nodiscard, gnu::target("avx512f")]] inline __m512 load_e4m3_over_256_avx512(const float8_e4m3* p) noexcept {
    const __m256i x = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));  // sign-extended
    const __m256i h = _mm256_and_si256(_mm256_slli_epi16(x, 7), _mm256_set1_epi16(std::int16_t(0xbf80)));
    const __m512 f = _mm512_maskz_cvtph_ps(__mmask16(0xffff), h);
    const __mmask16 nan = _mm512_cmp_ps_mask(_mm512_abs_ps(f), _mm512_set1_ps(1.875f), _CMP_EQ_OQ);
    return _mm512_mask_mov_ps(f, nan, _mm512_set1_ps(__builtin_nanf("")));
}
/// Sixteen int8 values at `p` as fp32.
[[nodiscard, gnu::target("avx512f")]] inline __m512 load_floats_avx512(const std::int8_t* p) noexcept {
    const __mmask16 all = 0xffff;
    return _mm512_maskz_cvtepi32_ps(all, _mm512_maskz_cvtepi8_epi32(all, _mm_loadu_si128(reinterpret_cast<const __m128i*>(p))));
}
/// `n` elements of `src` as fp32, sixteen at a time.
template <class T>
[[gnu::target("avx512f")]] inline void to_floats_avx512(const T* src, float* dst, std::size_t n) noexcept {
    std::size_t i = 0;
    for (; i + 16 <= n; i += 16) _mm512_storeu_ps(dst + i, load_floats_avx512(src + i));
    to_floats_scalar(src + i, dst + i, n - i);
}

[[gnu::target("avx512f")]] inline void floats_to_bf16_avx512(const float* src, bfloat16* dst, std::size_t n) noexcept {
    const __mmask16 all = 0xffff;
    const __m512i one = _mm512_set1_epi32(1), bias = _mm512_set1_epi32(0x7fff), abs_mask = _mm512_set1_epi32(0x7fffffff);
    const __m512i inf = _mm512_set1_epi32(0x7f800000), quiet_bit = _mm512_set1_epi32(0x400000);
    std::size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        const __m512i u = _mm512_castps_si512(_mm512_loadu_ps(src + i));
        const __m512i lsb = _mm512_and_si512(_mm512_maskz_srli_epi32(all, u, 16), one);
        const __m512i r = _mm512_add_epi32(_mm512_add_epi32(u, bias), lsb);
        const __mmask16 nan = _mm512_cmpgt_epi32_mask(_mm512_and_si512(u, abs_mask), inf);
        const __m512i h = _mm512_maskz_srli_epi32(all, _mm512_mask_mov_epi32(r, nan, _mm512_or_si512(u, quiet_bit)), 16);
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + i), _mm512_maskz_cvtepi32_epi16(all, h));
    }
    floats_to_bf16_scalar(src + i, dst + i, n - i);
}
[[gnu::target("avx512f")]] inline void floats_to_f16_avx512(const float* src, float16* dst, std::size_t n) noexcept {
    std::size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        const __m256i h =
            _mm512_maskz_cvtps_ph(__mmask16(0xffff), _mm512_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + i), h);
    }
    floats_to_f16_scalar(src + i, dst + i, n - i);
}

inline constexpr conversion_kernels avx512_kernels{"avx512",
                                                   to_floats_avx512<bfloat16>,
                                                   to_floats_avx512<float16>,
                                                   floats_to_bf16_avx512,
                                                   floats_to_f16_avx512,
                                                   to_floats_avx512<float8_e4m3>,
                                                   to_floats_avx512<float8_e5m2>,
                                                   to_floats_avx512<std::int8_t>};
#endif  // FRUGAL_X86_KERNELS

/// The kernels of `isa` ("avx512", "avx2", "sse2", "scalar") when this build has them and
/// the CPU runs them, else null: for tests that compare every path with the scalar one.
[[nodiscard]] inline const conversion_kernels* conversion_kernels_for(const char* isa) noexcept {
    const auto is = [isa](const char* name) { return std::strcmp(isa, name) == 0; };
    if (is("scalar")) return &scalar_kernels;
#if FRUGAL_X86_KERNELS
    __builtin_cpu_init();  // in case this runs before the runtime's own initialisation
    if (is("sse2")) return &sse2_kernels;
    if (is("avx2") && __builtin_cpu_supports("avx2")) {  // (and the OS saves AVX state)
        unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;   // Clang 14's builtin does not know F16C
        if (__get_cpuid(1, &eax, &ebx, &ecx, &edx) != 0 && (ecx & bit_F16C) != 0) return &avx2_kernels;
    }
    if (is("avx512") && __builtin_cpu_supports("avx512f")) return &avx512_kernels;
#endif
    return nullptr;
}

/// The widest kernels the CPU runs, chosen on the first call.
[[nodiscard]] inline const conversion_kernels& conversions() noexcept {
#if FRUGAL_X86_KERNELS
    static const conversion_kernels* const chosen = [] {
        if (const conversion_kernels* k = conversion_kernels_for("avx512")) return k;
        if (const conversion_kernels* k = conversion_kernels_for("avx2")) return k;
        return &sse2_kernels;
    }();
    return *chosen;
#else
    return scalar_kernels;
#endif
}

}  // namespace FRUGAL_SIMD_ABI
}  // namespace detail

inline namespace FRUGAL_SIMD_ABI {

/// The vector path the block conversions (`to_floats`, `from_floats`) take on this CPU:
/// "avx512", "avx2" (with F16C), "sse2" (any other x86-64) or "scalar" (other
/// architectures, CUDA sources, compilers other than GCC and Clang). Chosen once, at the
/// first conversion, from the CPU and not from the compiler flags.
/// @code
/// std::printf("bf16/fp16 conversions: %s\n", frugal::attention::conversion_isa());
/// @endcode
[[nodiscard]] inline const char* conversion_isa() noexcept { return detail::conversions().isa; }

/// Converts `n` elements to fp32, exactly (bit for bit `to_float` on every element, NaNs
/// included; 8-bit K/V elements before their scale), with the widest vector path the CPU
/// has (`conversion_isa()`); fp32 is copied. Each call looks the path up once, so convert
/// rows or blocks, not single elements.
/// @code
/// frugal::attention::to_floats(page_row, row_f32, 128);
/// @endcode
template <kv_storage_type T>
inline void to_floats(const T* src, float* dst, std::size_t n) noexcept {
    using U = std::remove_const_t<T>;
    const detail::conversion_kernels& k = detail::conversions();
    if constexpr (std::is_same_v<U, float>) std::memcpy(dst, src, n * sizeof(float));
    else if constexpr (std::is_same_v<U, bfloat16>) k.bf16_to_floats(src, dst, n);
    else if constexpr (std::is_same_v<U, float16>) k.f16_to_floats(src, dst, n);
    else if constexpr (std::is_same_v<U, float8_e4m3>) k.e4m3_to_floats(src, dst, n);
    else if constexpr (std::is_same_v<U, float8_e5m2>) k.e5m2_to_floats(src, dst, n);
    else k.i8_to_floats(src, dst, n);
}

/// Rounds `n` fp32 values to `T` (nearest even), bit for bit `from_float` on every value
/// (subnormals and NaNs included), with the widest vector path the CPU has
/// (`conversion_isa()`); fp32 is copied.
/// @code
/// frugal::attention::from_floats(row_f32, out_row, 128);
/// @endcode
template <storage_type T>
inline void from_floats(const float* src, T* dst, std::size_t n) noexcept {
    if constexpr (std::is_same_v<T, float>) {
        std::memcpy(dst, src, n * sizeof(float));
    } else if constexpr (std::is_same_v<T, bfloat16>) {
        detail::conversions().floats_to_bf16(src, dst, n);
    } else {
        detail::conversions().floats_to_f16(src, dst, n);
    }
}

}  // namespace FRUGAL_SIMD_ABI

}  // namespace frugal::attention
