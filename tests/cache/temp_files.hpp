#pragma once
// A test fixture with a temporary folder of its own and byte-exact file helpers, for the
// persistence tests of the cache module.
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include <gtest/gtest.h>

#include "frugal_test_temp.hpp"

namespace frugal::cache_model {

class temp_files : public ::testing::Test {
protected:
    std::filesystem::path dir = frugal::testing::temp_path_for_test("frugal_cache_files");
    void SetUp() override { std::filesystem::create_directories(dir); }
    void TearDown() override { std::filesystem::remove_all(dir); }
    static std::string read(const std::filesystem::path& p) {
        std::ifstream f(p, std::ios::binary);
        return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
    }
    static void write(const std::filesystem::path& p, const std::string& s) { std::ofstream(p, std::ios::binary) << s; }
};

}  // namespace frugal::cache_model
