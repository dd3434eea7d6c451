#pragma once
/// @file
/// HyperGen's per-step memory estimate of the prefill stage (hypergen.txt 3.2, Table 1)
/// and its memory-pressure classification for a device memory limit.

#include <array>
#include <cstddef>
#include <cstdint>
#include <limits>

#include "frugal/core/error.hpp"
#include "frugal/core/memory_budget.hpp"

namespace frugal::attention {

/// The five steps of one transformer block's prefill (HyperGen 2.2).
enum class prefill_step : unsigned char { qkv, attention_score, softmax, attention_output, mlp };

/// All steps in execution order.
inline constexpr std::array<prefill_step, 5> prefill_steps = {prefill_step::qkv, prefill_step::attention_score,
                                                              prefill_step::softmax, prefill_step::attention_output,
                                                              prefill_step::mlp};

/// The sizes Table 1 is written in: batch `b`, prompt length `s`, attention hidden size
/// `h1`, MLP hidden size `h2`, attention heads `n`, and bytes per element.
/// @code
/// frugal::attention::prefill_dims opt30b{.b = 1, .s = 4096, .h1 = 7168, .h2 = 28672, .n = 56, .element_bytes = 2};
/// @endcode
struct prefill_dims {
    std::uint64_t b = 1;
    std::uint64_t s = 0;
    std::uint64_t h1 = 0;
    std::uint64_t h2 = 0;
    std::uint64_t n = 1;
    std::uint64_t element_bytes = 4;
};

/// Peak and retained memory of one step, in elements and bytes.
struct step_memory {
    std::uint64_t peak_elements = 0;
    std::uint64_t retained_elements = 0;
    std::uint64_t element_bytes = 4;
    [[nodiscard]] constexpr std::uint64_t peak_bytes() const noexcept { return peak_elements * element_bytes; }
    [[nodiscard]] constexpr std::uint64_t retained_bytes() const noexcept { return retained_elements * element_bytes; }
};

namespace detail {
[[nodiscard]] constexpr std::uint64_t checked_mul(std::uint64_t a, std::uint64_t b) {
    FRUGAL_CHECK(a == 0 || b <= std::numeric_limits<std::uint64_t>::max() / a, "prefill memory: ", a, " * ", b,
                 " overflows 64 bits");
    return a * b;
}
}  // namespace detail

/// HyperGen Table 1: peak and retained memory of `step` for `dims`.
///
/// | step | peak | retained |
/// |---|---|---|
/// | QKV | 4bsh1 + 3h1^2 | 4bsh1 |
/// | attention score | 4bsh1 + nbs^2 | 2bsh1 + nbs^2 |
/// | softmax | 2bsh1 + 2nbs^2 | 2bsh1 + nbs^2 |
/// | attention output | 3bsh1 + h1^2 + nbs^2 | bsh1 |
/// | MLP | 2bsh1 + 2h1h2 + bsh2 | bsh1 |
/// @code
/// auto m = frugal::attention::estimate_step_memory(frugal::attention::prefill_step::softmax, dims);
/// bool fits = m.peak_bytes() <= limit;
/// @endcode
[[nodiscard]] constexpr step_memory estimate_step_memory(prefill_step step, const prefill_dims& d) {
    using detail::checked_mul;
    const std::uint64_t bsh1 = checked_mul(checked_mul(d.b, d.s), d.h1);
    const std::uint64_t bsh2 = checked_mul(checked_mul(d.b, d.s), d.h2);
    const std::uint64_t nbs2 = checked_mul(checked_mul(d.n, d.b), checked_mul(d.s, d.s));
    const std::uint64_t h1h1 = checked_mul(d.h1, d.h1);
    const std::uint64_t h1h2 = checked_mul(d.h1, d.h2);
    switch (step) {
        case prefill_step::qkv: return {4 * bsh1 + 3 * h1h1, 4 * bsh1, d.element_bytes};
        case prefill_step::attention_score: return {4 * bsh1 + nbs2, 2 * bsh1 + nbs2, d.element_bytes};
        case prefill_step::softmax: return {2 * bsh1 + 2 * nbs2, 2 * bsh1 + nbs2, d.element_bytes};
        case prefill_step::attention_output: return {3 * bsh1 + h1h1 + nbs2, bsh1, d.element_bytes};
        case prefill_step::mlp: return {2 * bsh1 + 2 * h1h2 + bsh2, bsh1, d.element_bytes};
    }
    FRUGAL_FAIL(invalid_argument, "estimate_step_memory: unknown step ", static_cast<int>(step));
}

/// HyperGen's deployment classes (3.2, "Computation scheduling").
enum class memory_pressure : unsigned char {
    none,      ///< every step fits the limit
    moderate,  ///< only softmax exceeds it: softmax is partitioned in place (Figure 3a)
    severe,    ///< score, softmax and output exceed it: all three are partitioned, results concatenated in host memory (Figure 3b)
};

/// Classifies a device memory `limit` for `dims` by Table 1's peaks. A limit under which
/// softmax fits but the score or output step does not is classified severe (those steps
/// need the severe-pressure partitioning). Throws when QKV or MLP do not fit: HyperGen
/// partitions only the three attention steps.
/// @code
/// auto p = frugal::attention::classify_memory_pressure(dims, frugal::memory_budget(8ull << 30));
/// @endcode
[[nodiscard]] constexpr memory_pressure classify_memory_pressure(const prefill_dims& d, memory_budget limit) {
    const auto fits = [&](prefill_step s) { return estimate_step_memory(s, d).peak_bytes() <= limit.bytes(); };
    FRUGAL_CHECK(fits(prefill_step::qkv) && fits(prefill_step::mlp), "classify_memory_pressure: the QKV (",
                 estimate_step_memory(prefill_step::qkv, d).peak_bytes(), " bytes) or MLP (",
                 estimate_step_memory(prefill_step::mlp, d).peak_bytes(), " bytes) step exceeds the limit of ",
                 limit.bytes(), " bytes; HyperGen partitions only the attention steps");
    if (fits(prefill_step::attention_score) && fits(prefill_step::softmax) && fits(prefill_step::attention_output)) {
        return memory_pressure::none;
    }
    if (fits(prefill_step::attention_score) && fits(prefill_step::attention_output)) return memory_pressure::moderate;
    return memory_pressure::severe;
}

}  // namespace frugal::attention
