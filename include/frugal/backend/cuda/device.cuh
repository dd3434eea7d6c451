#pragma once
/// @file
/// Device discovery for the CUDA adapter: whether there is a GPU, and the few properties
/// its plans are sized from.

#include <cstddef>
#include <string>

#include <cuda_runtime.h>

#include "frugal/backend/cuda/cuda_error.cuh"

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

/// What frugal's GPU plans read off a device: the multiprocessors to fill, the L2 a
/// benchmark must flush, and the shared memory a block may opt into.
struct device_properties {
    std::string name;
    int multiprocessors = 0;
    int compute_major = 0, compute_minor = 0;
    std::size_t l2_bytes = 0;
    std::size_t shared_per_block_optin = 0;
    std::size_t global_bytes = 0;
};

/// The properties of `device` (default: the calling thread's current device).
/// @code
/// auto props = frugal::cuda::properties();
/// std::printf("%s: %d SMs\n", props.name.c_str(), props.multiprocessors);
/// @endcode
[[nodiscard]] inline device_properties properties(int device = -1) {
    if (device < 0) FRUGAL_CUDA_CHECK(cudaGetDevice(&device));
    cudaDeviceProp p{};
    FRUGAL_CUDA_CHECK(cudaGetDeviceProperties(&p, device));
    return {p.name, p.multiProcessorCount, p.major, p.minor, std::size_t(p.l2CacheSize),
            std::size_t(p.sharedMemPerBlockOptin), std::size_t(p.totalGlobalMem)};
}

}  // namespace frugal::cuda
