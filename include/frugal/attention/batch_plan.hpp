#pragma once
/// @file
/// The batch plan of serving attention (FlashInfer's plan/run split): made once per engine
/// step from the query offsets and KV lengths of a batch, it fixes the work split
/// (prefill query tiles, decode head groups, split-KV chunks) and the exact workspace,
/// then serves every layer's run.

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <limits>
#include <optional>
#include <span>
#include <tuple>
#include <vector>

#include "frugal/attention/dtype.hpp"
#include "frugal/attention/masks.hpp"
#include "frugal/attention/online_softmax.hpp"
#include "frugal/core/checked.hpp"
#include "frugal/core/error.hpp"

namespace frugal::attention {

/// The sizes of one engine step: `q_heads` query heads over `kv_heads` KV heads of
/// `head_dim`; sequence s has queries `qo_indptr[s] .. qo_indptr[s + 1]` (rows of the
/// ragged Q and output tensors) and `kv_lens[s]` keys, the last `q_len` of which are
/// its own new tokens under a bottom-right causal mask. The plan does not depend on how
/// the KV cache is paged, so a paged and a contiguous cache give the same bits.
/// Non-owning; the plan copies what it keeps.
/// @code
/// std::vector<std::size_t> qo_indptr{0, 1, 2, 130};      // two decodes, one 128-token prefill chunk
/// std::vector<std::size_t> kv_lens{4000, 912, 640};
/// frugal::attention::batch_shape shape{.q_heads = 32, .kv_heads = 8, .head_dim = 128,
///                                      .qo_indptr = qo_indptr, .kv_lens = kv_lens};
/// @endcode
struct batch_shape {
    std::size_t q_heads = 1;
    std::size_t kv_heads = 1;
    std::size_t head_dim = 0;
    std::span<const std::size_t> qo_indptr;
    std::span<const std::size_t> kv_lens;

    /// The largest head dimension a plan takes (a run's workspace holds rows of it per worker).
    static constexpr std::size_t max_head_dim = std::size_t(1) << 16;

    /// Query heads per KV head.
    [[nodiscard]] constexpr std::size_t group() const noexcept { return kv_heads == 0 ? 0 : q_heads / kv_heads; }
    /// Sequences in the batch.
    [[nodiscard]] constexpr std::size_t batch() const noexcept { return kv_lens.size(); }

