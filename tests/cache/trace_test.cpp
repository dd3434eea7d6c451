// Published numbers: LRU and ARC on the ARC paper's OLTP trace, LRU on the LIRS traces (hit counts of
// the data README's independent simulator), S3-FIFO and LIRS against libCacheSim's hit ratios on the
// same traces (issue 21's table, measured with libCacheSim side by side), and the trace readers on
// small files.
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <tuple>
#include <vector>

#include <gtest/gtest.h>

#include <frugal/cache/arc_policy.hpp>
#include <frugal/cache/basic_cache.hpp>
#include <frugal/cache/lirs_policy.hpp>
#include <frugal/cache/lru_policy.hpp>
#include <frugal/cache/s3fifo_policy.hpp>

#include "cache_trace.hpp"
#include "frugal_test_data.hpp"
#include "frugal_test_temp.hpp"

namespace {

template <class Policy = frugal::cache::lru_policy>
std::uint64_t hits(const std::vector<frugal::bench::trace_request>& trace, std::size_t capacity) {
    frugal::cache::basic_cache<std::uint64_t, char, Policy> c(capacity);
    for (const auto& r : trace)
        if (c.get(r.key) == nullptr) c.put(r.key, 'x');
    return c.stats().hits;
}
std::uint64_t lru_hits(const std::vector<frugal::bench::trace_request>& trace, std::size_t capacity) {
    return hits(trace, capacity);
}

TEST(CacheTraces, LruReproducesTheArcPaperOnOltp) {
    FRUGAL_SHARED_DATA_OR_SKIP(path, "cache_traces/arc/OLTP.lis.zst");
    const auto trace = frugal::bench::read_trace(path, "arc");
    ASSERT_EQ(trace.size(), 914145u);
    // Megiddo & Modha, FAST'03, Table IV: 32.83, 42.47, 53.65, 60.70, 64.63 %.
    const std::vector<std::pair<std::size_t, double>> published = {
        {1000, 32.83}, {2000, 42.47}, {5000, 53.65}, {10000, 60.70}, {15000, 64.63}};
    for (auto [capacity, percent] : published) {
        const double got = 100.0 * static_cast<double>(lru_hits(trace, capacity)) / static_cast<double>(trace.size());
        EXPECT_NEAR(got, percent, 0.005) << capacity << " pages";
    }
}

TEST(CacheTraces, ArcReproducesTheArcPaperOnOltp) {
    FRUGAL_SHARED_DATA_OR_SKIP(path, "cache_traces/arc/OLTP.lis.zst");
    const auto trace = frugal::bench::read_trace(path, "arc");
    ASSERT_EQ(trace.size(), 914145u);
    // Megiddo & Modha, FAST'03, Table IV, the ARC column: 38.93, 46.08, 55.25, 61.87, 65.40 %.
    // Fig. 4 with a real-valued p reproduces four of the five to two decimals; at 1000 pages it
    // gives 38.945 % (integer or rounded adaptation steps are further off at every size).
    const std::vector<std::tuple<std::size_t, double, double>> published = {
        {1000, 38.93, 0.02}, {2000, 46.08, 0.005}, {5000, 55.25, 0.005}, {10000, 61.87, 0.005}, {15000, 65.40, 0.005}};
    for (auto [capacity, percent, tolerance] : published) {
        const double got =
            100.0 * static_cast<double>(hits<frugal::cache::arc_policy>(trace, capacity)) / static_cast<double>(trace.size());
        EXPECT_NEAR(got, percent, tolerance) << capacity << " pages";
    }
}

TEST(CacheTraces, LruMatchesTheIndependentSimulatorOnLirsTraces) {
    FRUGAL_SHARED_DATA_OR_SKIP(gli, "cache_traces/lirs/gli.trace.gz");
    FRUGAL_SHARED_DATA_OR_SKIP(loop, "cache_traces/lirs/loop.trace.gz");
    const auto g = frugal::bench::read_trace(gli, "lines");
    const auto l = frugal::bench::read_trace(loop, "lines");
    ASSERT_EQ(g.size(), 6015u);
    ASSERT_EQ(l.size(), 505500u);
    EXPECT_EQ(lru_hits(g, 1000), 674u);
    EXPECT_EQ(lru_hits(g, 2000), 3453u);
    EXPECT_EQ(lru_hits(l, 512), 0u);
    EXPECT_EQ(lru_hits(l, 2000), 504489u);
}

// One point of issue 21's table: a bundled trace, its format, a capacity and libCacheSim's hit
// ratio there (percent, two decimals; unit sizes, default parameters).
struct libcachesim_point {
    const char* trace;
    const char* format;
    std::size_t capacity;
    double percent;
};

// Replays each point with `Policy`; skips (with the message of FRUGAL_SHARED_DATA_OR_SKIP) when
// the shared data is absent.
template <class Policy>
void expect_libcachesim(const std::vector<libcachesim_point>& points) {
    for (const auto& p : points) {
        const auto path = frugal::testing::shared_data_file(p.trace);
        if (!path) GTEST_SKIP() << "shared data file '" << p.trace << "' not found (set FRUGAL_DATA_DIR to point at it)";
        const auto trace = frugal::bench::read_trace(*path, p.format);
        const double got = 100.0 * static_cast<double>(hits<Policy>(trace, p.capacity)) / static_cast<double>(trace.size());
        EXPECT_NEAR(got, p.percent, 0.005) << p.trace << " @ " << p.capacity;
    }
}

// libCacheSim's S3-FIFO (S3FIFOv0.c, the paper's algorithm): the best libCacheSim policy at
// these points.
TEST(CacheTraces, S3FifoReproducesLibCacheSim) {
    const char* oltp = "cache_traces/arc/OLTP.lis.zst";
    expect_libcachesim<frugal::cache::s3fifo_policy>({{oltp, "arc", 1000, 40.84},
                                                      {oltp, "arc", 2000, 47.01},
                                                      {oltp, "arc", 5000, 55.88},
                                                      {oltp, "arc", 10000, 62.64},
                                                      {oltp, "arc", 15000, 66.04},
                                                      {"cache_traces/lirs/multi1.trace.gz", "lines", 100, 43.24},
                                                      {"cache_traces/lirs/sprite.trace.gz", "lines", 500, 78.94}});
}

// libCacheSim's LIRS (LIRS.c) where it is the best libCacheSim policy. At gli @ 100 libCacheSim
// gives 6.17%: with a one-entry HIR queue, a hit on a queued HIR entry evicts that very entry
// from the queue yet leaves it resident uncounted, so it holds 101 entries on 837 of the 6015
// requests; frugal evicts it (6.12%).
TEST(CacheTraces, LirsReproducesLibCacheSim) {
    const char* gli = "cache_traces/lirs/gli.trace.gz";
    const char* loop = "cache_traces/lirs/loop.trace.gz";
    const char* multi1 = "cache_traces/lirs/multi1.trace.gz";
    expect_libcachesim<frugal::cache::lirs_policy>({{gli, "lines", 250, 16.03},
                                                    {gli, "lines", 1000, 50.72},
                                                    {loop, "lines", 100, 9.77},
                                                    {loop, "lines", 250, 24.48},
                                                    {multi1, "lines", 250, 49.53},
                                                    {multi1, "lines", 500, 55.91}});
}

class TraceFiles : public ::testing::Test {
protected:
    std::filesystem::path dir = frugal::testing::temp_path_for_test("frugal_trace");
    void SetUp() override { std::filesystem::create_directories(dir); }
    void TearDown() override { std::filesystem::remove_all(dir); }
    std::filesystem::path write(const std::string& name, const std::string& bytes) {
        std::ofstream(dir / name, std::ios::binary) << bytes;
        return dir / name;
    }
};

TEST_F(TraceFiles, FormatsParse) {
    const auto lines = frugal::bench::read_trace(write("a.txt", "5\r\n*\r\n\r\n7\r\n5\r\n"), "lines");
    ASSERT_EQ(lines.size(), 3u);
    EXPECT_EQ(lines[1].key, 7u);
    const auto arc = frugal::bench::read_trace(write("b.lis", "10 3 0 1\n4 1 0 2\n"), "arc");
    ASSERT_EQ(arc.size(), 4u);
    EXPECT_EQ(arc[2].key, 12u);
    EXPECT_EQ(arc[3].key, 4u);
    std::string rec(24, '\0');
    const std::uint64_t id = 99;
    const std::uint32_t size = 4096;
    std::memcpy(rec.data() + 4, &id, 8);
    std::memcpy(rec.data() + 12, &size, 4);
    const auto bin = frugal::bench::read_trace(write("c.bin", rec + rec), "oracle-bin");
    ASSERT_EQ(bin.size(), 2u);
    EXPECT_EQ(bin[1].key, 99u);
    EXPECT_EQ(bin[1].size, 4096u);
}

TEST_F(TraceFiles, BadInputIsAClearError) {
    EXPECT_THROW(frugal::bench::read_trace(write("d.bin", std::string(25, '\0')), "oracle-bin"), frugal::runtime_error);
    EXPECT_THROW(frugal::bench::read_trace(write("e.txt", "12\nx3\n"), "lines"), frugal::runtime_error);
    EXPECT_THROW(frugal::bench::read_trace(write("f.gz", "\x1f\x8b garbage"), "lines"), frugal::runtime_error);
    EXPECT_THROW(frugal::bench::read_trace(write("g.lis", "1 2 3\n"), "arc"), frugal::runtime_error);
    EXPECT_THROW(frugal::bench::read_trace(dir / "missing", "lines"), frugal::runtime_error);
    // Issue 23, item 10: a 17-byte record asking for 2^32 requests is refused, not allocated.
    try {
        (void)frugal::bench::read_trace(write("h.lis", "1 4294967296 0 1\n"), "arc");
        ADD_FAILURE() << "a run of 2^32 pages was accepted";
    } catch (const frugal::runtime_error& e) {
        EXPECT_NE(std::string(e.what()).find("asks for 4294967296 pages"), std::string::npos) << e.what();
    }
    EXPECT_THROW(frugal::bench::read_trace(write("i.lis", "18446744073709551615 2 0 1\n"), "arc"), frugal::runtime_error);
}

}  // namespace
