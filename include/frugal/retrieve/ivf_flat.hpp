#pragma once
/// @file
/// The IVF index concept frugal's RAG scheduling drives, and ivf_flat, a reference IVF-Flat
/// index (k-means coarse quantizer, exact L2 scan of the probed lists) whose search can stop
/// after any cluster and resume with the same top-k heap (hedrarag.txt 4.2, 4.3).

#include <algorithm>
#include <cmath>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <random>
#include <span>
#include <type_traits>
#include <utility>
#include <vector>

#include "frugal/core/concepts.hpp"
#include "frugal/core/error.hpp"
#include "frugal/core/matrix_view.hpp"
#include "frugal/retrieve/top_k.hpp"

namespace frugal::retrieve {

/// An inverted-file vector index as the RAG scheduler needs it: the number of lists, each
/// list's size (its search cost), the nprobe lists nearest a query in order, and a search
/// of chosen lists into a caller-owned top-k heap (so a search can be split and resumed).
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
template <class Index>
    requires ivf_index<Index>
[[nodiscard]] std::vector<std::uint64_t> ivf_search(const Index& index, std::span<const float> query, std::size_t k,
                                                    std::size_t nprobe) {
    top_k heap(k);
    index.search_lists(query, index.probe(query, nprobe), heap);
    return heap.ids();
}

/// Squared Euclidean distance of two equal-length vectors.
[[nodiscard]] inline float squared_l2(std::span<const float> a, std::span<const float> b) noexcept {
    float s = 0.0f;
    for (std::size_t i = 0; i < a.size(); ++i) {
        const float d = a[i] - b[i];
        s += d * d;
    }
    return s;
}

/// Reference IVF-Flat over squared L2: `train` runs Lloyd's k-means (initial centroids
/// sampled without replacement, seeded) on row-major `data`, then every vector goes to the
/// list of its nearest centroid. Ids are row numbers. Without a backend the assignment step
/// is plain loops (exact, the readable reference); with a GEMM backend (frugal::eigen::backend)
/// it computes all vector-centroid distances as ||c||^2 - 2 X C^T by blocked GEMM, as FAISS
/// does, which is much faster and may break near-ties differently by float rounding.
/// @code
/// auto index = frugal::retrieve::ivf_flat::train(data, /*dim=*/32, /*lists=*/64, /*iterations=*/10, /*seed=*/1);
/// auto fast = frugal::retrieve::ivf_flat::train(data, 32, 64, 10, 1, frugal::eigen::backend{});
/// auto ids = index.search(query, /*k=*/5, /*nprobe=*/8);
/// @endcode
class ivf_flat {
public:
    [[nodiscard]] static ivf_flat train(std::span<const float> data, std::size_t dim, std::size_t lists,
                                        std::size_t iterations, std::uint64_t seed) {
        return train_with(data, dim, lists, iterations, seed, [](const ivf_flat& ix, std::vector<std::size_t>& assign) {
            for (std::size_t i = 0; i < assign.size(); ++i) assign[i] = ix.nearest(ix.vector(i));
        });
    }

    /// k-means training whose assignment step runs on `backend`'s GEMM (blocks of rows).
    template <class Backend>
        requires gemm_backend<std::remove_reference_t<Backend>, float>
    [[nodiscard]] static ivf_flat train(std::span<const float> data, std::size_t dim, std::size_t lists,
                                        std::size_t iterations, std::uint64_t seed, Backend&& backend) {
        return train_with(data, dim, lists, iterations, seed, [&](const ivf_flat& ix, std::vector<std::size_t>& assign) {
            const std::size_t k = ix.centroids_.size() / dim, block = 1024;
            std::vector<float> norms(k), scores(block * k);
            for (std::size_t c = 0; c < k; ++c)
                for (std::size_t d = 0; d < dim; ++d) norms[c] += ix.centroids_[c * dim + d] * ix.centroids_[c * dim + d];
            const matrix_view<const float> cents(ix.centroids_.data(), k, dim);
            for (std::size_t r0 = 0; r0 < assign.size(); r0 += block) {
                const std::size_t rows = std::min(block, assign.size() - r0);
                const matrix_view<float> g(scores.data(), rows, k);
                backend.gemm(matrix_view<const float>(ix.data_.data() + r0 * dim, rows, dim), transpose::no, cents,
                             transpose::yes, g, -2.0f, 0.0f);
                for (std::size_t i = 0; i < rows; ++i) {
                    std::size_t best = 0;
                    float bd = std::numeric_limits<float>::infinity();
                    for (std::size_t c = 0; c < k; ++c)
                        if (const float d = norms[c] + g(i, c); d < bd) {
                            bd = d;
                            best = c;
                        }
                    assign[r0 + i] = best;
                }
            }
        });
    }

private:
    // Lloyd's k-means; `assign_all(ix, assign)` sets every row's nearest centroid.
    template <class AssignAll>
    [[nodiscard]] static ivf_flat train_with(std::span<const float> data, std::size_t dim, std::size_t lists,
                                             std::size_t iterations, std::uint64_t seed, AssignAll&& assign_all) {
        FRUGAL_CHECK(dim > 0 && data.size() % dim == 0, "ivf_flat: ", data.size(), " floats is not a multiple of dim ", dim);
        const std::size_t n = data.size() / dim;
        FRUGAL_CHECK(lists > 0 && lists <= n, "ivf_flat: ", lists, " lists for ", n, " vectors");
        for (float v : data) FRUGAL_CHECK(std::isfinite(v), "ivf_flat: non-finite value in the data");
        ivf_flat ix;
        ix.dim_ = dim;
        ix.data_.assign(data.begin(), data.end());
        std::mt19937_64 rng(seed);
        std::vector<std::size_t> rows(n);
        for (std::size_t i = 0; i < n; ++i) rows[i] = i;
        std::shuffle(rows.begin(), rows.end(), rng);
        for (std::size_t c = 0; c < lists; ++c) {
            const auto v = ix.vector(rows[c]);
            ix.centroids_.insert(ix.centroids_.end(), v.begin(), v.end());
        }
        std::vector<std::size_t> assign(n);
        for (std::size_t it = 0; it <= iterations; ++it) {
            assign_all(ix, assign);
            if (it == iterations) break;
            std::vector<double> sum(lists * dim, 0.0);
            std::vector<std::size_t> count(lists, 0);
            for (std::size_t i = 0; i < n; ++i) {
                ++count[assign[i]];
                for (std::size_t d = 0; d < dim; ++d) sum[assign[i] * dim + d] += data[i * dim + d];
            }
            for (std::size_t c = 0; c < lists; ++c)
                if (count[c] > 0)  // an empty cluster keeps its centroid
                    for (std::size_t d = 0; d < dim; ++d)
                        ix.centroids_[c * dim + d] = static_cast<float>(sum[c * dim + d] / static_cast<double>(count[c]));
        }
        ix.lists_.assign(lists, {});
        for (std::size_t i = 0; i < n; ++i) ix.lists_[assign[i]].push_back(i);
        ix.list_of_ = std::move(assign);
        return ix;
    }

public:

