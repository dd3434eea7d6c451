#pragma once
/// @file
/// flat_similarity_index: the exhaustive reference model of the `similarity_index` concept
/// (vector_index.hpp) behind the semantic QA bank, scanning with any `vector_scan`
/// (distance.hpp), and `normalize_into`. Including it also gives the concept, the match
/// type and `scalar_scan`.

#include <algorithm>
#include <cmath>
#include <concepts>
#include <cstddef>
#include <limits>
#include <optional>
#include <span>
#include <utility>
#include <vector>

#include "frugal/core/checked.hpp"
#include "frugal/core/error.hpp"
#include "frugal/core/matrix_view.hpp"
#include "frugal/retrieve/distance.hpp"
#include "frugal/retrieve/top_k.hpp"
#include "frugal/retrieve/vector_index.hpp"

namespace frugal::retrieve {

/// Exhaustive inner-product index over a dense slot x dim matrix: exact, O(slots x dim) per
/// query with the `Scan` kernel, good to tens of thousands of entries (a QA bank's scale).
/// @code
/// frugal::retrieve::flat_similarity_index<> index(384);
/// index.store(0, unit_vector);
/// auto best = index.nearest(unit_query);   // {slot, cosine}
/// @endcode
template <vector_scan Scan = scalar_scan>
class flat_similarity_index {
public:
    explicit flat_similarity_index(std::size_t dim, Scan scan = {}) : dim_(dim), scan_(std::move(scan)) {
        FRUGAL_CHECK(dim > 0, "flat_similarity_index: dimension 0");
    }
    [[nodiscard]] std::size_t dim() const noexcept { return dim_; }

    /// Stores `v` (dim() floats) in `slot`, growing the matrix as needed.
    void store(std::size_t slot, std::span<const float> v) {
        FRUGAL_CHECK(v.size() == dim_, "flat_similarity_index::store: vector of ", v.size(), " floats, dimension ", dim_);
        for (std::size_t i = 0; i < v.size(); ++i)
            FRUGAL_CHECK(std::isfinite(v[i]), "flat_similarity_index::store: non-finite value ", v[i], " at ", i);
        if (slot >= used_.size()) {
            const std::size_t floats = checked_mul(checked_add(slot, std::size_t{1}, "slot + 1"), dim_, "slots x dim");
            FRUGAL_CHECK(floats <= data_.max_size(), "flat_similarity_index::store: slot ", slot, " needs ", floats,
                         " floats, more than a vector holds");
            data_.resize(floats, 0.0f);
            scores_.resize(slot + 1);
            used_.resize(slot + 1, false);  // last: its size is the row count the other two cover
        }
        std::copy(v.begin(), v.end(), data_.begin() + static_cast<std::ptrdiff_t>(slot * dim_));
        used_[slot] = true;
    }
    /// Frees `slot` (it no longer matches).
    void erase(std::size_t slot) {
        FRUGAL_CHECK_AS(frugal::out_of_range, slot < used_.size() && used_[slot], "flat_similarity_index::erase: slot ", slot,
                        " is empty");
        used_[slot] = false;
    }
    /// The stored slot with the largest inner product with `q`, or nullopt when empty.
    [[nodiscard]] std::optional<similarity_match> nearest(std::span<const float> q) const {
        FRUGAL_CHECK(q.size() == dim_, "flat_similarity_index::nearest: query of ", q.size(), " floats, dimension ", dim_);
        if (used_.empty()) return std::nullopt;
        scan_(matrix_view<const float>(data_.data(), used_.size(), dim_), q, scores_, metric::inner_product);
        best_.clear();  // the largest inner product is the smallest negated one
        for (std::size_t s = 0; s < used_.size(); ++s)
            if (used_[s]) best_.offer(-scores_[s], s);
        if (best_.size() == 0) return std::nullopt;
        const auto [negated, slot] = best_.unordered().front();
        return similarity_match{static_cast<std::size_t>(slot), -negated};
    }
    /// The vector stored in `slot`.
    [[nodiscard]] std::span<const float> vector(std::size_t slot) const {
        FRUGAL_CHECK_AS(frugal::out_of_range, slot < used_.size() && used_[slot], "flat_similarity_index::vector: slot ", slot,
                        " is empty");
        return std::span<const float>(data_).subspan(slot * dim_, dim_);
    }

private:
    std::size_t dim_;
    [[no_unique_address]] Scan scan_;
    std::vector<float> data_;
    std::vector<bool> used_;
    mutable std::vector<float> scores_;
    mutable top_k best_{1};
};

static_assert(similarity_index<flat_similarity_index<>>);

/// `v` scaled to unit length in `out` (cosine similarity becomes an inner product); throws on
/// a zero, infinite or NaN vector.
/// @code
/// std::vector<float> u(v.size());
/// frugal::retrieve::normalize_into(v, u);
/// @endcode
inline void normalize_into(std::span<const float> v, std::span<float> out) {
    FRUGAL_CHECK(v.size() == out.size(), "normalize_into: sizes ", v.size(), " and ", out.size(), " differ");
    double sq = 0;
    for (float x : v) sq += static_cast<double>(x) * static_cast<double>(x);
    FRUGAL_CHECK(std::isfinite(sq) && sq > 0, "normalize_into: the vector has norm ", std::sqrt(sq),
                 " (zero, infinite or NaN) and no direction");
    const double inv = 1.0 / std::sqrt(sq);
    for (std::size_t i = 0; i < v.size(); ++i) out[i] = static_cast<float>(v[i] * inv);
}

}  // namespace frugal::retrieve
