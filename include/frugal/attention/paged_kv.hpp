#pragma once
/// @file
/// A paged KV cache as engines keep it (vLLM, FlashInfer): K/V pools of fixed-size pages,
/// a page table per sequence plus the last page's length, NHD or HND page layouts, K and
/// V in separate or interleaved pools, in any of the K/V storage types (8-bit ones with
/// their dequantization scales). Contiguous KV is one page per sequence.

#include <cstddef>
#include <cstdint>
#include <limits>
#include <span>
#include <type_traits>

#include "frugal/attention/dtype.hpp"
#include "frugal/attention/host_device.hpp"
#include "frugal/core/checked.hpp"
#include "frugal/core/error.hpp"
#include "frugal/core/matrix_view.hpp"

namespace frugal::attention {

/// How one page of one pool is laid out: `nhd` = [page_size][kv_heads][head_dim] (a
/// token's heads together, as a QKV projection writes them), `hnd` =
/// [kv_heads][page_size][head_dim] (a head's tokens together: each head of a page is
/// one contiguous block, which decode streams best).
enum class kv_layout : unsigned char { nhd, hnd };

/// The page table of a batch in CSR form (FlashInfer's `kv_indptr`, `kv_indices`,
/// `kv_last_page_len`): sequence s owns pages `indices[indptr[s] .. indptr[s + 1])`, in
/// token order, and uses the first `last_page_len[s]` tokens of its last page. Non-owning.
/// @code
/// std::vector<std::int32_t> indptr{0, 2, 3}, indices{7, 2, 5}, last{16, 9};
/// frugal::attention::page_table table{indptr, indices, last, 16};
/// std::size_t n = table.kv_len(0);   // 2 pages: 16 + 16 = 32 tokens
/// @endcode
struct page_table {
    std::span<const std::int32_t> indptr;
    std::span<const std::int32_t> indices;
    std::span<const std::int32_t> last_page_len;
    std::size_t page_size = 0;

    /// Sequences in the batch.
    [[nodiscard]] constexpr std::size_t batch() const noexcept { return last_page_len.size(); }
    /// Pages of sequence `s`.
    [[nodiscard]] constexpr std::size_t pages(std::size_t s) const noexcept {
        return static_cast<std::size_t>(indptr[s + 1] - indptr[s]);
    }
    /// Tokens of sequence `s`: full pages plus the last page's length.
    [[nodiscard]] constexpr std::size_t kv_len(std::size_t s) const noexcept {
        return (pages(s) - 1) * page_size + static_cast<std::size_t>(last_page_len[s]);
    }
    /// The pool page holding token `t` of sequence `s`.
    [[nodiscard]] constexpr std::size_t page_of(std::size_t s, std::size_t t) const noexcept {
        return static_cast<std::size_t>(indices[static_cast<std::size_t>(indptr[s]) + t / page_size]);
    }

