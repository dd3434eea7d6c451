#pragma once
/// @file
/// thread_pool: a persistent pool of threads implementing the executor concept, and the
/// process-wide default pool.

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

#include "frugal/core/error.hpp"
#include "frugal/core/executor.hpp"

namespace frugal {

/// A fixed set of threads, started once and parked between batches, that runs `bulk`
/// batches with the calling thread as worker 0 (so `thread_pool(2)` starts one thread).
/// Hand-written over std::jthread because frugal's batches are known up front (a shared
/// item counter is all the scheduling they need) and Boost.Asio's pool would add a
/// dependency and a queue per item. One batch runs at a time: a `bulk` call made while
/// another is running (from another thread, or from inside an item) runs its items on the
/// calling thread alone rather than wait, so callers never block each other.
/// @code
/// frugal::thread_pool pool(4);                     // the caller plus 3 threads
/// frugal::parallel_for(pool, 100, 4, [&](std::size_t i, std::size_t worker) { out[i] = f(i); });
/// @endcode
class thread_pool {
public:
    /// A pool of `concurrency` workers (at least 1): the caller and concurrency - 1 threads.
    explicit thread_pool(std::size_t concurrency) {
        FRUGAL_CHECK(concurrency >= 1, "thread_pool: concurrency 0 can run nothing");
        threads_.reserve(concurrency - 1);
        for (std::size_t w = 1; w < concurrency; ++w) threads_.emplace_back([this, w] { work_loop(w); });
    }
    thread_pool(const thread_pool&) = delete;
    thread_pool& operator=(const thread_pool&) = delete;
    ~thread_pool() {
        {
            std::lock_guard lock(mutex_);
            stopping_ = true;
        }
        wake_.notify_all();
        for (auto& t : threads_) t.join();
    }

    /// Workers that can run at once: the caller plus the pool's threads.
    [[nodiscard]] std::size_t concurrency() const noexcept { return threads_.size() + 1; }

    /// Runs the batch (see the `executor` concept).
    void bulk(std::size_t count, std::size_t max_workers, bulk_fn fn) {
        if (count == 0) return;
        const std::size_t workers = std::min({max_workers == 0 ? std::size_t{1} : max_workers, concurrency(), count});
        std::unique_lock batch(batch_mutex_, std::try_to_lock);
        if (workers == 1 || !batch.owns_lock()) {
            for (std::size_t i = 0; i < count; ++i) fn(i, 0);
            return;
        }
        {
            std::lock_guard lock(mutex_);
            job_ = &fn;
            count_ = count;
            active_ = workers;
            next_.store(0, std::memory_order_relaxed);
            failed_.store(false, std::memory_order_relaxed);
            error_ = nullptr;
            running_ = workers - 1;
            ++generation_;
        }
        wake_.notify_all();
        run_items(0);
        std::unique_lock lock(mutex_);
        done_.wait(lock, [&] { return running_ == 0; });
        job_ = nullptr;
        if (error_) std::rethrow_exception(std::exchange(error_, nullptr));
    }

private:
    void work_loop(std::size_t worker) {
        std::uint64_t seen = 0;
        std::unique_lock lock(mutex_);
        while (true) {
            wake_.wait(lock, [&] { return stopping_ || generation_ != seen; });
            if (stopping_) return;
            seen = generation_;
            if (worker >= active_) continue;
            lock.unlock();
            run_items(worker);
            lock.lock();
            if (--running_ == 0) done_.notify_one();
        }
    }
    void run_items(std::size_t worker) noexcept {
        try {
            for (std::size_t i = next_++; i < count_ && !failed_.load(std::memory_order_relaxed); i = next_++)
                (*job_)(i, worker);
        } catch (...) {
            std::lock_guard lock(mutex_);
            if (!error_) error_ = std::current_exception();
            failed_ = true;
        }
    }

    std::mutex batch_mutex_;  // held by the running batch
    std::mutex mutex_;        // guards the fields below and the condition variables
    std::condition_variable wake_, done_;
    const bulk_fn* job_ = nullptr;
    std::size_t count_ = 0, active_ = 0, running_ = 0;
    std::uint64_t generation_ = 0;
    bool stopping_ = false;
    std::atomic<std::size_t> next_{0};
    std::atomic<bool> failed_{false};
    std::exception_ptr error_;
    std::vector<std::thread> threads_;
};
static_assert(executor<thread_pool>);

/// The pool frugal's parallel algorithms use when the caller passes none: one worker per
/// hardware thread, started on first use and kept until the process exits.
/// @code
/// frugal::parallel_for(frugal::default_thread_pool(), n, 2, body);
/// @endcode
inline thread_pool& default_thread_pool() {
    static thread_pool pool(std::max(1u, std::thread::hardware_concurrency()));
    return pool;
}

}  // namespace frugal
