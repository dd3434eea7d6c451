#pragma once
/// @file
/// The two vector-index contracts frugal drives, stated once: `similarity_index` (a store of
/// unit vectors in numbered slots, searched for the single most similar one: the semantic
/// QA bank's) and `ivf_index` (an inverted-file index whose search visits chosen lists in a
/// chosen order into a caller-owned top-k: HedraRAG's resumable, reorderable retrieval).
/// Models: flat_similarity_index (similarity_index.hpp); ivf_flat (ivf_flat.hpp) and
/// frugal::faiss::ivf_adapter (backend/faiss/faiss_ivf.hpp).

#include <concepts>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "frugal/retrieve/top_k.hpp"

namespace frugal::retrieve {

/// The best stored vector for a query: its slot and inner product (cosine for unit vectors).
/// @code
/// if (auto m = index.nearest(q); m && m->similarity >= 0.9) use(m->slot);
/// @endcode
struct similarity_match {
    std::size_t slot;
    float similarity;
};

/// A store of unit vectors in numbered slots that finds the slot with the largest inner
/// product with a query. `dim()` is the vector length; `store(slot, v)` puts dim() floats in
/// a slot (replacing what was there); `erase(slot)` frees a stored slot; `nearest(q)` is the
/// stored slot with the largest inner product with q (ties: the smaller slot), or nullopt
/// when none is stored; `vector(slot)` is what a stored slot holds. Plug in your own (an
/// HNSW or IVF index) through this concept; the semantic cache hands it unit-normalized
/// vectors and manages the slot numbers.
/// @code
/// static_assert(frugal::retrieve::similarity_index<my_faiss_adapter>);
/// @endcode
template <class I>
concept similarity_index = requires(I& index, const I& cindex, std::size_t slot, std::span<const float> v) {
    { cindex.dim() } -> std::convertible_to<std::size_t>;
    index.store(slot, v);
    index.erase(slot);
    { cindex.nearest(v) } -> std::same_as<std::optional<similarity_match>>;
    { cindex.vector(slot) } -> std::same_as<std::span<const float>>;
};

/// An inverted-file vector index as HedraRAG's retrieval needs it: `lists()` lists, each of
/// `list_size(c)` vectors (its search cost); `probe(q, nprobe)` the nprobe lists nearest a
/// query, nearest first; and `search_lists(q, lists, heap)`, which scans the given lists in
/// the given order into a caller-owned `top_k` of (distance, id), smaller distance nearer.
/// Scanning a probe list in consecutive chunks with the same heap gives exactly the
/// one-call result, so a search can stop after any list and resume later (4.2's retrieval
/// sub-stages) and follow any order (4.3's similarity-aware order).
/// @code
/// static_assert(frugal::retrieve::ivf_index<frugal::retrieve::ivf_flat>);
/// @endcode
template <class I>
concept ivf_index = requires(const I& i, std::span<const float> q, std::span<const std::size_t> lists, top_k& heap,
                             std::size_t n) {
    { i.lists() } -> std::convertible_to<std::size_t>;
    { i.list_size(n) } -> std::convertible_to<std::size_t>;
    { i.probe(q, n) } -> std::convertible_to<std::vector<std::size_t>>;
    i.search_lists(q, lists, heap);
};

/// One-shot search of any `ivf_index`: the k nearest ids among the nprobe lists nearest
/// `query`, nearest first.
/// @code
/// auto ids = frugal::retrieve::ivf_search(index, query, /*k=*/5, /*nprobe=*/8);
/// @endcode
template <ivf_index Index>
[[nodiscard]] std::vector<std::uint64_t> ivf_search(const Index& index, std::span<const float> query, std::size_t k,
                                                    std::size_t nprobe) {
    top_k heap(k);
    index.search_lists(query, index.probe(query, nprobe), heap);
    return heap.ids();
}

}  // namespace frugal::retrieve
