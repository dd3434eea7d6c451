#pragma once
// stream_read: the benches' memory-bandwidth roofline, measured in the same run as the work
// it bounds.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <utility>
#include <vector>

#include <frugal/backend/eigen/attention_backend.hpp>  // xsimd, inside frugal's GCC 12 warning bracket
#include <frugal/core/executor.hpp>
#include <xsimd/xsimd.hpp>

namespace frugal::bench {

/// A streaming read of memory regions by `threads` workers (an XOR of every 32-bit word):
/// the bandwidth roofline of a step that reads those bytes once (decode's K/V, a QA bank's
/// embeddings).
struct stream_read {
    std::vector<std::pair<const unsigned char*, std::size_t>> pieces;  // 1 MiB pieces
    mutable std::vector<std::uint32_t> sink;
    stream_read(std::initializer_list<std::pair<const void*, std::size_t>> regions, std::size_t threads)
        : sink(threads * 16) {
        constexpr std::size_t piece = std::size_t(1) << 20;
        for (const auto& [p, n] : regions)
            for (std::size_t at = 0; at < n; at += piece)
                pieces.emplace_back(static_cast<const unsigned char*>(p) + at, std::min(piece, n - at));
    }
    void operator()(std::size_t threads) const {
        using batch = xsimd::batch<std::uint32_t>;
        constexpr std::size_t lanes = batch::size;
        parallel_for(default_thread_pool(), pieces.size(), threads, [&](std::size_t i, std::size_t worker) {
            const auto* p = reinterpret_cast<const std::uint32_t*>(pieces[i].first);
            const std::size_t n = pieces[i].second / sizeof(std::uint32_t);
            batch a0(0u), a1(0u), a2(0u), a3(0u);
            std::size_t j = 0;
            for (; j + 4 * lanes <= n; j += 4 * lanes) {
                a0 ^= batch::load_unaligned(p + j);
                a1 ^= batch::load_unaligned(p + j + lanes);
                a2 ^= batch::load_unaligned(p + j + 2 * lanes);
                a3 ^= batch::load_unaligned(p + j + 3 * lanes);
            }
            std::uint32_t x = 0;
            for (; j < n; ++j) x ^= p[j];
            ((a0 ^ a1) ^ (a2 ^ a3)).store_unaligned(sink.data() + worker * 16);
            sink[worker * 16] ^= x;
        });
    }
};

}  // namespace frugal::bench
