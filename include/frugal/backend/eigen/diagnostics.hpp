#pragma once
/// @file
/// FRUGAL_EIGEN_DIAGNOSTICS_PUSH / _POP: bracket the backend's includes of Eigen and xsimd
/// and the backend code into which their AVX-512 kernels are inlined.
///
/// GCC 12.0 to 12.2 report the undefined pass-through operand of their own unmasked AVX-512
/// intrinsics (`__m512 __Y = __Y;` in avx512fintrin.h) as uninitialized wherever Eigen's or
/// xsimd's AVX-512 code is inlined (GCC PR 105593, fixed in 12.3): hundreds of false
/// `-Wuninitialized` / `-Wmaybe-uninitialized` warnings in a unit built with
/// `-march=native` on an AVX-512 machine. The brackets silence those two warnings there, on
/// those compilers only. frugal's own intrinsics (`attention/dtype.hpp`) use the zero-masked
/// forms instead and need no bracket. GCC judges a function of Eigen or xsimd that is not
/// inlined into frugal's code by where its header was first included: a unit that includes
/// Eigen or xsimd itself before frugal's backend headers gets those warnings for them.
/// @code
/// #include "frugal/backend/eigen/diagnostics.hpp"
/// FRUGAL_EIGEN_DIAGNOSTICS_PUSH
/// #include <Eigen/Core>
/// FRUGAL_EIGEN_DIAGNOSTICS_POP
/// @endcode

#if defined(__GNUC__) && !defined(__clang__) && __GNUC__ == 12 && __GNUC_MINOR__ < 3
#define FRUGAL_EIGEN_DIAGNOSTICS_PUSH                     \
    _Pragma("GCC diagnostic push")                        \
    _Pragma("GCC diagnostic ignored \"-Wuninitialized\"") \
    _Pragma("GCC diagnostic ignored \"-Wmaybe-uninitialized\"")
#define FRUGAL_EIGEN_DIAGNOSTICS_POP _Pragma("GCC diagnostic pop")
#else
#define FRUGAL_EIGEN_DIAGNOSTICS_PUSH
#define FRUGAL_EIGEN_DIAGNOSTICS_POP
#endif
