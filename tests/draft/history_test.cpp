// The live history against a brute-force model of its documents (which are held, in what
// order, what their substrings count), its file against truncation, corruption and kill -9.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <frugal/draft/drafter.hpp>
#include <frugal/draft/history.hpp>

#include "frugal_test_fixtures.hpp"
#include "frugal_test_temp.hpp"
#include "history_model.hpp"

namespace {

using frugal::draft::live_history;
using frugal::testing::count_in;
using frugal::testing::docs_t;
using frugal::testing::documents_of;
using frugal::testing::history_model;

// The snapshot holds exactly `docs` (oldest first), and its automata count every pattern
// as brute force does over them.
void expect_holds(const frugal::draft::history_snapshot<int>& snap, const docs_t& docs) {
    ASSERT_EQ(documents_of(snap), docs);
    ASSERT_EQ(snap.size(), history_model::tokens(docs));
    ASSERT_EQ(snap.documents(), docs.size());
    for (const std::vector<int>& p : docs_t{{0}, {1, 2}, {3, 3}, {0, 1, 2}, {2, 2, 2, 2}, {1, 0, 3, 1}})
        EXPECT_EQ(count_in(snap, p), count_in(docs, p));
}

docs_t random_docs(std::uint32_t seed, std::size_t n, int max_len = 30) {
    std::mt19937 rng(seed);
    std::uniform_int_distribution<int> tok(0, 3), len(1, max_len);
    docs_t docs(n);
    for (auto& d : docs) {
        const int l = len(rng);
        for (int i = 0; i < l; ++i) d.push_back(tok(rng));
    }
    return docs;
}

TEST(LiveHistory, AddsAndEvictsAsTheModelSays) {
    for (const auto& [bound, young] : {std::pair<std::size_t, std::size_t>{100, 0}, {100, 30}, {1000, 0}, {60, 59}}) {
        live_history<int> h(bound, young);
        history_model model{bound, h.young_tokens(), {}, {}};
        std::mt19937 rng(static_cast<std::uint32_t>(bound + young));
        const auto docs = random_docs(static_cast<std::uint32_t>(bound), 300, 40);
        for (std::size_t i = 0; i < docs.size();) {
            const std::size_t batch = 1 + rng() % 4;
            docs_t pending;
            for (std::size_t k = 0; k < batch && i < docs.size(); ++k, ++i) {
                h.add(docs[i]);
                pending.push_back(docs[i]);
            }
            h.add(std::vector<int>{});  // ignored
            EXPECT_TRUE(h.publish());
            model.publish(pending);
            const auto snap = h.snapshot();
            ASSERT_LE(snap->size(), bound);
            expect_holds(*snap, model.held());
            if (::testing::Test::HasFatalFailure()) return;
        }
        EXPECT_FALSE(h.publish());  // nothing queued
    }
    std::vector<int> huge(250);
    for (std::size_t i = 0; i < huge.size(); ++i) huge[i] = int(i % 7);
    live_history<int> h(100, 20);
    h.add(huge);
    h.publish();
    expect_holds(*h.snapshot(), {std::vector<int>(huge.end() - 80, huge.end())});  // its last 100 - 20 tokens
}

TEST(LiveHistory, ASnapshotNeverChangesUnderItsReader) {
    live_history<int> h(200, 40);
    const auto docs = random_docs(9, 200);
    for (std::size_t i = 0; i < 20; ++i) h.add(docs[i]);
    h.publish();
    const auto held = h.snapshot();
    const docs_t before = documents_of(*held);
    const auto version = held->version();
    for (std::size_t i = 20; i < docs.size(); ++i) {  // many young copies and old rebuilds later
        h.add(docs[i]);
        h.publish();
    }
    EXPECT_GT(h.version(), version);
    EXPECT_EQ(held->version(), version);
    expect_holds(*held, before);
}

TEST(LiveHistory, DraftersFollowNewSnapshots) {
    // A request that started before an output was added drafts from it at its next step,
    // and its match in the young generation carries over from copy to copy.
    live_history<int> h(1 << 12, 1 << 10);
    frugal::draft::drafter<int> d({.max_draft = 3, .history_escape = 1.0}, &h);
    d.begin(std::vector<int>{1, 70, 71});
    EXPECT_TRUE(d.chain().empty());
    h.add(std::vector<int>{70, 71, 72, 73, 74});
    h.publish();
    EXPECT_EQ(std::vector<int>(d.chain().tokens.begin(), d.chain().tokens.end()), (std::vector<int>{72, 73, 74}));
    d.accept(72);
    h.add(std::vector<int>{5, 5, 5});  // a young copy: same lineage, the match stays
    h.publish();
    EXPECT_EQ(d.history_match(), 3u);
    EXPECT_EQ(std::vector<int>(d.chain().tokens.begin(), d.chain().tokens.end()), (std::vector<int>{73, 74}));
    EXPECT_EQ(d.snapshot()->version(), h.version());
}

TEST(LiveHistory, BadBounds) {
    EXPECT_THROW(live_history<int>(0), frugal::invalid_argument);
    EXPECT_THROW(live_history<int>(1), frugal::invalid_argument);
    try {
        live_history<int> h(10, 10);
        ADD_FAILURE() << "no error";
    } catch (const frugal::invalid_argument& e) {
        EXPECT_NE(std::string(e.what()).find("young_tokens = 10"), std::string::npos) << e.what();
    }
}

// ---- the file -------------------------------------------------------------------------------

std::filesystem::path temp_file(const char* name) {
    return frugal::testing::temp_path_for_test(std::string("frugal_draft_") + name);
}

TEST(HistoryFile, SaveLoadRoundTrip) {
    const auto docs = random_docs(3, 12);
    live_history<int> h(10000);
    for (const auto& d : docs) h.add(d);
    h.publish();
    const auto file = temp_file("roundtrip");
    h.save(file);
    const live_history<int> back(file);
    EXPECT_EQ(back.max_tokens(), 10000u);
    expect_holds(*back.snapshot(), docs);
    live_history<int> empty(5);
    empty.save(file);
    EXPECT_EQ(live_history<int>(file).snapshot()->size(), 0u);
    std::filesystem::remove(file);
}

TEST(HistoryFile, TruncatedOrCorruptFilesFailClearly) {
    live_history<int> h(1000);
    for (const auto& d : random_docs(5, 6)) h.add(d);
    h.publish();
    const auto file = temp_file("corrupt");
    h.save(file);
    std::ifstream in(file, std::ios::binary);
    const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    in.close();
    auto write = [&](const std::string& b) { std::ofstream(file, std::ios::binary | std::ios::trunc) << b; };
    auto expect_error = [&](const char* needle) {
        try {
            const live_history<int> loaded(file);
            ADD_FAILURE() << "no error for " << needle;
        } catch (const frugal::runtime_error& e) {
            EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
        }
    };
    for (std::size_t cut : {std::size_t{0}, std::size_t{5}, std::size_t{20}, std::size_t{50}, bytes.size() - 1}) {
        write(bytes.substr(0, cut));
        expect_error("truncated");
    }
    for (std::size_t at : {std::size_t{60}, bytes.size() / 2, bytes.size() - 12}) {  // a flipped token byte
        std::string b = bytes;
        b[at] = char(b[at] ^ 0x5a);
        write(b);
        expect_error("corrupt");
    }
    std::string b = bytes;
    b[0] = 'X';
    write(b);
    expect_error("bad magic");
    write(bytes);
    EXPECT_THROW(live_history<std::int64_t>{file}, frugal::runtime_error);  // another token type
    std::filesystem::remove(file);
    EXPECT_THROW(live_history<int>{file}, frugal::runtime_error);  // missing
}

// Issue 23, item 5: a save killed at any moment leaves the old history or the new one. A
// child process saves two large histories in turn to one file and is killed with SIGKILL
// after a random delay; the file must then load and hold one of the two.
TEST(HistoryFile, SurvivesKillDuringSave) {
    const auto file = temp_file("kill");
    const auto dir = file.parent_path();
    live_history<int> a(1 << 20), b(1 << 20);
    std::mt19937 rng(5);
    for (auto* h : {&a, &b}) {
        std::vector<int> doc(200000);
        for (auto& t : doc) t = int(rng() % 32000);
        h->add(doc);
        h->publish();
    }
    const std::size_t size_a = a.snapshot()->size();
    b.add(std::vector<int>{1, 2, 3});  // b differs from a in size
    b.publish();
    const std::size_t size_b = b.snapshot()->size();
    a.save(file);
    int rounds = 0, killed_mid_save = 0;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (rounds < 60 && std::chrono::steady_clock::now() < deadline) {
        ++rounds;
        const pid_t child = fork();
        ASSERT_GE(child, 0);
        if (child == 0) {
            for (int i = 0;; ++i) (i % 2 == 0 ? b : a).save(file);  // until killed
        }
        std::this_thread::sleep_for(std::chrono::microseconds(500 + rng() % 20000));
        ::kill(child, SIGKILL);
        int status = 0;
        ::waitpid(child, &status, 0);
        killed_mid_save += WIFSIGNALED(status);
        try {
            const live_history<int> loaded(file);
            const std::size_t n = loaded.snapshot()->size();
            EXPECT_TRUE(n == size_a || n == size_b) << "round " << rounds << ": " << n << " tokens";
        } catch (const frugal::runtime_error& e) {
            ADD_FAILURE() << "round " << rounds << ": " << e.what();
        }
    }
    EXPECT_EQ(killed_mid_save, rounds);
    EXPECT_GE(rounds, 10);
    for (const auto& entry : std::filesystem::directory_iterator(dir))  // stray temporary files
        if (entry.path().filename().string().rfind(file.filename().string() + ".tmp.", 0) == 0)
            std::filesystem::remove(entry.path());
    std::filesystem::remove(file);
}

// A file written by the build that defined format version 1 (tests/fixtures) loads with
// the same documents.
TEST(HistoryFormat, ReadsAFileOfVersion1) {
    const auto fixture = frugal::testing::fixture_path("history_v1.bin");
    live_history<int> sample(1000);
    for (int d = 0; d < 5; ++d) {
        std::vector<int> doc;
        for (int i = 0; i < 10 + d * 7; ++i) doc.push_back((i * 31 + d * 7) % 97 - 20);
        sample.add(doc);
    }
    sample.publish();
    if (frugal::testing::writing_fixtures()) sample.save(fixture);
    const live_history<int> loaded(fixture);
    std::vector<std::vector<int>> want, got;
    sample.snapshot()->for_each_document([&](std::span<const int> d) { want.emplace_back(d.begin(), d.end()); });
    loaded.snapshot()->for_each_document([&](std::span<const int> d) { got.emplace_back(d.begin(), d.end()); });
    EXPECT_EQ(got, want);
    EXPECT_EQ(loaded.max_tokens(), sample.max_tokens());
}

}  // namespace
