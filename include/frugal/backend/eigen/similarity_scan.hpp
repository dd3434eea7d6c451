#pragma once
/// @file
/// gemv_scan: frugal::retrieve's scan interface through Eigen (one matrix-vector product for
/// inner products, one row-wise reduction for squared L2), for the flat similarity index and
/// for ivf_flat's list and centroid scans.

#include <span>

#include "frugal/backend/eigen/diagnostics.hpp"
FRUGAL_EIGEN_DIAGNOSTICS_PUSH
#include <Eigen/Core>
FRUGAL_EIGEN_DIAGNOSTICS_POP

#include "frugal/backend/eigen/eigen_backend.hpp"
#include "frugal/core/error.hpp"
#include "frugal/retrieve/distance.hpp"
#include "frugal/retrieve/ivf_flat.hpp"
#include "frugal/retrieve/similarity_index.hpp"

// (GCC 12.0-12.2: see diagnostics.hpp.)
FRUGAL_EIGEN_DIAGNOSTICS_PUSH
namespace frugal::eigen {

/// Scores every row against the query with Eigen: inner products as one GEMV, squared L2
/// distances as one row-wise squared norm of the differences. Plug it into
/// `frugal::retrieve::flat_similarity_index` (the semantic QA bank's exhaustive search) or
/// `frugal::retrieve::basic_ivf_flat`; it sums in another order than `scalar_scan`, so
/// scores may differ in the last bits.
/// @code
/// frugal::retrieve::flat_similarity_index<frugal::eigen::gemv_scan> index(384);
/// frugal::cache::semantic_cache<std::string, std::uint32_t, decltype(index)> bank(1000, 0.9, std::move(index));
/// @endcode
struct gemv_scan {
    void operator()(matrix_view<const float> rows, std::span<const float> query, std::span<float> out,
                    retrieve::metric m = retrieve::metric::inner_product) const {
        FRUGAL_CHECK(query.size() == rows.cols() && out.size() >= rows.rows(), "gemv_scan: query of ", query.size(),
                     " floats for ", rows.cols(), " columns, ", out.size(), " outputs for ", rows.rows(), " rows");
        if (rows.rows() == 0) return;
        const Eigen::Map<const Eigen::VectorXf> q(query.data(), static_cast<Eigen::Index>(query.size()));
        Eigen::Map<Eigen::VectorXf> o(out.data(), static_cast<Eigen::Index>(rows.rows()));
        if (m == retrieve::metric::inner_product) o.noalias() = to_eigen(rows) * q;
        else o.noalias() = (to_eigen(rows).rowwise() - q.transpose()).rowwise().squaredNorm();
    }
};
static_assert(retrieve::vector_scan<gemv_scan>);

/// A flat similarity index whose scan runs through Eigen.
using flat_similarity_index = frugal::retrieve::flat_similarity_index<gemv_scan>;
/// An IVF-Flat index whose list and centroid scans run through Eigen.
using ivf_flat = frugal::retrieve::basic_ivf_flat<gemv_scan>;

}  // namespace frugal::eigen
FRUGAL_EIGEN_DIAGNOSTICS_POP
