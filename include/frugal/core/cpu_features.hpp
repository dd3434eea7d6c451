#pragma once
/// @file
/// What frugal's vector kernels build on. Each kernel is compiled for its own instruction
/// set with [[gnu::target]], whatever the unit's -m flags, and the widest one the CPU runs
/// is picked once per process at run time (cpuid); this header says where that is possible
/// (FRUGAL_X86_KERNELS) and names the inline namespace the kernels live in
/// (FRUGAL_SIMD_ABI).

// The vector paths: x86-64 with GCC or Clang (target attributes, __builtin_cpu_supports),
// never in CUDA sources; everywhere else the scalar loops run.
#if !defined(__CUDACC__) && defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define FRUGAL_X86_KERNELS 1
#include <cpuid.h>
#include <immintrin.h>
#else
#define FRUGAL_X86_KERNELS 0
#endif

// Kernels live in an inline namespace named after the level of x86-64 the unit is compiled
// for. Their source does not depend on -m flags, but the compiler still adds those flags
// to every function it compiles: naming the level keeps units built for different levels
// from sharing one copy (the linker would keep either, and a copy compiled for AVX-512
// would run on a CPU without it). Units of one level share theirs.
#if !FRUGAL_X86_KERNELS
#define FRUGAL_SIMD_ABI portable
#elif defined(__AVX512F__)
#define FRUGAL_SIMD_ABI x86_64_v4
#elif defined(__AVX2__)
#define FRUGAL_SIMD_ABI x86_64_v3
#elif defined(__AVX__)
#define FRUGAL_SIMD_ABI x86_64_avx
#elif defined(__SSE4_1__)
#define FRUGAL_SIMD_ABI x86_64_v2
#else
#define FRUGAL_SIMD_ABI x86_64_v1
#endif
