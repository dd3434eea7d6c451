#pragma once
/// @file
/// The CUDA adapter's batch attention over a paged KV cache: the same `batch_plan` as the
/// CPU path (its work items and split-KV merges), run at the level of the whole plan by one
/// paged kernel and one merge kernel. A block takes one work item: the query heads that
/// share one KV head (GQA), against one chunk of keys, each key row read once for the whole
/// group with 16-byte loads. Masks, page addressing and the online-softmax / merge steps are
/// the `FRUGAL_HOST_DEVICE` functions the CPU tests cover.

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include <cuda_runtime.h>

#include "frugal/attention/batch_attention.hpp"
#include "frugal/attention/batch_plan.hpp"
#include "frugal/attention/dtype.hpp"
#include "frugal/attention/heads_view.hpp"
#include "frugal/attention/masks.hpp"
#include "frugal/attention/online_softmax.hpp"
#include "frugal/attention/paged_kv.hpp"
#include "frugal/backend/cuda/batch_plan.cuh"
#include "frugal/backend/cuda/cuda_error.cuh"
#include "frugal/backend/cuda/warp_mma.cuh"

namespace frugal::cuda {

namespace detail {

/// Warps per work item and the largest head dimension.
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
    int page_shift;  // log2(page_size) when a power of two, else -1
    attention::page_geometry geometry;
    int group, head_dim;
    attention::attention_mask mask;
    float scale_log2;
    attention::softmax_base lse_base;
};

/// How a block's threads cover key rows of up to `D` elements of `T`: `lanes` threads per
/// row, each holding `width` consecutive elements read by 16-byte loads, so `rows_in_flight`
/// key rows are read at once.
template <class T, int D>
struct row_split {
    static constexpr int vector = 16 / int(sizeof(T));
    static constexpr int lanes = D / vector < 32 ? D / vector : 32;
    static constexpr int width = D / lanes;
    static constexpr int loads = width / vector;
    static constexpr int rows_in_flight = 32 * batch_warps / lanes;
};

/// `N` elements of `T` as fp32, from 16-byte words.
template <class T, int N>
__device__ inline void to_floats(const uint4 (&raw)[N * sizeof(T) / 16], float (&x)[N]) {
    for (int i = 0; i < N * int(sizeof(T)) / 16; ++i) {
        const std::uint32_t w[4] = {raw[i].x, raw[i].y, raw[i].z, raw[i].w};
        if constexpr (std::is_same_v<T, float>) {
            for (int e = 0; e < 4; ++e) x[4 * i + e] = __uint_as_float(w[e]);
        } else {
            for (int e = 0; e < 4; ++e) {
                const float2 f = unpack2<T>(w[e]);
                x[8 * i + 2 * e] = f.x;
                x[8 * i + 2 * e + 1] = f.y;
            }
        }
    }
}

/// Offset in the pools of key `key` of KV head `kv_head`, for a sequence whose pages start at
/// `page0` of the page table.
template <class T>
__device__ inline std::size_t key_row(const batch_params<T>& p, std::size_t page0, std::size_t kv_head,
                                      std::size_t key) {
    std::size_t slot, in_page;
    if (p.page_shift >= 0) {
        slot = key >> p.page_shift;
        in_page = key & (p.table.page_size - 1);
    } else {
        slot = key / p.table.page_size;
        in_page = key % p.table.page_size;
    }
    return p.geometry.row_offset(std::size_t(p.table.indices[page0 + slot]), kv_head, in_page);
}

/// One block per work item. For each of the item's KV heads, its query rows (token x head of
/// the group) are taken `Rows` at a time: each group of `lanes` threads streams every
/// `rows_in_flight`-th key of the item's chunk through its own online-softmax state of the
/// `Rows` rows, and the groups' states are merged in shared memory at the end.
template <class T, int D, int Rows>
__global__ void __launch_bounds__(batch_warps * 32) paged_attention_kernel(batch_params<T> p) {
    using split = row_split<T, D>;
    constexpr int unroll = Rows <= 4 ? 4 : 2;  // key rows each thread group loads before using them
    constexpr int groups = split::rows_in_flight, width = split::width;
    __shared__ float merge_o[groups][Rows][D];
    __shared__ float merge_m[groups][Rows], merge_l[groups][Rows];

    const attention::batch_work_item it = p.items[blockIdx.x];
    const int grp = int(threadIdx.x) / split::lanes, c0 = (int(threadIdx.x) % split::lanes) * width;
    const bool active = c0 < p.head_dim;
    const std::size_t g = std::size_t(p.group), d = std::size_t(p.head_dim);
    const std::size_t rows_per_head = it.rows * g, all_rows = rows_per_head * it.heads;
    const std::size_t qbegin = p.qo_indptr[it.seq], kv_len = p.kv_lens[it.seq];
    const auto q_len = std::int64_t(p.qo_indptr[it.seq + 1] - qbegin);
    const std::size_t page0 = std::size_t(p.table.indptr[it.seq]);
    float* slot = it.slot == attention::batch_work_item::no_slot ? nullptr : p.slots + it.slot * p.slot_floats;

    for (std::size_t hh = 0; hh < it.heads; ++hh) {
        const std::size_t kv_head = it.kv_head + hh;
        for (std::size_t r0 = 0; r0 < rows_per_head; r0 += Rows) {
            // The rows' queries (this thread's columns, pre-scaled) and the keys each sees.
            float q[Rows][width];
            std::int64_t kb[Rows], ke[Rows];
            auto lo = std::int64_t(it.k_end), hi = std::int64_t(it.k_begin);
            for (int r = 0; r < Rows; ++r) {
                const std::size_t row = r0 + std::size_t(r);
                kb[r] = ke[r] = 0;
                for (int e = 0; e < width; ++e) q[r][e] = 0.0f;
                if (row >= rows_per_head) continue;
                const std::size_t t = it.q0 + row / g, h = kv_head * g + row % g;
                const auto ti = std::int64_t(t), kl = std::int64_t(kv_len);
                kb[r] = max(std::int64_t(it.k_begin), p.mask.key_begin(ti, q_len, kl));
                ke[r] = min(std::int64_t(it.k_end), p.mask.key_end(ti, q_len, kl));
                lo = min(lo, kb[r]);
                hi = max(hi, ke[r]);
                if (!active) continue;
                const T* qrow = p.q + h * p.q_head_stride + (qbegin + t) * p.q_token_stride + c0;
                for (int e = 0; e < width; ++e) q[r][e] = attention::to_float(qrow[e]) * p.scale_log2;
            }
            float o[Rows][width], m[Rows], l[Rows];
            for (int r = 0; r < Rows; ++r) {
                for (int e = 0; e < width; ++e) o[r][e] = 0.0f;
                m[r] = attention::softmax_math::minus_infinity();
                l[r] = 0.0f;
            }
            for (std::int64_t base = lo; base < hi; base += groups * unroll) {
                uint4 kraw[unroll][split::loads], vraw[unroll][split::loads];
                std::int64_t key[unroll];
                for (int u = 0; u < unroll; ++u) {
                    key[u] = base + grp + groups * u;
                    for (int i = 0; i < split::loads; ++i) kraw[u][i] = vraw[u][i] = make_uint4(0, 0, 0, 0);
                    if (key[u] < hi && active) {
                        const std::size_t at = key_row(p, page0, kv_head, std::size_t(key[u])) + std::size_t(c0);
                        for (int i = 0; i < split::loads; ++i) {
                            kraw[u][i] = __ldg(reinterpret_cast<const uint4*>(p.k_pool + at) + i);
                            vraw[u][i] = __ldg(reinterpret_cast<const uint4*>(p.v_pool + at) + i);
                        }
                    }
                }
                float s[Rows][unroll];
                for (int u = 0; u < unroll; ++u) {
                    float kf[width];
                    to_floats<T, width>(kraw[u], kf);
                    for (int r = 0; r < Rows; ++r) {
                        float acc = 0.0f;
                        for (int e = 0; e < width; ++e) acc += q[r][e] * kf[e];
                        s[r][u] = acc;
                    }
                }
                for (int r = 0; r < Rows; ++r)
                    for (int u = 0; u < unroll; ++u)
                        for (int off = split::lanes / 2; off > 0; off /= 2)
                            s[r][u] += __shfl_xor_sync(0xffffffffu, s[r][u], off);
                for (int r = 0; r < Rows; ++r) {
                    float tile_max = attention::softmax_math::minus_infinity();
                    for (int u = 0; u < unroll; ++u) {
                        if (key[u] < kb[r] || key[u] >= ke[r]) s[r][u] = attention::softmax_math::minus_infinity();
                        tile_max = fmaxf(tile_max, s[r][u]);
                    }
                    const auto step = attention::softmax_math::online_rescale<attention::softmax_base::two>(m[r], tile_max);
                    m[r] = step.max;
                    l[r] *= step.alpha;
                    for (int e = 0; e < width; ++e) o[r][e] *= step.alpha;
                    for (int u = 0; u < unroll; ++u) {
                        s[r][u] = exp2f(s[r][u] - step.shift);
                        l[r] += s[r][u];
                    }
                }
                for (int u = 0; u < unroll; ++u) {
                    float vf[width];
                    to_floats<T, width>(vraw[u], vf);
                    for (int r = 0; r < Rows; ++r)
                        for (int e = 0; e < width; ++e) o[r][e] += s[r][u] * vf[e];
                }
            }

            // Merge the thread groups' states of these rows and write them out.
            for (int r = 0; r < Rows; ++r) {
                if (c0 == 0) {
                    merge_m[grp][r] = m[r];
                    merge_l[grp][r] = l[r];
                }
                if (active)
                    for (int e = 0; e < width; ++e) merge_o[grp][r][c0 + e] = o[r][e];
            }
            __syncthreads();
            for (int x = int(threadIdx.x); x < Rows * D; x += batch_warps * 32) {
                const int r = x / D, c = x % D;
                const std::size_t row = r0 + std::size_t(r);
                if (row >= rows_per_head || c >= p.head_dim) continue;
                float mx = attention::softmax_math::minus_infinity();
                for (int k = 0; k < groups; ++k) mx = fmaxf(mx, merge_m[k][r]);
                float acc = 0.0f, sum = 0.0f;
                if (mx != attention::softmax_math::minus_infinity()) {
                    for (int k = 0; k < groups; ++k) {
                        const float w = exp2f(merge_m[k][r] - mx);
                        acc += w * merge_o[k][r][c];
                        sum += w * merge_l[k][r];
                    }
                }
                if (slot != nullptr) {  // a chunk of a split sequence: its partial state (o, m, l)
                    const std::size_t at = hh * rows_per_head + row;
                    slot[at * d + std::size_t(c)] = acc;
                    if (c == 0) {
                        slot[all_rows * d + at] = mx;
                        slot[all_rows * d + all_rows + at] = sum;
                    }
                } else {
                    const std::size_t t = qbegin + it.q0 + row / g, h = kv_head * g + row % g;
                    p.out[h * p.o_head_stride + t * p.o_token_stride + std::size_t(c)] =
                        attention::from_float<T>(sum > 0.0f ? acc / sum : 0.0f);
                    if (c == 0 && p.lse != nullptr) p.lse[h * p.lse_row_stride + t] = attention::softmax_math::lse_from_base_two(mx, sum, p.lse_base);
                }
            }
            __syncthreads();  // the merge arrays are free for the next rows
        }
    }
}

/// One block per split merge: the chunks' states merged in chunk order (the CPU's order),
/// a warp per query row, lanes over the head dimension.
template <class T>
__global__ void __launch_bounds__(batch_warps * 32) merge_kernel(batch_params<T> p) {
    constexpr int per_lane = batch_max_head_dim / 32;
    const attention::batch_merge mg = p.merges[blockIdx.x];
    const int lane = int(threadIdx.x % 32), warp = int(threadIdx.x / 32);
    const std::size_t qbegin = p.qo_indptr[mg.seq], q_len = p.qo_indptr[mg.seq + 1] - qbegin;
    const std::size_t g = std::size_t(p.group), rows_per_head = q_len * g, rows = rows_per_head * mg.heads;
    const std::size_t d = std::size_t(p.head_dim);
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
        const std::size_t hh = r / rows_per_head, rem = r % rows_per_head;
        const std::size_t t = qbegin + rem / g, h = (mg.kv_head + hh) * g + rem % g;
        const float inv = l > 0.0f ? 1.0f / l : 0.0f;
        T* out = p.out + h * p.o_head_stride + t * p.o_token_stride;
        for (int i = 0; i < per_lane; ++i) {
            const int c = lane + 32 * i;
            if (std::size_t(c) < d) out[c] = attention::from_float<T>(o[i] * inv);
        }
        if (p.lse != nullptr && lane == 0) p.lse[h * p.lse_row_stride + t] = attention::softmax_math::lse_from_base_two(m, l, p.lse_base);
    }
}

