#pragma once
/// @file
/// ivf_adapter: frugal's IVF index concept over a FAISS IndexIVF (Debian libfaiss-dev 1.7.3).
/// Searches go through IndexIVF::search_preassigned with the list order frugal chooses
/// (the similarity-aware order of HedraRAG 4.3, or any other), and a search can be
/// split into list chunks that keep FAISS's own top-k heap between calls
/// (PARALLEL_MODE_NO_HEAP_INIT), the resumable search of 4.2.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <span>
#include <utility>
#include <vector>

#include <faiss/IndexIVF.h>
#include <faiss/utils/Heap.h>
#include <faiss/utils/distances.h>

#include "frugal/core/error.hpp"
#include "frugal/retrieve/top_k.hpp"
#include "frugal/retrieve/vector_index.hpp"

namespace frugal::faiss {

/// FAISS's list and vector id type (::faiss::Index::idx_t in FAISS 1.7.3; -1 means "none").
using idx_t = ::faiss::Index::idx_t;

namespace detail {

// Scans `per_query` lists of each of `n` queries (`lists`, n x per_query, in scan order)
// into caller-owned FAISS heaps through IndexIVF::search_preassigned, with
// PARALLEL_MODE_NO_HEAP_INIT so the heaps are neither reset before nor sorted after the scan.
// FAISS 1.7.3 reads that flag from the index, not from the search parameters, so it is set
// for the duration of the call and restored (also when FAISS throws).
inline void faiss_scan_into_heaps(::faiss::IndexIVF& ix, std::size_t n, const float* x, std::size_t k,
                                  std::span<const idx_t> lists, std::size_t per_query, float* dis,
                                  idx_t* ids) {
    FRUGAL_CHECK(per_query > 0 && lists.size() == n * per_query, "ivf_adapter: ", lists.size(), " list ids for ", n,
                 " queries x ", per_query);
    for (idx_t c : lists)
        FRUGAL_CHECK_AS(frugal::out_of_range, c < static_cast<idx_t>(ix.nlist), "ivf_adapter: list ", c, " >= ",
                        ix.nlist);
    // The query-to-centroid distances IndexIVF::search would pass: IVF-Flat ignores them,
    // residual codecs with precomputed tables (IVF-PQ) need them.
    const std::size_t d = static_cast<std::size_t>(ix.d);
    std::vector<float> coarse(lists.size(), 0.0f), centroid(d);
    for (std::size_t j = 0; j < lists.size(); ++j) {
        if (lists[j] < 0) continue;
        ix.quantizer->reconstruct(lists[j], centroid.data());
        const float* q = x + (j / per_query) * d;
        coarse[j] = ix.metric_type == ::faiss::METRIC_INNER_PRODUCT ? ::faiss::fvec_inner_product(q, centroid.data(), d)
                                                                 : ::faiss::fvec_L2sqr(q, centroid.data(), d);
    }
    ::faiss::SearchParametersIVF p;
    p.nprobe = per_query;
    p.max_codes = 0;
    struct restore {
        ::faiss::IndexIVF& ix;
        int mode;
        ~restore() { ix.parallel_mode = mode; }
    } const saved{ix, ix.parallel_mode};
    ix.parallel_mode |= ix.PARALLEL_MODE_NO_HEAP_INIT;
    ix.search_preassigned(static_cast<idx_t>(n), x, static_cast<idx_t>(k), lists.data(), coarse.data(), dis,
                          ids, false, &p);
}

}  // namespace detail

/// A resumable FAISS search of `n` queries: the per-query top-k heaps (FAISS's own
/// max-heaps for L2, min-heaps for inner product) live here between calls, and each
/// `search_chunk` scans the next lists of every query into them with
/// IndexIVF::search_preassigned. Scanning a probe list in chunks gives exactly the
/// one-call result. Not safe to run concurrently with another search on the same index
/// (the NO_HEAP_INIT flag is set on the index for the duration of a call).
/// @code
/// frugal::ivf_list_search s(index, queries, /*n=*/2, /*k=*/5);
/// s.search_chunk(first_lists, 4);   // 2 x 4 list ids, row-major
/// s.search_chunk(next_lists, 4);
/// auto [distances, labels] = s.results();
/// @endcode
class ivf_list_search {
public:
    ivf_list_search(::faiss::IndexIVF& index, std::span<const float> queries, std::size_t n, std::size_t k)
        : ix_(index), x_(queries), n_(n), k_(k), dis_(n * k), ids_(n * k) {
        FRUGAL_CHECK(k > 0, "ivf_list_search: k = 0");
        FRUGAL_CHECK(queries.size() == n * static_cast<std::size_t>(index.d), "ivf_list_search: ", queries.size(),
                     " floats for ", n, " queries of dimension ", index.d);
        for (std::size_t i = 0; i < n; ++i) {
            if (l2()) ::faiss::heap_heapify<::faiss::CMax<float, idx_t>>(k, &dis_[i * k], &ids_[i * k]);
            else ::faiss::heap_heapify<::faiss::CMin<float, idx_t>>(k, &dis_[i * k], &ids_[i * k]);
        }
    }

    /// Scans `per_query` lists for every query (`lists` is n x per_query, row-major, in the
    /// order to scan; -1 entries are skipped, as in FAISS) into the kept heaps.
    void search_chunk(std::span<const idx_t> lists, std::size_t per_query) {
        detail::faiss_scan_into_heaps(ix_, n_, x_.data(), k_, lists, per_query, dis_.data(), ids_.data());
    }

