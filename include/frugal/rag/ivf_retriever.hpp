#pragma once
/// @file
/// ivf_retriever: the scheduler's retriever over a real vector index. Any
/// `retrieve::ivf_index` (ivf_flat, frugal::faiss::ivf_adapter, your own) becomes a
/// `rag_retriever` given an embedder that turns a request's state into its query vector.

#include <algorithm>
#include <chrono>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <span>
#include <type_traits>
#include <utility>
#include <vector>

#include "frugal/core/error.hpp"
#include "frugal/core/executor.hpp"
#include "frugal/rag/engine.hpp"
#include "frugal/rag/workflow.hpp"
#include "frugal/retrieve/vector_index.hpp"

namespace frugal::rag {

/// An embedder: `embed(state, node)` is the query vector of the request's retrieval at `node`
/// (typically an embedding model applied to `state.input` or to a generated text such as
/// `state.text("hypothesis")`).
/// @code
/// auto embed = [&](const frugal::rag::rag_state& s, const frugal::rag::rag_node&) { return model.embed(s.input); };
/// static_assert(frugal::rag::rag_embedder<decltype(embed)>);
/// @endcode
template <class E>
concept rag_embedder = std::invocable<const E&, const rag_state&, const rag_node&> &&
                       std::convertible_to<std::invoke_result_t<const E&, const rag_state&, const rag_node&>,
                                           std::vector<float>>;

/// How an ivf_retriever searches and accounts time: `nprobe` lists per query; a list's
/// estimated search cost `per_list_ms + per_vector_ms * list_size` (what sub-stage budgets,
/// Eq. 1, are cut by); whether `search` reports the measured wall-clock time of the batch
/// (`measure`, for serving) or the sum of the estimates (deterministic, for planning and
/// tests); how many of the executor's workers search a batch (`threads`, 0: all of them);
/// and what one work item is: a query (`split_lists` false: FAISS's default, a call with
/// one query runs on one worker) or a slice of one query's lists (true: HedraRAG's
/// cluster-level split, every worker busy even for one query; the slices' heaps are merged
/// into the query's, so results do not change).
/// @code
/// frugal::rag::ivf_retriever retriever(index, embed, {.nprobe = 32, .measure = false});
/// @endcode
struct ivf_retriever_options {
    std::size_t nprobe = 8;
    double per_list_ms = 0.002, per_vector_ms = 2.5e-4;
    bool measure = true;
    std::size_t threads = 0;
    bool split_lists = false;
};

/// A `rag_retriever` over any `retrieve::ivf_index`: `query_of` embeds the state, `probe`
/// asks the index for its `nprobe` nearest lists, and `search` scans each slot's lists, in
/// the scheduler's order, into the slot's top-k (resumable, so sub-stages and the
/// similarity-aware order of 4.3 apply). When the index locates rows (`list_of(id)`, as
/// ivf_flat does) it is a `rag_ordered_retriever` too. A batch's queries are searched on the
/// caller's executor, one query per item (each writes only its own heap, so results do not
/// depend on the executor; the index's `search_lists` must then be safe to call
/// concurrently, as ivf_flat's is and FAISS's adapter's is not), or on the calling thread
/// without one. The index and executor are borrowed and must outlive the retriever; the
/// embedder is held by value (pass std::ref to share one).
/// @code
/// auto index = frugal::retrieve::ivf_flat::train(passages, dim, 64, 10, 1);
/// auto embed = [&](const frugal::rag::rag_state& s, const frugal::rag::rag_node&) { return model.embed(s.input); };
/// frugal::rag::ivf_retriever retriever(index, embed, {.nprobe = 8}, frugal::default_thread_pool());
/// auto run = frugal::sim::schedule_rag(requests, engine, retriever);
/// @endcode
template <retrieve::ivf_index Index, rag_embedder Embed, executor Executor = inline_executor>
class ivf_retriever {
public:
    /// A retriever that searches on the calling thread.
    ivf_retriever(const Index& index, Embed embed, ivf_retriever_options options = {})
        requires std::same_as<Executor, inline_executor>
        : ivf_retriever(index, std::move(embed), options, serial_) {}
    /// A retriever that searches a batch's queries on `ex`.
    ivf_retriever(const Index& index, Embed embed, ivf_retriever_options options, Executor& ex)
        : index_(index), embed_(std::move(embed)), opt_(options), ex_(&ex) {
        FRUGAL_CHECK(options.nprobe > 0 && options.nprobe <= index.lists(), "ivf_retriever: nprobe ", options.nprobe,
                     " with ", index.lists(), " lists");
        FRUGAL_CHECK(options.per_list_ms >= 0.0 && options.per_vector_ms >= 0.0 &&
                         options.per_list_ms + options.per_vector_ms < 1e300,
                     "ivf_retriever: list costs ", options.per_list_ms, " and ", options.per_vector_ms,
                     " ms (must be finite and >= 0)");
    }