    /// Throws `frugal::invalid_argument` (or `out_of_range` for a page index) naming the
    /// first bad entry: every sequence needs at least one page, offsets that increase,
    /// a last-page length in [1, page_size] and page indices in [0, num_pages).
    void validate(std::size_t num_pages) const {
        FRUGAL_CHECK(page_size > 0, "page_table: page_size must be positive");
        FRUGAL_CHECK(indptr.size() == last_page_len.size() + 1, "page_table: indptr has ", indptr.size(),
                     " entries for ", last_page_len.size(), " sequences (expected batch + 1)");
        FRUGAL_CHECK(!last_page_len.empty(), "page_table: the batch is empty");
        FRUGAL_CHECK(indptr[0] == 0, "page_table: indptr[0] = ", indptr[0], ", expected 0");
        for (std::size_t s = 0; s < batch(); ++s) {
            FRUGAL_CHECK(indptr[s + 1] > indptr[s], "page_table: indptr[", s + 1, "] = ", indptr[s + 1],
                         " does not increase on indptr[", s, "] = ", indptr[s], " (every sequence needs a page)");
            FRUGAL_CHECK(last_page_len[s] >= 1 && static_cast<std::size_t>(last_page_len[s]) <= page_size,
                         "page_table: last_page_len[", s, "] = ", last_page_len[s], " is outside [1, page_size = ",
                         page_size, "]");
        }
        FRUGAL_CHECK(static_cast<std::size_t>(indptr.back()) == indices.size(), "page_table: indptr ends at ",
                     indptr.back(), " but there are ", indices.size(), " page indices");
        for (std::size_t i = 0; i < indices.size(); ++i) {
            FRUGAL_CHECK_AS(out_of_range, indices[i] >= 0 && static_cast<std::size_t>(indices[i]) < num_pages,
                            "page_table: page index indices[", i, "] = ", indices[i], " is outside the pool of ",
                            num_pages, " pages");
        }
    }
};

/// Where each row of a page pool lives; the addressing the CPU driver and the CUDA kernel share.
/// @code
/// frugal::attention::page_geometry g{.page_size = 16, .kv_heads = 8, .head_dim = 128, .page_stride = 16 * 8 * 128,
///                                    .layout = frugal::attention::kv_layout::hnd};
/// std::size_t at = g.row_offset(/*page=*/7, /*head=*/3, /*token in page=*/5);
/// @endcode
struct page_geometry {
    std::size_t page_size = 0;
    std::size_t kv_heads = 0;
    std::size_t head_dim = 0;
    std::size_t page_stride = 0;  ///< elements from one page of a pool to the next
    kv_layout layout = kv_layout::nhd;

    /// Elements between consecutive tokens of one head inside a page.
    [[nodiscard]] FRUGAL_HOST_DEVICE constexpr std::size_t token_stride() const noexcept {
        return layout == kv_layout::nhd ? kv_heads * head_dim : head_dim;
    }
    /// Offset of row (head `h`, token `r` of the page) of page `page` from the pool's start.
    [[nodiscard]] FRUGAL_HOST_DEVICE constexpr std::size_t row_offset(std::size_t page, std::size_t h,
                                                                      std::size_t r) const noexcept {
        return page * page_stride + (layout == kv_layout::nhd ? (r * kv_heads + h) * head_dim
                                                              : (h * page_size + r) * head_dim);
    }
    /// Offset of that row's scale in a per-token scale pool (`scale_granularity::token`):
    /// one float per row, pages of `page_size x kv_heads` laid out as the K/V pages.
    [[nodiscard]] FRUGAL_HOST_DEVICE constexpr std::size_t scale_offset(std::size_t page, std::size_t h,
                                                                        std::size_t r) const noexcept {
        return page * page_size * kv_heads + (layout == kv_layout::nhd ? r * kv_heads + h : h * page_size + r);
    }
};

/// What one dequantization scale of an 8-bit K/V cache covers.
enum class scale_granularity : unsigned char {
    tensor,  ///< one scale for all of K, one for V (vLLM's per-layer `k_scale`, `v_scale`)
    head,    ///< one per KV head: `kv_heads` floats each
    token,   ///< one per token and KV head, in pools laid out as the pages (`page_geometry::scale_offset`)
};

/// The dequantization scales of an 8-bit K/V cache: a value is its stored element times
/// its scale. `F` is `const float` to read them, `float` where `quantize_into` sets
/// per-token scales. Non-owning.
/// @code
/// std::vector<float> k_scale(kv_heads), v_scale(kv_heads);   // per head, e.g. calibrated
/// frugal::attention::kv_scales scales{frugal::attention::scale_granularity::head, k_scale.data(), v_scale.data()};
/// @endcode
template <class F = const float>
struct basic_kv_scales {
    scale_granularity granularity = scale_granularity::tensor;
    F* k = nullptr;
    F* v = nullptr;
};
using kv_scales = basic_kv_scales<const float>;

/// A paged K/V cache: `num_pages` pages of `page_size` tokens x `kv_heads` heads x
/// `head_dim` in the caller's pools, addressed through a `page_table`. Validated on
/// construction (see `page_table::validate`); non-owning.
///
/// Separate pools hold K pages and V pages in two arrays; an interleaved pool holds
/// page p's K block and then its V block (`[num_pages][2][page elements]`).
/// Contiguous KV (`[batch][max_len][kv_heads][head_dim]`) is the case of one page of
/// `max_len` tokens per sequence. 8-bit pools (`quantized_kv_type`) carry their scales
/// (`with_scales`); attention refuses them without.
/// @code
/// frugal::attention::page_table table{indptr, indices, last_page_len, 16};
/// auto kv = frugal::attention::paged_kv<const frugal::attention::bfloat16>::separate(
///     k_pool.data(), v_pool.data(), num_pages, 8, 128, frugal::attention::kv_layout::hnd, table);
/// @endcode
template <class T>
class paged_kv {
public:
    using element_type = T;
    /// `const float` for a read-only cache, else `float`.
    using scale_type = std::conditional_t<std::is_const_v<T>, const float, float>;

