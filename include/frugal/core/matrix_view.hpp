#pragma once
/// @file
/// matrix_view<T>: a non-owning, row-major, row-strided view of a matrix.

#include <cstddef>
#include <limits>
#include <span>
#include <type_traits>

#include "frugal/core/assert.hpp"
#include "frugal/core/error.hpp"

namespace frugal {

/// A non-owning row-major view: pointer, rows, cols and a row stride in elements.
///
/// The stride lets a view select one head of a caller's `[tokens, heads, dim]` tensor
/// without a copy (rows = tokens, cols = dim, stride = heads * dim). `matrix_view<T>`
/// converts to `matrix_view<const T>`. Construction validates the shape and throws
/// `frugal::invalid_argument` on a stride smaller than cols or a null pointer with
/// a non-empty shape.
/// @code
/// std::vector<float> qkv(tokens * heads * dim);
/// frugal::matrix_view<const float> head2(qkv.data() + 2 * dim, tokens, dim, heads * dim);
/// float x = head2(5, 0);   // token 5, head 2, first feature
/// @endcode
template <class T>
class matrix_view {
public:
    using element_type = T;
    using value_type = std::remove_cv_t<T>;
    using size_type = std::size_t;

    constexpr matrix_view() noexcept = default;

    /// A contiguous view (row stride = cols).
    constexpr matrix_view(T* data, size_type rows, size_type cols)
        : matrix_view(data, rows, cols, cols) {}

    constexpr matrix_view(T* data, size_type rows, size_type cols, size_type row_stride)
        : data_(data), rows_(rows), cols_(cols), stride_(row_stride) {
        FRUGAL_CHECK(row_stride >= cols, "matrix_view: row stride ", row_stride,
                     " is smaller than cols ", cols, " (rows = ", rows, ")");
        FRUGAL_CHECK(data != nullptr || rows == 0 || cols == 0,
                     "matrix_view: null data for a ", rows, " x ", cols, " view");
        FRUGAL_CHECK(rows == 0 || row_stride <= std::numeric_limits<size_type>::max() / rows,
                     "matrix_view: ", rows, " rows of stride ", row_stride,
                     " overflow the address space");
    }

    /// Mutable to const conversion.
    template <class U>
        requires(!std::is_same_v<U, T> && std::is_convertible_v<U (*)[], T (*)[]>)
    constexpr matrix_view(const matrix_view<U>& other) noexcept  // NOLINT(google-explicit-constructor)
        : data_(other.data()), rows_(other.rows()), cols_(other.cols()), stride_(other.row_stride()) {}

    [[nodiscard]] constexpr T* data() const noexcept { return data_; }
    [[nodiscard]] constexpr size_type rows() const noexcept { return rows_; }
    [[nodiscard]] constexpr size_type cols() const noexcept { return cols_; }
    [[nodiscard]] constexpr size_type row_stride() const noexcept { return stride_; }
    [[nodiscard]] constexpr size_type size() const noexcept { return rows_ * cols_; }
    [[nodiscard]] constexpr bool empty() const noexcept { return size() == 0; }
    [[nodiscard]] constexpr bool is_contiguous() const noexcept { return stride_ == cols_ || rows_ <= 1; }

    /// Element access; bounds are checked by FRUGAL_ASSERT only (hot path).
    [[nodiscard]] constexpr T& operator()(size_type r, size_type c) const noexcept {
        FRUGAL_ASSERT(r < rows_ && c < cols_);
        return data_[r * stride_ + c];
    }

    /// Row `r` as a span of `cols()` elements.
    [[nodiscard]] constexpr std::span<T> row(size_type r) const noexcept {
        FRUGAL_ASSERT(r < rows_);
        return {data_ + r * stride_, cols_};
    }

    /// The `nrows x ncols` sub-view starting at (`r0`, `c0`); checked.
    [[nodiscard]] constexpr matrix_view block(size_type r0, size_type c0, size_type nrows,
                                              size_type ncols) const {
        FRUGAL_CHECK(r0 <= rows_ && nrows <= rows_ - r0 && c0 <= cols_ && ncols <= cols_ - c0,
                     "matrix_view::block: rows [", r0, ", ", r0 + nrows, ") x cols [", c0, ", ",
                     c0 + ncols, ") outside a ", rows_, " x ", cols_, " view");
        // An empty block keeps the base pointer: offsetting it could pass the end of the data.
        if (nrows == 0 || ncols == 0) return matrix_view(data_, nrows, ncols, stride_);
        return matrix_view(data_ + r0 * stride_ + c0, nrows, ncols, stride_);
    }

    /// Rows [`r0`, `r0 + n`) with every column; checked.
    [[nodiscard]] constexpr matrix_view row_block(size_type r0, size_type n) const {
        return block(r0, 0, n, cols_);
    }

private:
    T* data_ = nullptr;
    size_type rows_ = 0;
    size_type cols_ = 0;
    size_type stride_ = 0;
};

template <class T>
matrix_view(T*, std::size_t, std::size_t) -> matrix_view<T>;
template <class T>
matrix_view(T*, std::size_t, std::size_t, std::size_t) -> matrix_view<T>;

/// Throws `frugal::invalid_argument` unless `a` is `rows x cols`; `what` names the operand.
template <class T>
constexpr void check_shape(const matrix_view<T>& a, std::size_t rows, std::size_t cols, const char* what) {
    FRUGAL_CHECK(a.rows() == rows && a.cols() == cols, what, " is ", a.rows(), " x ", a.cols(),
                 ", expected ", rows, " x ", cols);
}

}  // namespace frugal