    [[nodiscard]] std::vector<float> query_of(const rag_state& s, const rag_node& n) const { return embed_(s, n); }
    [[nodiscard]] std::vector<std::size_t> probe(const std::vector<float>& query) const {
        return index_.probe(query, opt_.nprobe);
    }
    [[nodiscard]] double cluster_time(std::size_t c) const {
        return opt_.per_list_ms + opt_.per_vector_ms * static_cast<double>(index_.list_size(c));
    }
    /// Searches the batch on the retriever's executor.
    double search(std::span<const retrieval_slot<std::vector<float>>> batch) { return search(batch, *ex_); }
    /// Searches the batch on `ex` (the runtime passes the executor it was given).
    template <executor X>
    double search(std::span<const retrieval_slot<std::vector<float>>> batch, X& ex) {
        const auto start = std::chrono::steady_clock::now();
        const std::size_t workers = opt_.threads == 0 ? ex.concurrency() : opt_.threads;
        if (!opt_.split_lists) {
            parallel_for(ex, batch.size(), workers, [&](std::size_t i, std::size_t) {
                index_.search_lists(*batch[i].query, batch[i].clusters, *batch[i].results);
            });
        } else {
            // Slices of about a quarter of a worker's share of the lists, each into a heap of
            // its own, merged into its query's heap afterwards.
            std::size_t total = 0;
            for (const auto& s : batch) total += s.clusters.size();
            const std::size_t per = std::max<std::size_t>(1, total / (4 * std::max<std::size_t>(1, workers)));
            struct slice {
                std::size_t slot, begin, end;
            };
            std::vector<slice> slices;
            for (std::size_t i = 0; i < batch.size(); ++i)
                for (std::size_t b = 0; b < batch[i].clusters.size(); b += per)
                    slices.push_back({i, b, std::min(batch[i].clusters.size(), b + per)});
            std::vector<retrieve::top_k> heaps;
            heaps.reserve(slices.size());
            for (const slice& sl : slices) heaps.emplace_back(batch[sl.slot].results->k());
            parallel_for(ex, slices.size(), workers, [&](std::size_t i, std::size_t) {
                const slice& sl = slices[i];
                index_.search_lists(*batch[sl.slot].query, batch[sl.slot].clusters.subspan(sl.begin, sl.end - sl.begin),
                                    heaps[i]);
            });
            for (std::size_t i = 0; i < slices.size(); ++i) batch[slices[i].slot].results->merge(heaps[i]);
        }
        if (!opt_.measure) {
            double estimate = 0.0;
            for (const auto& s : batch)
                for (std::size_t c : s.clusters) estimate += cluster_time(c);
            return estimate;
        }
        return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    }
    /// The list holding row `id` (when the index can tell).
    [[nodiscard]] std::size_t list_of(std::uint64_t id) const
        requires requires(const Index& i, std::size_t row) {
            { i.list_of(row) } -> std::convertible_to<std::size_t>;
        }
    {
        return index_.list_of(static_cast<std::size_t>(id));
    }

private:
    const Index& index_;
    Embed embed_;
    ivf_retriever_options opt_;
    Executor* ex_;
    static inline inline_executor serial_{};
};

}  // namespace frugal::rag
