#include <frugal/core/memory_budget.hpp>

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>

namespace {

TEST(MemoryBudget, HoldsBytesAndTestsFit) {
    frugal::memory_budget b(1000);
    EXPECT_EQ(b.bytes(), 1000u);
    EXPECT_TRUE(b.fits(1000));
    EXPECT_FALSE(b.fits(1001));
    EXPECT_EQ(frugal::memory_budget::mib(2).bytes(), 2u * 1024 * 1024);
    EXPECT_EQ(frugal::memory_budget::mib(0.5).bytes(), 512u * 1024);
}

TEST(MemoryBudget, ZeroNegativeAndNonFiniteBudgetsAreErrors) {
    try {
        frugal::memory_budget zero(0);
        FAIL();
    } catch (const frugal::error& e) {
        EXPECT_NE(std::string(e.what()).find("0 bytes"), std::string::npos) << e.what();
    }
    EXPECT_THROW((void)frugal::memory_budget::mib(-1), frugal::invalid_argument);
    EXPECT_THROW((void)frugal::memory_budget::mib(std::nan("")), frugal::invalid_argument);
    EXPECT_THROW((void)frugal::memory_budget::mib(std::numeric_limits<double>::infinity()), frugal::invalid_argument);
    EXPECT_THROW((void)frugal::memory_budget::mib(1e-9), frugal::invalid_argument);  // < 1 byte
}

}  // namespace
