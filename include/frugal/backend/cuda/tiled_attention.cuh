#pragma once
/// @file
/// The CUDA adapter's fused tiled-attention kernel (fp32, any mask, GQA/MQA), driven by
/// the same `frugal::attention::attention_plan` as the CPU path. Its online-softmax rescaling and
/// mask predicates are the `FRUGAL_HOST_DEVICE` functions the CPU tests cover.

#include <cstddef>
#include <cstdint>

#include <cuda_runtime.h>

#include "frugal/attention/heads_view.hpp"
#include "frugal/attention/masks.hpp"
#include "frugal/attention/online_softmax.hpp"
#include "frugal/attention/tiled_attention.hpp"
#include "frugal/backend/cuda/cuda_error.cuh"
#include "frugal/attention/attention_plan.hpp"

namespace frugal::cuda {

namespace detail {

/// Query rows per thread block (one thread per row) and keys per shared-memory tile.
inline constexpr int block_rows = 64;
inline constexpr int block_keys = 32;
/// Largest head dimension the register accumulators hold.
inline constexpr int max_head_dim = 256;

struct attention_params {
    const float* q;
    const float* k;
    const float* v;
    float* out;
    float* lse;  // nullptr: not wanted
    std::size_t q_head_stride, q_token_stride, k_head_stride, k_token_stride, v_head_stride, v_token_stride,
        o_head_stride, o_token_stride, lse_row_stride;
    int group, q_len, kv_len, head_dim;
    attention::attention_mask mask;
    float scale_log2;
    bool lse_natural;
};

/// One block: `block_rows` queries of one head against every key tile the mask leaves,
/// K/V tiles staged in shared memory, the online softmax in registers.
__global__ void __launch_bounds__(block_rows) tiled_attention_kernel(attention_params p) {
    extern __shared__ float tile[];  // K then V: block_keys x head_dim each
    const int head = blockIdx.y, d = p.head_dim;
    const std::int64_t q0 = std::int64_t(blockIdx.x) * block_rows, i = q0 + threadIdx.x;
    const std::int64_t q1 = q0 + block_rows < p.q_len ? q0 + block_rows : p.q_len;
    const bool valid = i < p.q_len;
    const float* qi = p.q + head * p.q_head_stride + (valid ? i : 0) * p.q_token_stride;
    const float* kh = p.k + (head / p.group) * p.k_head_stride;
    const float* vh = p.v + (head / p.group) * p.v_head_stride;
    float o[max_head_dim];
    for (int c = 0; c < d; ++c) o[c] = 0.0f;
    float m = attention::softmax_math::minus_infinity(), l = 0.0f;
    const std::int64_t k_begin = p.mask.key_begin(q0, p.q_len, p.kv_len);
    const std::int64_t k_end = p.mask.key_end(q1 - 1, p.q_len, p.kv_len);
    for (std::int64_t k0 = k_begin; k0 < k_end; k0 += block_keys) {
        const int cols = int(k_end - k0 < block_keys ? k_end - k0 : block_keys);
        const attention::tile_coverage cover = p.mask.classify(q0, q1, k0, k0 + cols, p.q_len, p.kv_len);
        if (cover == attention::tile_coverage::skip) continue;  // uniform across the block
        __syncthreads();
        for (int e = threadIdx.x; e < cols * d; e += blockDim.x) {
            const int r = e / d, c = e % d;
            tile[e] = kh[(k0 + r) * p.k_token_stride + c];
            tile[block_keys * d + e] = vh[(k0 + r) * p.v_token_stride + c];
        }
        __syncthreads();
        if (!valid) continue;
        float s[block_keys];
        float tile_max = attention::softmax_math::minus_infinity();
        for (int j = 0; j < cols; ++j) {
            float acc = 0.0f;
            for (int c = 0; c < d; ++c) acc += qi[c] * tile[j * d + c];
            s[j] = cover == attention::tile_coverage::partial && !p.mask.visible(i, k0 + j, p.q_len, p.kv_len)
                       ? attention::softmax_math::minus_infinity()
                       : acc * p.scale_log2;
            tile_max = fmaxf(tile_max, s[j]);
        }
        const attention::softmax_math::rescale step = attention::softmax_math::online_rescale<attention::softmax_base::two>(m, tile_max);
        l *= step.alpha;
        for (int c = 0; c < d; ++c) o[c] *= step.alpha;
        for (int j = 0; j < cols; ++j) {
            const float pj = exp2f(s[j] - step.shift);
            l += pj;
            for (int c = 0; c < d; ++c) o[c] += pj * tile[block_keys * d + j * d + c];
        }
        m = step.max;
    }
    if (!valid) return;
    float* oi = p.out + head * p.o_head_stride + i * p.o_token_stride;
    const float inv = l > 0.0f ? 1.0f / l : 0.0f;
    for (int c = 0; c < d; ++c) oi[c] = o[c] * inv;
    if (p.lse != nullptr) {
        const float lse2 = attention::softmax_math::lse<attention::softmax_base::two>(m, l);
        p.lse[head * p.lse_row_stride + i] = p.lse_natural && l > 0.0f ? lse2 * 0.6931471805599453f : lse2;
    }
}

}  // namespace detail

/// Runs `plan` on the GPU: `q`, `k`, `v`, `out` (and `lse`, `q_heads x q_len` or empty)
/// are views of device memory with the same shapes, strides and mask semantics as
/// `frugal::attention::tiled::run`. The kernel keeps one K/V tile in shared memory per
/// block and the row state in registers, so it needs no global workspace; head_dim must
/// be at most 256. Asynchronous on `stream`; launch errors throw `frugal::runtime_error`.
/// @code
/// auto plan = frugal::attention::tiled::plan(shape, {.mask = frugal::attention::attention_mask::causal()}, budget);
/// frugal::cuda::run_tiled_attention(plan, q_dev, k_dev, v_dev, out_dev);
/// FRUGAL_CUDA_CHECK(cudaDeviceSynchronize());
/// @endcode
inline void run_tiled_attention(const attention::attention_plan& plan, attention::heads_view<const float> q, attention::heads_view<const float> k,
                                attention::heads_view<const float> v, attention::heads_view<float> out, matrix_view<float> lse = {},
                                cudaStream_t stream = nullptr) {
    const attention::attention_shape& sh = plan.shape();
    frugal::attention::detail::check_attention_views(sh, q, k, v, out, lse, "cuda::run_tiled_attention");
    FRUGAL_CHECK(sh.head_dim <= std::size_t(detail::max_head_dim), "cuda::run_tiled_attention: head_dim ",
                 sh.head_dim, " exceeds ", detail::max_head_dim);
    FRUGAL_CHECK(sh.q_len < (std::size_t(1) << 31) && sh.kv_len < (std::size_t(1) << 31) && sh.q_heads < 65536,
                 "cuda::run_tiled_attention: ", sh.q_heads, " heads of ", sh.q_len, " x ", sh.kv_len,
                 " exceed the launch grid");
    detail::attention_params p{q.data(), k.data(), v.data(), out.data(), lse.empty() ? nullptr : lse.data(),
                               q.head_stride(), q.token_stride(), k.head_stride(), k.token_stride(),
                               v.head_stride(), v.token_stride(), out.head_stride(), out.token_stride(),
                               lse.row_stride(), int(sh.group()), int(sh.q_len), int(sh.kv_len), int(sh.head_dim),
                               plan.options().mask, plan.score_scale_log2(),
                               plan.options().lse_base == attention::softmax_base::e};
    const dim3 grid(unsigned((sh.q_len + detail::block_rows - 1) / detail::block_rows), unsigned(sh.q_heads));
    const std::size_t shared = 2 * detail::block_keys * sh.head_dim * sizeof(float);
    detail::tiled_attention_kernel<<<grid, detail::block_rows, shared, stream>>>(p);
    FRUGAL_CUDA_CHECK(cudaGetLastError());
}

}  // namespace frugal::cuda
