#pragma once
/// @file
/// quantize_into: writes a token's K and V rows into their page slots as an engine appends
/// them, in the cache's storage type (rounded to fp32/bf16/fp16, or quantized to FP8 or
/// int8 against the cache's scales).

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <span>
#include <type_traits>

#include "frugal/attention/dtype.hpp"
#include "frugal/attention/paged_kv.hpp"
#include "frugal/core/error.hpp"

namespace frugal::attention {

/// The largest magnitude an 8-bit K/V element stores: 448 (E4M3), 57344 (E5M2), 127 (int8,
/// symmetric: -128 is never written). A calibrated per-tensor or per-head scale is the
/// largest |value| over this.
/// @code
/// float k_scale = calibrated_amax / frugal::attention::quantized_max<frugal::attention::float8_e4m3>;
/// @endcode
template <quantized_kv_type T>
inline constexpr float quantized_max = std::is_same_v<std::remove_const_t<T>, float8_e4m3>   ? 448.0f
                                       : std::is_same_v<std::remove_const_t<T>, float8_e5m2> ? 57344.0f
                                                                                             : 127.0f;

namespace detail {

/// `x / scale` as an 8-bit K/V element (x finite, scale positive and finite): FP8 rounds to
/// nearest even and saturates, int8 rounds to nearest even and clamps to [-127, 127].
template <quantized_kv_type T>
[[nodiscard]] inline std::remove_const_t<T> quantize(float x, float scale) noexcept {
    using U = std::remove_const_t<T>;
    const float y = x / scale;
    if constexpr (std::is_same_v<U, std::int8_t>) return static_cast<std::int8_t>(std::clamp(std::nearbyint(y), -127.0f, 127.0f));
    else return U::from_float(y);
}

}  // namespace detail

/// Writes token `t` of sequence `s` into its page slot of `kv`: `k` and `v` hold the
/// token's `kv_heads x head_dim` values, head after head (as a QKV projection writes one
/// token), in any storage type. fp32/bf16/fp16 pools get the values rounded to their type.
/// 8-bit pools: with `scale_granularity::token` scales, each head's K and V scales are set
/// to max|x| / `quantized_max` (0 for an all-zero row) and the elements to x / scale; with
/// `tensor` or `head` scales (the engine's, e.g. calibrated as vLLM's `k_scale`), the
/// elements are x / scale, saturating. A value that is not finite, a token outside the
/// sequence's pages or rows of the wrong size get a `frugal::error` naming them.
/// @code
/// // as the engine appends token t of sequence s (per-token int8 scales):
/// auto kv = frugal::attention::paged_kv<std::int8_t>::separate(k_pool, v_pool, pages, 8, 128, layout, table)
///               .with_scales({frugal::attention::scale_granularity::token, k_scales, v_scales});
/// frugal::attention::quantize_into(kv, s, t, std::span<const float>(k_row), std::span<const float>(v_row));
/// @endcode
template <kv_storage_type KV, storage_type T>
    requires(!std::is_const_v<KV>)
void quantize_into(const paged_kv<KV>& kv, std::size_t s, std::size_t t, std::span<const T> k, std::span<const T> v) {
    const std::size_t heads = kv.kv_heads(), d = kv.head_dim();
    FRUGAL_CHECK(s < kv.batch(), "quantize_into: sequence ", s, " is outside the batch of ", kv.batch());
    FRUGAL_CHECK(t < kv.table().pages(s) * kv.page_size(), "quantize_into: token ", t, " of sequence ", s,
                 " is outside its ", kv.table().pages(s), " pages of ", kv.page_size());
    FRUGAL_CHECK(k.size() == heads * d && v.size() == heads * d, "quantize_into: K and V rows of ", k.size(), " and ",
                 v.size(), " values, expected kv_heads x head_dim = ", heads * d);
    for (std::size_t i = 0; i < heads * d; ++i) {
        FRUGAL_CHECK(std::isfinite(to_float(k[i])) && std::isfinite(to_float(v[i])), "quantize_into: K or V value ", i,
                     " (head ", i / d, ", element ", i % d, ") is ", to_float(k[i]), " / ", to_float(v[i]));
    }
    const std::size_t page = kv.table().page_of(s, t), r = t % kv.page_size();
    const page_geometry& g = kv.geometry();
    for (std::size_t h = 0; h < heads; ++h) {
        for (const bool is_k : {true, false}) {
            const T* src = (is_k ? k : v).data() + h * d;
            KV* dst = (is_k ? kv.k_pool() : kv.v_pool()) + g.row_offset(page, h, r);
            if constexpr (!quantized_kv_type<KV>) {
                for (std::size_t c = 0; c < d; ++c) dst[c] = from_float<KV>(to_float(src[c]));
            } else {
                FRUGAL_CHECK(kv.scales().k != nullptr, "quantize_into: ", dtype_name(dtype_of<KV>),
                             " pages need their scales (paged_kv::with_scales)");
                float& scale = is_k ? kv.k_scale(page, h, r) : kv.v_scale(page, h, r);
                if (kv.scales().granularity == scale_granularity::token) {
                    float amax = 0.0f;
                    for (std::size_t c = 0; c < d; ++c) amax = std::max(amax, std::abs(to_float(src[c])));
                    scale = amax / quantized_max<KV>;
                } else {
                    FRUGAL_CHECK(std::isfinite(scale) && scale > 0.0f, "quantize_into: ", is_k ? "K" : "V", " scale ",
                                 scale, " of head ", h, " must be finite and positive");
                }
                for (std::size_t c = 0; c < d; ++c) dst[c] = scale > 0.0f ? detail::quantize<KV>(to_float(src[c]), scale) : KV{};
            }
        }
    }
}

}  // namespace frugal::attention
