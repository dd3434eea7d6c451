#include <frugal/schedule/timeline.hpp>

#include <gtest/gtest.h>

#include <cstdint>
#include <string>

#include "frugal_test_errors.hpp"

#include <vector>

namespace {

using frugal::schedule::resource;

// Double buffering of three layers, worked out by hand:
//   io:      L0 [0,2)  L1 [2,4)  L2 [4,6)
//   compute:           C0 [2,5)  C1 [5,8)  C2 [8,11)
// L2 may start only after C0 released its buffer (two buffers): L2 waits for C0 -> [5,7).
TEST(Timeline, DoubleBufferedLayersHandComputed) {
    frugal::schedule::timeline t;
    const auto l0 = t.add(resource::io, 2.0, {}, 10);
    const auto l1 = t.add(resource::io, 2.0, {}, 10);
    const auto c0 = t.add(resource::compute, 3.0, {l0}, 0, 10);
    const auto l2 = t.add(resource::io, 2.0, {c0}, 10);
    const auto c1 = t.add(resource::compute, 3.0, {l1}, 0, 10);
    const auto c2 = t.add(resource::compute, 3.0, {l2}, 0, 10);
    const auto r = t.simulate();
    EXPECT_DOUBLE_EQ(r.start[l2], 5.0);
    EXPECT_DOUBLE_EQ(r.finish[l2], 7.0);
    EXPECT_DOUBLE_EQ(r.start[c1], 5.0);
    EXPECT_DOUBLE_EQ(r.start[c2], 8.0);
    EXPECT_DOUBLE_EQ(r.makespan, 11.0);
    EXPECT_DOUBLE_EQ(r.busy_time(resource::compute), 9.0);
    EXPECT_DOUBLE_EQ(r.idle_time(resource::compute), 2.0);
    EXPECT_DOUBLE_EQ(r.busy_time(resource::io), 6.0);
    EXPECT_DOUBLE_EQ(r.idle_time(resource::io), 5.0);
    // Two buffers at most: L2 acquires at t=5, the instant C0 releases.
    EXPECT_EQ(r.peak_resident_bytes, 20u);
}

TEST(Timeline, PerResourceOrderIsInsertionOrder) {
    // The second compute task is ready at 0 but waits behind the first, which waits for
    // the load: compute runs [3,4) then [4,5).
    frugal::schedule::timeline t;
    const auto load = t.add(resource::io, 3.0);
    const auto a = t.add(resource::compute, 1.0, {load});
    const auto b = t.add(resource::compute, 1.0);
    const auto r = t.simulate();
    EXPECT_DOUBLE_EQ(r.start[a], 3.0);
    EXPECT_DOUBLE_EQ(r.start[b], 4.0);
    EXPECT_DOUBLE_EQ(r.makespan, 5.0);
}

TEST(Timeline, DependencyOnLaterTaskAndInitialBytes) {
    frugal::schedule::timeline t(50);
    const auto c = t.add(resource::compute, 1.0);
    const auto l = t.add(resource::io, 4.0, {}, 30, 80);
    t.add_dependency(c, l);
    const auto r = t.simulate();
    EXPECT_DOUBLE_EQ(r.start[c], 4.0);
    EXPECT_DOUBLE_EQ(r.makespan, 5.0);
    EXPECT_EQ(r.peak_resident_bytes, 80u);
}

TEST(Timeline, EmptyTimeline) {
    const auto r = frugal::schedule::timeline{}.simulate();
    EXPECT_EQ(r.makespan, 0.0);
    EXPECT_EQ(r.peak_resident_bytes, 0u);
}

TEST(Timeline, RejectsBadInput) {
    frugal::schedule::timeline t;
    EXPECT_THROW(t.add(resource::io, -1.0), frugal::invalid_argument);
    // A cycle through the compute order: a waits for b, b sits behind a.
    const auto a = t.add(resource::compute, 1.0);
    const auto b = t.add(resource::compute, 1.0);
    t.add_dependency(a, b);
    EXPECT_THROW((void)t.simulate(), frugal::invalid_argument);
    frugal::schedule::timeline u;
    u.add(resource::io, 1.0, {7});
    EXPECT_THROW((void)u.simulate(), frugal::out_of_range);
    frugal::schedule::timeline v;
    v.add(resource::io, 1.0, {}, 0, 5);
    EXPECT_THROW((void)v.simulate(), frugal::invalid_argument);
    // Resident bytes that would wrap 64 bits (they reported a peak of 2^64 - 1).
    frugal::schedule::timeline w;
    w.add(resource::io, 1.0, {}, ~std::uint64_t{0});
    w.add(resource::compute, 1.0, {}, ~std::uint64_t{0});
    const std::string msg = frugal::testing::error_of([&] { (void)w.simulate(); });
    EXPECT_NE(msg.find("timeline: resident bytes"), std::string::npos) << msg;
}

}  // namespace
