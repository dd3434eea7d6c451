#pragma once
/// @file
/// The reference CPU backend: Eigen maps over frugal views, GEMM through Eigen.

#include <cstddef>
#include <type_traits>

#include "frugal/backend/eigen/diagnostics.hpp"
FRUGAL_EIGEN_DIAGNOSTICS_PUSH
#include <Eigen/Core>
FRUGAL_EIGEN_DIAGNOSTICS_POP

#include "frugal/core/concepts.hpp"
#include "frugal/core/error.hpp"
#include "frugal/core/matrix_view.hpp"

// (GCC 12.0-12.2: see diagnostics.hpp.)
FRUGAL_EIGEN_DIAGNOSTICS_PUSH
namespace frugal::eigen {

/// The row-major Eigen matrix type a frugal view maps onto.
template <class T>
using row_major_matrix = Eigen::Matrix<std::remove_const_t<T>, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

/// An Eigen map of a (possibly row-strided) frugal view; const-ness follows `T`.
template <class T>
using row_major_map =
    Eigen::Map<std::conditional_t<std::is_const_v<T>, const row_major_matrix<T>, row_major_matrix<T>>,
               Eigen::Unaligned, Eigen::OuterStride<>>;

/// Maps a frugal view as an Eigen expression without copying.
/// @code
/// auto m = frugal::eigen::to_eigen(view);   // Eigen::Map, same memory
/// double total = m.template cast<double>().sum();
/// @endcode
template <class T>
[[nodiscard]] row_major_map<T> to_eigen(matrix_view<T> v) {
    return row_major_map<T>(v.data(), static_cast<Eigen::Index>(v.rows()),
                            static_cast<Eigen::Index>(v.cols()),
                            Eigen::OuterStride<>(static_cast<Eigen::Index>(v.row_stride())));
}

/// A frugal view of a row-major Eigen matrix, map or block with unit inner stride.
/// @code
/// frugal::eigen::row_major_matrix<float> m(3, 7);
/// frugal::matrix_view<float> v = frugal::eigen::to_view(m);
/// @endcode
template <class Derived>
[[nodiscard]] auto to_view(Eigen::DenseBase<Derived>& m) {
    static_assert(Derived::IsRowMajor || Derived::ColsAtCompileTime == 1,
                  "frugal::eigen::to_view needs a row-major Eigen object");
    FRUGAL_CHECK(m.innerStride() == 1, "to_view: inner stride ", m.innerStride(), " is not 1");
    using scalar = std::remove_reference_t<decltype(*m.derived().data())>;
    return matrix_view<scalar>(m.derived().data(), static_cast<std::size_t>(m.rows()),
                               static_cast<std::size_t>(m.cols()),
                               static_cast<std::size_t>(m.rows() > 1 ? m.outerStride() : m.cols()));
}

/// frugal's reference CPU tensor backend.
///
/// GEMM runs through Eigen's blocked kernels on maps of the caller's views, so strided
/// views (one head of a `[tokens, heads, dim]` tensor) need no copy.
/// @code
/// frugal::eigen::backend cpu;
/// cpu.gemm(q, frugal::transpose::no, k, frugal::transpose::yes, scores, 1.0f, 0.0f);
/// @endcode
class backend {
public:
    /// `c = alpha * op(a) * op(b) + beta * c`; `c` is not read when `beta == 0`.
    template <real_scalar T>
    void gemm(matrix_view<const T> a, transpose ta, matrix_view<const T> b, transpose tb,
              matrix_view<T> c, T alpha, T beta) const {
        const std::size_t m = ta == transpose::no ? a.rows() : a.cols();
        const std::size_t k = ta == transpose::no ? a.cols() : a.rows();
        const std::size_t kb = tb == transpose::no ? b.rows() : b.cols();
        const std::size_t n = tb == transpose::no ? b.cols() : b.rows();
        FRUGAL_CHECK(k == kb && c.rows() == m && c.cols() == n, "gemm: op(a) is ", m, " x ", k,
                     ", op(b) is ", kb, " x ", n, ", c is ", c.rows(), " x ", c.cols());
        auto cm = to_eigen(c);
        if (k == 0) {  // an empty product: only the beta term remains
            if (beta == T(0)) cm.setZero(); else cm *= beta;
            return;
        }
        const auto am = to_eigen(a);
        const auto bm = to_eigen(b);
        const auto run = [&](const auto& lhs, const auto& rhs) {
            if (beta == T(0)) {
                cm.noalias() = alpha * (lhs * rhs);
            } else {
                cm *= beta;
                cm.noalias() += alpha * (lhs * rhs);
            }
        };
        if (ta == transpose::no) {
            if (tb == transpose::no) run(am, bm); else run(am, bm.transpose());
        } else {
            if (tb == transpose::no) run(am.transpose(), bm); else run(am.transpose(), bm.transpose());
        }
    }
};

static_assert(tensor_backend<backend, float>);
static_assert(tensor_backend<backend, double>);

}  // namespace frugal::eigen
FRUGAL_EIGEN_DIAGNOSTICS_POP
