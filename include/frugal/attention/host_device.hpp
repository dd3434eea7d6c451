#pragma once
/// @file
/// FRUGAL_HOST_DEVICE: marks the tile math that the CPU driver and the CUDA kernel share.
///
/// Under nvcc it expands to `__host__ __device__`, elsewhere to nothing, so one
/// definition of the online-softmax rescaling and the mask predicates serves both
/// paths and the CPU tests cover the math the GPU runs.
/// @code
/// FRUGAL_HOST_DEVICE inline float twice(float x) { return 2 * x; }
/// @endcode

#ifndef FRUGAL_HOST_DEVICE
#if defined(__CUDACC__)
#define FRUGAL_HOST_DEVICE __host__ __device__
#else
#define FRUGAL_HOST_DEVICE
#endif
#endif
