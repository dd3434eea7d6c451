#pragma once
// The prune test binary replaces operator new (counting_new.cpp) to count allocations and
// their largest size while `counting` is set: the steady-state pruning test asserts none,
// the trajectory reader's tests that a header's counts size no allocation.

#include <atomic>
#include <cstddef>

namespace frugal::testing {

struct allocation_counter {
    std::atomic<bool> counting{false};
    std::atomic<std::size_t> count{0}, largest{0};
    void start() {
        count = 0;
        largest = 0;
        counting = true;
    }
    void stop() { counting = false; }
};

allocation_counter& allocations();

}  // namespace frugal::testing
