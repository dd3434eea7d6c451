#pragma once
/// @file
/// ivf_flat: a reference IVF-Flat index (k-means coarse quantizer, exact squared-L2 scan of
/// the probed lists) whose search can stop after any list and resume with the same top-k
/// heap (HedraRAG 4.2, 4.3). It models `ivf_index` (vector_index.hpp) and scores with
/// the shared kernels of distance.hpp through a pluggable scan.

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <random>
#include <span>
#include <type_traits>
#include <utility>
#include <vector>

#include "frugal/core/concepts.hpp"
#include "frugal/core/error.hpp"
#include "frugal/core/matrix_view.hpp"
#include "frugal/retrieve/distance.hpp"
#include "frugal/retrieve/top_k.hpp"
#include "frugal/retrieve/vector_index.hpp"

namespace frugal::retrieve {

/// Reference IVF-Flat over squared L2: `train` runs Lloyd's k-means (initial centroids
/// sampled without replacement, seeded) on row-major `data`, then every vector goes to the
/// list of its nearest centroid (ties: the lower list). Ids are row numbers; each list's
/// vectors are stored contiguously, as FAISS's inverted lists are. `Scan` scores lists and
/// centroids (`scalar_scan`: plain loops, exact; `frugal::eigen::gemv_scan`: Eigen). Without
/// a backend the k-means assignment step runs on the scan; with a GEMM backend
/// (frugal::eigen::backend) it computes all vector-centroid distances as ||c||^2 - 2 X C^T
/// by blocked GEMM, as FAISS does, which is much faster and may break near-ties differently
/// by float rounding. Non-finite data or queries are rejected.
/// @code
/// auto index = frugal::retrieve::ivf_flat::train(data, /*dim=*/32, /*lists=*/64, /*iterations=*/10, /*seed=*/1);
/// auto fast = frugal::retrieve::ivf_flat::train(data, 32, 64, 10, 1, frugal::eigen::backend{});
/// auto ids = index.search(query, /*k=*/5, /*nprobe=*/8);
/// @endcode
template <vector_scan Scan = scalar_scan>
class basic_ivf_flat {
public:
    [[nodiscard]] static basic_ivf_flat train(std::span<const float> data, std::size_t dim, std::size_t lists,
                                              std::size_t iterations, std::uint64_t seed) {
        return train_with(data, dim, lists, iterations, seed, [&](const basic_ivf_flat& ix, std::vector<std::size_t>& assign) {
            std::vector<float> d(ix.lists_.size());
            for (std::size_t i = 0; i < assign.size(); ++i) {
                ix.scan_(ix.centroid_rows(), data.subspan(i * dim, dim), d, metric::squared_l2);
                assign[i] = argmin(d);
            }
        });
    }

    /// k-means training whose assignment step runs on `backend`'s GEMM (blocks of rows).
    template <class Backend>
        requires gemm_backend<std::remove_reference_t<Backend>, float>
    [[nodiscard]] static basic_ivf_flat train(std::span<const float> data, std::size_t dim, std::size_t lists,
                                              std::size_t iterations, std::uint64_t seed, Backend&& backend) {
        return train_with(data, dim, lists, iterations, seed, [&](const basic_ivf_flat& ix, std::vector<std::size_t>& assign) {
            const std::size_t k = ix.lists_.size(), block = 1024;
            std::vector<float> norms(k), scores(block * k);
            const matrix_view<const float> cents = ix.centroid_rows();
            const std::vector<float> origin(dim, 0.0f);
            ix.scan_(cents, origin, norms, metric::squared_l2);  // ||c||^2
            for (std::size_t r0 = 0; r0 < assign.size(); r0 += block) {
                const std::size_t rows = std::min(block, assign.size() - r0);
                const matrix_view<float> g(scores.data(), rows, k);
                backend.gemm(matrix_view<const float>(data.data() + r0 * dim, rows, dim), transpose::no, cents,
                             transpose::yes, g, -2.0f, 0.0f);
                for (std::size_t i = 0; i < rows; ++i) {
                    const std::span<float> row = g.row(i);
                    for (std::size_t c = 0; c < k; ++c) row[c] += norms[c];  // ||c||^2 - 2 x.c
                    assign[r0 + i] = argmin(row);
                }
            }
        });
    }

    [[nodiscard]] std::size_t dim() const noexcept { return dim_; }
    [[nodiscard]] std::size_t size() const noexcept { return list_of_.size(); }
    [[nodiscard]] std::size_t lists() const noexcept { return lists_.size(); }
    [[nodiscard]] std::size_t list_size(std::size_t c) const { return members(c).size(); }
    /// The row ids in list `c`, ascending.
    [[nodiscard]] std::span<const std::size_t> members(std::size_t c) const { return list_at(c).ids; }
    /// The list holding row `id`.
    [[nodiscard]] std::size_t list_of(std::size_t id) const {
        FRUGAL_CHECK_AS(frugal::out_of_range, id < size(), "ivf_flat: id ", id, " >= ", size());
        return list_of_[id];
    }
    [[nodiscard]] std::span<const float> vector(std::size_t id) const {
        const std::size_t c = list_of(id);
        return std::span<const float>(lists_[c].vectors).subspan(position_[id] * dim_, dim_);
    }
    [[nodiscard]] std::span<const float> centroid(std::size_t c) const {
        FRUGAL_CHECK_AS(frugal::out_of_range, c < lists(), "ivf_flat: list ", c, " >= ", lists());
        return std::span<const float>(centroids_).subspan(c * dim_, dim_);
    }