    /// Throws `frugal::invalid_argument` naming the bad value: heads that do not divide,
    /// offsets that do not start at 0 or do not increase, a KV length of 0, and sizes
    /// whose tensors would overflow.
    void validate() const {
        FRUGAL_CHECK(q_heads > 0 && kv_heads > 0, "batch_shape: q_heads ", q_heads, " and kv_heads ", kv_heads,
                     " must be positive");
        FRUGAL_CHECK(q_heads % kv_heads == 0, "batch_shape: kv_heads ", kv_heads, " does not divide q_heads ", q_heads);
        FRUGAL_CHECK(head_dim > 0 && head_dim <= max_head_dim, "batch_shape: head_dim ", head_dim, " is outside [1, ",
                     max_head_dim, "]");
        FRUGAL_CHECK(!kv_lens.empty(), "batch_shape: the batch is empty");
        FRUGAL_CHECK(qo_indptr.size() == kv_lens.size() + 1, "batch_shape: qo_indptr has ", qo_indptr.size(),
                     " entries for ", kv_lens.size(), " sequences (expected batch + 1)");
        FRUGAL_CHECK(qo_indptr[0] == 0, "batch_shape: qo_indptr[0] = ", qo_indptr[0], ", expected 0");
        constexpr std::size_t max_len = std::size_t(1) << 40;
        for (std::size_t s = 0; s < batch(); ++s) {
            FRUGAL_CHECK(qo_indptr[s + 1] > qo_indptr[s], "batch_shape: qo_indptr[", s + 1, "] = ", qo_indptr[s + 1],
                         " does not increase on qo_indptr[", s, "] = ", qo_indptr[s]);
            FRUGAL_CHECK(kv_lens[s] > 0 && kv_lens[s] <= max_len, "batch_shape: kv_lens[", s, "] = ", kv_lens[s],
                         " is outside [1, 2^40]");
        }
        FRUGAL_CHECK(qo_indptr.back() <= max_len, "batch_shape: ", qo_indptr.back(), " query tokens exceed 2^40");
        (void)checked_product("batch_shape: query tensor elements", qo_indptr.back(), q_heads, head_dim, sizeof(float));
    }
};

/// What a batch computes and how it may run.
///
/// `mask` applies per sequence (its q_len x kv_len score matrix; `causal()` is
/// bottom-right: new tokens after their cache). `scale` multiplies QK^T (0 =
/// 1/sqrt(head_dim)). `dtype` is the storage of Q and the output (f32, bf16 or f16),
/// `kv_dtype` that of K and V (unset: `dtype`; or an 8-bit format: fp8_e4m3, fp8_e5m2,
/// int8); run checks both.
/// `threads` bounds the workers (at most `max_threads`). Prefill tiles are `q_tile x kv_tile`; decode folds
/// `kv_block` keys per step (0: 128, or 64 where items read several KV heads of token-major
/// pages with 16- or 32-bit rows, which decode faster in shorter steps; at most 256), from
/// any number of pages; split-KV
/// cuts decode sequences into `kv_chunk`-key chunks (0: chosen from the thread count
/// and the lengths; a multiple of `kv_block`). Sequences with at most `decode_rows`
/// query rows per KV head (q_len x group) take the decode path, the rest the GEMM path.
/// `group_decode_heads` (the default) makes each decode item read every KV head of its
/// keys, block by block: one item per sequence and chunk instead of per KV head and chunk.
/// A CPU then walks each page once for all heads (with NHD pools whole token rows instead
/// of `head_dim`-element pieces), and split-KV cuts sequences finer for the same number of
/// items; the result is the same up to the split's merge rounding (bitwise for the same
/// split and `kv_block`). A GPU wants one item per KV head (`cuda::plan_batch` turns it off); it runs either.
/// @code
/// frugal::attention::batch_options opt{.mask = frugal::attention::attention_mask::causal(),
///                                      .dtype = frugal::attention::storage_dtype::bf16, .threads = 2};
/// @endcode
struct batch_options {
    /// The most workers a plan takes (each owns a workspace slice).
    static constexpr std::size_t max_threads = 4096;
    attention_mask mask{};
    float scale = 0.0f;
    softmax_base lse_base = softmax_base::e;
    storage_dtype dtype = storage_dtype::f32;
    std::optional<storage_dtype> kv_dtype{};
    std::size_t threads = 1;
    std::size_t q_tile = 128;
    std::size_t kv_tile = 256;
    std::size_t kv_block = 0;
    std::size_t kv_chunk = 0;
    std::size_t decode_rows = 32;
    bool group_decode_heads = true;
};

/// The most KV heads one backend `decode_tile` call folds (the block's row pointers live
/// on the stack).
inline constexpr std::size_t max_decode_tile_heads = 8;

/// One unit of work of a batch run.
struct batch_work_item {
    /// No partial-state slot: the item writes its output rows itself.
    static constexpr std::size_t no_slot = std::numeric_limits<std::size_t>::max();
    std::size_t seq = 0;
    std::size_t kv_head = 0;  ///< the first KV head of the item
    std::size_t heads = 1;    ///< decode: KV heads from `kv_head` (all of them with `group_decode_heads`)
    bool prefill = false;
    std::size_t q0 = 0;       ///< prefill: the tile's first query of the sequence (decode: 0)
    std::size_t rows = 0;     ///< query tokens of the item
    std::size_t k_begin = 0;  ///< decode: the chunk's keys [k_begin, k_end); prefill: all visible keys
    std::size_t k_end = 0;
    std::size_t slot = no_slot;  ///< decode chunks of a split sequence: their partial state
};

/// A decode sequence's KV head split into chunks: slots `[first_slot, first_slot + chunks)`
/// are merged in order into its output rows.
struct batch_merge {
    std::size_t seq = 0;
    std::size_t kv_head = 0;
    std::size_t heads = 1;  ///< KV heads from `kv_head` the slots hold, head after head
    std::size_t first_slot = 0;
    std::size_t chunks = 0;
};

/// The plan of a batch (see `batch::plan`): the work items in the order they are handed
/// out (most expensive first), the split merges and the exact workspace layout.
/// @code
/// auto plan = frugal::attention::batch::plan(shape, {.threads = 2});
/// std::vector<float> ws(plan.workspace_bytes() / sizeof(float));   // all run needs, exactly
/// @endcode
class batch_plan {
public:
    [[nodiscard]] std::size_t batch() const noexcept { return kv_lens_.size(); }
    [[nodiscard]] std::size_t q_heads() const noexcept { return q_heads_; }
    [[nodiscard]] std::size_t kv_heads() const noexcept { return kv_heads_; }
    [[nodiscard]] std::size_t group() const noexcept { return q_heads_ / kv_heads_; }
    [[nodiscard]] std::size_t head_dim() const noexcept { return head_dim_; }
    [[nodiscard]] const batch_options& options() const noexcept { return options_; }
    [[nodiscard]] storage_dtype dtype() const noexcept { return options_.dtype; }
    /// The storage of K and V (`options.kv_dtype`, else `dtype()`).
    [[nodiscard]] storage_dtype kv_dtype() const noexcept { return options_.kv_dtype.value_or(options_.dtype); }
    [[nodiscard]] std::span<const std::size_t> qo_indptr() const noexcept { return qo_indptr_; }
    [[nodiscard]] std::span<const std::size_t> kv_lens() const noexcept { return kv_lens_; }
    [[nodiscard]] std::size_t q_tokens() const noexcept { return qo_indptr_.back(); }
    [[nodiscard]] std::size_t q_len(std::size_t s) const noexcept { return qo_indptr_[s + 1] - qo_indptr_[s]; }
    /// Whether sequence `s` takes the decode path (q_len x group <= decode_rows, without
    /// forming a product that could wrap).
    [[nodiscard]] bool is_decode(std::size_t s) const noexcept { return q_len(s) <= options_.decode_rows / group(); }
    [[nodiscard]] std::span<const batch_work_item> items() const noexcept { return items_; }
    [[nodiscard]] std::span<const batch_merge> merges() const noexcept { return merges_; }
    /// Keys each decode step folds (the alignment of decode blocks).
    [[nodiscard]] std::size_t kv_block() const noexcept { return kv_block_; }
    /// Keys per split-KV chunk (decode chunks start at multiples of it).
    [[nodiscard]] std::size_t kv_chunk() const noexcept { return kv_chunk_; }
    /// Prefill tiles actually used (the query tile is clamped to the longest prefill).
    [[nodiscard]] std::size_t q_tile() const noexcept { return q_tile_; }
    [[nodiscard]] std::size_t kv_tile() const noexcept { return options_.kv_tile; }
    /// Most query rows of a decode item: q_len x group x `decode_heads()`.
    [[nodiscard]] std::size_t decode_rows() const noexcept { return decode_rows_ * decode_heads_; }
    /// KV heads per decode item (1, or all with `group_decode_heads`).
    [[nodiscard]] std::size_t decode_heads() const noexcept { return decode_heads_; }
    /// Concurrent workers (each owns one workspace slice).
    [[nodiscard]] std::size_t workers() const noexcept { return workers_; }
    [[nodiscard]] std::size_t worker_floats() const noexcept { return worker_floats_; }
    [[nodiscard]] std::size_t slot_floats() const noexcept { return slot_floats_; }
    [[nodiscard]] std::size_t slots() const noexcept { return slots_; }
    /// Exact bytes of workspace a run uses: the worker slices, then the split-KV partial states.
    [[nodiscard]] std::size_t workspace_bytes() const noexcept { return workspace_bytes_; }
    /// The factor applied to QK^T, in base-2 units (see `softmax_math::score_scale_log2`).
    [[nodiscard]] float score_scale_log2() const noexcept {
        return softmax_math::score_scale_log2(options_.scale, head_dim_);
    }

