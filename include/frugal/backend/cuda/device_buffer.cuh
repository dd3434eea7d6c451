#pragma once
/// @file
/// device_buffer<T>: RAII ownership of a typed cudaMalloc allocation.

#include <cstddef>
#include <limits>
#include <span>
#include <type_traits>
#include <utility>

#include <cuda_runtime.h>

#include "frugal/backend/cuda/cuda_error.cuh"

namespace frugal::cuda {

/// A typed device allocation freed on destruction; move-only.
/// @code
/// frugal::cuda::device_buffer<float> d(host.size());
/// d.copy_from_host(host);
/// d.copy_to_host(result);
/// @endcode
template <class T>
class device_buffer {
    static_assert(std::is_trivially_copyable_v<T>, "device_buffer holds trivially copyable types");

public:
    device_buffer() noexcept = default;

    explicit device_buffer(std::size_t count) : size_(count) {
        FRUGAL_CHECK(count <= std::numeric_limits<std::size_t>::max() / sizeof(T),
                     "device_buffer: ", count, " elements overflow a byte count");
        if (count > 0) FRUGAL_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&data_), bytes()));
    }

    device_buffer(device_buffer&& other) noexcept
        : data_(std::exchange(other.data_, nullptr)), size_(std::exchange(other.size_, 0)) {}

    device_buffer& operator=(device_buffer&& other) noexcept {
        if (this != &other) {
            release();
            data_ = std::exchange(other.data_, nullptr);
            size_ = std::exchange(other.size_, 0);
        }
        return *this;
    }

    device_buffer(const device_buffer&) = delete;
    device_buffer& operator=(const device_buffer&) = delete;
    ~device_buffer() { release(); }

    [[nodiscard]] T* data() const noexcept { return data_; }
    [[nodiscard]] std::size_t size() const noexcept { return size_; }
    [[nodiscard]] std::size_t bytes() const noexcept { return size_ * sizeof(T); }

    /// Copies `host` (exactly `size()` elements) to the device.
    void copy_from_host(std::span<const T> host) {
        FRUGAL_CHECK(host.size() == size_, "device_buffer::copy_from_host: ", host.size(),
                     " elements into a buffer of ", size_);
        if (size_ > 0) FRUGAL_CUDA_CHECK(cudaMemcpy(data_, host.data(), bytes(), cudaMemcpyHostToDevice));
    }

    /// Copies the buffer into `host` (exactly `size()` elements).
    void copy_to_host(std::span<T> host) const {
        FRUGAL_CHECK(host.size() == size_, "device_buffer::copy_to_host: ", size_,
                     " elements into a span of ", host.size());
        if (size_ > 0) FRUGAL_CUDA_CHECK(cudaMemcpy(host.data(), data_, bytes(), cudaMemcpyDeviceToHost));
    }

private:
    void release() noexcept {
        if (data_ != nullptr) (void)cudaFree(data_);
        data_ = nullptr;
        size_ = 0;
    }

    T* data_ = nullptr;
    std::size_t size_ = 0;
};

}  // namespace frugal::cuda
