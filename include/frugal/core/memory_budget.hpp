#pragma once
/// @file
/// memory_budget: a validated byte budget passed to planners.

#include <cmath>
#include <cstddef>

#include "frugal/core/error.hpp"

namespace frugal {

/// A positive number of bytes a planner may use (workspace, resident weights, cache).
///
/// Zero, negative or non-finite budgets are rejected at construction, so every
/// planner receives a usable budget.
/// @code
/// auto budget = frugal::memory_budget::mib(64);
/// bool ok = budget.fits(workspace_bytes);
/// @endcode
class memory_budget {
public:
    explicit constexpr memory_budget(std::size_t bytes) : bytes_(bytes) {
        FRUGAL_CHECK(bytes > 0, "memory_budget: a budget of 0 bytes leaves no room for any work");
    }

    /// A budget of `mebibytes` MiB (fractions allowed), rounded down to whole bytes.
    [[nodiscard]] static memory_budget mib(double mebibytes) {
        FRUGAL_CHECK(std::isfinite(mebibytes) && mebibytes > 0, "memory_budget::mib: budget ",
                     mebibytes, " MiB must be positive and finite");
        const double bytes = std::floor(mebibytes * 1024.0 * 1024.0);
        FRUGAL_CHECK(bytes >= 1 && bytes < 1.8e19, "memory_budget::mib: ", mebibytes,
                     " MiB is not a representable byte count");
        return memory_budget(static_cast<std::size_t>(bytes));
    }

    [[nodiscard]] constexpr std::size_t bytes() const noexcept { return bytes_; }
    [[nodiscard]] constexpr bool fits(std::size_t n) const noexcept { return n <= bytes_; }

    friend constexpr bool operator==(memory_budget, memory_budget) = default;

private:
    std::size_t bytes_;
};

}  // namespace frugal
