// A consumer of the CUDA adapter: plans a decode batch on the host and, when a GPU is
// present, runs it; without one it stops after the host-side work (compiled and linked).
#include <frugal/backend/cuda/batch_attention.cuh>
#include <frugal/backend/cuda/device.cuh>
#include <frugal/core/version.hpp>

#include <cstdio>
#include <vector>

int main() {
    const std::vector<std::size_t> qo_indptr{0, 1, 2}, kv_lens{40, 17};
    const frugal::attention::batch_plan plan(
        {.q_heads = 4, .kv_heads = 2, .head_dim = 64, .qo_indptr = qo_indptr, .kv_lens = kv_lens},
        {.threads = 4, .group_decode_heads = false});  // the GPU's plan: one decode item per KV head
    const bool ok = plan.items().size() >= 4 && plan.decode_heads() == 1;
    std::printf("frugal %s cuda %s (%d devices)\n", frugal::version, ok ? "ok" : "WRONG", frugal::cuda::device_count());
    return ok ? 0 : 1;
}
