#pragma once
/// @file
/// Monolithic forwarding (GRATING sections 3.2, 4.1, 4.3): one batch of all candidates goes
/// through the layers together, a pruning policy runs before each layer, and each layer is
/// executed over the active candidates in chunks.

#include <algorithm>
#include <cstddef>
#include <limits>
#include <optional>
#include <span>
#include <vector>

#include "frugal/core/error.hpp"
#include "frugal/prune/cluster_pruner.hpp"
#include "frugal/prune/progressive_selection.hpp"
#include "frugal/schedule/chunk_plan.hpp"

namespace frugal::prune {

/// A layer-wise reranker the driver can run: `layers()` transformer layers; `embed(ids)`
/// creates the hidden states of candidates `ids`; `forward(layer, ids)` runs one layer on
/// the hidden states of one chunk of candidates; `score(ids, out)` applies the classifier
/// head to the current hidden states of `ids`. Candidate ids are 0..pool-1. Optional hooks
/// `begin_layer(layer)` / `end_layer(layer)` bracket each layer (acquire and release the
/// layer's weights, e.g. from a stream/layer_window).
/// @code
/// static_assert(frugal::prune::progressive_model<my_reranker>);
/// @endcode
template <class M>
concept progressive_model = requires(M& m, std::size_t layer, std::span<const std::size_t> ids, std::span<float> out) {
    { m.layers() } -> std::convertible_to<std::size_t>;
    m.embed(ids);
    m.forward(layer, ids);
    m.score(ids, out);
};

/// What the chunk planner needs to size a layer's chunks (GRATING 4.3): the cost of one
/// layer in the terms of frugal::schedule::plan_chunks, with one *candidate* (its whole query +
/// document sequence) as the model's token: `cost.per_token_seconds` is one candidate
/// through one layer once the hardware is saturated, `cost.min_chunk_seconds` the time of
/// any chunk below saturation (the chunk size's lower bound), and
/// `cost.intermediate_bytes_per_token` one candidate's intermediate tensors inside a layer.
/// @code
/// frugal::prune::chunk_planning plan{.cost = {.per_token_seconds = 2e-3, .min_chunk_seconds = 4e-3,
///                                      .intermediate_bytes_per_token = 6 << 20},
///                             .next_layer_load_seconds = 0.015, .memory_limit_bytes = 32 << 20};
/// @endcode
struct chunk_planning {
    schedule::chunk_cost_model cost{};
    /// Time to read one layer's weights (the dual-layer window loads layer l + 1 while layer l
    /// computes); the last layer has nothing to hide.
    double next_layer_load_seconds = 0.0;
    /// Memory for one chunk's intermediate tensors.
    double memory_limit_bytes = 0.0;
};

/// How the driver executes a layer over the active candidates.
struct progressive_ranker_options {
    /// When set, each layer's chunk size comes from frugal::schedule::plan_chunks over the candidates
    /// still active: the smallest chunk whose intermediates fit the memory limit and whose
    /// layer time max(compute, next layer's load) is the best any fitting chunk achieves, so
    /// the layer's compute covers the next load whenever a fitting chunk can make it. The
    /// plan is redone before every layer because pruning shrinks the batch.
    std::optional<chunk_planning> planning{};
    /// Override: candidates per chunk for every layer, ignoring `planning`. 0 = planned, or
    /// one chunk of all active candidates when there is no planning either.
    std::size_t chunk_size = 0;
};

/// What happened at one layer.
struct layer_stats {
    std::size_t layer = 0;
    std::size_t active = 0;    ///< candidates that computed this layer
    std::size_t selected = 0;  ///< accepted by the decision before this layer
    std::size_t dropped = 0;   ///< dropped by the decision before this layer
    std::size_t chunks = 0;    ///< forward() calls for this layer
    std::size_t chunk_size = 0;  ///< candidates per chunk (planned, overridden, or all active)
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
/// deferred candidates in chunks sized by `options` (planned per layer, see
/// progressive_ranker_options); the forward pass stops when the top-K is complete. Throws
/// when K is 0 or exceeds the pool, the model has no layer, or the planning inputs are
/// invalid (see plan_chunks).
/// @code
/// frugal::prune::cluster_pruner pruner({.threshold = 0.35});
/// auto r = frugal::prune::progressive_rank(model, 20, 10, pruner, {.planning = plan});
/// @endcode
template <progressive_model Model, pruning_policy Policy>
[[nodiscard]] progressive_ranking progressive_rank(Model& model, std::size_t pool, std::size_t k, Policy& policy,
                                                   const progressive_ranker_options& options = {}) {
    const std::size_t layers = model.layers();
    FRUGAL_CHECK(layers > 0, "progressive_rank: the model has no layer");
    progressive_selection<Policy> sel(policy, pool, k);  // checks pool and K
    progressive_ranking out;
    std::vector<float> scores;
    // candidates per chunk for `layer` over the active candidates
    const auto chunk_for = [&](std::size_t layer) {
        const std::size_t active = sel.active().size();
        if (options.chunk_size > 0) return options.chunk_size;
        if (!options.planning) return active;
        const chunk_planning& p = *options.planning;
        const double load = layer + 1 < layers ? p.next_layer_load_seconds : 0.0;
        return schedule::plan_chunks(p.cost, active, load, p.memory_limit_bytes).chunk;
    };
    const auto run_chunks = [&](std::size_t step, auto&& fn) {
        const auto active = sel.active();
        std::size_t chunks = 0;
        for (std::size_t b = 0; b < active.size(); b += step, ++chunks)
            fn(active.subspan(b, std::min(step, active.size() - b)));
        return chunks;
    };
    run_chunks(chunk_for(0), [&](std::span<const std::size_t> ids) { model.embed(ids); });
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
        st.chunk_size = chunk_for(layer);
        st.chunks = run_chunks(st.chunk_size, [&](std::span<const std::size_t> ids) { model.forward(layer, ids); });
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

}  // namespace frugal::prune
