#pragma once
/// @file
/// Device discovery for the CUDA adapter.

#include <cuda_runtime.h>

namespace frugal::cuda {

/// Number of usable CUDA devices; 0 when there is no GPU or no driver (never throws),
/// so callers and tests can fall back or skip.
/// @code
/// if (frugal::cuda::device_count() == 0) { /* use the CPU backend */ }
/// @endcode
[[nodiscard]] inline int device_count() noexcept {
    int count = 0;
    if (cudaGetDeviceCount(&count) != cudaSuccess) {
        (void)cudaGetLastError();  // clear the sticky "no device" status
        return 0;
    }
    return count;
}

}  // namespace frugal::cuda
