#pragma once
/// @file
/// The online-softmax state of one query row (running max m, running sum l, unnormalized
/// output o) in fp32 and the exact merge of partial attention results over disjoint key ranges.

#include <cmath>
#include <cstddef>
#include <limits>
#include <span>
#include <vector>

#include "frugal/attention/host_device.hpp"
#include "frugal/core/error.hpp"
#include "frugal/core/matrix_view.hpp"

namespace frugal::attention {

/// The base of the exponent and of the log-sum-exp a softmax state is kept in.
///
/// `two` keeps scores pre-multiplied by log2(e) so the inner loop uses exp2 (as
/// FlashAttention-2 and FlashInfer do); `e` is the natural base of PyTorch's LSE.
enum class softmax_base : unsigned char { e, two };

/// Scalar online-softmax math shared by the CPU driver and the CUDA kernel.
namespace softmax_math {

/// `Base`^x.
template <softmax_base Base>
[[nodiscard]] FRUGAL_HOST_DEVICE inline float exp_in(float x) noexcept {
    if constexpr (Base == softmax_base::two) return ::exp2f(x); else return ::expf(x);
}
/// log_`Base`(x).
template <softmax_base Base>
[[nodiscard]] FRUGAL_HOST_DEVICE inline float log_in(float x) noexcept {
    if constexpr (Base == softmax_base::two) return ::log2f(x); else return ::logf(x);
}

/// Minus infinity, the max of an empty row.
[[nodiscard]] FRUGAL_HOST_DEVICE constexpr float minus_infinity() noexcept { return -HUGE_VALF; }

/// The new running max and the factor that rescales everything accumulated so far.
struct rescale {
    float max;    ///< max(m_old, m_new)
    float alpha;  ///< Base^(m_old - max): 0 when nothing was accumulated yet
    float shift;  ///< the value to subtract before exponentiating new scores (0 if max is -inf)
};

/// Online-softmax step (FlashAttention-2, Alg. 1 line 9-10): folding scores whose max is
/// `tile_max` into a row whose running max is `running_max`.
template <softmax_base Base>
[[nodiscard]] FRUGAL_HOST_DEVICE inline rescale online_rescale(float running_max, float tile_max) noexcept {
    const float m = running_max > tile_max ? running_max : tile_max;
    const float shift = m == minus_infinity() ? 0.0f : m;  // an all-masked row stays at 0
    return {m, running_max == minus_infinity() ? 0.0f : exp_in<Base>(running_max - shift), shift};
}

/// Weights of two partial results in their merge: o = wa * o_a + wb * o_b, l = wa * l_a + wb * l_b.
struct merge_weights {
    float max;
    float a;
    float b;
};

/// The merge of two states with running maxima `max_a`, `max_b` (FlashInfer's state merge).
template <softmax_base Base>
[[nodiscard]] FRUGAL_HOST_DEVICE inline merge_weights merge_scales(float max_a, float max_b) noexcept {
    const rescale r = online_rescale<Base>(max_a, max_b);
    return {r.max, r.alpha, max_b == minus_infinity() ? 0.0f : exp_in<Base>(max_b - r.shift)};
}

/// The factor applied to QK^T in base-2 units: `scale` (0 means 1/sqrt(head_dim)) times
/// log2(e), because the drivers exponentiate in base two.
[[nodiscard]] FRUGAL_HOST_DEVICE inline float score_scale_log2(float scale, std::size_t head_dim) noexcept {
    return (scale > 0.0f ? scale : 1.0f / ::sqrtf(static_cast<float>(head_dim))) * 1.4426950408889634f;
}

/// log-sum-exp in `Base` of a row with running max `max` and running sum `sum`; -inf when empty.
template <softmax_base Base>
[[nodiscard]] FRUGAL_HOST_DEVICE inline float lse(float max, float sum) noexcept {
    return sum > 0.0f ? max + log_in<Base>(sum) : minus_infinity();
}

/// The log-sum-exp of a base-two row state (running max `max`, running sum `sum`) written
/// in `base`, as the drivers return it; -inf for a row without keys.
[[nodiscard]] FRUGAL_HOST_DEVICE inline float lse_from_base_two(float max, float sum, softmax_base base) noexcept {
    const float lse2 = lse<softmax_base::two>(max, sum);
    return base == softmax_base::two || sum <= 0.0f ? lse2 : lse2 * 0.6931471805599453f;
}

}  // namespace softmax_math

/// One query row's partial attention over a key range: running max `max`, running sum
/// `sum` (both in `Base`) and unnormalized output `out` (sum of Base^(s_j - max) v_j).
///
/// Two states over disjoint key ranges merge exactly into the state of their union
/// (`merge_state`), which is how tiled, streamed and prefix-reused attention combine
/// partial results. The base is part of the type, so a base-2 state cannot be merged
/// with a base-e one by mistake.
/// @code
/// using state = frugal::attention::softmax_state<frugal::attention::softmax_base::e>;
/// state prefix = state::from_output(prefix_out_row, prefix_lse);
/// state suffix = state::from_output(suffix_out_row, suffix_lse);
/// frugal::attention::merge_state(prefix, suffix);
/// std::vector<float> row = prefix.normalized();   // attention over prefix + suffix keys
/// @endcode
template <softmax_base Base>
struct softmax_state {
    static constexpr softmax_base base = Base;

