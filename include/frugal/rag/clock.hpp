#pragma once
/// @file
/// The clock concept of the RAG scheduler's drivers: the decision core reads no clock, its
/// drivers pass it their time (the wall-clock runtime's steady clock, the simulation's
/// virtual one).

#include <chrono>
#include <concepts>

namespace frugal::rag {

/// Where a driver reads the time, in ms: `now_ms()`, non-decreasing.
/// @code
/// static_assert(frugal::rag::rag_clock<frugal::rag::steady_clock_ms>);
/// @endcode
template <class C>
concept rag_clock = requires(const C& c) {
    { c.now_ms() } -> std::convertible_to<double>;
};

/// `std::chrono::steady_clock` in ms since the clock object was made.
struct steady_clock_ms {
    std::chrono::steady_clock::time_point epoch = std::chrono::steady_clock::now();
    [[nodiscard]] double now_ms() const { return ms_at(std::chrono::steady_clock::now()); }
    /// The clock's reading at `t`.
    [[nodiscard]] double ms_at(std::chrono::steady_clock::time_point t) const {
        return std::chrono::duration<double, std::milli>(t - epoch).count();
    }
};
static_assert(rag_clock<steady_clock_ms>);

}  // namespace frugal::rag
