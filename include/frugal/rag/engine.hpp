#pragma once
/// @file
/// The engine a RAG scheduler drives (HedraRAG 4.5's GPU and CPU sides): the slots of a
/// generation batch and of a retrieval batch, and the generator and retriever concepts. The
/// decision core (`rag_scheduler`) only plans batches and reads the engine's estimates; its
/// drivers (the wall-clock `rag_runtime`, frugal::sim's virtual-clock loop) run `step` and
/// `search`.

#include <concepts>
#include <cstddef>
#include <cstdint>
#include <span>
#include <type_traits>
#include <utility>
#include <vector>

#include "frugal/core/executor.hpp"
#include "frugal/rag/workflow.hpp"
#include "frugal/retrieve/top_k.hpp"

namespace frugal::rag {

/// One request's decode step in a generation batch. Step 0 starts a new generation of
/// `node` for the request (prefill its prompt from `state` and `docs`); later steps extend
/// it. A generation ends with the generator's `commit` (kept) or `discard` (a speculative
/// generation whose documents were not the final ones, 4.3), and the next generation of
/// the request starts at step 0 again. `context` is the prompt, documents and steps so far
/// in tokens, as the scheduler estimates it.
struct generation_slot {
    std::size_t request = 0, step = 0, context = 0;
    const rag_node* node = nullptr;
    const rag_state* state = nullptr;
    std::span<const std::uint64_t> docs;
    bool speculative = false;  ///< conditioned on a partial top-k (4.3): may be discarded
};

/// One request's share of a retrieval batch: its query (the retriever's own type, from
/// `query_of`), the clusters to search now, in order, and the top-k heap kept across the
/// request's sub-stages.
template <class Query>
struct retrieval_slot {
    std::size_t request = 0;
    const Query* query = nullptr;
    std::span<const std::size_t> clusters;
    retrieve::top_k* results = nullptr;
};

/// The LLM engine as the scheduler drives it, which owns what it generates (text, KV cache)
/// per request: `step(batch)` runs one decode step for every slot and returns its duration
/// in ms; `step_time(batch, context)` estimates a step for sub-stage budgeting;
/// `length(state, node)` is the number of steps the node will decode; `commit(state, node)`
/// keeps the request's current generation and writes its outputs into the state (what
/// conditional edges and the next retrieval read); `discard(request)` drops it (frees its KV;
/// a request with no generation in progress is ignored).
///
/// Every method is called on the generation side only (the thread that runs `step`, or the
/// scheduler's calls that thread makes), never while a `step` is running elsewhere, so a
/// generator needs no lock of its own.
/// @code
/// static_assert(frugal::rag::rag_generator<my_engine>);
/// @endcode
template <class G>
concept rag_generator = requires(G& g, const G& cg, std::span<const generation_slot> batch, rag_state& s,
                                 const rag_state& cs, const rag_node& n, std::size_t count) {
    { g.step(batch) } -> std::convertible_to<double>;
    { cg.step_time(count, count) } -> std::convertible_to<double>;
    { cg.length(cs, n) } -> std::convertible_to<std::size_t>;
    g.commit(s, n);
    g.discard(count);
};

/// A generator that can also write into a state what its unfinished generation has
/// produced so far, as `commit` would (`preview(state, node)`, the generation going on):
/// speculative retrieval (4.3) asks the retriever for the query of that previewed state.
/// @code
/// static_assert(frugal::rag::rag_previewing_generator<frugal::sim::simulated_generator>);
/// @endcode
template <class G>
concept rag_previewing_generator = rag_generator<G> && requires(const G& g, rag_state& s, const rag_node& n) {
    g.preview(s, n);
};

/// A generator whose generations may end before `length` steps, at an end-of-sequence token:
/// after each step the scheduler asks `stopped(request)`, and a generation that stopped is
/// over (committed, or discarded if it was a speculation that turned out wrong) like one
/// that ran all its steps. `length(state, node)` is then the most steps a node may take.
/// @code
/// static_assert(frugal::rag::rag_stopping_generator<frugal::sim::simulated_generator>);
/// @endcode
template <class G>
concept rag_stopping_generator = rag_generator<G> && requires(const G& g, std::size_t request) {
    { g.stopped(request) } -> std::convertible_to<bool>;
};

/// The query type of retriever R: what its `query_of(state, node)` returns.
template <class R>
using rag_query_t = std::remove_cvref_t<decltype(std::declval<const R&>().query_of(std::declval<const rag_state&>(),
                                                                                   std::declval<const rag_node&>()))>;

/// The vector index as the scheduler drives it: `query_of(state, node)` names the query
/// of the request's retrieval at `node` from its state (the question, the text generated
/// so far: an embedding, or whatever `probe` takes; compared with == to validate a
/// speculative retrieval); `probe(query)` lists the clusters it searches, in order;
/// `cluster_time(c)` estimates the time cluster c adds to a batch; `search(batch)` searches
/// each slot's clusters into its heap and returns the duration in ms.
///
/// Every method is called on the retrieval side only (the thread that runs `search`, or
/// the scheduler's calls that thread makes), never while a `search` is running elsewhere.
/// @code
/// static_assert(frugal::rag::rag_retriever<frugal::rag::ivf_retriever<frugal::retrieve::ivf_flat, my_embedder>>);
/// @endcode
template <class R>
concept rag_retriever =
    requires(const R& cr, const rag_state& s, const rag_node& n) { cr.query_of(s, n); } &&
    std::copyable<rag_query_t<R>> && std::equality_comparable<rag_query_t<R>> &&
    requires(R& r, const R& cr, const rag_query_t<R>& q, std::span<const retrieval_slot<rag_query_t<R>>> batch,
             std::size_t c) {
        { cr.probe(q) } -> std::convertible_to<std::vector<std::size_t>>;
        { cr.cluster_time(c) } -> std::convertible_to<double>;
        { r.search(batch) } -> std::convertible_to<double>;
    };

/// A retriever that also names the cluster each result came from (`list_of(id)`): the
/// scheduler then applies the similarity-aware cluster order of 4.3 with each request's
/// local cache of previous results, and can run speculative retrieval.
/// @code
/// static_assert(frugal::rag::rag_ordered_retriever<frugal::rag::ivf_retriever<frugal::retrieve::ivf_flat, my_embedder>>);
/// @endcode
template <class R>
concept rag_ordered_retriever = rag_retriever<R> && requires(const R& r, std::uint64_t id) {
    { r.list_of(id) } -> std::convertible_to<std::size_t>;
};

/// A retriever that runs a batch's scans on the caller's executor (`search(batch, ex)`,
/// spreading the (query, cluster) scans over the executor's workers): `rag_runtime` then
/// hands it the executor it was given; other retrievers get `search(batch)` on the
/// runtime's retrieval thread.
/// @code
/// static_assert(frugal::rag::rag_parallel_retriever<my_retriever, frugal::thread_pool>);
/// @endcode
template <class R, class E>
concept rag_parallel_retriever =
    rag_retriever<R> && executor<E> && requires(R& r, std::span<const retrieval_slot<rag_query_t<R>>> batch, E& ex) {
        { r.search(batch, ex) } -> std::convertible_to<double>;
    };

}  // namespace frugal::rag
