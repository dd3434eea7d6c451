#pragma once
/// @file
/// gemv_scan: the similarity scan of frugal's flat index through Eigen (one GEMV).

#include <span>

#include <Eigen/Core>

#include "frugal/backend/eigen/eigen_backend.hpp"
#include "frugal/retrieve/similarity_index.hpp"

namespace frugal::eigen {

/// Scores every stored row against the query with one Eigen matrix-vector product; plug it
/// into `frugal::retrieve::flat_similarity_index` for the semantic QA bank's exhaustive search.
/// @code
/// frugal::retrieve::flat_similarity_index<frugal::eigen::gemv_scan> index(384);
/// frugal::cache::semantic_cache<std::string, std::uint32_t, decltype(index)> bank(1000, 0.9, std::move(index));
/// @endcode
struct gemv_scan {
    void operator()(matrix_view<const float> rows, std::span<const float> query, std::span<float> out) const {
        FRUGAL_CHECK(query.size() == rows.cols() && out.size() >= rows.rows(), "gemv_scan: query of ", query.size(),
                     " floats for ", rows.cols(), " columns, ", out.size(), " outputs for ", rows.rows(), " rows");
        const Eigen::Map<const Eigen::VectorXf> q(query.data(), static_cast<Eigen::Index>(query.size()));
        Eigen::Map<Eigen::VectorXf> o(out.data(), static_cast<Eigen::Index>(rows.rows()));
        o.noalias() = to_eigen(rows) * q;
    }
};

/// A flat similarity index whose scan runs through Eigen.
using flat_similarity_index = frugal::retrieve::flat_similarity_index<gemv_scan>;

}  // namespace frugal::eigen
