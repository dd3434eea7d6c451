#pragma once
/// @file
/// The warp-level primitives of the tensor-core kernels (sm_80 and later, Hopper included):
/// asynchronous 16-byte global-to-shared copies, `ldmatrix` fragment loads and the
/// m16n8k16 matrix multiply-accumulate in bf16 or fp16 with fp32 accumulators. Written as
/// inline PTX because the CUDA C++ WMMA API hides the fragment layout the attention
/// kernels rely on (the score accumulators are reused as the next product's operand).

#include <cstdint>
#include <type_traits>

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "frugal/attention/dtype.hpp"

namespace frugal::cuda::detail {

/// The shared-memory address of `p`, as the PTX instructions below take it.
__device__ inline std::uint32_t shared_address(const void* p) {
    return static_cast<std::uint32_t>(__cvta_generic_to_shared(p));
}

/// Copies 16 bytes from global `src` to shared `dst` without staging in registers;
/// `valid == false` zero-fills `dst` and reads nothing.
__device__ inline void copy_async_16(void* dst, const void* src, bool valid) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(shared_address(dst)), "l"(src),
                 "r"(valid ? 16 : 0));
#else
    (void)dst, (void)src, (void)valid;
    __trap();
#endif
}

/// Closes the group of copies issued so far.
__device__ inline void copy_async_commit() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    asm volatile("cp.async.commit_group;\n" ::);
#endif
}

/// Waits until at most `Pending` committed groups of this thread are still in flight.
template <int Pending>
__device__ inline void copy_async_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    asm volatile("cp.async.wait_group %0;\n" ::"n"(Pending));
#endif
}

/// Loads four 8x8 b16 matrices from shared memory; lane l gives the address of row l % 8
/// of matrix l / 8. `Transpose` loads each matrix transposed.
template <bool Transpose>
__device__ inline void load_matrix_x4(std::uint32_t (&r)[4], const void* row) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 750
    if constexpr (Transpose) {
        asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                     : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                     : "r"(shared_address(row)));
    } else {
        asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                     : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                     : "r"(shared_address(row)));
    }
#else
    (void)r, (void)row;
    __trap();
#endif
}

/// d += a * b for a 16x16 row-major A, a 16x8 column-major B (both bf16 or fp16, as `T`)
/// and a 16x8 fp32 accumulator, in the register layout of PTX's m16n8k16.
template <class T>
__device__ inline void mma_16x8x16(float (&d)[4], const std::uint32_t (&a)[4], std::uint32_t b0, std::uint32_t b1) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    if constexpr (std::is_same_v<T, attention::bfloat16>) {
        asm volatile(
            "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
            "{%0, %1, %2, %3};\n"
            : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
            : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
    } else {
        static_assert(std::is_same_v<T, attention::float16>, "mma_16x8x16 takes bf16 or fp16 operands");
        asm volatile(
            "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
            "{%0, %1, %2, %3};\n"
            : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
            : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
    }
#else
    (void)d, (void)a, (void)b0, (void)b1;
    __trap();
#endif
}

/// Two fp32 values rounded to nearest-even `T` and packed, `lo` in the low half.
template <class T>
__device__ inline std::uint32_t pack2(float lo, float hi) {
    if constexpr (std::is_same_v<T, attention::bfloat16>) {
        const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
        return *reinterpret_cast<const std::uint32_t*>(&v);
    } else {
        const __half2 v = __floats2half2_rn(lo, hi);
        return *reinterpret_cast<const std::uint32_t*>(&v);
    }
}

/// The two 16-bit values packed in `bits` (low half first) as fp32.
template <class T>
__device__ inline float2 unpack2(std::uint32_t bits) {
    if constexpr (std::is_same_v<T, attention::bfloat16>) {
        return make_float2(__uint_as_float(bits << 16), __uint_as_float(bits & 0xffff0000u));
    } else {
        return __half22float2(*reinterpret_cast<const __half2*>(&bits));
    }
}

}  // namespace frugal::cuda::detail
