// The replaced operator new of the prune test binary (counting_new.hpp).
#include "counting_new.hpp"

#include <cstdlib>
#include <new>

frugal::testing::allocation_counter& frugal::testing::allocations() {
    static allocation_counter counter;
    return counter;
}

// GCC sees free() inside operator delete once it is inlined and calls it a new/free mismatch.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
#endif
void* operator new(std::size_t size) {
    auto& a = frugal::testing::allocations();
    if (a.counting) {
        ++a.count;
        for (std::size_t seen = a.largest; size > seen && !a.largest.compare_exchange_weak(seen, size);) {
        }
    }
    if (void* p = std::malloc(size == 0 ? 1 : size)) return p;
    throw std::bad_alloc();
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif
