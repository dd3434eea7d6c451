#pragma once
/// @file
/// The GPU side of the batch plan (FlashInfer's plan/run split): a `batch_plan` shaped for a
/// device (one work item per sequence, KV head and KV chunk; split-KV chunks sized from the
/// multiprocessor count) and its arrays uploaded once per engine step.

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "frugal/attention/batch_plan.hpp"
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

/// Blocks per multiprocessor the split-KV chunks aim at: enough to hide the tail of a ragged
/// batch behind other blocks, few enough that each block streams a few hundred keys.
inline constexpr std::size_t blocks_per_multiprocessor = 8;

/// The plan of a batch for a GPU with `multiprocessors` SMs: `options` as given, except that
/// each decode item holds one KV head (the group of query heads that share it) and, unless
/// `options.kv_chunk` is set, split-KV cuts the decode sequences into chunks of a multiple
/// of `kv_block` keys (at least 256) so the decode items number about
/// `blocks_per_multiprocessor` per SM: a batch of long sequences and one 32k sequence both
/// fill the GPU.
/// @code
/// auto plan = frugal::cuda::plan_batch(shape, {.mask = frugal::attention::attention_mask::causal(),
///                                              .dtype = frugal::attention::storage_dtype::bf16},
///                                      frugal::cuda::properties().multiprocessors);
/// @endcode
[[nodiscard]] inline attention::batch_plan plan_batch(const attention::batch_shape& shape,
                                                      attention::batch_options options, int multiprocessors) {
    FRUGAL_CHECK(multiprocessors > 0, "cuda::plan_batch: multiprocessors ", multiprocessors, " must be positive");
    shape.validate();
    options.group_decode_heads = false;
    if (options.kv_chunk == 0) {
        const std::size_t block = options.kv_block > 0 ? options.kv_block : 128;
        std::size_t key_heads = 0;
        for (std::size_t s = 0; s < shape.batch(); ++s) {
            const std::size_t q_len = shape.qo_indptr[s + 1] - shape.qo_indptr[s];
            if (q_len * shape.group() <= options.decode_rows) key_heads += shape.kv_lens[s] * shape.kv_heads;
        }
        const std::size_t want = blocks_per_multiprocessor * std::size_t(multiprocessors);
        const std::size_t per_item = std::max<std::size_t>((key_heads + want - 1) / want, 256);
        options.kv_chunk = (per_item + block - 1) / block * block;
    }
    return attention::batch_plan(shape, options);
}

/// A `batch_plan` uploaded once per engine step: its work items, merges and query offsets
/// in device memory, for every layer's `run_batch_attention`. The plan must outlive it.
/// @code
/// auto plan = frugal::cuda::plan_batch(shape, options, frugal::cuda::properties().multiprocessors);
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
        for (const attention::batch_work_item& it : plan.items()) rows_ = std::max(rows_, it.rows * plan.group());
    }
    [[nodiscard]] const attention::batch_plan& plan() const noexcept { return *plan_; }
    [[nodiscard]] const attention::batch_work_item* items() const noexcept { return items_.data(); }
    [[nodiscard]] const attention::batch_merge* merges() const noexcept { return merges_.data(); }
    [[nodiscard]] const std::size_t* qo_indptr() const noexcept { return qo_indptr_.data(); }
    [[nodiscard]] const std::size_t* kv_lens() const noexcept { return kv_lens_.data(); }
    /// Most query rows of one KV head in a work item (q_len x group): how many rows the
    /// kernel keeps in registers per pass over the keys (at most 8).
    [[nodiscard]] std::size_t rows_per_pass() const noexcept { return std::min<std::size_t>(rows_, 8); }
    /// Device floats `run_batch_attention` needs: the split-KV partial states.
    [[nodiscard]] std::size_t workspace_floats() const noexcept { return plan_->slots() * plan_->slot_floats(); }

private:
    const attention::batch_plan* plan_;
    device_buffer<attention::batch_work_item> items_;
    device_buffer<attention::batch_merge> merges_;
    device_buffer<std::size_t> qo_indptr_, kv_lens_;
    std::size_t rows_ = 1;
};

}  // namespace frugal::cuda
