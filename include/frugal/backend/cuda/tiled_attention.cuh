#pragma once
/// @file
/// The CUDA adapter's fused tiled attention (any mask, GQA/MQA), driven by the same
/// `frugal::attention::attention_plan` as the CPU path: fp32 on the CUDA cores, bf16 and
/// fp16 on the tensor cores (FlashAttention-2's loop: a warp's query rows against K/V tiles
/// staged in shared memory, the online softmax in registers). The online-softmax rescaling
/// and the mask predicates are the `FRUGAL_HOST_DEVICE` functions the CPU tests cover.

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include <cuda_runtime.h>

#include "frugal/attention/attention_plan.hpp"
#include "frugal/attention/dtype.hpp"
#include "frugal/attention/heads_view.hpp"
#include "frugal/attention/masks.hpp"
#include "frugal/attention/online_softmax.hpp"
#include "frugal/attention/tiled_attention.hpp"
#include "frugal/backend/cuda/cuda_error.cuh"
#include "frugal/backend/cuda/warp_mma.cuh"

namespace frugal::cuda {

namespace detail {

/// fp32 path: query rows per thread block (one thread per row) and keys per shared-memory tile.
inline constexpr int block_rows = 64;
inline constexpr int block_keys = 32;
/// Largest head dimension the fp32 path's register accumulators hold.
inline constexpr int max_head_dim = 256;
/// Tensor-core path: warps per block (16 query rows each), keys per K/V tile, and the
/// largest head dimension (its Q fragments and output accumulators live in registers).
inline constexpr int mma_warps = 4;
inline constexpr int mma_rows = 16 * mma_warps;
inline constexpr int mma_keys = 64;
inline constexpr int mma_max_head_dim = 128;

template <class T>
struct attention_params {
    const T* q;
    const T* k;
    const T* v;
    T* out;
    float* lse;  // nullptr: not wanted
    std::size_t q_head_stride, q_token_stride, k_head_stride, k_token_stride, v_head_stride, v_token_stride,
        o_head_stride, o_token_stride, lse_row_stride;
    int group, q_len, kv_len, head_dim;
    attention::attention_mask mask;
    float scale_log2;
    attention::softmax_base lse_base;
};

/// fp32: one block of `block_rows` queries of one head against every key tile the mask
/// leaves, K/V tiles staged in shared memory, the online softmax in registers.
__global__ void __launch_bounds__(block_rows) tiled_attention_kernel(attention_params<float> p) {
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
        const attention::softmax_math::rescale step =
            attention::softmax_math::online_rescale<attention::softmax_base::two>(m, tile_max);
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
    if (p.lse != nullptr) p.lse[head * p.lse_row_stride + i] = attention::softmax_math::lse_from_base_two(m, l, p.lse_base);
}

/// Element offset of 16-byte chunk `c` of row `r` in a shared tile of rows of `D` 16-bit
/// values: chunks are XOR-swizzled by the row so the eight rows an `ldmatrix` reads at one
/// column fall in distinct banks.
template <int D>
__device__ inline int swizzled(int r, int c) {
    return (r * (D / 8) + (c ^ (r & 7))) * 8;
}

/// Stages rows [row0, row0 + 64) of one head (the first `rows` of them exist; `d` of the
/// `D` columns) into a swizzled shared tile by asynchronous copies; the rest is zero.
template <class T, int D>
__device__ inline void stage_rows(T* tile, const T* head, std::size_t token_stride, std::int64_t row0, int rows,
                                  int d) {
    constexpr int chunks = D / 8, per_thread = mma_keys * chunks / (32 * mma_warps);
    static_assert(mma_rows == mma_keys, "Q and K/V tiles share the staging loop");
    for (int i = 0; i < per_thread; ++i) {
        const int e = int(threadIdx.x) + 32 * mma_warps * i, r = e / chunks, c = e % chunks;
        const bool ok = r < rows && c * 8 < d;
        const T* src = ok ? head + std::size_t(row0 + r) * token_stride + std::size_t(c) * 8 : head;
        copy_async_16(tile + swizzled<D>(r, c), src, ok);
    }
}

/// bf16/fp16 on the tensor cores: one block of `mma_rows` queries of one head (16 per warp),
/// K/V tiles of `mma_keys` double-buffered in shared memory by asynchronous copies, S = QK^T
/// and O += PV by m16n8k16 products with P taken straight from S's accumulators.
template <class T, int D>
__global__ void __launch_bounds__(32 * mma_warps) mma_attention_kernel(attention_params<T> p) {
    extern __shared__ __align__(128) unsigned char shared_bytes[];
    T* const sq = reinterpret_cast<T*>(shared_bytes);
    T* const sk = sq + mma_rows * D;      // two buffers
    T* const sv = sk + 2 * mma_keys * D;  // two buffers
    const int head = int(blockIdx.x), warp = int(threadIdx.x / 32), lane = int(threadIdx.x % 32);
    const int g = lane / 4, t4 = lane % 4;
    // The longest query blocks of a causal mask go first.
    const std::int64_t q0 = std::int64_t(gridDim.y - 1 - blockIdx.y) * mma_rows;
    const std::int64_t q1 = q0 + mma_rows < p.q_len ? q0 + mma_rows : p.q_len;
    const T* qh = p.q + std::size_t(head) * p.q_head_stride;
    const T* kh = p.k + std::size_t(head / p.group) * p.k_head_stride;
    const T* vh = p.v + std::size_t(head / p.group) * p.v_head_stride;
    const std::int64_t kb = p.mask.key_begin(q0, p.q_len, p.kv_len);
    const std::int64_t ke = p.mask.key_end(q1 - 1, p.q_len, p.kv_len);
    const int tiles = ke > kb ? int((ke - kb + mma_keys - 1) / mma_keys) : 0;

    // This thread's two query rows and the keys each sees.
    const std::int64_t row[2] = {q0 + warp * 16 + g, q0 + warp * 16 + g + 8};
    std::int64_t row_kb[2], row_ke[2];
    for (int r = 0; r < 2; ++r) {
        row_kb[r] = p.mask.key_begin(row[r], p.q_len, p.kv_len);
        row_ke[r] = p.mask.key_end(row[r], p.q_len, p.kv_len);
    }

    stage_rows<T, D>(sq, qh, p.q_token_stride, q0, int(q1 - q0), p.head_dim);
    if (tiles > 0) {
        const int rows = int(ke - kb < mma_keys ? ke - kb : mma_keys);
        stage_rows<T, D>(sk, kh, p.k_token_stride, kb, rows, p.head_dim);
        stage_rows<T, D>(sv, vh, p.v_token_stride, kb, rows, p.head_dim);
    }
    copy_async_commit();

    std::uint32_t qf[D / 16][4];
    float o[D / 8][4];
    for (auto& x : o) x[0] = x[1] = x[2] = x[3] = 0.0f;
    float m[2] = {attention::softmax_math::minus_infinity(), attention::softmax_math::minus_infinity()};
    float l[2] = {0.0f, 0.0f};

    for (int n = 0; n < tiles; ++n) {
        copy_async_wait<0>();
        __syncthreads();  // tile n is visible, and every warp is done with tile n - 1's buffer
        const std::int64_t k0 = kb + std::int64_t(n) * mma_keys;
        if (n + 1 < tiles) {
            const std::int64_t next = k0 + mma_keys;
            const int rows = int(ke - next < mma_keys ? ke - next : mma_keys);
            stage_rows<T, D>(sk + ((n + 1) & 1) * mma_keys * D, kh, p.k_token_stride, next, rows, p.head_dim);
            stage_rows<T, D>(sv + ((n + 1) & 1) * mma_keys * D, vh, p.v_token_stride, next, rows, p.head_dim);
        }
        copy_async_commit();
        if (n == 0) {
            for (int kk = 0; kk < D / 16; ++kk)
                load_matrix_x4<false>(qf[kk], sq + swizzled<D>(warp * 16 + lane % 8 + ((lane / 8) & 1) * 8,
                                                               kk * 2 + lane / 16));
        }
        const T* tk = sk + (n & 1) * mma_keys * D;
        const T* tv = sv + (n & 1) * mma_keys * D;

        float s[mma_keys / 8][4];
        for (auto& x : s) x[0] = x[1] = x[2] = x[3] = 0.0f;
        for (int kk = 0; kk < D / 16; ++kk) {
            for (int nn = 0; nn < mma_keys / 16; ++nn) {
                std::uint32_t b[4];
                load_matrix_x4<false>(b, tk + swizzled<D>(nn * 16 + lane % 8 + (lane / 16) * 8, kk * 2 + ((lane / 8) & 1)));
                mma_16x8x16<T>(s[2 * nn], qf[kk], b[0], b[1]);
                mma_16x8x16<T>(s[2 * nn + 1], qf[kk], b[2], b[3]);
            }
        }

        // Scale, mask (tiles the mask crosses and the ragged last tile), online softmax.
        const std::int64_t k1 = k0 + mma_keys;
        const bool masked = k1 > ke || p.mask.classify(q0, q1, k0, k1, p.q_len, p.kv_len) != attention::tile_coverage::full;
        float tile_max[2] = {attention::softmax_math::minus_infinity(), attention::softmax_math::minus_infinity()};
        for (int j = 0; j < mma_keys / 8; ++j) {
            for (int e = 0; e < 4; ++e) {
                const int r = e / 2;
                const std::int64_t key = k0 + j * 8 + t4 * 2 + (e & 1);
                const bool seen = !masked || (key >= row_kb[r] && key < row_ke[r]);
                s[j][e] = seen ? s[j][e] * p.scale_log2 : attention::softmax_math::minus_infinity();
                tile_max[r] = fmaxf(tile_max[r], s[j][e]);
            }
        }
        float alpha[2], shift[2];
        for (int r = 0; r < 2; ++r) {
            tile_max[r] = fmaxf(tile_max[r], __shfl_xor_sync(0xffffffffu, tile_max[r], 1));
            tile_max[r] = fmaxf(tile_max[r], __shfl_xor_sync(0xffffffffu, tile_max[r], 2));
            const auto step = attention::softmax_math::online_rescale<attention::softmax_base::two>(m[r], tile_max[r]);
            m[r] = step.max;
            alpha[r] = step.alpha;
            shift[r] = step.shift;
            l[r] *= step.alpha;
        }
        for (int j = 0; j < mma_keys / 8; ++j) {
            for (int e = 0; e < 4; ++e) {
                s[j][e] = exp2f(s[j][e] - shift[e / 2]);
                l[e / 2] += s[j][e];
            }
        }
        for (auto& x : o) {
            x[0] *= alpha[0];
            x[1] *= alpha[0];
            x[2] *= alpha[1];
            x[3] *= alpha[1];
        }
        for (int kk = 0; kk < mma_keys / 16; ++kk) {
            const std::uint32_t a[4] = {pack2<T>(s[2 * kk][0], s[2 * kk][1]), pack2<T>(s[2 * kk][2], s[2 * kk][3]),
                                        pack2<T>(s[2 * kk + 1][0], s[2 * kk + 1][1]),
                                        pack2<T>(s[2 * kk + 1][2], s[2 * kk + 1][3])};
            for (int dd = 0; dd < D / 16; ++dd) {
                std::uint32_t b[4];
                load_matrix_x4<true>(b, tv + swizzled<D>(kk * 16 + lane % 8 + ((lane / 8) & 1) * 8, dd * 2 + lane / 16));
                mma_16x8x16<T>(o[2 * dd], a, b[0], b[1]);
                mma_16x8x16<T>(o[2 * dd + 1], a, b[2], b[3]);
            }
        }
    }

    for (int r = 0; r < 2; ++r) {
        l[r] += __shfl_xor_sync(0xffffffffu, l[r], 1);
        l[r] += __shfl_xor_sync(0xffffffffu, l[r], 2);
        if (row[r] >= p.q_len) continue;
        const float inv = l[r] > 0.0f ? 1.0f / l[r] : 0.0f;
        T* out = p.out + std::size_t(head) * p.o_head_stride + std::size_t(row[r]) * p.o_token_stride;
        for (int j = 0; j < D / 8; ++j) {
            const int c = j * 8 + t4 * 2;
            if (c < p.head_dim)
                *reinterpret_cast<std::uint32_t*>(out + c) = pack2<T>(o[j][2 * r] * inv, o[j][2 * r + 1] * inv);
        }
        if (p.lse != nullptr && t4 == 0)
            p.lse[std::size_t(head) * p.lse_row_stride + std::size_t(row[r])] = attention::softmax_math::lse_from_base_two(m[r], l[r], p.lse_base);
    }
}

template <int D, class T>
void launch_mma_attention(const attention_params<T>& p, std::size_t q_heads, cudaStream_t stream) {
    constexpr std::size_t shared = std::size_t(mma_rows + 4 * mma_keys) * D * sizeof(T);
    FRUGAL_CUDA_CHECK(cudaFuncSetAttribute(mma_attention_kernel<T, D>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                           int(shared)));
    const dim3 grid(unsigned(q_heads), unsigned((std::size_t(p.q_len) + mma_rows - 1) / mma_rows));
    mma_attention_kernel<T, D><<<grid, 32 * mma_warps, shared, stream>>>(p);
}

}  // namespace detail

/// Runs `plan` on the GPU: `q`, `k`, `v`, `out` (and `lse`, `q_heads x q_len` or empty)
/// are views of device memory with the same shapes, strides and mask semantics as
/// `frugal::attention::tiled::run`, in fp32, bf16 or fp16. fp32 runs on the CUDA cores
/// (head_dim at most 256); bf16 and fp16 on the tensor cores with fp32 accumulation
/// (head_dim a multiple of 8, at most 128; strides multiples of 8 elements and 16-byte
/// aligned data, as cudaMalloc gives). No global workspace. Asynchronous on `stream`;
/// bad views throw `frugal::invalid_argument` before any launch, launch errors
/// `frugal::runtime_error`.
/// @code
/// auto plan = frugal::attention::tiled::plan(shape, {.mask = frugal::attention::attention_mask::causal()}, budget);
/// frugal::cuda::run_tiled_attention<frugal::attention::bfloat16>(plan, q_dev, k_dev, v_dev, out_dev);
/// FRUGAL_CUDA_CHECK(cudaDeviceSynchronize());
/// @endcode
template <attention::storage_type T>
void run_tiled_attention(const attention::attention_plan& plan, attention::heads_view<const T> q,
                         attention::heads_view<const T> k, attention::heads_view<const T> v,
                         attention::heads_view<T> out, matrix_view<float> lse = {}, cudaStream_t stream = nullptr) {
    const attention::attention_shape& sh = plan.shape();
    frugal::attention::detail::check_attention_views(sh, q, k, v, out, lse, "cuda::run_tiled_attention");
    FRUGAL_CHECK(sh.q_len < (std::size_t(1) << 31) && sh.kv_len < (std::size_t(1) << 31) && sh.q_heads < 65536,
                 "cuda::run_tiled_attention: ", sh.q_heads, " heads of ", sh.q_len, " x ", sh.kv_len,
                 " exceed the launch grid");
    const detail::attention_params<T> p{q.data(), k.data(), v.data(), out.data(), lse.empty() ? nullptr : lse.data(),
                                        q.head_stride(), q.token_stride(), k.head_stride(), k.token_stride(),
                                        v.head_stride(), v.token_stride(), out.head_stride(), out.token_stride(),
                                        lse.row_stride(), int(sh.group()), int(sh.q_len), int(sh.kv_len),
                                        int(sh.head_dim), plan.options().mask, plan.score_scale_log2(),
                                        plan.options().lse_base};
    if constexpr (std::is_same_v<T, float>) {
        FRUGAL_CHECK(sh.head_dim <= std::size_t(detail::max_head_dim), "cuda::run_tiled_attention: head_dim ",
                     sh.head_dim, " exceeds ", detail::max_head_dim);
        const dim3 grid(unsigned((sh.q_len + detail::block_rows - 1) / detail::block_rows), unsigned(sh.q_heads));
        const std::size_t shared = 2 * detail::block_keys * sh.head_dim * sizeof(float);
        detail::tiled_attention_kernel<<<grid, detail::block_rows, shared, stream>>>(p);
    } else {
        FRUGAL_CHECK(sh.head_dim % 8 == 0 && sh.head_dim <= std::size_t(detail::mma_max_head_dim),
                     "cuda::run_tiled_attention: head_dim ", sh.head_dim, " of ", attention::dtype_name(attention::dtype_of<T>),
                     " storage must be a multiple of 8 and at most ", detail::mma_max_head_dim);
        FRUGAL_CHECK(sh.q_len <= std::size_t(65535) * detail::mma_rows, "cuda::run_tiled_attention: q_len ", sh.q_len,
                     " exceeds the launch grid's ", 65535 * detail::mma_rows, " rows");
        for (const std::size_t stride : {q.head_stride(), q.token_stride(), k.head_stride(), k.token_stride(),
                                         v.head_stride(), v.token_stride(), out.head_stride(), out.token_stride()})
            FRUGAL_CHECK(stride % 8 == 0, "cuda::run_tiled_attention: stride ", stride,
                         " is not a multiple of 8 elements (16-byte rows)");
        for (const void* ptr : {static_cast<const void*>(q.data()), static_cast<const void*>(k.data()),
                                static_cast<const void*>(v.data()), static_cast<const void*>(out.data())})
            FRUGAL_CHECK(reinterpret_cast<std::uintptr_t>(ptr) % 16 == 0, "cuda::run_tiled_attention: data at ", ptr,
                         " is not 16-byte aligned");
        if (sh.head_dim <= 64) {
            detail::launch_mma_attention<64>(p, sh.q_heads, stream);
        } else {
            detail::launch_mma_attention<128>(p, sh.q_heads, stream);
        }
    }
    FRUGAL_CUDA_CHECK(cudaGetLastError());
}

}  // namespace frugal::cuda
