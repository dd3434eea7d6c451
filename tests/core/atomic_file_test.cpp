// write_file_atomically: the file holds the new bytes, a failed save leaves the old file,
// and kill -9 at random moments during saves never leaves a file that is neither the old
// nor the new contents (oracle: the two byte strings the saver alternates between).
#include <frugal/core/atomic_file.hpp>

#include <gtest/gtest.h>

#include <csignal>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include <sys/wait.h>
#include <unistd.h>

#include "frugal_test_temp.hpp"

namespace {

std::string read_all(const std::filesystem::path& p) {
    std::ifstream f(p, std::ios::binary);
    return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

TEST(AtomicFile, WritesAndReplaces) {
    const auto dir = frugal::testing::temp_path_for_test("atomic");
    std::filesystem::remove_all(dir);
    std::filesystem::create_directories(dir);
    const auto path = dir / "f.bin";
    frugal::write_file_atomically(path, std::string_view("first"));
    EXPECT_EQ(read_all(path), "first");
    frugal::write_file_atomically(path, std::string_view("second, longer"));
    EXPECT_EQ(read_all(path), "second, longer");
    EXPECT_EQ(std::distance(std::filesystem::directory_iterator(dir), std::filesystem::directory_iterator()), 1);
    std::filesystem::remove_all(dir);
}

TEST(AtomicFile, FailureNamesThePathAndLeavesNoTemporary) {
    const auto dir = frugal::testing::temp_path_for_test("atomic_missing");
    std::filesystem::remove_all(dir);
    try {
        frugal::write_file_atomically(dir / "sub" / "f.bin", std::string_view("x"));
        FAIL() << "expected a throw";
    } catch (const frugal::runtime_error& e) {
        EXPECT_NE(std::string(e.what()).find("f.bin"), std::string::npos) << e.what();
    }
    EXPECT_FALSE(std::filesystem::exists(dir));
}

TEST(AtomicFile, SurvivesKillDuringSave) {
    const auto dir = frugal::testing::temp_path_for_test("atomic_kill");
    std::filesystem::remove_all(dir);
    std::filesystem::create_directories(dir);
    const auto path = dir / "f.bin";
    const std::string a(3 << 20, 'a'), b(1 << 20, 'b');
    frugal::write_file_atomically(path, std::string_view(a));
    for (int round = 0; round < 20; ++round) {
        const pid_t child = fork();
        ASSERT_GE(child, 0);
        if (child == 0) {
            for (int i = 0;; ++i) frugal::write_file_atomically(path, std::string_view(i % 2 ? a : b));
        }
        usleep(static_cast<useconds_t>(2000 + 3000 * (round % 7)));
        kill(child, SIGKILL);
        int status = 0;
        waitpid(child, &status, 0);
        const std::string got = read_all(path);
        EXPECT_TRUE(got == a || got == b) << "round " << round << ": " << got.size() << " bytes";
    }
    std::filesystem::remove_all(dir);
}

}  // namespace
