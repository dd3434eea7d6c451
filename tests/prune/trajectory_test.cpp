// Trajectory files: round trips (stream and crash-safe file), the version-1 format still
// read, and every malformed file of issue 23 (item 2) rejected with a frugal::error and no
// allocation sized by the file's counts.
#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include <frugal/prune/trajectory.hpp>

#include "counting_new.hpp"
#include "frugal_test_temp.hpp"
#include "make_query.hpp"

namespace {

using frugal::testing::make_query;

frugal::prune::trajectory_set small_set() {
    frugal::prune::trajectory_set set;
    set.layers = 3;
    set.queries.push_back(make_query({{0.1f, 0.2f, 0.3f}, {1e-7f, 0.333333343f, 0.999f}}));
    set.queries.push_back(make_query({{-2.5f, 3.25f, 0.0f}}));
    return set;
}

void expect_equal(const frugal::prune::trajectory_set& a, const frugal::prune::trajectory_set& b) {
    ASSERT_EQ(a.layers, b.layers);
    ASSERT_EQ(a.queries.size(), b.queries.size());
    for (std::size_t q = 0; q < a.queries.size(); ++q) {
        ASSERT_EQ(a.queries[q].candidates(), b.queries[q].candidates());
        for (std::size_t c = 0; c < a.queries[q].candidates(); ++c)
            for (std::size_t l = 0; l < a.layers; ++l) EXPECT_EQ(a.queries[q].at(c, l), b.queries[q].at(c, l));
    }
}

frugal::prune::trajectory_set read(const std::string& text) {
    std::istringstream in(text);
    return frugal::prune::read_trajectories(in);
}

// Reading `text` throws frugal::runtime_error whose message holds `expected`, and no
// allocation on the way is larger than the text could justify.
void expect_rejected(const std::string& text, const std::string& expected) {
    auto& allocations = frugal::testing::allocations();
    allocations.start();
    try {
        (void)read(text);
        allocations.stop();
        ADD_FAILURE() << "accepted: " << text;
    } catch (const frugal::runtime_error& e) {
        allocations.stop();
        EXPECT_NE(std::string(e.what()).find(expected), std::string::npos) << e.what() << "\nfor: " << text;
    }
    EXPECT_LT(allocations.largest.load(), 4096 + 16 * text.size()) << text;
}

TEST(Trajectories, RoundTripThroughTheTextFormat) {
    const auto set = small_set();
    std::stringstream io;
    frugal::prune::write_trajectories(io, set, "unit test");
    EXPECT_NE(io.str().find("frugal-trajectories 2\nlayers 3\nqueries 2\n"), std::string::npos);
    EXPECT_EQ(io.str().substr(io.str().size() - 4), "end\n");
    expect_equal(frugal::prune::read_trajectories(io), set);
}

TEST(Trajectories, SaveIsCrashSafeAndLoadReadsItBack) {
    const auto path = frugal::testing::temp_path_for_test("frugal_trajectories");
    { std::ofstream(path) << "old contents"; }
    frugal::prune::save_trajectories(path, small_set(), "unit test");
    expect_equal(frugal::prune::load_trajectories(path), small_set());
    for (const auto& entry : std::filesystem::directory_iterator(path.parent_path()))  // no temporary left
        EXPECT_EQ(entry.path().string().find(path.filename().string() + ".tmp"), std::string::npos) << entry.path();
    std::filesystem::remove(path);
    EXPECT_THROW((void)frugal::prune::load_trajectories(path), frugal::runtime_error);
    EXPECT_THROW(frugal::prune::save_trajectories("/nonexistent/frugal/dir/t.txt", small_set()), frugal::runtime_error);
}

TEST(Trajectories, VersionOneFilesStillRead) {
    const auto set = read("# comment\n\nfrugal-trajectories 1\nlayers 3\nquery 2\n0.1 0.2 0.3\n1e-07 0.333333343 0.999\n"
                          "query 1\n-2.5 3.25 0\n");
    expect_equal(set, small_set());
}

TEST(Trajectories, RejectsRaggedAndCorruptFiles) {
    expect_rejected("", "header");
    expect_rejected("layers 2\nquery 1\n0.1 0.2\n", "header");
    expect_rejected("frugal-trajectories 1\nlayers 0\n", "layers <N>");
    expect_rejected("frugal-trajectories 1\nlayers 2\n", "no query");
    expect_rejected("frugal-trajectories 1\nlayers 2\nquery 2\n0.1 0.2\n0.3\n", "ragged row: 1 scores");
    expect_rejected("frugal-trajectories 1\nlayers 2\nquery 1\n0.1 0.2 0.3\n", "ragged row: 3 scores");
    expect_rejected("frugal-trajectories 1\nlayers 2\nquery 2\n0.1 0.2\n", "after 1 of 2 candidate rows");
    expect_rejected("frugal-trajectories 1\nlayers 2\nquery 1\n0.1 nan\n", "'nan'");
    expect_rejected("frugal-trajectories 1\nlayers 2\nquery 1\n0.1 abc\n", "'abc'");
    expect_rejected("frugal-trajectories 1\nlayers 2\nquery 1\n0.1 0.2x\n", "'0.2x'");
    expect_rejected("frugal-trajectories 1\nlayers 2\nquery 1 extra\n0.1 0.2\n", "query <N>");
}

// Issue 23, item 2, each reproducer.
TEST(Trajectories, HeaderCountsAreValidatedNotTrusted) {
    // candidates x layers wrapped and the reader wrote past its buffer
    expect_rejected("frugal-trajectories 1\nlayers 4\nquery 4611686018427387905\n0.1 0.2 0.3 0.4\n",
                    "after 1 of 4611686018427387905 candidate rows");
    EXPECT_THROW(frugal::prune::score_trajectory(4611686018427387905u, 4), frugal::invalid_argument);
    try {
        frugal::prune::score_trajectory(4611686018427387905u, 4);
    } catch (const frugal::invalid_argument& e) {
        EXPECT_NE(std::string(e.what()).find("4611686018427387905 x 4 overflows"), std::string::npos) << e.what();
    }
    // negative counts parsed as huge unsigned values (std::length_error)
    expect_rejected("frugal-trajectories 2\nlayers -2\n", "'layers -2'");
    expect_rejected("frugal-trajectories 2\nlayers 2\nqueries -1\n", "'queries -1'");
    expect_rejected("frugal-trajectories 2\nlayers 2\nqueries 1\nquery -3\n", "'query -3'");
    expect_rejected("frugal-trajectories 2\nlayers 99999999999999999999999\n", "positive decimal count");
    // a 60-byte file asked for 40 GB
    const std::string small = "frugal-trajectories 2\nlayers 100000\nqueries 1\nquery 100000\n0.5\n";
    expect_rejected(small, "ragged row: 1 scores, expected 100000");
    // the version check was a prefix match
    expect_rejected("frugal-trajectories 10\nlayers 2\nquery 1\n0.1 0.2\n", "header");
    expect_rejected("frugal-trajectories 1x\nlayers 2\nquery 1\n0.1 0.2\n", "header");
    expect_rejected("frugal-trajectories 2 extra\nlayers 2\nqueries 1\nquery 1\n0.1 0.2\nend\n", "header");
}

TEST(Trajectories, EveryTruncationOfAVersionTwoFileIsRejected) {
    std::ostringstream out;
    frugal::prune::write_trajectories(out, small_set());
    const std::string text = out.str();
    for (std::size_t cut = 0; cut + 1 < text.size(); ++cut) {  // all but the final newline
        std::istringstream in(text.substr(0, cut));
        EXPECT_THROW((void)frugal::prune::read_trajectories(in), frugal::runtime_error) << "cut at " << cut;
    }
    expect_equal(read(text.substr(0, text.size() - 1)), small_set());  // only the last newline gone
    expect_rejected(text + "query 1\n1 2 3\n", "content after 'end'");
    std::string wrong_count = text;
    wrong_count.replace(wrong_count.find("queries 2"), 9, "queries 3");
    expect_rejected(wrong_count, "'end' after 2 queries, the header announced 3");
}

}  // namespace
