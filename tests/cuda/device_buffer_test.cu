#include <frugal/backend/cuda/device.cuh>
#include <frugal/backend/cuda/device_buffer.cuh>

#include <gtest/gtest.h>

#include <numeric>
#include <string>
#include <vector>

#include "device_test.hpp"

namespace {

TEST(CudaError, FailedCallNamesTheCallAndTheCudaError) {
    // Runs without a GPU: only the error path of the macro is exercised.
    try {
        FRUGAL_CUDA_CHECK(cudaErrorInvalidValue);
        FAIL();
    } catch (const frugal::error& e) {
        const std::string what = e.what();
        EXPECT_NE(what.find("cudaErrorInvalidValue"), std::string::npos) << what;
    }
}

TEST(DeviceBuffer, EmptyBufferNeedsNoDevice) {
    frugal::cuda::device_buffer<float> empty;
    EXPECT_EQ(empty.size(), 0u);
    EXPECT_EQ(empty.data(), nullptr);
}

TEST(DeviceBuffer, RoundTripsThroughTheDevice) {
    FRUGAL_REQUIRE_GPU();
    std::vector<float> host(1000), back(1000);
    std::iota(host.begin(), host.end(), 0.5f);
    frugal::cuda::device_buffer<float> d(host.size());
    d.copy_from_host(host);
    frugal::cuda::device_buffer<float> moved = std::move(d);
    EXPECT_EQ(d.data(), nullptr);
    moved.copy_to_host(back);
    EXPECT_EQ(host, back);
    std::vector<float> wrong(3);
    EXPECT_THROW(moved.copy_to_host(wrong), frugal::invalid_argument);
}

TEST(DeviceProperties, DescribeAHopperOrNewerGpu) {
    FRUGAL_REQUIRE_GPU();
    const auto p = frugal::cuda::properties();
    EXPECT_FALSE(p.name.empty());
    EXPECT_GT(p.multiprocessors, 0);
    EXPECT_GT(p.l2_bytes, 0u);
    EXPECT_GE(p.shared_per_block_optin, std::size_t(48) << 10);
    // The test build targets sm_90 (CMAKE_CUDA_ARCHITECTURES); an older card cannot run it.
    EXPECT_GE(p.compute_major, 9) << p.name;
}

}  // namespace
