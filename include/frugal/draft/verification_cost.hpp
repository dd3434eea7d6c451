#pragma once
/// @file
/// What verifying drafted tokens costs the engine: the time of one target-model step as a
/// function of the tokens it verifies across the batch (each request's last token plus its
/// draft). Every drafted token is verified by the model and competes with the other
/// requests' tokens, so this is what a draft's size is weighed against (`draft_size.hpp`).

#include <algorithm>
#include <cmath>
#include <concepts>
#include <cstddef>
#include <span>
#include <utility>
#include <vector>

#include "frugal/core/error.hpp"

namespace frugal::draft {

/// An engine's verification cost: `step_ms(tokens)` is the time in ms of one decode step
/// that verifies `tokens` tokens across the batch. It must be > 0, never NaN, and never
/// decrease as `tokens` grows; +infinity means the engine cannot verify that many (a
/// drafter told so drafts nothing). The draft-size choice checks each value it reads and
/// refuses a model that breaks these rules (`frugal::invalid_argument`, naming the value).
/// @code
/// struct my_engine_cost { double step_ms(std::size_t tokens) const { return table_lookup(tokens); } };
/// static_assert(frugal::draft::verification_cost<my_engine_cost>);
/// @endcode
template <class M>
concept verification_cost = requires(const M& m, std::size_t tokens) {
    { m.step_ms(tokens) } -> std::convertible_to<double>;
};

/// The default model, a roofline: a decode step reads the weights once (`weights_ms`) and
/// computes `ms_per_token` for each verified token, and takes the larger of the two. Below
/// the knee (`weights_ms / ms_per_token` tokens) drafted tokens ride along for free; past
/// it each costs `ms_per_token`.
/// @code
/// auto cost = frugal::draft::roofline_cost::h100_7b();          // 4.18 ms, knee at 149 tokens
/// auto mine = frugal::draft::roofline_cost::from_hardware(2.5e9, 50e9, 2.5e9, 1e12);  // a 1B model on a CPU
/// double ms = cost.step_ms(32 * 4);                             // 32 requests, 3 drafted tokens each
/// @endcode
class roofline_cost {
public:
    /// A step of max(`weights_ms`, `ms_per_token` x tokens); `weights_ms` finite and > 0,
    /// `ms_per_token` finite and >= 0.
    roofline_cost(double weights_ms, double ms_per_token) : weights_ms_(weights_ms), ms_per_token_(ms_per_token) {
        FRUGAL_CHECK(std::isfinite(weights_ms) && weights_ms > 0, "roofline_cost: weights_ms must be finite and > 0, got ",
                     weights_ms);
        FRUGAL_CHECK(std::isfinite(ms_per_token) && ms_per_token >= 0,
                     "roofline_cost: ms_per_token must be finite and >= 0, got ", ms_per_token);
    }

    /// From the hardware: `weight_bytes` read at `bytes_per_s` once per step, and
    /// `flops_per_token` (about 2 x parameters) at `flops_per_s` (the sustained rate).
    static roofline_cost from_hardware(double weight_bytes, double bytes_per_s, double flops_per_token,
                                       double flops_per_s) {
        for (const auto& [name, v] : {std::pair{"weight_bytes", weight_bytes}, std::pair{"bytes_per_s", bytes_per_s},
                                      std::pair{"flops_per_token", flops_per_token}, std::pair{"flops_per_s", flops_per_s}})
            FRUGAL_CHECK(std::isfinite(v) && v > 0, "roofline_cost::from_hardware: ", name,
                         " must be finite and > 0, got ", v);
        return {1e3 * weight_bytes / bytes_per_s, 1e3 * flops_per_token / flops_per_s};
    }

    /// A 7B model in 16-bit weights on an H100: 14 GB read at 3.35 TB/s (4.18 ms a step),
    /// 14 GFLOP a token at 500 TFLOP/s sustained (0.028 ms a token).
    static roofline_cost h100_7b() { return from_hardware(14e9, 3.35e12, 14e9, 5e14); }

    /// A 1B model in 16-bit weights on a server CPU: 2.5 GB read at 50 GB/s (50 ms a step),
    /// 2.5 GFLOP a token at 1 TFLOP/s (2.5 ms a token): the knee at 20 tokens, so a CPU
    /// engine gains from drafts only at small batches.
    static roofline_cost cpu_1b() { return from_hardware(2.5e9, 50e9, 2.5e9, 1e12); }

    /// The step time for `tokens` verified tokens.
    [[nodiscard]] double step_ms(std::size_t tokens) const noexcept {
        return std::max(weights_ms_, ms_per_token_ * static_cast<double>(tokens));
    }
    [[nodiscard]] double weights_ms() const noexcept { return weights_ms_; }
    [[nodiscard]] double ms_per_token() const noexcept { return ms_per_token_; }

private:
    double weights_ms_, ms_per_token_;
};

/// An engine's measured step times: `(tokens, ms)` points, linear between them, the first
/// point's time below it and the last segment's slope beyond the last (a compute-bound
/// step grows linearly). Points in increasing `tokens`, times finite, > 0 and never
/// decreasing.
/// @code
/// frugal::draft::measured_cost cost({{1, 21.0}, {64, 22.5}, {256, 41.0}, {1024, 160.0}});  // timed by the engine
/// @endcode
class measured_cost {
public:
    struct point {
        std::size_t tokens;
        double ms;
    };
    explicit measured_cost(std::vector<point> points) : points_(std::move(points)) {
        FRUGAL_CHECK(!points_.empty(), "measured_cost: no points");
        for (std::size_t i = 0; i < points_.size(); ++i) {
            FRUGAL_CHECK(std::isfinite(points_[i].ms) && points_[i].ms > 0, "measured_cost: point ", i, " (",
                         points_[i].tokens, " tokens) has time ", points_[i].ms, " ms (must be finite and > 0)");
            if (i == 0) continue;
            FRUGAL_CHECK(points_[i].tokens > points_[i - 1].tokens, "measured_cost: point ", i, " has ",
                         points_[i].tokens, " tokens, not more than point ", i - 1, "'s ", points_[i - 1].tokens);
            FRUGAL_CHECK(points_[i].ms >= points_[i - 1].ms, "measured_cost: time decreases from ", points_[i - 1].ms,
                         " ms at ", points_[i - 1].tokens, " tokens to ", points_[i].ms, " ms at ", points_[i].tokens);
        }
    }
    [[nodiscard]] double step_ms(std::size_t tokens) const noexcept {
        const auto after = std::upper_bound(points_.begin(), points_.end(), tokens,
                                            [](std::size_t t, const point& p) { return t < p.tokens; });
        if (after == points_.begin()) return points_.front().ms;
        if (points_.size() == 1) return points_.front().ms;
        // Interpolate inside a segment, or extend the last one.
        const auto hi = after == points_.end() ? points_.end() - 1 : after, lo = hi - 1;
        const double slope = (hi->ms - lo->ms) / static_cast<double>(hi->tokens - lo->tokens);
        return lo->ms + slope * (static_cast<double>(tokens) - static_cast<double>(lo->tokens));
    }
    [[nodiscard]] std::span<const point> points() const noexcept { return points_; }

private:
    std::vector<point> points_;
};

static_assert(verification_cost<roofline_cost>);
static_assert(verification_cost<measured_cost>);

}  // namespace frugal::draft
