#pragma once
/// @file
/// The vector-search kernels every index in frugal::retrieve scores with: the inner product
/// and the squared L2 distance of two vectors, and the scan interface that scores many rows
/// against a query at once (plain loops here, one Eigen product in `frugal::eigen::gemv_scan`).

#include <cstddef>
#include <cstdint>
#include <span>

#include "frugal/core/assert.hpp"
#include "frugal/core/matrix_view.hpp"

namespace frugal::retrieve {

/// How rows are scored against a query: by inner product (larger is more similar; cosine
/// for unit vectors) or by squared Euclidean distance (smaller is nearer).
enum class metric : std::uint8_t { inner_product, squared_l2 };

/// The inner product of two equal-length vectors, accumulated in float in index order.
/// @code
/// float s = frugal::retrieve::inner_product(a, b);
/// @endcode
[[nodiscard]] inline float inner_product(std::span<const float> a, std::span<const float> b) noexcept {
    FRUGAL_ASSERT(a.size() == b.size());
    float s = 0.0f;
    for (std::size_t i = 0; i < a.size(); ++i) s += a[i] * b[i];
    return s;
}

/// The squared Euclidean distance of two equal-length vectors, accumulated in float in index order.
/// @code
/// float d = frugal::retrieve::squared_l2(a, b);
/// @endcode
[[nodiscard]] inline float squared_l2(std::span<const float> a, std::span<const float> b) noexcept {
    FRUGAL_ASSERT(a.size() == b.size());
    float s = 0.0f;
    for (std::size_t i = 0; i < a.size(); ++i) {
        const float d = a[i] - b[i];
        s += d * d;
    }
    return s;
}

/// `a` scored against `b` under `m`.
/// @code
/// float d = frugal::retrieve::score(frugal::retrieve::metric::squared_l2, a, b);
/// @endcode
[[nodiscard]] inline float score(metric m, std::span<const float> a, std::span<const float> b) noexcept {
    return m == metric::inner_product ? inner_product(a, b) : squared_l2(a, b);
}

/// The scan interface: `scan(rows, query, out, m)` writes the score under `m` of every row of
/// `rows` (each of query.size() columns) against `query` into out[0, rows.rows()). The flat
/// similarity index scans its slots with it (inner product), ivf_flat its lists and
/// centroids (squared L2). Precondition: rows.cols() == query.size(), out.size() >= rows.rows().
/// @code
/// static_assert(frugal::retrieve::vector_scan<frugal::eigen::gemv_scan>);
/// @endcode
template <class S>
concept vector_scan = requires(const S& scan, matrix_view<const float> rows, std::span<const float> query,
                               std::span<float> out, metric m) { scan(rows, query, out, m); };

/// The reference scan: one `score` per row, in plain loops (exact, the readable reference).
/// @code
/// frugal::retrieve::flat_similarity_index<frugal::retrieve::scalar_scan> index(384);
/// @endcode
struct scalar_scan {
    void operator()(matrix_view<const float> rows, std::span<const float> query, std::span<float> out,
                    metric m = metric::inner_product) const noexcept {
        FRUGAL_ASSERT(rows.cols() == query.size() && out.size() >= rows.rows());
        for (std::size_t r = 0; r < rows.rows(); ++r) out[r] = score(m, rows.row(r), query);
    }
};
static_assert(vector_scan<scalar_scan>);

}  // namespace frugal::retrieve