    /// The `nprobe` lists whose centroids are nearest `query`, nearest first (ties: lower id).
    [[nodiscard]] std::vector<std::size_t> probe(std::span<const float> query, std::size_t nprobe) const {
        check_query(query);
        FRUGAL_CHECK(nprobe > 0 && nprobe <= lists(), "ivf_flat: nprobe ", nprobe, " with ", lists(), " lists");
        std::vector<float> d(lists());
        scan_(centroid_rows(), query, d, metric::squared_l2);
        top_k nearest(nprobe);
        for (std::size_t c = 0; c < d.size(); ++c) nearest.offer(d[c], c);
        std::vector<std::size_t> out;
        for (const auto& [d, c] : nearest.sorted()) out.push_back(static_cast<std::size_t>(c));
        return out;
    }

    /// Scans `lists` in the given order into `heap`: calling it on consecutive chunks of a
    /// probe list with the same heap gives exactly the one-call result (resumable search).
    void search_lists(std::span<const float> query, std::span<const std::size_t> lists, top_k& heap) const {
        check_query(query);
        std::vector<float> d;
        for (std::size_t c : lists) {
            const list& l = list_at(c);
            d.resize(l.ids.size());
            scan_(matrix_view<const float>(l.vectors.data(), l.ids.size(), dim_), query, d, metric::squared_l2);
            for (std::size_t j = 0; j < l.ids.size(); ++j) heap.offer(d[j], l.ids[j]);
        }
    }

    /// One-shot search: the k nearest ids among the nprobe nearest lists, nearest first.
    [[nodiscard]] std::vector<std::uint64_t> search(std::span<const float> query, std::size_t k, std::size_t nprobe) const {
        return ivf_search(*this, query, k, nprobe);
    }

private:
    struct list {
        std::vector<float> vectors;  // the members' vectors, row-major, in `ids` order
        std::vector<std::size_t> ids;
    };

    // Lloyd's k-means; `assign_all(ix, assign)` sets every row's nearest centroid.
    template <class AssignAll>
    [[nodiscard]] static basic_ivf_flat train_with(std::span<const float> data, std::size_t dim, std::size_t lists,
                                                   std::size_t iterations, std::uint64_t seed, AssignAll&& assign_all) {
        FRUGAL_CHECK(dim > 0 && data.size() % dim == 0, "ivf_flat: ", data.size(), " floats is not a multiple of dim ", dim);
        const std::size_t n = data.size() / dim;
        FRUGAL_CHECK(lists > 0 && lists <= n, "ivf_flat: ", lists, " lists for ", n, " vectors");
        for (std::size_t i = 0; i < data.size(); ++i)
            FRUGAL_CHECK(std::isfinite(data[i]), "ivf_flat: non-finite value ", data[i], " in the data at row ", i / dim);
        basic_ivf_flat ix;
        ix.dim_ = dim;
        ix.lists_.resize(lists);
        std::mt19937_64 rng(seed);
        std::vector<std::size_t> rows(n);
        for (std::size_t i = 0; i < n; ++i) rows[i] = i;
        std::shuffle(rows.begin(), rows.end(), rng);
        for (std::size_t c = 0; c < lists; ++c) {
            const auto v = data.subspan(rows[c] * dim, dim);
            ix.centroids_.insert(ix.centroids_.end(), v.begin(), v.end());
        }
        std::vector<std::size_t> assign(n);
        for (std::size_t it = 0; it <= iterations; ++it) {
            assign_all(std::as_const(ix), assign);
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
        ix.position_.resize(n);
        for (std::size_t i = 0; i < n; ++i) {
            list& l = ix.lists_[assign[i]];
            ix.position_[i] = l.ids.size();
            l.ids.push_back(i);
            l.vectors.insert(l.vectors.end(), data.begin() + static_cast<std::ptrdiff_t>(i * dim),
                             data.begin() + static_cast<std::ptrdiff_t>((i + 1) * dim));
        }
        ix.list_of_ = std::move(assign);
        return ix;
    }

    void check_query(std::span<const float> q) const {
        FRUGAL_CHECK(q.size() == dim_, "ivf_flat: query of dimension ", q.size(), " for an index of dimension ", dim_);
        for (std::size_t i = 0; i < q.size(); ++i)
            FRUGAL_CHECK(std::isfinite(q[i]), "ivf_flat: non-finite query value ", q[i], " at ", i);
    }
    [[nodiscard]] const list& list_at(std::size_t c) const {
        FRUGAL_CHECK_AS(frugal::out_of_range, c < lists_.size(), "ivf_flat: list ", c, " >= ", lists_.size());
        return lists_[c];
    }
    [[nodiscard]] matrix_view<const float> centroid_rows() const {
        return matrix_view<const float>(centroids_.data(), lists_.size(), dim_);
    }

    std::size_t dim_ = 0;
    [[no_unique_address]] Scan scan_;
    std::vector<float> centroids_;
    std::vector<list> lists_;
    std::vector<std::size_t> list_of_, position_;  // by id: its list, its row in that list
};

/// The reference IVF-Flat on plain-loop scans.
using ivf_flat = basic_ivf_flat<>;
static_assert(ivf_index<ivf_flat>);

}  // namespace frugal::retrieve
