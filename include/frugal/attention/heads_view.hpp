#pragma once
/// @file
/// heads_view<T>: a non-owning view of a batch of attention heads, each a strided matrix.

#include <cstddef>
#include <limits>
#include <type_traits>

#include "frugal/core/error.hpp"
#include "frugal/core/matrix_view.hpp"

namespace frugal::attention {

/// `heads` matrices of `tokens x dim`, head h at `data + h * head_stride`, rows
/// `token_stride` elements apart.
///
/// Both common layouts are views of the same type without a copy: `[tokens, heads, dim]`
/// (`token_major`) and `[heads, tokens, dim]` (`head_major`); any other strides work too.
/// @code
/// std::vector<float> q(tokens * heads * dim);           // [tokens, heads, dim]
/// auto qv = frugal::attention::heads_view<const float>::token_major(q.data(), tokens, heads, dim);
/// frugal::matrix_view<const float> h3 = qv.head(3);       // tokens x dim, stride heads * dim
/// @endcode
template <class T>
class heads_view {
public:
    using size_type = std::size_t;

    constexpr heads_view() noexcept = default;

    constexpr heads_view(T* data, size_type heads, size_type tokens, size_type dim, size_type head_stride,
                         size_type token_stride)
        : data_(data), heads_(heads), tokens_(tokens), dim_(dim), head_stride_(head_stride),
          token_stride_(token_stride) {
        FRUGAL_CHECK(token_stride >= dim, "heads_view: token stride ", token_stride, " < dim ", dim);
        FRUGAL_CHECK(data != nullptr || heads * tokens * dim == 0, "heads_view: null data for ", heads,
                     " heads of ", tokens, " x ", dim);
        FRUGAL_CHECK(heads == 0 || head_stride <= std::numeric_limits<size_type>::max() / heads,
                     "heads_view: ", heads, " heads of stride ", head_stride, " overflow the address space");
        if (heads > 0 && tokens > 0) (void)head(heads - 1);  // validates the last head's extent
    }

    /// A `[tokens, heads, dim]` tensor (token-major, as a fused QKV projection writes it).
    [[nodiscard]] static constexpr heads_view token_major(T* data, size_type tokens, size_type heads, size_type dim) {
        return heads_view(data, heads, tokens, dim, dim, heads * dim);
    }
    /// A `[heads, tokens, dim]` tensor (head-major).
    [[nodiscard]] static constexpr heads_view head_major(T* data, size_type heads, size_type tokens, size_type dim) {
        return heads_view(data, heads, tokens, dim, tokens * dim, dim);
    }

    /// Mutable to const conversion.
    template <class U>
        requires(!std::is_same_v<U, T> && std::is_convertible_v<U (*)[], T (*)[]>)
    constexpr heads_view(const heads_view<U>& o) noexcept  // NOLINT(google-explicit-constructor)
        : data_(o.data()), heads_(o.heads()), tokens_(o.tokens()), dim_(o.dim()), head_stride_(o.head_stride()),
          token_stride_(o.token_stride()) {}

    [[nodiscard]] constexpr T* data() const noexcept { return data_; }
    [[nodiscard]] constexpr size_type heads() const noexcept { return heads_; }
    [[nodiscard]] constexpr size_type tokens() const noexcept { return tokens_; }
    [[nodiscard]] constexpr size_type dim() const noexcept { return dim_; }
    [[nodiscard]] constexpr size_type head_stride() const noexcept { return head_stride_; }
    [[nodiscard]] constexpr size_type token_stride() const noexcept { return token_stride_; }

    /// Head `h` as a `tokens x dim` matrix view; checked.
    [[nodiscard]] constexpr matrix_view<T> head(size_type h) const {
        FRUGAL_CHECK_AS(out_of_range, h < heads_, "heads_view::head: head ", h, " >= heads ", heads_);
        if (tokens_ == 0 || dim_ == 0) return matrix_view<T>(data_, tokens_, dim_, token_stride_);
        return matrix_view<T>(data_ + h * head_stride_, tokens_, dim_, token_stride_);
    }

private:
    T* data_ = nullptr;
    size_type heads_ = 0;
    size_type tokens_ = 0;
    size_type dim_ = 0;
    size_type head_stride_ = 0;
    size_type token_stride_ = 0;
};

}  // namespace frugal::attention
