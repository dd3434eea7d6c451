#pragma once
// The message of the frugal error a call throws, for tests that assert the message names
// the bad value (not just the exception type).

#include <frugal/core/error.hpp>

#include <string>

namespace frugal::testing {

/// The `what()` of the `Error` (a frugal error type) `f` throws; "" when it throws none.
template <class Error = frugal::error, class F>
std::string error_of(F&& f) {
    try {
        f();
    } catch (const Error& e) {
        return e.what();
    }
    return "";
}

}  // namespace frugal::testing
