#pragma once
// Helpers of the CUDA adapter's tests: skip without a GPU, move vectors to and from the
// device, and poison outputs (NaN) so an element a kernel never wrote fails the oracle.

#include <frugal/attention/dtype.hpp>
#include <frugal/backend/cuda/device.cuh>
#include <frugal/backend/cuda/device_buffer.cuh>

#include <gtest/gtest.h>

#include <limits>
#include <vector>

#define FRUGAL_REQUIRE_GPU()                                                                   \
    if (frugal::cuda::device_count() == 0) {                                                   \
        GTEST_SKIP() << "no CUDA device on this machine: device test skipped (compiled only)"; \
    }

namespace frugal::testing {

template <class T>
cuda::device_buffer<T> upload(const std::vector<T>& host) {
    cuda::device_buffer<T> d(host.size());
    d.copy_from_host(host);
    return d;
}

template <class T>
std::vector<T> download(const cuda::device_buffer<T>& d) {
    std::vector<T> host(d.size());
    d.copy_to_host(host);
    return host;
}

/// A device buffer of `n` NaNs of `T`.
template <class T>
cuda::device_buffer<T> poisoned(std::size_t n) {
    return upload(std::vector<T>(n, attention::from_float<T>(std::numeric_limits<float>::quiet_NaN())));
}

template <class T>
std::vector<float> as_floats(const std::vector<T>& x) {
    std::vector<float> f;
    f.reserve(x.size());
    for (const T& v : x) f.push_back(attention::to_float(v));
    return f;
}

}  // namespace frugal::testing
