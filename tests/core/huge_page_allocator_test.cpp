// huge_page_allocator: small blocks as std::allocator, large ones aligned to 2 MiB; a vector
// on it grows and keeps its contents exactly as one on std::allocator does.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <new>
#include <vector>

#include <frugal/core/huge_page_allocator.hpp>

namespace {

using frugal::huge_page_allocator;

TEST(HugePageAllocator, LargeBlocksAreAlignedToTheHugePageAndWritable) {
    huge_page_allocator<std::uint64_t> alloc;
    const std::size_t n = (huge_page_allocator<std::uint64_t>::huge_page_bytes * 3) / sizeof(std::uint64_t) + 5;
    std::uint64_t* p = alloc.allocate(n);
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(p) % huge_page_allocator<std::uint64_t>::huge_page_bytes, 0u);
    for (std::size_t i = 0; i < n; ++i) p[i] = i * 7;
    std::uint64_t sum = 0;
    for (std::size_t i = 0; i < n; ++i) sum += p[i];
    EXPECT_EQ(sum, 7 * (std::uint64_t{n} * (n - 1) / 2));
    alloc.deallocate(p, n);
}

TEST(HugePageAllocator, VectorGrowsAcrossTheThresholdLikeStdVector) {
    std::vector<int, huge_page_allocator<int>> v;
    std::vector<int> oracle;
    for (int i = 0; i < (3 << 20); ++i) {  // 12 MiB at the end: crosses 2 MiB while growing
        v.push_back(i * 3 - 1);
        oracle.push_back(i * 3 - 1);
    }
    ASSERT_EQ(v.size(), oracle.size());
    EXPECT_TRUE(std::equal(v.begin(), v.end(), oracle.begin()));
    v.resize(10);
    v.shrink_to_fit();  // back below the threshold: freed by the path that allocated it
    EXPECT_TRUE(std::equal(v.begin(), v.end(), oracle.begin()));
}

TEST(HugePageAllocator, OversizedRequestsThrowBadArrayNewLength) {
    huge_page_allocator<std::uint64_t> alloc;
    EXPECT_THROW((void)alloc.allocate(std::numeric_limits<std::size_t>::max() / 4), std::bad_array_new_length);
}

}  // namespace
