#pragma once
/// @file
/// parallel_for_index: runs independent work items on a few threads.

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

namespace frugal {

/// Calls `fn(item, worker)` once for every item in [0, `count`) on up to `threads`
/// threads (the caller's thread is worker 0), handing out items in index order.
///
/// Each item must write only its own outputs, so results never depend on the thread
/// count. The first exception a worker throws stops the hand-out and is rethrown.
/// Hand-written over std::jthread because the items are known up front: a shared
/// counter is all the scheduling needed, and no pool outlives the call.
/// @code
/// frugal::parallel_for_index(heads, 2, [&](std::size_t h, std::size_t worker) { run_head(h, worker); });
/// @endcode
template <class Fn>
void parallel_for_index(std::size_t count, std::size_t threads, Fn&& fn) {
    const std::size_t workers = std::max<std::size_t>(1, std::min(threads, count));
    std::atomic<std::size_t> next{0};
    std::atomic<bool> failed{false};
    std::exception_ptr error;
    std::mutex error_mutex;
    const auto work = [&](std::size_t worker) {
        try {
            for (std::size_t i = next++; i < count && !failed.load(std::memory_order_relaxed); i = next++) {
                fn(i, worker);
            }
        } catch (...) {
            const std::lock_guard lock(error_mutex);
            if (!error) error = std::current_exception();
            failed = true;
        }
    };
    {
        std::vector<std::jthread> pool;
        pool.reserve(workers - 1);
        for (std::size_t w = 1; w < workers; ++w) pool.emplace_back(work, w);
        work(0);
    }
    if (error) std::rethrow_exception(error);
}

}  // namespace frugal
