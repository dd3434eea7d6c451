#pragma once
/// @file
/// Monolithic forwarding (GRATING sections 3.2, 4.1, 4.3): one batch of all candidates goes
/// through the layers together, a pruning policy runs before each layer, and each layer is
/// executed over the active candidates in chunks.

#include <algorithm>
#include <cstddef>
#include <limits>
#include <span>
#include <vector>

#include "frugal/core/error.hpp"
#include "frugal/prune/cluster_pruner.hpp"
#include "frugal/prune/progressive_selection.hpp"

namespace frugal {

/// A layer-wise reranker the driver can run: `layers()` transformer layers; `embed(ids)`
/// creates the hidden states of candidates `ids`; `forward(layer, ids)` runs one layer on
/// the hidden states of one chunk of candidates; `score(ids, out)` applies the classifier
/// head to the current hidden states of `ids`. Candidate ids are 0..pool-1. Optional hooks
/// `begin_layer(layer)` / `end_layer(layer)` bracket each layer (acquire and release the
/// layer's weights, e.g. from a stream/layer_window).
/// @code
/// static_assert(frugal::progressive_model<my_reranker>);
/// @endcode
template <class M>
concept progressive_model = requires(M& m, std::size_t layer, std::span<const std::size_t> ids, std::span<float> out) {
    { m.layers() } -> std::convertible_to<std::size_t>;
    m.embed(ids);
    m.forward(layer, ids);
    m.score(ids, out);
};

/// How the driver executes a layer over the active candidates.
struct progressive_ranker_options {
    /// Candidates per chunk (GRATING 4.3). The intermediate tensors of one chunk must fit the
    /// caller's memory limit; the whole layer's compute, which chunking does not change, is
    /// what hides the next layer's weight load. 0 = one chunk of all active candidates.
    /// (The general planner lives in frugal/schedule; chunk_size_for() below covers the case
    /// of a fixed per-candidate intermediate size.)
    std::size_t chunk_size = 0;
};

/// The largest chunk whose intermediate tensors (`bytes_per_candidate` each) fit
/// `budget_bytes`, at least `min_chunk` (the smallest chunk that still uses the hardware
/// well) and at most `pool`. Throws when even `min_chunk` candidates do not fit.
/// @code
/// std::size_t chunk = frugal::chunk_size_for(64 << 20, 6 << 20, 2, 20);  // 10
/// @endcode
[[nodiscard]] inline std::size_t chunk_size_for(std::size_t budget_bytes, std::size_t bytes_per_candidate,
                                                std::size_t min_chunk, std::size_t pool) {
    FRUGAL_CHECK(bytes_per_candidate > 0 && min_chunk > 0 && pool > 0, "chunk_size_for: bytes per candidate ",
                 bytes_per_candidate, ", minimum chunk ", min_chunk, " and pool ", pool, " must be positive");
    const std::size_t fit = budget_bytes / bytes_per_candidate;
    FRUGAL_CHECK(fit >= std::min(min_chunk, pool), "chunk_size_for: a budget of ", budget_bytes, " bytes holds ", fit,
                 " candidates of ", bytes_per_candidate, " bytes, fewer than the minimum chunk ", min_chunk);
    return std::min(fit, pool);
}

/// What happened at one layer.
struct layer_stats {
    std::size_t layer = 0;
    std::size_t active = 0;    ///< candidates that computed this layer
    std::size_t selected = 0;  ///< accepted by the decision before this layer
    std::size_t dropped = 0;   ///< dropped by the decision before this layer
    std::size_t chunks = 0;    ///< forward() calls for this layer
    bool triggered = false;    ///< the decision before this layer clustered
    double dispersion = 0.0;
};

/// The outcome of progressive_rank.
struct progressive_ranking {
    std::vector<std::size_t> top;  ///< the K ids: early-selected ones first, then by final score
    /// Final-layer score of each id in `top`, NaN for ids selected before the last layer.
    std::vector<float> scores;
    std::vector<layer_stats> layers;  ///< one entry per layer that ran
    std::size_t candidate_layers_computed = 0;
    std::size_t candidate_layers_skipped = 0;  ///< pool x layers - computed
};

/// Runs `model` over a pool of `pool` candidates with monolithic forwarding and progressive
/// pruning (GRATING 4.1-4.3): all candidates are embedded, then before every layer but the
/// first the active candidates are scored and `policy` routes them; the layer runs on the
/// deferred candidates in chunks of `options.chunk_size`; the forward pass stops when the
/// top-K is complete. Throws when K is 0 or exceeds the pool, or the model has no layer.
/// @code
/// frugal::cluster_pruner pruner({.threshold = 0.35});
/// auto r = frugal::progressive_rank(model, 20, 10, pruner, {.chunk_size = 2});
/// @endcode
template <progressive_model Model, pruning_policy Policy>
[[nodiscard]] progressive_ranking progressive_rank(Model& model, std::size_t pool, std::size_t k, Policy& policy,
                                                   const progressive_ranker_options& options = {}) {
    const std::size_t layers = model.layers();
    FRUGAL_CHECK(layers > 0, "progressive_rank: the model has no layer");
    progressive_selection<Policy> sel(policy, pool, k);  // checks pool and K
    progressive_ranking out;
    std::vector<float> scores;
    const auto run_chunks = [&](auto&& fn) {
        const auto active = sel.active();
        const std::size_t step = options.chunk_size == 0 ? active.size() : options.chunk_size;
        std::size_t chunks = 0;
        for (std::size_t b = 0; b < active.size(); b += step, ++chunks)
            fn(active.subspan(b, std::min(step, active.size() - b)));
        return chunks;
    };
    run_chunks([&](std::span<const std::size_t> ids) { model.embed(ids); });
    for (std::size_t layer = 0; layer < layers; ++layer) {
        layer_stats st;
        st.layer = layer;
        if (layer > 0) {
            scores.resize(sel.active().size());
            model.score(sel.active(), std::span<float>(scores));
            const std::size_t selected_before = sel.selected().size(), dropped_before = sel.dropped();
            const prune_step step = sel.observe(scores);
            st.selected = sel.selected().size() - selected_before;
            st.dropped = sel.dropped() - dropped_before;
            st.triggered = step.triggered;
            st.dispersion = step.dispersion;
            if (sel.done()) break;
        }
        st.active = sel.active().size();
        if constexpr (requires { model.begin_layer(layer); }) model.begin_layer(layer);
        st.chunks = run_chunks([&](std::span<const std::size_t> ids) { model.forward(layer, ids); });
        if constexpr (requires { model.end_layer(layer); }) model.end_layer(layer);
        out.candidate_layers_computed += st.active;
        out.layers.push_back(st);
    }
    if (sel.done()) {
        out.top = sel.finish({});
        out.scores.assign(out.top.size(), std::numeric_limits<float>::quiet_NaN());
    } else {
        const auto active = sel.active();
        scores.resize(active.size());
        model.score(active, std::span<float>(scores));
        out.top = sel.finish(scores);
        out.scores.assign(out.top.size(), std::numeric_limits<float>::quiet_NaN());
        for (std::size_t t = sel.selected().size(); t < out.top.size(); ++t) {
            const auto it = std::find(active.begin(), active.end(), out.top[t]);
            out.scores[t] = scores[static_cast<std::size_t>(it - active.begin())];
        }
    }
    out.candidate_layers_skipped = pool * layers - out.candidate_layers_computed;
    return out;
}

}  // namespace frugal
