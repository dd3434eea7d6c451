#pragma once
/// @file
/// Overflow-checked size arithmetic: every size frugal computes from user input (tensor
/// shapes, file headers, budgets) goes through these, so a size that would wrap becomes a
/// `frugal::invalid_argument` naming it instead of a small allocation and an overrun.

#include <concepts>
#include <cstddef>
#include <limits>
#include <utility>

#include "frugal/core/error.hpp"

namespace frugal {

/// `a + b`, or `frugal::invalid_argument` naming `what` when the sum does not fit in T.
/// @code
/// std::size_t total = frugal::checked_add(header_bytes, payload_bytes, "history file size");
/// @endcode
template <std::unsigned_integral T>
[[nodiscard]] constexpr T checked_add(T a, T b, const char* what) {
    FRUGAL_CHECK(b <= std::numeric_limits<T>::max() - a, what, ": ", a, " + ", b, " overflows ",
                 std::numeric_limits<T>::digits, "-bit sizes");
    return a + b;
}

/// `a * b`, or `frugal::invalid_argument` naming `what` when the product does not fit in T.
/// @code
/// std::size_t floats = frugal::checked_mul(rows, cols, "score tile");
/// @endcode
template <std::unsigned_integral T>
[[nodiscard]] constexpr T checked_mul(T a, T b, const char* what) {
    FRUGAL_CHECK(a == 0 || b <= std::numeric_limits<T>::max() / a, what, ": ", a, " x ", b, " overflows ",
                 std::numeric_limits<T>::digits, "-bit sizes");
    return a * b;
}

/// The product of every factor, checked at each step (see `checked_mul`).
/// @code
/// std::size_t bytes = frugal::checked_product("KV pool", pages, page_size, heads, dim, sizeof(float));
/// @endcode
template <std::unsigned_integral T, std::unsigned_integral... U>
[[nodiscard]] constexpr T checked_product(const char* what, T first, U... rest) {
    T p = first;
    ((p = checked_mul(p, static_cast<T>(rest), what)), ...);
    return p;
}

/// `v` converted to `To`, or `frugal::invalid_argument` naming `what` when the value does
/// not fit (negative into unsigned, or too large).
/// @code
/// auto n = frugal::checked_cast<std::size_t>(header_count, "record count");
/// @endcode
template <std::integral To, std::integral From>
[[nodiscard]] constexpr To checked_cast(From v, const char* what) {
    FRUGAL_CHECK(std::in_range<To>(v), what, ": ", +v, " does not fit in the range [",
                 +std::numeric_limits<To>::min(), ", ", +std::numeric_limits<To>::max(), "]");
    return static_cast<To>(v);
}

}  // namespace frugal
