#pragma once
/// @file
/// An allocator that asks for transparent huge pages for large blocks.

#include <cstddef>
#include <limits>
#include <memory>
#include <new>

#if defined(__linux__)
#include <sys/mman.h>
#endif

namespace frugal {

/// A standard allocator whose blocks of 2 MiB and more are aligned to 2 MiB and, on Linux,
/// advised with `madvise(MADV_HUGEPAGE)`, so that the kernel may back them with transparent
/// huge pages. Structures that take random steps through hundreds of megabytes (a suffix
/// automaton of a million tokens) otherwise miss the TLB on most steps: one 2 MiB page
/// covers what takes 512 ordinary ones. The advice is a hint. Under THP mode `never`, on
/// other systems, or when the kernel declines, the block keeps ordinary pages and nothing
/// else changes. Smaller blocks come from `std::allocator`.
/// @code
/// std::vector<int, frugal::huge_page_allocator<int>> states;
/// states.reserve(std::size_t{1} << 22);  // 16 MiB: aligned, advised
/// @endcode
template <class T>
struct huge_page_allocator {
    using value_type = T;
    /// Blocks this large or larger are advised (the x86-64 and AArch64 huge page size).
    static constexpr std::size_t huge_page_bytes = std::size_t{2} << 20;

    huge_page_allocator() noexcept = default;
    template <class U>
    huge_page_allocator(const huge_page_allocator<U>& /*other*/) noexcept {}  // implicit: containers rebind

    [[nodiscard]] T* allocate(std::size_t n) {
        if (n > std::numeric_limits<std::size_t>::max() / sizeof(T)) throw std::bad_array_new_length();
        const std::size_t bytes = n * sizeof(T);
        if (bytes < huge_page_bytes) return std::allocator<T>{}.allocate(n);
        const std::size_t rounded = (bytes + huge_page_bytes - 1) / huge_page_bytes * huge_page_bytes;
        void* block = ::operator new(rounded, std::align_val_t{huge_page_bytes});
#if defined(__linux__) && defined(MADV_HUGEPAGE)
        ::madvise(block, rounded, MADV_HUGEPAGE);  // advice only: on failure the pages stay ordinary
#endif
        return static_cast<T*>(block);
    }

    void deallocate(T* p, std::size_t n) noexcept {
        if (n * sizeof(T) < huge_page_bytes) {
            std::allocator<T>{}.deallocate(p, n);
            return;
        }
        ::operator delete(p, std::align_val_t{huge_page_bytes});
    }

    friend bool operator==(const huge_page_allocator& /*a*/, const huge_page_allocator& /*b*/) noexcept {
        return true;  // stateless: any instance frees what another allocated
    }
};

}  // namespace frugal
