#pragma once
/// @file
/// The CUDA adapter's batch attention over a paged KV cache: the same `batch_plan` as the
/// CPU path (its work items and split-KV merges), run at the level of the whole plan by
/// one paged kernel (a block of warps per work item: one head group of one sequence over
/// one KV chunk) and one merge kernel. Masks, page addressing, storage conversions and
/// the online-softmax / merge steps are the `FRUGAL_HOST_DEVICE` functions the CPU tests cover.

#include <cstddef>
#include <cstdint>
#include <type_traits>
#include <vector>

#include <cuda_runtime.h>

#include "frugal/attention/batch_plan.hpp"
#include "frugal/attention/dtype.hpp"
#include "frugal/attention/heads_view.hpp"
#include "frugal/attention/masks.hpp"
#include "frugal/attention/online_softmax.hpp"
#include "frugal/attention/paged_kv.hpp"
#include "frugal/backend/cuda/cuda_error.cuh"
#include "frugal/backend/cuda/device_buffer.cuh"

namespace frugal::cuda {

/// A batch's page table in device memory (the same arrays as the host `page_table`
/// the plan and the views were validated with).
/// @code
/// frugal::cuda::device_page_table table{d_indptr.data(), d_indices.data(), d_last.data(), 16};
/// @endcode
struct device_page_table {
    const std::int32_t* indptr = nullptr;
    const std::int32_t* indices = nullptr;
    const std::int32_t* last_page_len = nullptr;
    std::size_t page_size = 0;
};

/// A `batch_plan` uploaded once per engine step: its work items, merges and query offsets
/// in device memory, for every layer's `run_batch_attention`.
/// @code
/// auto plan = frugal::attention::batch::plan(shape, {.threads = 1, .group_decode_heads = false});
/// frugal::cuda::device_batch_plan dplan(plan);
/// @endcode
class device_batch_plan {
public:
    explicit device_batch_plan(const attention::batch_plan& plan)
        : plan_(&plan), items_(plan.items().size()), merges_(plan.merges().size()), qo_indptr_(plan.batch() + 1),
          kv_lens_(plan.batch()) {
        items_.copy_from_host(plan.items());
        merges_.copy_from_host(plan.merges());
        qo_indptr_.copy_from_host(plan.qo_indptr());
        kv_lens_.copy_from_host(plan.kv_lens());
    }
    [[nodiscard]] const attention::batch_plan& plan() const noexcept { return *plan_; }
    [[nodiscard]] const attention::batch_work_item* items() const noexcept { return items_.data(); }
    [[nodiscard]] const attention::batch_merge* merges() const noexcept { return merges_.data(); }
    [[nodiscard]] const std::size_t* qo_indptr() const noexcept { return qo_indptr_.data(); }
    [[nodiscard]] const std::size_t* kv_lens() const noexcept { return kv_lens_.data(); }
    /// Device floats `run_batch_attention` needs: the split-KV partial states.
    [[nodiscard]] std::size_t workspace_floats() const noexcept { return plan_->slots() * plan_->slot_floats(); }

private:
    const attention::batch_plan* plan_;
    device_buffer<attention::batch_work_item> items_;
    device_buffer<attention::batch_merge> merges_;
    device_buffer<std::size_t> qo_indptr_, kv_lens_;
};

namespace detail {

/// Warps per work item and the largest head dimension a lane's registers hold (8 per lane).
inline constexpr int batch_warps = 4;
inline constexpr int batch_max_head_dim = 256;

template <class T>
struct batch_params {
    const attention::batch_work_item* items;
    const attention::batch_merge* merges;
    const std::size_t* qo_indptr;
    const std::size_t* kv_lens;
    const T* q;
    const T* k_pool;
    const T* v_pool;
    T* out;
    float* lse;  // nullptr: not wanted
    float* slots;
    std::size_t q_head_stride, q_token_stride, o_head_stride, o_token_stride, lse_row_stride, slot_floats;
    device_page_table table;
    attention::page_geometry geometry;
    int group, head_dim;
    attention::attention_mask mask;
    float scale_log2;
    bool lse_natural;
};

/// Sum over the 32 lanes of a warp.
__device__ inline float warp_sum(float x) {
    for (int offset = 16; offset > 0; offset /= 2) x += __shfl_xor_sync(0xffffffffu, x, offset);
    return x;
}

/// Writes one normalized output row (and its LSE) from lane-held state.
template <class T>
__device__ void write_row(const batch_params<T>& p, std::size_t h, std::size_t token, const float* o, float m, float l,
                          int lane) {
    const float inv = l > 0.0f ? 1.0f / l : 0.0f;
    T* out = p.out + h * p.o_head_stride + token * p.o_token_stride;
    for (int i = 0; i < batch_max_head_dim / 32; ++i) {
        const int c = lane + 32 * i;
        if (c < p.head_dim) out[c] = attention::from_float<T>(o[i] * inv);
    }
    if (p.lse != nullptr && lane == 0) {
        const float lse2 = attention::softmax_math::lse<attention::softmax_base::two>(m, l);
        p.lse[h * p.lse_row_stride + token] = p.lse_natural && l > 0.0f ? lse2 * 0.6931471805599453f : lse2;
    }
}

/// One block per work item; each warp takes query rows (token, head of the group) in turn
/// and streams the item's keys through its online-softmax state, lanes splitting the
/// head dimension. Pages are read through the shared page addressing.
template <class T>
__global__ void __launch_bounds__(batch_warps * 32) paged_attention_kernel(batch_params<T> p) {
    const attention::batch_work_item it = p.items[blockIdx.x];
    const int lane = int(threadIdx.x % 32), warp = int(threadIdx.x / 32);
    const std::size_t rows = it.rows * std::size_t(p.group);
    const std::size_t qbegin = p.qo_indptr[it.seq], kv_len = p.kv_lens[it.seq];
    const std::size_t q_len = p.qo_indptr[it.seq + 1] - qbegin;
    const std::size_t page0 = std::size_t(p.table.indptr[it.seq]);
    constexpr int per_lane = batch_max_head_dim / 32;
    for (std::size_t r = std::size_t(warp); r < rows; r += batch_warps) {
        const std::size_t t = it.q0 + r / std::size_t(p.group), h = it.kv_head * std::size_t(p.group) + r % std::size_t(p.group);
        float q[per_lane], o[per_lane];
        const T* qrow = p.q + h * p.q_head_stride + (qbegin + t) * p.q_token_stride;
        for (int i = 0; i < per_lane; ++i) {
            const int c = lane + 32 * i;
            q[i] = c < p.head_dim ? attention::to_float(qrow[c]) * p.scale_log2 : 0.0f;
            o[i] = 0.0f;
        }
        float m = attention::softmax_math::minus_infinity(), l = 0.0f;
        const auto i64 = std::int64_t(t), ql = std::int64_t(q_len), kl = std::int64_t(kv_len);
        const std::size_t k0 = it.k_begin > std::size_t(p.mask.key_begin(i64, ql, kl)) ? it.k_begin
                                                                                        : std::size_t(p.mask.key_begin(i64, ql, kl));
        const std::size_t k1 = it.k_end < std::size_t(p.mask.key_end(i64, ql, kl)) ? it.k_end
                                                                                    : std::size_t(p.mask.key_end(i64, ql, kl));
        for (std::size_t j = k0; j < k1; ++j) {
            const std::size_t page = std::size_t(p.table.indices[page0 + j / p.table.page_size]);
            const std::size_t at = p.geometry.row_offset(page, it.kv_head, j % p.table.page_size);
            float partial = 0.0f;
            for (int i = 0; i < per_lane; ++i) {
                const int c = lane + 32 * i;
                if (c < p.head_dim) partial += q[i] * attention::to_float(p.k_pool[at + c]);
            }
            const float s = warp_sum(partial);
            const auto step = attention::softmax_math::online_rescale<attention::softmax_base::two>(m, s);
            const float w = exp2f(s - step.shift);
            l = step.alpha * l + w;
            m = step.max;
            for (int i = 0; i < per_lane; ++i) {
                const int c = lane + 32 * i;
                o[i] = step.alpha * o[i] + (c < p.head_dim ? w * attention::to_float(p.v_pool[at + c]) : 0.0f);
            }
        }
        if (it.slot == attention::batch_work_item::no_slot) {
            write_row(p, h, qbegin + t, o, m, l, lane);
        } else {  // a chunk of a split sequence: its partial state (o, m, l) in its slot
            float* slot = p.slots + it.slot * p.slot_floats;
            for (int i = 0; i < per_lane; ++i) {
                const int c = lane + 32 * i;
                if (c < p.head_dim) slot[r * std::size_t(p.head_dim) + std::size_t(c)] = o[i];
            }
            if (lane == 0) {
                slot[rows * std::size_t(p.head_dim) + r] = m;
                slot[rows * std::size_t(p.head_dim) + rows + r] = l;
            }
        }
    }
}

/// One block per split merge: the chunks' states merged in chunk order (the CPU's order).
template <class T>
__global__ void __launch_bounds__(batch_warps * 32) merge_kernel(batch_params<T> p) {
    const attention::batch_merge mg = p.merges[blockIdx.x];
    const int lane = int(threadIdx.x % 32), warp = int(threadIdx.x / 32);
    const std::size_t qbegin = p.qo_indptr[mg.seq], q_len = p.qo_indptr[mg.seq + 1] - qbegin;
    const std::size_t rows = q_len * std::size_t(p.group), d = std::size_t(p.head_dim);
    constexpr int per_lane = batch_max_head_dim / 32;
    for (std::size_t r = std::size_t(warp); r < rows; r += batch_warps) {
        const float* first = p.slots + mg.first_slot * p.slot_floats;
        float o[per_lane];
        for (int i = 0; i < per_lane; ++i) o[i] = std::size_t(lane + 32 * i) < d ? first[r * d + std::size_t(lane + 32 * i)] : 0.0f;
        float m = first[rows * d + r], l = first[rows * d + rows + r];
        for (std::size_t c = 1; c < mg.chunks; ++c) {
            const float* other = first + c * p.slot_floats;
            const float om = other[rows * d + r], ol = other[rows * d + rows + r];
            const auto w = attention::softmax_math::merge_scales<attention::softmax_base::two>(m, om);
            for (int i = 0; i < per_lane; ++i) {
                const std::size_t x = std::size_t(lane + 32 * i);
                o[i] = w.a * o[i] + (x < d ? w.b * other[r * d + x] : 0.0f);
            }
            l = w.a * l + w.b * ol;
            m = w.max;
        }
        const std::size_t t = r / std::size_t(p.group), h = mg.kv_head * std::size_t(p.group) + r % std::size_t(p.group);
        write_row(p, h, qbegin + t, o, m, l, lane);
    }
}

/// The host-side checks of `run_batch_attention`, made before anything touches the device.
template <class T>
void check_batch_call(const attention::batch_plan& plan, const attention::heads_view<const T>& q,
                      const attention::paged_kv<const T>& kv, const device_page_table& table,
                      const attention::heads_view<T>& out, const matrix_view<float>& lse) {
    FRUGAL_CHECK(plan.dtype() == attention::dtype_of<T>, "cuda::run_batch_attention: the plan was made for ",
                 attention::dtype_name(plan.dtype()), " storage but the tensors hold ",
                 attention::dtype_name(attention::dtype_of<T>));
    FRUGAL_CHECK(plan.head_dim() <= std::size_t(detail::batch_max_head_dim), "cuda::run_batch_attention: head_dim ",
                 plan.head_dim(), " exceeds ", detail::batch_max_head_dim);
    FRUGAL_CHECK(q.heads() == plan.q_heads() && q.tokens() == plan.q_tokens() && q.dim() == plan.head_dim() &&
                     out.heads() == q.heads() && out.tokens() == q.tokens() && out.dim() == q.dim(),
                 "cuda::run_batch_attention: q is ", q.heads(), " x ", q.tokens(), " x ", q.dim(), " and out ",
                 out.heads(), " x ", out.tokens(), " x ", out.dim(), ", the plan expects ", plan.q_heads(), " x ",
                 plan.q_tokens(), " x ", plan.head_dim());
    FRUGAL_CHECK(kv.kv_heads() == plan.kv_heads() && kv.head_dim() == plan.head_dim() && kv.batch() == plan.batch() &&
                     table.page_size == kv.page_size() && table.indptr != nullptr && table.indices != nullptr,
                 "cuda::run_batch_attention: the KV cache (", kv.batch(), " sequences, ", kv.kv_heads(), " heads x ",
                 kv.head_dim(), ", pages of ", kv.page_size(), ") or the device page table (pages of ",
                 table.page_size, ") does not match the plan");
    for (std::size_t s = 0; s < plan.batch(); ++s) {
        FRUGAL_CHECK(kv.kv_len(s) == plan.kv_lens()[s], "cuda::run_batch_attention: sequence ", s, " has ",
                     kv.kv_len(s), " keys in the page table, the plan expects ", plan.kv_lens()[s]);
    }
    FRUGAL_CHECK(lse.empty() || (lse.rows() == plan.q_heads() && lse.cols() == plan.q_tokens()),
                 "cuda::run_batch_attention: lse is ", lse.rows(), " x ", lse.cols());
    FRUGAL_CHECK(plan.decode_heads() == 1, "cuda::run_batch_attention: the plan groups ", plan.decode_heads(),
                 " KV heads per decode item; make the GPU's plan with batch_options::group_decode_heads = false");
}

}  // namespace detail

/// Runs a batch plan on the GPU, on `stream`: `q`/`out` are ragged `[tokens, q_heads, d]`
/// views of device memory, `kv` a paged cache whose pools are device memory and whose
/// (host) page table validated the batch, `table` the same page table in device memory,
/// `lse` empty or `q_heads x tokens` in device memory, `workspace` at least
/// `dplan.workspace_floats()` device floats. head_dim must be at most 256. The results
/// match the CPU run up to fp32 rounding (the CPU folds keys in blocks, the kernel one
/// by one). Launch errors throw `frugal::runtime_error`; the call is asynchronous.
/// @code
/// frugal::cuda::device_batch_plan dplan(plan);
/// frugal::cuda::run_batch_attention(dplan, q_dev, kv_dev, table_dev, out_dev, {}, workspace.data());
/// FRUGAL_CUDA_CHECK(cudaStreamSynchronize(nullptr));
/// @endcode
template <attention::storage_type T>
void run_batch_attention(const device_batch_plan& dplan, attention::heads_view<const T> q,
                         const attention::paged_kv<const T>& kv, const device_page_table& table,
                         attention::heads_view<T> out, matrix_view<float> lse, float* workspace,
                         cudaStream_t stream = nullptr) {
    const attention::batch_plan& plan = dplan.plan();
    detail::check_batch_call(plan, q, kv, table, out, lse);
    FRUGAL_CHECK(workspace != nullptr || dplan.workspace_floats() == 0,
                 "cuda::run_batch_attention: the plan's split-KV merges need ", dplan.workspace_floats(),
                 " workspace floats");
    const detail::batch_params<T> p{dplan.items(), dplan.merges(), dplan.qo_indptr(), dplan.kv_lens(), q.data(),
                                    kv.k_pool(), kv.v_pool(), out.data(), lse.empty() ? nullptr : lse.data(),
                                    workspace, q.head_stride(), q.token_stride(), out.head_stride(),
                                    out.token_stride(), lse.row_stride(), plan.slot_floats(), table, kv.geometry(),
                                    int(plan.group()), int(plan.head_dim()), plan.options().mask,
                                    plan.score_scale_log2(), plan.options().lse_base == attention::softmax_base::e};
    if (!plan.items().empty()) {
        detail::paged_attention_kernel<T><<<unsigned(plan.items().size()), detail::batch_warps * 32, 0, stream>>>(p);
        FRUGAL_CUDA_CHECK(cudaGetLastError());
    }
    if (!plan.merges().empty()) {
        detail::merge_kernel<T><<<unsigned(plan.merges().size()), detail::batch_warps * 32, 0, stream>>>(p);
        FRUGAL_CUDA_CHECK(cudaGetLastError());
    }
}

}  // namespace frugal::cuda
