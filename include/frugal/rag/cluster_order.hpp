#pragma once
/// @file
/// HedraRAG's similarity-aware search order (section 4.3): a request remembers where
/// its previous retrieval found its (top-20) results and which lists it searched, and its
/// next query searches those lists first.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>
#include <unordered_set>
#include <utility>
#include <vector>

#include "frugal/core/error.hpp"

namespace frugal::rag {

/// Reorders a probe list C' given H_v (lists that held the previous query's results) and
/// C (lists the previous query searched): first H_v ∩ C', then (C - H_v) ∩ C', then the rest
/// of C', each group in C' order. A permutation of `probe`.
/// @code
/// auto order = frugal::rag::similarity_cluster_order(probe, result_lists, searched_lists);
/// @endcode
[[nodiscard]] inline std::vector<std::size_t> similarity_cluster_order(std::span<const std::size_t> probe,
                                                                       std::span<const std::size_t> result_lists,
                                                                       std::span<const std::size_t> searched_lists) {
    const std::unordered_set<std::size_t> h(result_lists.begin(), result_lists.end());
    const std::unordered_set<std::size_t> c(searched_lists.begin(), searched_lists.end());
    auto group = [&](std::size_t x) { return h.contains(x) ? 0 : c.contains(x) ? 1 : 2; };
    std::vector<std::size_t> out(probe.begin(), probe.end());
    std::stable_sort(out.begin(), out.end(), [&](std::size_t a, std::size_t b) { return group(a) < group(b); });
    return out;
}

/// A request's local cache (4.3): the previous retrieval's larger top-k (20 in the paper)
/// as (id, list) pairs, and the lists it searched; `order()` applies the similarity-aware
/// order to the next probe list.
/// @code
/// frugal::rag::retrieval_history h(20);
/// h.remember(results_with_lists, probe);
/// auto order = h.order(next_probe);
/// @endcode
class retrieval_history {
public:
    explicit retrieval_history(std::size_t capacity = 20) : capacity_(capacity) {
        FRUGAL_CHECK(capacity > 0, "retrieval_history: capacity 0");
    }
    /// Replaces the history with a retrieval's results (nearest first; the first `capacity`
    /// are kept) and the lists it searched.
    void remember(std::span<const std::pair<std::uint64_t, std::size_t>> results, std::span<const std::size_t> searched) {
        results_.assign(results.begin(), results.begin() + static_cast<std::ptrdiff_t>(std::min(capacity_, results.size())));
        searched_.assign(searched.begin(), searched.end());
    }
    [[nodiscard]] std::span<const std::pair<std::uint64_t, std::size_t>> results() const noexcept { return results_; }
    [[nodiscard]] std::vector<std::size_t> order(std::span<const std::size_t> probe) const {
        std::vector<std::size_t> h;
        for (const auto& r : results_) h.push_back(r.second);
        return similarity_cluster_order(probe, h, searched_);
    }

private:
    std::size_t capacity_;
    std::vector<std::pair<std::uint64_t, std::size_t>> results_;
    std::vector<std::size_t> searched_;
};

}  // namespace frugal::rag