    /// K page p at `k + p * page_stride`, V page p at `v + p * page_stride`.
    paged_kv(T* k, T* v, std::size_t num_pages, std::size_t page_stride, std::size_t kv_heads, std::size_t head_dim,
             kv_layout layout, page_table table)
        : k_(k), v_(v), num_pages_(num_pages), geometry_{table.page_size, kv_heads, head_dim, page_stride, layout},
          table_(table) {
        FRUGAL_CHECK(kv_heads > 0 && head_dim > 0, "paged_kv: kv_heads ", kv_heads, " and head_dim ", head_dim,
                     " must be positive");
        FRUGAL_CHECK(num_pages > 0 && k != nullptr && v != nullptr, "paged_kv: ", num_pages,
                     " pages need non-null pools");
        table.validate(num_pages);
        const std::size_t page = checked_product("paged_kv: page elements", table.page_size, kv_heads, head_dim);
        FRUGAL_CHECK(page_stride >= page, "paged_kv: page stride ", page_stride, " < page elements ", page);
        (void)checked_product("paged_kv: pool bytes", num_pages, page_stride, sizeof(T));
    }

    /// A read-only view of a writable cache.
    template <class U>
        requires std::is_same_v<const U, T> && (!std::is_same_v<U, T>)
    paged_kv(const paged_kv<U>& other) noexcept  // NOLINT(google-explicit-constructor)
        : k_(other.k_pool()), v_(other.v_pool()), num_pages_(other.num_pages()), geometry_(other.geometry()),
          table_(other.table()), scales_{other.scales().granularity, other.scales().k, other.scales().v} {}

    /// K and V in two pools of `num_pages` pages each.
    [[nodiscard]] static paged_kv separate(T* k, T* v, std::size_t num_pages, std::size_t kv_heads,
                                           std::size_t head_dim, kv_layout layout, page_table table) {
        return {k, v, num_pages, page_elements(table, kv_heads, head_dim), kv_heads, head_dim, layout, table};
    }
    /// K and V interleaved per page in one pool of `num_pages` pages.
    [[nodiscard]] static paged_kv interleaved(T* kv, std::size_t num_pages, std::size_t kv_heads,
                                              std::size_t head_dim, kv_layout layout, page_table table) {
        const std::size_t page = page_elements(table, kv_heads, head_dim);
        return {kv, kv + page, num_pages, checked_mul(page, std::size_t{2}, "paged_kv: interleaved page"), kv_heads,
                head_dim, layout, table};
    }

    [[nodiscard]] const page_table& table() const noexcept { return table_; }
    [[nodiscard]] std::size_t batch() const noexcept { return table_.batch(); }
    [[nodiscard]] std::size_t kv_len(std::size_t s) const noexcept { return table_.kv_len(s); }
    [[nodiscard]] std::size_t page_size() const noexcept { return table_.page_size; }
    [[nodiscard]] std::size_t num_pages() const noexcept { return num_pages_; }
    [[nodiscard]] const page_geometry& geometry() const noexcept { return geometry_; }
    [[nodiscard]] std::size_t kv_heads() const noexcept { return geometry_.kv_heads; }
    [[nodiscard]] std::size_t head_dim() const noexcept { return geometry_.head_dim; }
    [[nodiscard]] kv_layout layout() const noexcept { return geometry_.layout; }
    [[nodiscard]] T* k_pool() const noexcept { return k_; }
    [[nodiscard]] T* v_pool() const noexcept { return v_; }
    [[nodiscard]] const basic_kv_scales<scale_type>& scales() const noexcept { return scales_; }

