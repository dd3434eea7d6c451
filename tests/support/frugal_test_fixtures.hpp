#pragma once
// Files written by an earlier build of frugal, committed under tests/fixtures/, that the
// current build must keep reading (or refuse by name, when a format's version was bumped
// on purpose).

#include <cstdlib>
#include <filesystem>
#include <string_view>

namespace frugal::testing {

/// tests/fixtures/`name`.
inline std::filesystem::path fixture_path(std::string_view name) {
    return std::filesystem::path(FRUGAL_TEST_FIXTURE_DIR) / name;
}

/// Whether the tests should write their fixtures instead of reading them: set
/// FRUGAL_WRITE_FIXTURES=1 once, with the build that defines a format's new version, and
/// commit the files with the version in their names.
inline bool writing_fixtures() {
    const char* v = std::getenv("FRUGAL_WRITE_FIXTURES");
    return v != nullptr && *v != '\0' && *v != '0';
}

}  // namespace frugal::testing
