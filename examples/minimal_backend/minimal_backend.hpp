#pragma once
// A complete user tensor backend in one short file: plain loops, any real type.
// Replace the loop with your engine's host GEMM (oneDNN, OpenBLAS, ggml's CPU kernels)
// and frugal's dense drivers run on it, tile by tile. The drivers hand it views of host
// memory (score tiles, outputs), so a device GEMM such as cuBLAS cannot plug in here: a
// device backend runs a whole plan instead, as frugal/backend/cuda does.

#include <frugal/core/concepts.hpp>

namespace example {

struct minimal_backend {
    template <frugal::real_scalar T>
    void gemm(frugal::matrix_view<const T> a, frugal::transpose ta, frugal::matrix_view<const T> b,
              frugal::transpose tb, frugal::matrix_view<T> c, T alpha, T beta) const {
        const bool at = ta == frugal::transpose::yes, bt = tb == frugal::transpose::yes;
        const std::size_t k = at ? a.rows() : a.cols();
        for (std::size_t i = 0; i < c.rows(); ++i) {
            for (std::size_t j = 0; j < c.cols(); ++j) {
                T sum = 0;
                for (std::size_t p = 0; p < k; ++p) sum += (at ? a(p, i) : a(i, p)) * (bt ? b(j, p) : b(p, j));
                c(i, j) = alpha * sum + (beta == T(0) ? T(0) : beta * c(i, j));
            }
        }
    }
};
static_assert(frugal::tensor_backend<minimal_backend, float>);

}  // namespace example
