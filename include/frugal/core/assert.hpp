#pragma once
/// @file
/// FRUGAL_ASSERT: debug-only invariant checks for hot loops.
///
/// Enabled when NDEBUG is not defined, or when FRUGAL_ENABLE_ASSERTS is defined.
/// Define FRUGAL_ASSERT_HANDLER(expr, file, line) before including frugal to route
/// failures elsewhere (the default prints and aborts), or define FRUGAL_ASSERT itself
/// to replace the whole macro.
/// @code
/// #define FRUGAL_ASSERT_HANDLER(expr, file, line) my_log_and_trap(expr, file, line)
/// #include <frugal/frugal.hpp>
/// @endcode

#include <cstdio>
#include <cstdlib>

#ifndef FRUGAL_ASSERT_HANDLER
#define FRUGAL_ASSERT_HANDLER(expr, file, line)                                      \
    (std::fprintf(stderr, "frugal: assertion '%s' failed at %s:%d\n", expr, file, line), \
     std::abort())
#endif

#ifndef FRUGAL_ASSERT
#if !defined(NDEBUG) || defined(FRUGAL_ENABLE_ASSERTS)
#define FRUGAL_ASSERT(cond) \
    ((cond) ? static_cast<void>(0) : static_cast<void>(FRUGAL_ASSERT_HANDLER(#cond, __FILE__, __LINE__)))
#else
#define FRUGAL_ASSERT(cond) static_cast<void>(0)
#endif
#endif
