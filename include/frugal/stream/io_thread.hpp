#pragma once
/// @file
/// io_thread: one background thread running I/O tasks in submission order, whose first
/// error and whose cancellation reach the threads waiting on it.

#include <condition_variable>
#include <deque>
#include <exception>
#include <functional>
#include <mutex>
#include <stop_token>
#include <thread>
#include <utility>

#include "frugal/core/error.hpp"

namespace frugal::stream {

/// A FIFO of I/O tasks executed by one std::jthread (the streaming parts need ordering:
/// a buffer's write-back must finish before the next read into it, which one FIFO thread
/// guarantees without per-buffer locks). Each task has an unlocked `work` part and an
/// `on_done` part run under the object's mutex, where it publishes its result for
/// `wait()`. The first exception thrown by a task is kept, pending tasks are discarded,
/// and every current and later `wait()` rethrows it. The destructor cancels and joins: no
/// thread outlives the object (an in-flight task finishes first).
/// @code
/// frugal::stream::io_thread io;
/// bool loaded = false;
/// io.submit([&] { read_file(buf); }, [&] { loaded = true; });
/// io.wait([&] { return loaded; });  // rethrows read_file's exception
/// @endcode
class io_thread {
public:
    io_thread() : thread_([this](std::stop_token stop) { run(stop); }) {}
    io_thread(const io_thread&) = delete;
    io_thread& operator=(const io_thread&) = delete;
    ~io_thread() { cancel(); }

    /// Queues a task. After an error or cancel() the task is dropped: the next wait() that
    /// needs it reports the error, so callers see failures at one place.
    void submit(std::function<void()> work, std::function<void()> on_done = {}) {
        std::lock_guard lock(mutex_);
        if (error_ || cancelled_) return;
        tasks_.push_back({std::move(work), std::move(on_done)});
        cv_.notify_all();
    }

    /// Blocks until `ready()` (evaluated under the mutex) holds. Throws frugal::runtime_error
    /// once cancelled (even if ready), and rethrows a task's error when not ready.
    template <class Predicate>
    void wait(Predicate ready) {
        std::unique_lock lock(mutex_);
        cv_.wait(lock, [&] { return error_ || cancelled_ || ready(); });
        if (cancelled_ || !ready()) check_locked();
    }

    /// Runs `fn` under the mutex (to read or change state the tasks' on_done publish).
    template <class Fn>
    decltype(auto) locked(Fn&& fn) {
        std::lock_guard lock(mutex_);
        return std::forward<Fn>(fn)();
    }

    /// Discards pending tasks, wakes every waiter (they throw) and joins the thread after its
    /// in-flight task. Idempotent.
    void cancel() {
        {
            std::lock_guard lock(mutex_);
            cancelled_ = true;
            tasks_.clear();
            cv_.notify_all();
        }
        thread_.request_stop();
        if (thread_.joinable()) thread_.join();
    }

private:
    struct task {
        std::function<void()> work, on_done;
    };

    void check_locked() const {
        if (cancelled_) FRUGAL_FAIL(runtime_error, "io_thread: cancelled");
        if (error_) std::rethrow_exception(error_);
    }

    void run(std::stop_token stop) {
        std::unique_lock lock(mutex_);
        while (true) {
            cv_.wait(lock, stop, [&] { return !tasks_.empty() || cancelled_; });
            if (stop.stop_requested() || cancelled_ || tasks_.empty()) return;
            task t = std::move(tasks_.front());
            tasks_.pop_front();
            lock.unlock();
            std::exception_ptr failure;
            try {
                t.work();
            } catch (...) {
                failure = std::current_exception();
            }
            lock.lock();
            if (failure) {
                error_ = failure;
                tasks_.clear();
            } else if (t.on_done) {
                t.on_done();
            }
            cv_.notify_all();
        }
    }

    std::mutex mutex_;
    std::condition_variable_any cv_;
    std::deque<task> tasks_;
    std::exception_ptr error_;
    bool cancelled_ = false;
    std::jthread thread_;  // last: started after, and joined before, the state above
};

}  // namespace frugal::stream