    /// The current top-k of every query, nearest first (n x k distances and labels; -1
    /// labels where fewer than k vectors were seen). The heaps are kept: search can go on.
    [[nodiscard]] std::pair<std::vector<float>, std::vector<idx_t>> results() const {
        std::pair<std::vector<float>, std::vector<idx_t>> out{dis_, ids_};
        for (std::size_t i = 0; i < n_; ++i) {
            if (l2()) ::faiss::heap_reorder<::faiss::CMax<float, idx_t>>(k_, &out.first[i * k_], &out.second[i * k_]);
            else ::faiss::heap_reorder<::faiss::CMin<float, idx_t>>(k_, &out.first[i * k_], &out.second[i * k_]);
        }
        return out;
    }

private:
    [[nodiscard]] bool l2() const noexcept { return ix_.metric_type == ::faiss::METRIC_L2; }

    ::faiss::IndexIVF& ix_;
    std::span<const float> x_;
    std::size_t n_, k_;
    std::vector<float> dis_;
    std::vector<idx_t> ids_;
};

/// frugal's `ivf_index` concept over a trained FAISS IndexIVF with squared-L2 metric
/// (IndexIVFFlat, IndexIVFPQ, ...): `probe` asks FAISS's coarse quantizer for the nprobe
/// nearest lists, and `search_lists` scans lists in the order given by frugal (e.g. the
/// similarity-aware order of HedraRAG 4.3) into a frugal `top_k`, seeding FAISS's heap
/// with its current contents so that FAISS prunes against the top-k found so far. The
/// index is borrowed and must outlive the adapter.
/// @code
/// ::faiss::IndexFlatL2 quantizer(dim);
/// ::faiss::IndexIVFFlat index(&quantizer, dim, 64);
/// index.train(n, data); index.add(n, data);
/// frugal::faiss::ivf_adapter ivf(index);
/// frugal::retrieve::top_k best(5);
/// ivf.search_lists(query, history.order(ivf.probe(query, 8)), best);
/// @endcode
class ivf_adapter {
public:
    explicit ivf_adapter(::faiss::IndexIVF& index) : ix_(&index) {
        FRUGAL_CHECK(index.is_trained, "ivf_adapter: the FAISS index is not trained");
        FRUGAL_CHECK(index.metric_type == ::faiss::METRIC_L2, "ivf_adapter: metric ", static_cast<int>(index.metric_type),
                     " (frugal's top_k keeps the smallest distances: use METRIC_L2)");
    }

    [[nodiscard]] ::faiss::IndexIVF& index() const noexcept { return *ix_; }
    [[nodiscard]] std::size_t dim() const noexcept { return static_cast<std::size_t>(ix_->d); }
    [[nodiscard]] std::size_t lists() const noexcept { return ix_->nlist; }
    [[nodiscard]] std::size_t list_size(std::size_t c) const {
        FRUGAL_CHECK_AS(frugal::out_of_range, c < lists(), "ivf_adapter: list ", c, " >= ", lists());
        return ix_->invlists->list_size(c);
    }

    /// The `nprobe` lists FAISS's quantizer finds nearest `query`, nearest first (the order
    /// IndexIVF::search scans them in).
    [[nodiscard]] std::vector<std::size_t> probe(std::span<const float> query, std::size_t nprobe) const {
        check_query(query);
        FRUGAL_CHECK(nprobe > 0 && nprobe <= lists(), "ivf_adapter: nprobe ", nprobe, " with ", lists(), " lists");
        std::vector<float> dis(nprobe);
        std::vector<idx_t> ids(nprobe);
        ix_->quantizer->search(1, query.data(), static_cast<idx_t>(nprobe), dis.data(), ids.data());
        std::vector<std::size_t> out;
        for (idx_t c : ids)
            if (c >= 0) out.push_back(static_cast<std::size_t>(c));
        return out;
    }

    /// Scans `lists` in the given order into `heap` through IndexIVF::search_preassigned,
    /// FAISS's heap seeded from `heap` (PARALLEL_MODE_NO_HEAP_INIT). Chunks of a probe list
    /// scanned one after the other give the one-call result (resumable search).
    void search_lists(std::span<const float> query, std::span<const std::size_t> lists, retrieve::top_k& heap) const {
        check_query(query);
        if (lists.empty()) return;
        const std::size_t k = heap.k();
        // FAISS's L2 max-heap, (+inf, -1) everywhere, then the kept candidates pushed in the
        // way FAISS's scanners push (replace the top, sift down), so it stays a valid heap.
        std::vector<float> dis(k);
        std::vector<idx_t> ids(k);
        ::faiss::heap_heapify<::faiss::CMax<float, idx_t>>(k, dis.data(), ids.data());
        for (const auto& [d, id] : heap.sorted())
            ::faiss::heap_replace_top<::faiss::CMax<float, idx_t>>(k, dis.data(), ids.data(), d,
                                                                      static_cast<idx_t>(id));
        const std::vector<idx_t> order(lists.begin(), lists.end());
        detail::faiss_scan_into_heaps(*ix_, 1, query.data(), k, order, order.size(), dis.data(), ids.data());
        retrieve::top_k merged(k);
        for (std::size_t j = 0; j < k; ++j)
            if (ids[j] >= 0) merged.offer(dis[j], static_cast<std::uint64_t>(ids[j]));
        heap = std::move(merged);
    }

private:
    void check_query(std::span<const float> q) const {
        FRUGAL_CHECK(q.size() == dim(), "ivf_adapter: query of dimension ", q.size(), " for an index of dimension ", dim());
    }

    ::faiss::IndexIVF* ix_;
};
static_assert(retrieve::ivf_index<ivf_adapter>);

}  // namespace frugal::faiss
