#pragma once
/// @file
/// frugal's version.

#define FRUGAL_VERSION_MAJOR 0
#define FRUGAL_VERSION_MINOR 1
#define FRUGAL_VERSION_PATCH 0

namespace frugal {
/// The library version as "major.minor.patch".
inline constexpr const char* version = "0.1.0";
}  // namespace frugal
