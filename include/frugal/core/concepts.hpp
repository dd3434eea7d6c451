#pragma once
/// @file
/// The tensor-backend concepts: the few dense primitives frugal's generic drivers call.
///
/// Algorithms constrain on the weakest concept they need. A backend opts in by
/// providing the member functions below and `static_assert`ing the concept right
/// after its definition; examples/minimal_backend shows one in a short file.

#include <concepts>
#include <type_traits>

#include "frugal/core/matrix_view.hpp"

namespace frugal {

/// Whether a GEMM operand is used as stored or transposed.
enum class transpose : bool { no = false, yes = true };

/// Element types frugal's dense paths accept as accumulation types.
template <class T>
concept real_scalar = std::floating_point<T>;

/// A backend that computes `c = alpha * op(a) * op(b) + beta * c` on row-strided views.
///
/// When `beta == 0` the backend must not read `c` (it may hold NaN). Shapes are the
/// caller's responsibility to match; a backend may check them.
/// @code
/// struct my_backend {
///     void gemm(frugal::matrix_view<const float> a, frugal::transpose ta,
///               frugal::matrix_view<const float> b, frugal::transpose tb,
///               frugal::matrix_view<float> c, float alpha, float beta);
/// };
/// static_assert(frugal::gemm_backend<my_backend, float>);
/// @endcode
template <class B, class T>
concept gemm_backend =
    real_scalar<T> && requires(B& backend, matrix_view<const T> a, matrix_view<const T> b,
                               matrix_view<T> c, transpose op, T scale) {
        { backend.gemm(a, op, b, op, c, scale, scale) } -> std::same_as<void>;
    };

/// The general tensor backend of frugal's dense modules: GEMM on views, for `T`.
/// Modules that need more (tiled attention's row reductions) refine it.
template <class B, class T = float>
concept tensor_backend = gemm_backend<B, T> && std::is_object_v<B>;

}  // namespace frugal
