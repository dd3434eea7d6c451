#pragma once
/// @file
/// The tile plan of tiled attention: query tile, KV tile and concurrent workers chosen so
/// the workspace fits a byte budget, with the exact workspace size.

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>

#include "frugal/attention/masks.hpp"
#include "frugal/attention/online_softmax.hpp"
#include "frugal/core/checked.hpp"
#include "frugal/core/error.hpp"
#include "frugal/core/memory_budget.hpp"

namespace frugal::attention {

/// Sizes of one attention call: `q_heads` query heads over `kv_heads` key/value heads
/// (GQA/MQA when fewer; q_heads must be a multiple), `q_len` queries, `kv_len` keys,
/// head dimension `head_dim` (any value, e.g. 72, 80, 96, 112, 128).
/// @code
/// frugal::attention::attention_shape shape{.q_heads = 32, .kv_heads = 8, .q_len = 4096, .kv_len = 4096, .head_dim = 128};
/// @endcode
struct attention_shape {
    std::size_t q_heads = 1;
    std::size_t kv_heads = 1;
    std::size_t q_len = 0;
    std::size_t kv_len = 0;
    std::size_t head_dim = 0;

    /// Query heads per KV head.
    [[nodiscard]] constexpr std::size_t group() const noexcept { return kv_heads == 0 ? 0 : q_heads / kv_heads; }

    /// Throws `frugal::invalid_argument` naming the bad size, including sizes whose
    /// tensors would not fit the address space (or lengths the mask's signed arithmetic
    /// cannot hold).
    constexpr void validate() const {
        FRUGAL_CHECK(q_heads > 0 && kv_heads > 0, "attention_shape: q_heads ", q_heads, " and kv_heads ", kv_heads,
                     " must be positive");
        FRUGAL_CHECK(q_heads % kv_heads == 0, "attention_shape: kv_heads ", kv_heads, " does not divide q_heads ",
                     q_heads);
        FRUGAL_CHECK(head_dim > 0, "attention_shape: head_dim must be positive");
        FRUGAL_CHECK(q_len > 0 && kv_len > 0, "attention_shape: q_len ", q_len, " and kv_len ", kv_len,
                     " must be positive");
        constexpr std::size_t max_len = std::size_t(1) << 62;
        FRUGAL_CHECK(q_len <= max_len && kv_len <= max_len, "attention_shape: q_len ", q_len, " or kv_len ", kv_len,
                     " exceeds 2^62");
        constexpr std::size_t max_floats = std::numeric_limits<std::size_t>::max() / sizeof(float);
        FRUGAL_CHECK(head_dim <= max_floats / q_heads / q_len, "attention_shape: ", q_heads, " query heads x ", q_len,
                     " tokens x head_dim ", head_dim, " floats overflow 64-bit byte sizes");
        FRUGAL_CHECK(head_dim <= max_floats / kv_heads / kv_len, "attention_shape: ", kv_heads, " KV heads x ",
                     kv_len, " tokens x head_dim ", head_dim, " floats overflow 64-bit byte sizes");
    }
};

/// What the attention computes and how it may run.
///
/// `scale` multiplies QK^T (0 means 1/sqrt(head_dim)); `lse_base` is the base of the
/// optional log-sum-exp output; `threads` bounds the concurrent (head, query tile)
/// work items; `q_tile`/`kv_tile` are the preferred tile sizes the planner shrinks to
/// fit the budget.
/// @code
/// frugal::attention::attention_options opt{.mask = frugal::attention::attention_mask::causal(), .threads = 2};
/// @endcode
struct attention_options {
    attention_mask mask{};
    float scale = 0.0f;
    softmax_base lse_base = softmax_base::e;
    std::size_t threads = 1;
    std::size_t q_tile = 256;
    std::size_t kv_tile = 256;
};

/// A validated tile plan (see `plan_attention_tiles`): every size the run needs and the
/// exact bytes of its workspace.
/// @code
/// auto plan = frugal::attention::plan_attention_tiles(shape, options, frugal::memory_budget::mib(16));
/// std::size_t bytes = plan.workspace_bytes();   // what run allocates, exactly
/// @endcode
class attention_plan {
public:
    /// Workspace floats of one worker with the given tiles: the score/probability tile
    /// and the per-row max, sum and rescale factor, padded to 64 bytes. Throws
    /// `frugal::invalid_argument` when the count does not fit in a size_t.
    [[nodiscard]] static constexpr std::size_t worker_floats(std::size_t q_tile, std::size_t kv_tile) {
        const char* what = "attention_plan: worker workspace floats";
        const std::size_t n = checked_add(checked_mul(q_tile, kv_tile, what), checked_mul(q_tile, std::size_t{3}, what),
                                          what);
        return checked_add(n, std::size_t{15}, what) / 16 * 16;
    }

    /// The smallest workspace any plan needs: one worker with a 1 x 1 tile.
    [[nodiscard]] static constexpr std::size_t minimum_bytes() noexcept { return 16 * sizeof(float); }  // worker_floats(1, 1)