    float max = softmax_math::minus_infinity();
    float sum = 0;
    std::vector<float> out;

    softmax_state() = default;
    /// The empty state (no keys yet) of a row of `dim` output features.
    explicit softmax_state(std::size_t dim) : out(dim, 0.0f) {}

    /// The state of a normalized output row and its log-sum-exp in `Base` (what
    /// attention returns with an LSE output): max = lse, sum = 1.
    [[nodiscard]] static softmax_state from_output(std::span<const float> normalized, float lse) {
        FRUGAL_CHECK(!std::isnan(lse), "softmax_state::from_output: LSE is NaN");
        softmax_state s(normalized.size());
        if (lse == softmax_math::minus_infinity()) return s;  // a row that saw no key
        s.max = lse;
        s.sum = 1;
        s.out.assign(normalized.begin(), normalized.end());
        return s;
    }

    /// Folds keys with `scores` (in `Base` units: natural-log scores times log2(e) for
    /// base two; -inf for masked keys) and value rows `values` into the state.
    void absorb(std::span<const float> scores, matrix_view<const float> values) {
        FRUGAL_CHECK(values.rows() == scores.size() && values.cols() == out.size(), "softmax_state::absorb: ",
                     scores.size(), " scores with ", values.rows(), " x ", values.cols(),
                     " values into a state of width ", out.size());
        float tile_max = softmax_math::minus_infinity();
        for (float x : scores) tile_max = x > tile_max ? x : tile_max;
        const auto r = softmax_math::online_rescale<Base>(max, tile_max);
        for (float& o : out) o *= r.alpha;
        sum *= r.alpha;
        for (std::size_t j = 0; j < scores.size(); ++j) {
            const float p = softmax_math::exp_in<Base>(scores[j] - r.shift);
            sum += p;
            for (std::size_t c = 0; c < out.size(); ++c) out[c] += p * values(j, c);
        }
        max = r.max;
    }

    /// log-sum-exp of the scores seen, in `Base`; -inf for an empty state.
    [[nodiscard]] float lse() const noexcept { return softmax_math::lse<Base>(max, sum); }

    /// The attention output o / l (zeros for an empty state).
    [[nodiscard]] std::vector<float> normalized() const {
        std::vector<float> r(out.size(), 0.0f);
        if (sum > 0) for (std::size_t i = 0; i < out.size(); ++i) r[i] = out[i] / sum;
        return r;
    }
};

/// Merges `b` into `a`: afterwards `a` is the state over the union of both key ranges,
/// exactly (up to rounding) what one pass over all keys would give.
/// @code
/// frugal::attention::merge_state(a, b);   // a := a (+) b
/// @endcode
template <softmax_base Base>
void merge_state(softmax_state<Base>& a, const softmax_state<Base>& b) {
    FRUGAL_CHECK(a.out.size() == b.out.size(), "merge_state: output widths ", a.out.size(), " and ",
                 b.out.size(), " differ");
    const auto w = softmax_math::merge_scales<Base>(a.max, b.max);
    for (std::size_t i = 0; i < a.out.size(); ++i) a.out[i] = w.a * a.out[i] + w.b * b.out[i];
    a.sum = w.a * a.sum + w.b * b.sum;
    a.max = w.max;
}

/// The merge of all `states` (order does not matter up to rounding); throws on an empty span.
/// @code
/// auto whole = frugal::attention::merge_states(std::span<const state>(parts));
/// @endcode
template <softmax_base Base>
[[nodiscard]] softmax_state<Base> merge_states(std::span<const softmax_state<Base>> states) {
    FRUGAL_CHECK(!states.empty(), "merge_states: no states to merge");
    softmax_state<Base> r = states.front();
    for (std::size_t i = 1; i < states.size(); ++i) merge_state(r, states[i]);
    return r;
}

/// Merges a normalized output row `out_b` with log-sum-exp `lse_b` into (`out_a`, `lse_a`)
/// in place: the row form of `merge_state` used on attention outputs with an LSE.
/// @code
/// frugal::attention::merge_output<frugal::attention::softmax_base::e>(prefix_row, prefix_lse, suffix_row, suffix_lse);
/// @endcode
template <softmax_base Base>
void merge_output(std::span<float> out_a, float& lse_a, std::span<const float> out_b, float lse_b) {
    FRUGAL_CHECK(out_a.size() == out_b.size(), "merge_output: output widths ", out_a.size(), " and ",
                 out_b.size(), " differ");
    // A NaN or +inf LSE would write NaN into the row; -inf is a partial state that saw no key.
    for (const float lse : {lse_a, lse_b})
        FRUGAL_CHECK(!std::isnan(lse) && lse != std::numeric_limits<float>::infinity(), "merge_output: LSE ", lse,
                     " must be finite or -inf (a row that saw no keys)");
    const auto w = softmax_math::merge_scales<Base>(lse_a, lse_b);
    const float total = w.a + w.b;  // both partial sums are 1 in this form
    if (total == 0.0f) return;   // neither side saw a key
    for (std::size_t i = 0; i < out_a.size(); ++i) out_a[i] = (w.a * out_a[i] + w.b * out_b[i]) / total;
    lse_a = w.max + softmax_math::log_in<Base>(total);
}

}  // namespace frugal::attention
