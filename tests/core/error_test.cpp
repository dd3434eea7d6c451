#include <frugal/core/error.hpp>
#include <frugal/core/version.hpp>

#include <gtest/gtest.h>

#include <stdexcept>
#include <string>

namespace {

int checked_div(int a, int b) {
    FRUGAL_CHECK(b != 0, "checked_div: divisor is ", b, " for dividend ", a);
    return a / b;
}

TEST(Error, CheckPassesThroughWhenTrue) { EXPECT_EQ(checked_div(7, 2), 3); }

TEST(Error, CheckThrowsInvalidArgumentNamingValues) {
    try {
        (void)checked_div(7, 0);
        FAIL() << "expected a throw";
    } catch (const frugal::error& e) {
        const std::string what = e.what();
        EXPECT_NE(what.find("divisor is 0 for dividend 7"), std::string::npos) << what;
        EXPECT_NE(what.find("b != 0"), std::string::npos) << what;
        EXPECT_EQ(what.rfind("frugal: ", 0), 0u) << what;
    }
}

TEST(Error, ErrorsAreAlsoStandardExceptionsOfTheFittingKind) {
    EXPECT_THROW((void)checked_div(1, 0), std::invalid_argument);
    EXPECT_THROW(FRUGAL_CHECK_AS(frugal::out_of_range, false, "id ", 9), std::out_of_range);
    EXPECT_THROW(FRUGAL_FAIL(frugal::runtime_error, "corrupt file"), std::runtime_error);
    EXPECT_THROW(FRUGAL_FAIL(frugal::runtime_error, "corrupt file"), frugal::error);
    try {
        FRUGAL_FAIL(frugal::runtime_error, "truncated at byte ", 12);
    } catch (const std::exception& e) {
        EXPECT_STREQ(e.what(), "frugal: truncated at byte 12");
    }
}

TEST(Error, ConditionIsEvaluatedOnce) {
    int calls = 0;
    auto count = [&] { return ++calls > 0; };
    FRUGAL_CHECK(count(), "never");
    EXPECT_EQ(calls, 1);
}

TEST(Version, HeaderMatchesTheCMakeProjectVersion) { EXPECT_STREQ(frugal::version, FRUGAL_CMAKE_VERSION); }

}  // namespace