    /// This cache with its dequantization scales (8-bit pools only): per tensor or per head
    /// arrays of 1 or `kv_heads` floats, per token pools of `num_pages x page_size x
    /// kv_heads` floats each (see `page_geometry::scale_offset`).
    /// @code
    /// auto kv = frugal::attention::paged_kv<const frugal::attention::float8_e4m3>::separate(
    ///     k_pool, v_pool, num_pages, 8, 128, frugal::attention::kv_layout::nhd, table)
    ///     .with_scales({frugal::attention::scale_granularity::tensor, &k_scale, &v_scale});
    /// @endcode
    [[nodiscard]] paged_kv with_scales(const basic_kv_scales<scale_type>& scales) const {
        FRUGAL_CHECK(quantized_kv_type<T>, "paged_kv: ", dtype_name(dtype_of<T>),
                     " pages hold their values; scales are for 8-bit pools (fp8e4m3, fp8e5m2, int8)");
        FRUGAL_CHECK(scales.k != nullptr && scales.v != nullptr, "paged_kv: null K or V scales");
        paged_kv out = *this;
        out.scales_ = scales;
        return out;
    }
    /// The scale of K row (head `h`, token `r`) of page `page` (8-bit pools with scales).
    [[nodiscard]] scale_type& k_scale(std::size_t page, std::size_t h, std::size_t r) const noexcept {
        return scale_of(scales_.k, page, h, r);
    }
    /// The scale of that V row.
    [[nodiscard]] scale_type& v_scale(std::size_t page, std::size_t h, std::size_t r) const noexcept {
        return scale_of(scales_.v, page, h, r);
    }
    /// Rows [t0, t0 + n) of KV head `h` of sequence `s` as matrix views, when they lie
    /// in one page (`t0 / page_size == (t0 + n - 1) / page_size`).
    [[nodiscard]] matrix_view<T> k_rows(std::size_t s, std::size_t h, std::size_t t0, std::size_t n) const {
        return rows(k_, s, h, t0, n);
    }
    [[nodiscard]] matrix_view<T> v_rows(std::size_t s, std::size_t h, std::size_t t0, std::size_t n) const {
        return rows(v_, s, h, t0, n);
    }

private:
    [[nodiscard]] static std::size_t page_elements(const page_table& table, std::size_t kv_heads,
                                                   std::size_t head_dim) {
        return checked_product("paged_kv: page elements", table.page_size, kv_heads, head_dim);
    }
    [[nodiscard]] scale_type& scale_of(scale_type* base, std::size_t page, std::size_t h, std::size_t r) const noexcept {
        FRUGAL_ASSERT(base != nullptr);
        switch (scales_.granularity) {
            case scale_granularity::tensor: return base[0];
            case scale_granularity::head: return base[h];
            case scale_granularity::token: break;
        }
        return base[geometry_.scale_offset(page, h, r)];
    }
    [[nodiscard]] matrix_view<T> rows(T* pool, std::size_t s, std::size_t h, std::size_t t0, std::size_t n) const {
        FRUGAL_ASSERT(h < kv_heads() && t0 + n <= kv_len(s) && n > 0 && t0 / page_size() == (t0 + n - 1) / page_size());
        return {pool + geometry_.row_offset(table_.page_of(s, t0), h, t0 % page_size()), n, head_dim(),
                geometry_.token_stride()};
    }

    T* k_;
    T* v_;
    std::size_t num_pages_;
    page_geometry geometry_;
    page_table table_;
    basic_kv_scales<scale_type> scales_{};
};

}  // namespace frugal::attention