    [[nodiscard]] std::size_t dim() const noexcept { return dim_; }
    [[nodiscard]] std::size_t size() const noexcept { return dim_ == 0 ? 0 : data_.size() / dim_; }
    [[nodiscard]] std::size_t lists() const noexcept { return lists_.size(); }
    [[nodiscard]] std::size_t list_size(std::size_t c) const { return members(c).size(); }
    /// The row ids in list `c`.
    [[nodiscard]] std::span<const std::size_t> members(std::size_t c) const {
        FRUGAL_CHECK_AS(frugal::out_of_range, c < lists_.size(), "ivf_flat: list ", c, " >= ", lists_.size());
        return lists_[c];
    }
    /// The list holding row `id`.
    [[nodiscard]] std::size_t list_of(std::size_t id) const {
        FRUGAL_CHECK_AS(frugal::out_of_range, id < size(), "ivf_flat: id ", id, " >= ", size());
        return list_of_[id];
    }
    [[nodiscard]] std::span<const float> vector(std::size_t id) const {
        FRUGAL_CHECK_AS(frugal::out_of_range, id < size(), "ivf_flat: id ", id, " >= ", size());
        return std::span<const float>(data_).subspan(id * dim_, dim_);
    }
    [[nodiscard]] std::span<const float> centroid(std::size_t c) const {
        FRUGAL_CHECK_AS(frugal::out_of_range, c < lists(), "ivf_flat: list ", c, " >= ", lists());
        return std::span<const float>(centroids_).subspan(c * dim_, dim_);
    }

    /// The `nprobe` lists whose centroids are nearest `query`, nearest first (ties: lower id).
    [[nodiscard]] std::vector<std::size_t> probe(std::span<const float> query, std::size_t nprobe) const {
        check_query(query);
        FRUGAL_CHECK(nprobe > 0 && nprobe <= lists(), "ivf_flat: nprobe ", nprobe, " with ", lists(), " lists");
        std::vector<std::pair<float, std::size_t>> d;
        for (std::size_t c = 0; c < lists(); ++c) d.emplace_back(squared_l2(query, centroid(c)), c);
        std::partial_sort(d.begin(), d.begin() + static_cast<std::ptrdiff_t>(nprobe), d.end());
        std::vector<std::size_t> out;
        for (std::size_t i = 0; i < nprobe; ++i) out.push_back(d[i].second);
        return out;
    }

    /// Scans `lists` in the given order into `heap`: calling it on consecutive chunks of a
    /// probe list with the same heap gives exactly the one-call result (resumable search).
    void search_lists(std::span<const float> query, std::span<const std::size_t> lists, top_k& heap) const {
        check_query(query);
        for (std::size_t c : lists)
            for (std::size_t id : members(c)) heap.offer(squared_l2(query, vector(id)), id);
    }

    /// One-shot search: the k nearest ids among the nprobe nearest lists, nearest first.
    [[nodiscard]] std::vector<std::uint64_t> search(std::span<const float> query, std::size_t k, std::size_t nprobe) const {
        return ivf_search(*this, query, k, nprobe);
    }

private:
    void check_query(std::span<const float> q) const {
        FRUGAL_CHECK(q.size() == dim_, "ivf_flat: query of dimension ", q.size(), " for an index of dimension ", dim_);
    }
    [[nodiscard]] std::size_t nearest(std::span<const float> v) const {
        std::size_t best = 0;
        float bd = std::numeric_limits<float>::infinity();
        for (std::size_t c = 0; c < centroids_.size() / dim_; ++c)
            if (const float d = squared_l2(v, std::span<const float>(centroids_).subspan(c * dim_, dim_)); d < bd) {
                bd = d;
                best = c;
            }
        return best;
    }

    std::size_t dim_ = 0;
    std::vector<float> data_, centroids_;
    std::vector<std::vector<std::size_t>> lists_;
    std::vector<std::size_t> list_of_;
};
static_assert(ivf_index<ivf_flat>);

}  // namespace frugal::retrieve
