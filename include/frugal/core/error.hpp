#pragma once
/// @file
/// frugal's exceptions and the FRUGAL_CHECK family of macros.

#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>
#include <version>

// The failing function's name for check messages: std::source_location where the standard
// library has it (clang 14 with libstdc++ does not), else __func__.
#if defined(__cpp_lib_source_location)
#include <source_location>
#define FRUGAL_DETAIL_FUNCTION_NAME std::source_location::current().function_name()
#else
#define FRUGAL_DETAIL_FUNCTION_NAME __func__
#endif

namespace frugal {

/// Base of every exception frugal throws; catch it to catch them all.
///
/// Each concrete error also derives from the standard exception that fits
/// (`std::invalid_argument`, `std::out_of_range`, `std::runtime_error`), so code that
/// already catches those keeps working.
/// @code
/// try { frugal::matrix_view<float> v(data, 3, 8, 4); }
/// catch (const frugal::error& e) { std::cerr << e.what(); }  // "... stride 4 < cols 8 ..."
/// @endcode
class error {
public:
    virtual ~error() = default;
    [[nodiscard]] virtual const char* what() const noexcept = 0;

protected:
    error() = default;
    error(const error&) = default;
    error& operator=(const error&) = default;
};

namespace detail {
/// Joins a frugal::error to one standard exception type.
template <class Std>
class basic_error : public Std, public error {
public:
    explicit basic_error(const std::string& message) : Std(message) {}
    [[nodiscard]] const char* what() const noexcept override { return Std::what(); }
};
}  // namespace detail

/// Bad input: NaN scores, k > n, empty pools, zero budgets, shape mismatches.
class invalid_argument : public detail::basic_error<std::invalid_argument> {
    using basic_error::basic_error;
};

/// An index or id outside the valid range.
class out_of_range : public detail::basic_error<std::out_of_range> {
    using basic_error::basic_error;
};

/// A failure outside the caller's arguments: I/O, corrupt or truncated files, device errors.
class runtime_error : public detail::basic_error<std::runtime_error> {
    using basic_error::basic_error;
};

namespace detail {
template <class... Parts>
[[nodiscard]] std::string concat(const Parts&... parts) {
    std::ostringstream out;
    (out << ... << parts);
    return out.str();
}

template <class Error, class... Parts>
[[noreturn]] void raise(const char* function, const char* condition, const Parts&... parts) {
    std::string message = concat("frugal: ", parts...);
    if (condition != nullptr) {
        message += concat(" [check '", condition, "' failed in ", function, "]");
    }
    throw Error(message);
}
}  // namespace detail
}  // namespace frugal

/// Throws `Kind` (a frugal error type) with the streamed message parts when `cond` is false.
/// The message should name the offending values:
/// @code
/// FRUGAL_CHECK_AS(frugal::out_of_range, id < size, "id ", id, " >= size ", size);
/// @endcode
#define FRUGAL_CHECK_AS(Kind, cond, ...)                                                   \
    do {                                                                                   \
        if (!(cond)) [[unlikely]] {                                                        \
            ::frugal::detail::raise<Kind>(FRUGAL_DETAIL_FUNCTION_NAME, #cond,              \
                                          __VA_ARGS__);                                    \
        }                                                                                  \
    } while (false)

/// Validates an argument; throws `frugal::invalid_argument` naming the bad values.
/// @code
/// FRUGAL_CHECK(k <= n, "k = ", k, " exceeds the pool size n = ", n);
/// @endcode
#define FRUGAL_CHECK(cond, ...) FRUGAL_CHECK_AS(::frugal::invalid_argument, cond, __VA_ARGS__)

/// Throws `Kind` unconditionally with the streamed message parts.
#define FRUGAL_FAIL(Kind, ...) \
    ::frugal::detail::raise<Kind>(FRUGAL_DETAIL_FUNCTION_NAME, nullptr, __VA_ARGS__)