    constexpr attention_plan(const attention_shape& shape, const attention_options& options, std::size_t q_tile,
                             std::size_t kv_tile, std::size_t workers)
        : shape_(shape), options_(options), q_tile_(q_tile), kv_tile_(kv_tile), workers_(workers) {
        shape.validate();
        FRUGAL_CHECK(q_tile > 0 && kv_tile > 0 && workers > 0, "attention_plan: tiles ", q_tile, " x ", kv_tile,
                     " and workers ", workers, " must be positive");
        FRUGAL_CHECK(std::isfinite(options.scale) && options.scale >= 0.0f, "attention_plan: scale ", options.scale,
                     " must be finite and >= 0 (0 = 1/sqrt(head_dim))");
        FRUGAL_CHECK(q_tile <= shape.q_len && kv_tile <= shape.kv_len, "attention_plan: tiles ", q_tile, " x ", kv_tile,
                     " exceed the ", shape.q_len, " x ", shape.kv_len, " score matrix");
        worker_floats_ = worker_floats(q_tile, kv_tile);
        workspace_bytes_ = checked_product("attention_plan: workspace bytes", workers, worker_floats_, sizeof(float));
    }

    [[nodiscard]] constexpr const attention_shape& shape() const noexcept { return shape_; }
    [[nodiscard]] constexpr const attention_options& options() const noexcept { return options_; }
    [[nodiscard]] constexpr std::size_t q_tile() const noexcept { return q_tile_; }
    [[nodiscard]] constexpr std::size_t kv_tile() const noexcept { return kv_tile_; }
    /// Work items processed at once (each holds one workspace slice).
    [[nodiscard]] constexpr std::size_t workers() const noexcept { return workers_; }
    /// Query tiles per head.
    [[nodiscard]] constexpr std::size_t q_tiles() const noexcept { return (shape_.q_len + q_tile_ - 1) / q_tile_; }
    /// Floats of one worker's workspace slice.
    [[nodiscard]] constexpr std::size_t worker_floats() const noexcept { return worker_floats_; }
    /// Exact bytes of workspace the run uses (Q, K, V and the output are the caller's).
    [[nodiscard]] constexpr std::size_t workspace_bytes() const noexcept { return workspace_bytes_; }
    /// The factor applied to QK^T: `scale` (or 1/sqrt(head_dim)) times log2(e), because
    /// the run exponentiates in base two.
    [[nodiscard]] float score_scale_log2() const noexcept {
        return softmax_math::score_scale_log2(options_.scale, shape_.head_dim);
    }

private:
    attention_shape shape_;
    attention_options options_;
    std::size_t q_tile_, kv_tile_, workers_;
    std::size_t worker_floats_ = 0, workspace_bytes_ = 0;
};

/// Plans tiled attention so its workspace fits `budget`: starts from the preferred tiles
/// (clamped to the sequence lengths) and `options.threads` workers, then halves the KV
/// tile, then the query tile, then the number of workers until it fits. The budget
/// covers frugal's workspace only, not the caller's Q, K, V and output. Throws
/// `frugal::invalid_argument` naming the minimum when even one 1 x 1 tile does not fit.
/// @code
/// auto plan = frugal::attention::plan_attention_tiles({.q_heads = 8, .kv_heads = 8, .q_len = 4096, .kv_len = 4096,
///                                           .head_dim = 128}, {.threads = 2}, frugal::memory_budget::mib(16));
/// @endcode
[[nodiscard]] inline attention_plan plan_attention_tiles(const attention_shape& shape,
                                                         const attention_options& options, memory_budget budget) {
    shape.validate();
    FRUGAL_CHECK(options.threads > 0, "plan_attention_tiles: threads must be positive");
    FRUGAL_CHECK(budget.bytes() >= attention_plan::minimum_bytes(), "plan_attention_tiles: a budget of ",
                 budget.bytes(), " bytes is below the minimum workspace of ", attention_plan::minimum_bytes(),
                 " bytes (one worker, a 1 x 1 tile)");
    std::size_t qt = std::clamp<std::size_t>(options.q_tile, 1, shape.q_len);
    std::size_t kt = std::clamp<std::size_t>(options.kv_tile, 1, shape.kv_len);
    const std::size_t items = shape.q_heads * ((shape.q_len + qt - 1) / qt);
    std::size_t workers = std::min(options.threads, items);
    const auto fits = [&] {
        const std::size_t floats = attention_plan::worker_floats(qt, kt);  // qt, kt <= lengths: no overflow
        return floats <= budget.bytes() / sizeof(float) / workers;
    };
    while (!fits() && kt > 1) kt = (kt + 1) / 2;
    while (!fits() && qt > 1) qt = (qt + 1) / 2;
    while (!fits() && workers > 1) --workers;
    return attention_plan(shape, options, qt, kt, workers);
}

}  // namespace frugal::attention
