#pragma once
/// @file
/// The merge of two partial attention results over disjoint keys on the GPU (FlashInfer's
/// `merge_state_in_place`; cascade attention: a shared prefix computed once, each request's
/// own keys apart). The merge weights are the `FRUGAL_HOST_DEVICE` `merge_scales` the CPU's
/// `merge_output` uses.

#include <cstddef>

#include <cuda_runtime.h>

#include "frugal/attention/dtype.hpp"
#include "frugal/attention/heads_view.hpp"
#include "frugal/attention/online_softmax.hpp"
#include "frugal/backend/cuda/cuda_error.cuh"
#include "frugal/core/matrix_view.hpp"

namespace frugal::cuda {

namespace detail {

template <class T>
struct merge_params {
    T* out;
    float* lse;
    const T* other;
    const float* other_lse;
    std::size_t heads, tokens, dim, o_head_stride, o_token_stride, b_head_stride, b_token_stride, lse_row_stride,
        other_lse_row_stride;
};

/// A warp per (head, token) row, lanes over the head dimension.
template <class T, attention::softmax_base Base>
__global__ void __launch_bounds__(128) merge_state_kernel(merge_params<T> p) {
    const std::size_t row = std::size_t(blockIdx.x) * 4 + threadIdx.x / 32;
    if (row >= p.heads * p.tokens) return;
    const std::size_t h = row / p.tokens, t = row % p.tokens;
    float& lse_a = p.lse[h * p.lse_row_stride + t];
    const float lse_b = p.other_lse[h * p.other_lse_row_stride + t];
    const auto w = attention::softmax_math::merge_scales<Base>(lse_a, lse_b);
    const float total = w.a + w.b;  // both states are normalized: their sums are 1
    if (total == 0.0f) return;     // neither side saw a key
    T* a = p.out + h * p.o_head_stride + t * p.o_token_stride;
    const T* b = p.other + h * p.b_head_stride + t * p.b_token_stride;
    for (std::size_t c = threadIdx.x % 32; c < p.dim; c += 32)
        a[c] = attention::from_float<T>((w.a * attention::to_float(a[c]) + w.b * attention::to_float(b[c])) / total);
    __syncwarp();
    if (threadIdx.x % 32 == 0) lse_a = w.max + attention::softmax_math::log_in<Base>(total);
}

}  // namespace detail

/// Merges the attention of the same queries over other, disjoint keys (`other`, `other_lse`)
/// into (`out`, `lse`) in place on the GPU: views of device memory, outputs
/// `[heads, tokens, dim]`-shaped with any strides, LSEs `heads x tokens` in `base` as the
/// attention runs wrote them (-inf for a row without keys: it takes the other side's).
/// Shapes are checked before the launch; asynchronous on `stream`.
/// @code
/// frugal::cuda::merge_state_in_place<frugal::attention::bfloat16>(out_dev, lse_dev, suffix_dev, suffix_lse_dev);
/// @endcode
template <attention::storage_type T>
void merge_state_in_place(attention::heads_view<T> out, matrix_view<float> lse, attention::heads_view<const T> other,
                          matrix_view<const float> other_lse,
                          attention::softmax_base base = attention::softmax_base::e, cudaStream_t stream = nullptr) {
    FRUGAL_CHECK(out.heads() == other.heads() && out.tokens() == other.tokens() && out.dim() == other.dim() &&
                     lse.rows() == out.heads() && lse.cols() == out.tokens() && other_lse.rows() == out.heads() &&
                     other_lse.cols() == out.tokens(),
                 "cuda::merge_state_in_place: outputs ", out.heads(), " x ", out.tokens(), " x ", out.dim(), " and ",
                 other.heads(), " x ", other.tokens(), " x ", other.dim(), " with LSE ", lse.rows(), " x ",
                 lse.cols(), " and ", other_lse.rows(), " x ", other_lse.cols(), " do not match");
    const std::size_t rows = out.heads() * out.tokens();
    if (rows == 0) return;
    FRUGAL_CHECK(rows / 4 < (std::size_t(1) << 31), "cuda::merge_state_in_place: ", rows, " rows exceed the launch grid");
    const detail::merge_params<T> p{out.data(), lse.data(), other.data(), other_lse.data(), out.heads(), out.tokens(),
                                    out.dim(), out.head_stride(), out.token_stride(), other.head_stride(),
                                    other.token_stride(), lse.row_stride(), other_lse.row_stride()};
    const unsigned grid = unsigned((rows + 3) / 4);
    if (base == attention::softmax_base::e) {
        detail::merge_state_kernel<T, attention::softmax_base::e><<<grid, 128, 0, stream>>>(p);
    } else {
        detail::merge_state_kernel<T, attention::softmax_base::two><<<grid, 128, 0, stream>>>(p);
    }
    FRUGAL_CUDA_CHECK(cudaGetLastError());
}

}  // namespace frugal::cuda
