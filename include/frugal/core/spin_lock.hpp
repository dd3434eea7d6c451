#pragma once
/// @file
/// spin_lock: a lock for critical sections of tens of nanoseconds.

#include <atomic>
#include <thread>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace frugal {

/// A test-and-test-and-set lock that spins with the CPU's pause hint and yields after a
/// while. Hand-written because the standard offers none (std::mutex sleeps in the kernel
/// when two threads meet, which costs microseconds; Boost's spinlock is an implementation
/// detail). Use it only where the lock is held for a few tens of nanoseconds, as in a
/// cache shard; a long critical section wants std::mutex. Satisfies Lockable, so
/// std::lock_guard and std::scoped_lock take it.
/// @code
/// frugal::spin_lock lock;
/// { std::lock_guard guard(lock); ++shared_counter; }
/// @endcode
class spin_lock {
public:
    void lock() noexcept {
        while (locked_.exchange(true, std::memory_order_acquire)) {
            // Wait on a plain load (the line stays shared) before trying the exchange again.
            for (unsigned spins = 0; locked_.load(std::memory_order_relaxed); ++spins) {
                if (spins < max_spins) {
                    pause();
                } else {
                    std::this_thread::yield();  // the holder may be descheduled: let it run
                }
            }
        }
    }
    [[nodiscard]] bool try_lock() noexcept {
        return !locked_.load(std::memory_order_relaxed) && !locked_.exchange(true, std::memory_order_acquire);
    }
    void unlock() noexcept { locked_.store(false, std::memory_order_release); }

private:
    static constexpr unsigned max_spins = 128;
    static void pause() noexcept {
#if defined(__x86_64__) || defined(__i386__)
        _mm_pause();
#elif defined(__aarch64__)
        asm volatile("yield");
#endif
    }
    std::atomic<bool> locked_{false};
};

}  // namespace frugal