/// The host-side checks of `run_batch_attention`, made before anything touches the device:
/// the CPU run's checks (with its messages), then what the kernel needs.
template <class T>
void check_batch_call(const attention::batch_plan& plan, const attention::heads_view<const T>& q,
                      const attention::paged_kv<const T>& kv, const device_page_table& table,
                      const attention::heads_view<T>& out, const matrix_view<float>& lse) {
    attention::detail::check_batch_views(plan, q, kv, out, lse);
    FRUGAL_CHECK(plan.head_dim() % 8 == 0 && plan.head_dim() <= std::size_t(batch_max_head_dim),
                 "cuda::run_batch_attention: head_dim ", plan.head_dim(), " must be a multiple of 8 and at most ",
                 batch_max_head_dim, " (16-byte loads of K/V rows)");
    FRUGAL_CHECK(table.page_size == kv.page_size() && table.indptr != nullptr && table.indices != nullptr,
                 "cuda::run_batch_attention: the device page table (pages of ", table.page_size,
                 ") does not match the KV cache's (pages of ", kv.page_size(), ") or is missing");
    FRUGAL_CHECK(kv.geometry().page_stride % 8 == 0 && reinterpret_cast<std::uintptr_t>(kv.k_pool()) % 16 == 0 &&
                     reinterpret_cast<std::uintptr_t>(kv.v_pool()) % 16 == 0,
                 "cuda::run_batch_attention: K/V pools at ", static_cast<const void*>(kv.k_pool()), " and ",
                 static_cast<const void*>(kv.v_pool()), " with pages of ", kv.geometry().page_stride,
                 " elements are not 16-byte aligned");
}