    /// Floats of one region, padded to 64 bytes.
    [[nodiscard]] static constexpr std::size_t padded(std::size_t floats) noexcept { return (floats + 15) / 16 * 16; }

    batch_plan(const batch_shape& shape, const batch_options& options);

private:
    std::size_t q_heads_, kv_heads_, head_dim_;
    batch_options options_;
    std::vector<std::size_t> qo_indptr_, kv_lens_;
    std::vector<batch_work_item> items_;
    std::vector<batch_merge> merges_;
    std::size_t kv_block_ = 0, kv_chunk_ = 0, q_tile_ = 0, decode_rows_ = 0, decode_heads_ = 1, workers_ = 1;
    std::size_t worker_floats_ = 0, slot_floats_ = 0, slots_ = 0, workspace_bytes_ = 0;
};

inline batch_plan::batch_plan(const batch_shape& shape, const batch_options& options)
    : q_heads_(shape.q_heads), kv_heads_(shape.kv_heads), head_dim_(shape.head_dim), options_(options) {
    shape.validate();
    FRUGAL_CHECK(options.threads > 0 && options.threads <= batch_options::max_threads, "batch plan: threads ",
                 options.threads, " is outside [1, ", batch_options::max_threads, "] (each worker owns a workspace slice)");
    FRUGAL_CHECK(options.q_tile > 0 && options.kv_tile > 0, "batch plan: tiles ", options.q_tile, " x ",
                 options.kv_tile, " must be positive");
    FRUGAL_CHECK(options.dtype == storage_dtype::f32 || options.dtype == storage_dtype::bf16 ||
                     options.dtype == storage_dtype::f16,
                 "batch plan: dtype ", dtype_name(options.dtype),
                 " is a K/V format; Q and the output are f32, bf16 or f16 (set kv_dtype for 8-bit K/V)");
    FRUGAL_CHECK(std::isfinite(options.scale) && options.scale >= 0.0f, "batch plan: scale ", options.scale,
                 " must be finite and >= 0 (0 = 1/sqrt(head_dim))");
    constexpr std::size_t max_tile = std::size_t(1) << 20;
    FRUGAL_CHECK(options.q_tile <= max_tile && options.kv_tile <= max_tile && options.kv_block <= max_tile &&
                     options.decode_rows <= max_tile,
                 "batch plan: q_tile ", options.q_tile, ", kv_tile ", options.kv_tile, ", kv_block ", options.kv_block,
                 " and decode_rows ", options.decode_rows, " must not exceed 2^20");
    qo_indptr_.assign(shape.qo_indptr.begin(), shape.qo_indptr.end());
    kv_lens_.assign(shape.kv_lens.begin(), shape.kv_lens.end());
    const std::size_t g = group(), d = head_dim_, n = batch();
    workers_ = options.threads;
    FRUGAL_CHECK(options.kv_block <= 256, "batch plan: kv_block ", options.kv_block, " exceeds 256 keys");
    kv_block_ = options.kv_block > 0 ? options.kv_block : 128;
    decode_heads_ = options.group_decode_heads ? kv_heads_ : 1;
    const std::size_t head_groups = kv_heads_ / decode_heads_;
    // Split-KV: chunks small enough that the decode work makes about eight items per
    // worker (so the longest-first hand-out balances), never below 512 keys; one worker
    // never splits.
    std::size_t decode_keys = 0, longest = 0, longest_prefill = 0;
    for (std::size_t s = 0; s < n; ++s) {
        if (is_decode(s)) {
            decode_keys = checked_add(decode_keys, kv_lens_[s], "batch plan: decode keys");
            longest = std::max(longest, kv_lens_[s]);
            decode_rows_ = std::max(decode_rows_, q_len(s) * g);
        } else {
            longest_prefill = std::max(longest_prefill, q_len(s));
        }
    }
    const auto round_up = [&](std::size_t x) { return (x + kv_block_ - 1) / kv_block_ * kv_block_; };
    if (options.kv_chunk > 0) {
        kv_chunk_ = round_up(options.kv_chunk);
    } else if (options.threads == 1 || decode_keys == 0) {
        kv_chunk_ = round_up(std::max<std::size_t>(longest, 1));
    } else {
        const std::size_t want_items = 8 * options.threads;
        const std::size_t per_item =
            checked_add(checked_mul(decode_keys, head_groups, "batch plan: decode keys x KV heads"), want_items - 1,
                        "batch plan: decode keys x KV heads") / want_items;
        kv_chunk_ = round_up(std::clamp<std::size_t>(per_item, 512, std::max<std::size_t>(longest, 512)));
    }
    q_tile_ = std::min(options.q_tile, std::max<std::size_t>(longest_prefill, 1));

    // Work items with their cost (query rows x keys) for the longest-first order. Counted
    // first: a plan holds its items, so their number is bounded before anything is allocated.
    const attention_mask& mask = options.mask;
    const auto chunk_range = [&](std::size_t s) {
        const auto ql = static_cast<std::int64_t>(q_len(s)), kl = static_cast<std::int64_t>(kv_lens_[s]);
        const auto kb = static_cast<std::size_t>(mask.key_begin(0, ql, kl));
        const auto ke = std::max(kb, static_cast<std::size_t>(mask.key_end(ql - 1, ql, kl)));
        const std::size_t c0 = kb / kv_chunk_;
        return std::tuple{kb, ke, c0, std::max(c0 + 1, (ke + kv_chunk_ - 1) / kv_chunk_)};
    };
    constexpr std::size_t max_items = std::size_t(1) << 26;
    std::size_t count = 0;
    for (std::size_t s = 0; s < n && count <= max_items; ++s) {
        const auto [kb, ke, c0, c1] = chunk_range(s);
        const char* what = "batch plan: work items";
        count = checked_add(count,
                            is_decode(s) ? checked_mul(head_groups, c1 - c0, what)
                                         : checked_mul(kv_heads_, (q_len(s) + q_tile_ - 1) / q_tile_, what),
                            what);
    }
    FRUGAL_CHECK(count <= max_items, "batch plan: the batch splits into more than 2^26 work items (q_tile ", q_tile_,
                 ", kv_chunk ", kv_chunk_, "); use larger tiles or chunks");
    std::vector<std::pair<double, batch_work_item>> work;
    work.reserve(count);
    for (std::size_t s = 0; s < n; ++s) {
        const auto ql = static_cast<std::int64_t>(q_len(s)), kl = static_cast<std::int64_t>(kv_lens_[s]);
        if (is_decode(s)) {
            const auto [kb, ke, c0, c1] = chunk_range(s);
            for (std::size_t h = 0; h < kv_heads_; h += decode_heads_) {
                const std::size_t first = slots_;
                for (std::size_t c = c0; c < c1; ++c) {
                    batch_work_item it{.seq = s, .kv_head = h, .heads = decode_heads_, .prefill = false, .q0 = 0,
                                       .rows = q_len(s), .k_begin = std::max(kb, c * kv_chunk_),
                                       .k_end = std::min(ke, (c + 1) * kv_chunk_)};
                    if (c1 - c0 > 1) it.slot = slots_++;
                    it.k_end = std::max(it.k_begin, it.k_end);
                    work.emplace_back(double(it.rows * g * it.heads) * double(it.k_end - it.k_begin + 1), it);
                }
                if (c1 - c0 > 1) merges_.push_back({s, h, decode_heads_, first, c1 - c0});
            }
        } else {
            for (std::size_t q0 = 0; q0 < q_len(s); q0 += q_tile_) {
                const std::size_t rows = std::min(q_tile_, q_len(s) - q0);
                const auto i0 = static_cast<std::int64_t>(q0), i1 = static_cast<std::int64_t>(q0 + rows) - 1;
                const auto kb = static_cast<std::size_t>(mask.key_begin(i0, ql, kl));
                const auto ke = std::max(kb, static_cast<std::size_t>(mask.key_end(i1, ql, kl)));
                for (std::size_t h = 0; h < kv_heads_; ++h) {
                    const batch_work_item it{.seq = s, .kv_head = h, .prefill = true, .q0 = q0, .rows = rows,
                                             .k_begin = kb, .k_end = ke};
                    work.emplace_back(double(rows * g) * double(ke - kb + 1), it);
                }
            }
        }
    }
    // Most expensive first; ties keep their order (std::sort on the index as well: no
    // temporary buffer, unlike std::stable_sort).
    std::vector<std::size_t> order(work.size());
    for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
        return work[a].first != work[b].first ? work[a].first > work[b].first : a < b;
    });
    items_.reserve(work.size());
    for (std::size_t i : order) items_.push_back(work[i].second);

    // Workspace: per worker the larger of the two paths' scratch, then one slot per chunk.
    // Every term checked: head counts and head_dim are only bounded by the tensors' sizes.
    const char* what = "batch plan: workspace floats";
    const auto pad = [&](std::size_t floats) { return checked_add(floats, std::size_t{15}, what) / 16 * 16; };
    const auto sum = [&](std::initializer_list<std::size_t> terms) {
        std::size_t total = 0;
        for (std::size_t t : terms) total = checked_add(total, t, what);
        return total;
    };
    std::size_t decode_floats = 0, prefill_floats = 0;
    if (decode_rows_ > 0) {
        // The item's query rows, outputs and row states; the rescale factors of one KV head
        // and the score tile of one backend call (up to `max_decode_tile_heads` heads).
        const std::size_t r = checked_mul(decode_rows_, decode_heads_, what);
        const std::size_t rd = pad(checked_mul(r, d, what)), kd = pad(checked_mul(kv_block_, d, what));
        const std::size_t tile_rows = decode_rows_ * std::min(decode_heads_, max_decode_tile_heads);
        decode_floats = sum({rd, rd, pad(r), pad(r), pad(decode_rows_), pad(tile_rows * kv_block_), kd, kd});
        slot_floats_ = pad(sum({checked_mul(r, d, what), r, r}));
    }
    if (longest_prefill > 0) {
        const std::size_t qt = q_tile_, kt = options.kv_tile;
        const std::size_t kd = pad(checked_mul(kt, d, what)), qd = pad(checked_mul(qt, d, what));
        prefill_floats = sum({pad(qt * kt), kd, kd, checked_mul(g, sum({qd, qd, pad(qt), pad(qt), pad(qt)}), what)});
    }
    worker_floats_ = std::max(decode_floats, prefill_floats);
    const std::size_t floats = checked_add(checked_mul(workers_, worker_floats_, what),
                                           checked_mul(slots_, slot_floats_, what), what);
    workspace_bytes_ = checked_mul(floats, sizeof(float), "batch plan: workspace bytes");
}

}  // namespace frugal::attention
