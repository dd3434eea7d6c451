#pragma once
/// @file
/// CUDA runtime errors as frugal::runtime_error.

#include <cuda_runtime.h>

#include "frugal/core/error.hpp"

/// Evaluates a CUDA runtime call and throws `frugal::runtime_error` naming the call and
/// the CUDA error string when it does not return `cudaSuccess`.
/// @code
/// FRUGAL_CUDA_CHECK(cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice));
/// @endcode
#define FRUGAL_CUDA_CHECK(call)                                                              \
    do {                                                                                     \
        const cudaError_t frugal_cuda_status_ = (call);                                      \
        if (frugal_cuda_status_ != cudaSuccess) {                                            \
            FRUGAL_FAIL(::frugal::runtime_error, "CUDA call '", #call, "' failed: ",         \
                        cudaGetErrorName(frugal_cuda_status_), " (",                         \
                        cudaGetErrorString(frugal_cuda_status_), ")");                       \
        }                                                                                    \
    } while (false)
