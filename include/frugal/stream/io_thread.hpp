#pragma once
/// @file
/// io_thread: one background thread running I/O tasks in submission order, shared by any
/// number of clients; io_channel: one client's queue on it, whose errors and cancellation
/// reach that client's waiters only; default_io_thread(): the process-wide thread the
/// streaming parts use unless given another.

#include <algorithm>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <exception>
#include <functional>
#include <mutex>
#include <stop_token>
#include <thread>
#include <utility>

#include "frugal/core/assert.hpp"
#include "frugal/core/error.hpp"

namespace frugal::stream {

class io_channel;

/// One std::jthread running the I/O tasks of its channels, all of them in one FIFO. The
/// streaming parts need that order (a buffer's write-back must finish before the next read
/// into it, which one FIFO thread guarantees without per-buffer locks), and a storage device
/// serves one stream of requests best, so the layer window and the hidden-state offload of
/// one model can share a thread rather than each start its own. A thread is not an
/// `executor` (core/executor.hpp): those run a batch and return, this keeps ordered work
/// in flight while the caller computes. It must outlive its channels; the destructor joins
/// after the task in flight. Tasks must not wait for work queued behind them (a channel's
/// `wait`, `discard` or `cancel` called from inside a task deadlocks).
/// @code
/// frugal::stream::io_thread disk;  // one thread for the window and the offload
/// frugal::stream::layer_window window(loader, disk);
/// frugal::stream::hidden_state_offload store(tmp / "hidden.bin", chunks, chunk_bytes, disk);
/// @endcode
class io_thread {
public:
    io_thread() : thread_([this](std::stop_token stop) { run(stop); }) {}
    io_thread(const io_thread&) = delete;
    io_thread& operator=(const io_thread&) = delete;
    ~io_thread() {
        {
            std::lock_guard lock(mutex_);
            FRUGAL_ASSERT(channels_ == 0);  // a channel outliving its thread would use it after this
        }
        thread_.request_stop();
        thread_.join();
    }

private:
    friend class io_channel;
    struct task {
        io_channel* owner;
        std::function<void()> work, on_done;
    };

    inline void run(std::stop_token stop);
    void drop_tasks_of(const io_channel* owner) {
        tasks_.erase(std::remove_if(tasks_.begin(), tasks_.end(), [&](const task& t) { return t.owner == owner; }),
                     tasks_.end());
    }

    std::mutex mutex_;  // guards everything below and every channel's state
    std::condition_variable_any cv_;
    std::deque<task> tasks_;
    const io_channel* running_ = nullptr;  // owner of the task in flight
    std::size_t channels_ = 0;
    std::jthread thread_;  // last: started after, and joined before, the state above
};

/// The I/O thread the streaming parts share when the caller names none: started on first
/// use and kept until the process exits, so constructing a window or an offload starts no
/// thread. Objects on it queue behind one another's I/O, as on one disk.
/// @code
/// frugal::stream::io_channel io(frugal::stream::default_io_thread());
/// @endcode
inline io_thread& default_io_thread() {
    static io_thread thread;
    return thread;
}

/// One client's FIFO of I/O tasks on an io_thread. Each task has an unlocked `work` part and
/// an `on_done` part run under the thread's mutex, where it publishes its result for
/// `wait()`. The first exception a task throws is kept and the channel's pending tasks are
/// discarded (other channels' tasks run on); from then on `wait()` rethrows it when its
/// condition does not hold and `submit()` rethrows it, until `discard()` forgets it. After
/// `cancel()` every call throws frugal::runtime_error. The destructor cancels: no task of
/// the channel runs after it (one in flight finishes first).
/// @code
/// frugal::stream::io_channel io;  // on default_io_thread()
/// bool loaded = false;
/// io.submit([&] { read_file(buf); }, [&] { loaded = true; });
/// io.wait([&] { return loaded; });  // rethrows read_file's exception
/// @endcode
class io_channel {
public:
    explicit io_channel(io_thread& thread = default_io_thread()) : thread_(&thread) {
        std::lock_guard lock(thread_->mutex_);
        ++thread_->channels_;
    }
    io_channel(const io_channel&) = delete;
    io_channel& operator=(const io_channel&) = delete;
    ~io_channel() {
        cancel();
        std::lock_guard lock(thread_->mutex_);
        --thread_->channels_;
    }

    /// Queues a task behind every task already on the thread. Rethrows the channel's error
    /// if a task failed (and discard() has not been called since); throws
    /// frugal::runtime_error after cancel(). Nothing is queued then.
    void submit(std::function<void()> work, std::function<void()> on_done = {}) {
        std::lock_guard lock(thread_->mutex_);
        check_locked();
        thread_->tasks_.push_back({this, std::move(work), std::move(on_done)});
        thread_->cv_.notify_all();
    }

    /// Blocks until `ready()` (evaluated under the mutex) holds. Throws frugal::runtime_error
    /// once cancelled (even if ready), and rethrows a task's error when not ready.
    template <class Predicate>
    void wait(Predicate ready) {
        std::unique_lock lock(thread_->mutex_);
        thread_->cv_.wait(lock, [&] { return error_ || cancelled_ || ready(); });
        if (cancelled_ || !ready()) check_locked();
    }

    /// Runs `fn` under the mutex (to read or change state the tasks' on_done publish).
    template <class Fn>
    decltype(auto) locked(Fn&& fn) {
        std::lock_guard lock(thread_->mutex_);
        return std::forward<Fn>(fn)();
    }

    /// Drops the channel's pending tasks, waits for its task in flight, and forgets its
    /// error: the channel takes work again. Throws frugal::runtime_error after cancel().
    /// The caller's own state (what the dropped tasks would have published) is the
    /// caller's to reset.
    void discard() {
        std::unique_lock lock(thread_->mutex_);
        if (cancelled_) FRUGAL_FAIL(runtime_error, "io_channel::discard: cancelled");
        drop_locked(lock);
        error_ = nullptr;
    }

    /// Drops the channel's pending tasks, wakes its waiters (they throw), and waits for its
    /// task in flight; later calls throw frugal::runtime_error. Idempotent.
    void cancel() {
        std::unique_lock lock(thread_->mutex_);
        cancelled_ = true;
        thread_->cv_.notify_all();
        drop_locked(lock);
    }

private:
    friend class io_thread;

    void check_locked() const {
        if (cancelled_) FRUGAL_FAIL(runtime_error, "io_channel: cancelled");
        if (error_) std::rethrow_exception(error_);
    }
    void drop_locked(std::unique_lock<std::mutex>& lock) {
        thread_->drop_tasks_of(this);
        thread_->cv_.wait(lock, [&] { return thread_->running_ != this; });
    }

    io_thread* thread_;
    std::exception_ptr error_;  // guarded by thread_->mutex_, as is cancelled_
    bool cancelled_ = false;
};

inline void io_thread::run(std::stop_token stop) {
    std::unique_lock lock(mutex_);
    while (cv_.wait(lock, stop, [&] { return !tasks_.empty(); })) {
        task t = std::move(tasks_.front());
        tasks_.pop_front();
        running_ = t.owner;
        lock.unlock();
        std::exception_ptr failure;
        try {
            t.work();
        } catch (...) {
            failure = std::current_exception();
        }
        lock.lock();
        if (failure) {
            t.owner->error_ = failure;
            drop_tasks_of(t.owner);
        } else if (t.on_done) {
            t.on_done();
        }
        t = {};  // the task's captures go before its owner may
        running_ = nullptr;
        cv_.notify_all();
    }
}

}  // namespace frugal::stream
