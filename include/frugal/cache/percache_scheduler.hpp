#pragma once
/// @file
/// PerCache's cache scheduler (section 4.3) and cache refresh (section 4.1.3) as plain
/// algorithms over a `semantic_cache` (QA bank) and a `prefix_tree` (knowledge bank).

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <functional>
#include <span>
#include <vector>

#include "frugal/cache/prefix_tree.hpp"
#include "frugal/cache/semantic_cache.hpp"
#include "frugal/core/error.hpp"
#include "frugal/core/matrix_view.hpp"

namespace frugal::cache {

/// How predicted queries populate the caches (section 4.3.1).
/// @code
/// if (frugal::cache::choose_population(tau, cutoff) == frugal::cache::population_strategy::prefill_only) prefill(q);
/// @endcode
enum class population_strategy {
    prefill_only,        ///< QKV tensors into the knowledge bank; the query enters the QA bank without an answer
    prefill_and_decode,  ///< both banks: the answer is generated too
};

/// Adaptive cache population (section 4.3.2): above the cutoff tau_scheduler few queries will
/// match the QA bank, so decoding predicted queries is wasted work: prefill only.
/// @code
/// auto s = frugal::cache::choose_population(bank.tau(), 0.88);
/// @endcode
[[nodiscard]] inline population_strategy choose_population(double tau_query, double tau_scheduler) {
    FRUGAL_CHECK(std::isfinite(tau_query) && std::isfinite(tau_scheduler), "choose_population: tau_query ", tau_query,
                 " and tau_scheduler ", tau_scheduler, " must be finite");
    return tau_query > tau_scheduler ? population_strategy::prefill_only : population_strategy::prefill_and_decode;
}

/// QKV cache -> QA bank conversion (section 4.3.3): the entries stored without an answer,
/// to decode in idle time. Sorted by id (insertion order).
/// @code
/// for (auto id : frugal::cache::decode_worklist(bank)) bank.set_answer(id, llm.decode(bank.find(id)->query));
/// @endcode
template <class Bank>
[[nodiscard]] std::vector<typename Bank::entry_id> decode_worklist(const Bank& bank) {
    std::vector<typename Bank::entry_id> ids;
    bank.for_each([&](const auto& id, const auto& e) {
        if (!e.answer) ids.push_back(id);
    });
    std::sort(ids.begin(), ids.end());
    return ids;
}

/// QA bank -> QKV cache conversion (section 4.3.3): the entries whose retrieved chunks are no
/// longer all in the knowledge bank, oldest first, as long as re-prefilling their missing
/// chunks (`chunk_bytes(id)` each) fits in the tree's free bytes.
/// @code
/// auto ids = frugal::cache::reprefill_worklist(bank, tree, [&](auto chunk) { return kv_bytes(chunk); });
/// @endcode
template <class Bank, class ChunkId, class Handle, class Policy, class Hash, class ChunkBytes>
[[nodiscard]] std::vector<typename Bank::entry_id> reprefill_worklist(const Bank& bank,
                                                                      const prefix_tree<ChunkId, Handle, Policy, Hash>& tree,
                                                                      ChunkBytes&& chunk_bytes) {
    std::vector<std::pair<typename Bank::entry_id, std::size_t>> missing;  // (id, bytes to restore)
    bank.for_each([&](const auto& id, const auto& e) {
        const std::size_t have = tree.cached_length(std::span<const ChunkId>(e.chunks));
        if (have == e.chunks.size()) return;
        std::size_t bytes = 0;
        for (std::size_t i = have; i < e.chunks.size(); ++i) bytes += static_cast<std::size_t>(chunk_bytes(e.chunks[i]));
        missing.emplace_back(id, bytes);
    });
    std::sort(missing.begin(), missing.end());
    std::size_t free = tree.budget() - std::min(tree.budget(), tree.bytes());
    std::vector<typename Bank::entry_id> ids;
    for (auto [id, bytes] : missing) {
        if (bytes > free) continue;
        free -= bytes;
        ids.push_back(id);
    }
    return ids;
}

/// Cache refresh (section 4.1.3): the entries for which some new chunk (a row of
/// `new_chunks`, any norm) has a cosine similarity above the entry's refresh floor (the
/// similarity of its k_refresh-th best chunk), i.e. would enter its top-k_refresh.
/// @code
/// for (auto id : frugal::cache::refresh_worklist(bank, new_chunk_embeddings)) requeue(id);
/// @endcode
template <class Bank>
[[nodiscard]] std::vector<typename Bank::entry_id> refresh_worklist(const Bank& bank, matrix_view<const float> new_chunks) {
    FRUGAL_CHECK(new_chunks.rows() == 0 || new_chunks.cols() == bank.dim(), "refresh_worklist: chunks of ", new_chunks.cols(),
                 " dimensions for a bank of ", bank.dim());
    std::vector<float> units(new_chunks.rows() * bank.dim());
    for (std::size_t r = 0; r < new_chunks.rows(); ++r)
        retrieve::normalize_into(new_chunks.row(r), std::span<float>(units).subspan(r * bank.dim(), bank.dim()));
    std::vector<typename Bank::entry_id> ids;
    bank.for_each([&](const auto& id, const auto& e) {
        const auto q = bank.embedding(e);
        for (std::size_t r = 0; r < new_chunks.rows(); ++r) {
            float s = 0;
            for (std::size_t c = 0; c < q.size(); ++c) s += q[c] * units[r * q.size() + c];
            if (s > e.refresh_floor) {
                ids.push_back(id);
                return;
            }
        }
    });
    std::sort(ids.begin(), ids.end());
    return ids;
}

/// Predictive population (section 4.1.2): asks `predict(stride)` for up to `stride` likely
/// future queries and hands each to `populate(query, strategy)`, which runs prefill (and
/// decode) and fills the banks. Returns how many queries were populated.
/// @code
/// frugal::cache::populate_predicted([&](std::size_t n) { return llm.predict_queries(abstract, n); }, 3,
///     frugal::cache::choose_population(bank.tau(), 0.88), [&](const std::string& q, auto s) { run(q, s); });
/// @endcode
template <class Predict, class Populate>
std::size_t populate_predicted(Predict&& predict, std::size_t stride, population_strategy strategy, Populate&& populate) {
    FRUGAL_CHECK(stride > 0, "populate_predicted: prediction stride 0 predicts nothing");
    auto queries = std::invoke(predict, stride);
    std::size_t n = 0;
    for (auto& q : queries) {
        if (n == stride) break;
        std::invoke(populate, q, strategy);
        ++n;
    }
    return n;
}

}  // namespace frugal::cache