template <class T, int D>
void launch_paged_attention(const batch_params<T>& p, std::size_t items, std::size_t rows, cudaStream_t stream) {
    const unsigned grid = unsigned(items);
    if (rows <= 1) {
        paged_attention_kernel<T, D, 1><<<grid, batch_warps * 32, 0, stream>>>(p);
    } else if (rows <= 2) {
        paged_attention_kernel<T, D, 2><<<grid, batch_warps * 32, 0, stream>>>(p);
    } else if (rows <= 4) {
        paged_attention_kernel<T, D, 4><<<grid, batch_warps * 32, 0, stream>>>(p);
    } else {
        paged_attention_kernel<T, D, 8><<<grid, batch_warps * 32, 0, stream>>>(p);
    }
}

}  // namespace detail

/// Runs a batch plan on the GPU, on `stream`: `q`/`out` are ragged `[tokens, q_heads, d]`
/// views of device memory, `kv` a paged cache whose pools are device memory and whose
/// (host) page table validated the batch, `table` the same page table in device memory,
/// `lse` empty or `q_heads x tokens` in device memory, `workspace` at least
/// `dplan.workspace_floats()` device floats. Any `batch_plan` runs; `plan_batch` makes the
/// one that fills a GPU (an item per KV head, split-KV from the SM count). head_dim must be
/// a multiple of 8 and at most 256. The results match the CPU run up to fp32 rounding.
/// Bad input throws `frugal::invalid_argument` before any launch (the CPU run's messages),
/// launch errors `frugal::runtime_error`; the call is asynchronous.
/// @code
/// auto plan = frugal::cuda::plan_batch(shape, {.dtype = frugal::attention::storage_dtype::bf16}, sms);
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
    const std::size_t page_size = table.page_size;
    int shift = -1;
    if ((page_size & (page_size - 1)) == 0)
        for (shift = 0; (std::size_t(1) << shift) < page_size; ++shift) {
        }
    const detail::batch_params<T> p{dplan.items(), dplan.merges(), dplan.qo_indptr(), dplan.kv_lens(), q.data(),
                                    kv.k_pool(), kv.v_pool(), out.data(), lse.empty() ? nullptr : lse.data(),
                                    workspace, q.head_stride(), q.token_stride(), out.head_stride(),
                                    out.token_stride(), lse.row_stride(), plan.slot_floats(), table, shift,
                                    kv.geometry(), int(plan.group()), int(plan.head_dim()), plan.options().mask,
                                    plan.score_scale_log2(), plan.options().lse_base};
    if (!plan.items().empty()) {
        const std::size_t items = plan.items().size(), rows = dplan.rows_per_pass();
        if (plan.head_dim() <= 64) {
            detail::launch_paged_attention<T, 64>(p, items, rows, stream);
        } else if (plan.head_dim() <= 128) {
            detail::launch_paged_attention<T, 128>(p, items, rows, stream);
        } else {
            detail::launch_paged_attention<T, 256>(p, items, rows, stream);
        }
        FRUGAL_CUDA_CHECK(cudaGetLastError());
    }
    if (!plan.merges().empty()) {
        detail::merge_kernel<T><<<unsigned(plan.merges().size()), detail::batch_warps * 32, 0, stream>>>(p);
        FRUGAL_CUDA_CHECK(cudaGetLastError());
    }
}

}  // namespace frugal::cuda
