#pragma once
// `frugal-bench attention --backend cuda`: the CUDA adapter's attention timed on the device
// against a device-to-device copy of the same bytes (the bandwidth roofline of decode) and
// cuBLAS's GEMM of the same FLOP count (the compute roofline of prefill), in the same run.

#include <cstddef>
#include <string>
#include <vector>

#include "harness.hpp"

namespace frugal::bench::gpu {

/// The serving workload of the CPU bench (same lengths, same shuffled pages); `mode` decode
/// and mixed run the batch kernel over paged K/V, prefill the tiled kernel per sequence over
/// head-major contiguous Q/K/V.
struct workload {
    std::string mode = "decode";
    std::size_t batch = 8, kv_len = 4096, heads = 32, kv_heads = 8, d = 128, page_size = 16, chunk = 512;
    double spread = 0;
    std::string dtype = "bf16", layout = "hnd";
    bool causal = false;  // prefill: causal mask (decode and mixed are always causal)
    int reps = 30;        // timed runs of each implementation, the L2 flushed before each
};

/// One record per implementation (`frugal` and its baselines), timed with CUDA events.
std::vector<record> run_attention(const workload& w);

}  // namespace frugal::bench::gpu
