// spin_lock: mutual exclusion checked by a non-atomic read-modify-write that would lose
// updates (and that TSan would report) without it.
#include <frugal/core/spin_lock.hpp>

#include <gtest/gtest.h>

#include <cstdint>
#include <mutex>
#include <thread>
#include <vector>

namespace {

TEST(SpinLock, NoUpdateIsLostUnderContention) {
    frugal::spin_lock lock;
    std::uint64_t counter = 0;  // plain: only the lock orders the threads' writes
    constexpr int threads = 4, rounds = 20000;  // more threads than the CI machine's cores: the yield path runs
    std::vector<std::thread> pool;
    for (int t = 0; t < threads; ++t)
        pool.emplace_back([&] {
            for (int i = 0; i < rounds; ++i) {
                std::lock_guard guard(lock);
                counter = counter + 1;
            }
        });
    for (auto& th : pool) th.join();
    EXPECT_EQ(counter, std::uint64_t{threads} * rounds);
}

TEST(SpinLock, TryLockFailsWhileHeldAndSucceedsAfter) {
    frugal::spin_lock lock;
    ASSERT_TRUE(lock.try_lock());
    bool other = true;
    std::thread([&] { other = lock.try_lock(); }).join();
    EXPECT_FALSE(other);
    lock.unlock();
    std::thread([&] {
        other = lock.try_lock();
        if (other) lock.unlock();
    }).join();
    EXPECT_TRUE(other);
}

}  // namespace
