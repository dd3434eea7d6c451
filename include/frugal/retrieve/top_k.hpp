#pragma once
/// @file
/// top_k: the bounded max-heap of (distance, id) candidates that every search in
/// frugal::retrieve keeps (the flat index's best slot, ivf_flat's probe and list scans),
/// and that an IVF search keeps across clusters so it can stop after any cluster and resume
/// later (HedraRAG 4.2-4.3); and argmin, the top-1 of a dense row of scores (the k-means
/// assignment).

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <span>
#include <utility>
#include <vector>

#include "frugal/core/error.hpp"

namespace frugal::retrieve {

/// The k nearest candidates seen so far, smaller distance first; ties break on the smaller
/// id so that the result never depends on the order the candidates arrived in. A heap
/// (std::push_heap) because each offer is O(log k) and the state is a plain vector.
/// @code
/// frugal::retrieve::top_k best(5);
/// best.offer(0.3f, 17);
/// auto ids = best.ids();  // {17}
/// @endcode
class top_k {
public:
    using entry = std::pair<float, std::uint64_t>;  ///< (distance, id)

    explicit top_k(std::size_t k) : k_(k) { FRUGAL_CHECK(k > 0, "top_k: k = 0"); }

    /// Offers a candidate; keeps it when it is among the k best so far. Returns whether kept.
    bool offer(float distance, std::uint64_t id) {
        FRUGAL_CHECK(!std::isnan(distance), "top_k: NaN distance for id ", id);
        const entry e{distance, id};
        if (heap_.size() < k_) {
            heap_.push_back(e);
            std::push_heap(heap_.begin(), heap_.end());
            return true;
        }
        if (!(e < heap_.front())) return false;
        std::pop_heap(heap_.begin(), heap_.end());
        heap_.back() = e;
        std::push_heap(heap_.begin(), heap_.end());
        return true;
    }

    /// Offers every candidate of `other`: the result is the k best of both heaps' candidates
    /// (what a search split between two tiers merges, HedraRAG 4.4).
    void merge(const top_k& other) {
        for (const entry& e : other.heap_) offer(e.first, e.second);
    }

    /// Forgets every candidate (k stays; the storage is kept for reuse).
    void clear() noexcept { heap_.clear(); }

    [[nodiscard]] std::size_t k() const noexcept { return k_; }
    [[nodiscard]] std::size_t size() const noexcept { return heap_.size(); }
    /// The current k-th distance (+inf while fewer than k candidates were kept).
    [[nodiscard]] float worst() const noexcept {
        return heap_.size() < k_ ? std::numeric_limits<float>::infinity() : heap_.front().first;
    }
    /// The candidates in heap order (the worst first; for k = 1, the best).
    [[nodiscard]] std::span<const entry> unordered() const noexcept { return heap_; }
    /// The candidates, nearest first.
    [[nodiscard]] std::vector<entry> sorted() const {
        std::vector<entry> out = heap_;
        std::sort(out.begin(), out.end());
        return out;
    }
    /// The ids, nearest first.
    [[nodiscard]] std::vector<std::uint64_t> ids() const {
        std::vector<std::uint64_t> out;
        for (const auto& e : sorted()) out.push_back(e.second);
        return out;
    }

private:
    std::size_t k_;
    std::vector<entry> heap_;
};

/// The position of the smallest of `scores` (ties: the first): the top-1 of a dense row of
/// scores, as the k-means assignment step takes it for every vector. Throws on an empty row
/// or a NaN score.
/// @code
/// std::size_t nearest = frugal::retrieve::argmin(distances_to_centroids);
/// @endcode
[[nodiscard]] inline std::size_t argmin(std::span<const float> scores) {
    FRUGAL_CHECK(!scores.empty(), "argmin: no scores");
    std::size_t best = 0;
    for (std::size_t i = 0; i < scores.size(); ++i) {
        if (scores[i] < scores[best]) best = i;
        else FRUGAL_CHECK(!std::isnan(scores[i]), "argmin: NaN score at ", i);  // also checks scores[0]
    }
    return best;
}

}  // namespace frugal::retrieve
