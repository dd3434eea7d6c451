#pragma once
// Locating the shared evaluation data (../shared/data) from tests.

#include <cstdlib>
#include <filesystem>
#include <optional>
#include <string_view>

namespace frugal::testing {

/// The evaluation data folder: $FRUGAL_DATA_DIR if set, else ../shared/data beside the
/// source tree; std::nullopt when neither exists (a user's clone).
inline std::optional<std::filesystem::path> shared_data_dir() {
    if (const char* env = std::getenv("FRUGAL_DATA_DIR"); env != nullptr && *env != '\0') {
        if (std::filesystem::is_directory(env)) return std::filesystem::path(env);
        return std::nullopt;
    }
#ifdef FRUGAL_SHARED_DATA_DIR
    if (std::filesystem::is_directory(FRUGAL_SHARED_DATA_DIR)) {
        return std::filesystem::canonical(FRUGAL_SHARED_DATA_DIR);
    }
#endif
    return std::nullopt;
}

/// A file inside the data folder, or std::nullopt when it is not there.
inline std::optional<std::filesystem::path> shared_data_file(std::string_view relative) {
    auto dir = shared_data_dir();
    if (!dir) return std::nullopt;
    auto file = *dir / relative;
    if (!std::filesystem::exists(file)) return std::nullopt;
    return file;
}

}  // namespace frugal::testing

/// Declares `var` as the path of a shared data file, or skips the test with a message
/// saying which file is missing and why.
#define FRUGAL_SHARED_DATA_OR_SKIP(var, relative)                                              \
    const auto var##_opt = ::frugal::testing::shared_data_file(relative);                      \
    if (!var##_opt) {                                                                          \
        GTEST_SKIP() << "shared data file '" << (relative)                                     \
                     << "' not found (../shared/data is absent in a user's clone; set "        \
                        "FRUGAL_DATA_DIR to point at it)";                                     \
    }                                                                                          \
    const std::filesystem::path& var = *var##_opt
