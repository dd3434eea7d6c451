#pragma once
// Temporary files of tests.

#include <filesystem>
#include <string>
#include <string_view>

#include <gtest/gtest.h>

namespace frugal::testing {

/// A path in the temp folder named after `prefix` and the running test. ctest runs the tests
/// of one binary in parallel processes, so a name must not come from something they may
/// share, such as GoogleTest's time-based random seed.
inline std::filesystem::path temp_path_for_test(std::string_view prefix) {
    const ::testing::TestInfo* test = ::testing::UnitTest::GetInstance()->current_test_info();
    return std::filesystem::temp_directory_path() /
           (std::string(prefix) + "_" + test->test_suite_name() + "_" + test->name());
}

}  // namespace frugal::testing
