#pragma once
/// @file
/// The wall-clock driver of the RAG scheduler: `rag_runtime` runs the user's generator on a
/// thread of its own (the GPU side: one engine step per batch) and the retriever's batches on
/// a second thread that spreads their scans over the caller's executor (the CPU side), so a
/// decode batch and a retrieval are in flight at the same time (HedraRAG 4.5). Requests are
/// submitted from any thread and come back by future or callback, with an admission limit,
/// deadlines, cancellation and a per-stage timeout; every request ends exactly once.

#include <algorithm>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <future>
#include <limits>
#include <memory>
#include <mutex>
#include <optional>
#include <sstream>
#include <stop_token>
#include <string>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include "frugal/core/error.hpp"
#include "frugal/core/executor.hpp"
#include "frugal/rag/clock.hpp"
#include "frugal/rag/engine.hpp"
#include "frugal/rag/scheduler.hpp"
#include "frugal/rag/workflow.hpp"

namespace frugal::rag {

/// What the runtime measured of one request (ms).
struct rag_request_metrics {
    double queued_ms = 0.0;       ///< submitted until admitted (the admission limit)
    double generation_ms = 0.0;   ///< in generation batches (each batch's whole duration)
    double retrieval_ms = 0.0;    ///< in retrieval batches
    double first_token_ms = -1.0; ///< submitted until its last generation's first decode step ended (-1: none)
    double end_to_end_ms = 0.0;   ///< submitted until it ended
    std::size_t decode_steps = 0, retrieval_substages = 0;
};

/// A request's end: how (`status`), its final state, why it did not finish (`error`, and
/// what was thrown) and its metrics.
struct rag_result {
    rag_status status = rag_status::finished;
    rag_state state;
    std::string error;
    std::exception_ptr exception;
    rag_request_metrics metrics;
};

/// What the runtime measured of each side and of the requests so far.
struct rag_runtime_metrics {
    double elapsed_ms = 0.0;                             ///< since the runtime started
    double generation_busy = 0.0, retrieval_busy = 0.0;  ///< fraction of elapsed with a batch in flight
    std::size_t generation_batches = 0, retrieval_batches = 0;
    double generation_batch_mean = 0.0, retrieval_batch_mean = 0.0;  ///< requests per batch
    std::size_t generation_batch_max = 0, retrieval_batch_max = 0;
    std::size_t submitted = 0, in_flight = 0, queued = 0;
    std::size_t finished = 0, cancelled = 0, timed_out = 0, failed = 0;
};

namespace detail {
inline void json_field(std::ostringstream& o, const char* name, double v, bool first = false) {
    o << (first ? "" : ", ") << '"' << name << "\": ";
    if (std::isfinite(v)) o << v;
    else o << "null";
}
}  // namespace detail

/// One JSON object of `m` (hand-written: frugal's library depends on no JSON package).
/// @code
/// std::puts(frugal::rag::to_json(result.metrics).c_str());
/// @endcode
[[nodiscard]] inline std::string to_json(const rag_request_metrics& m) {
    std::ostringstream o;
    o << '{';
    detail::json_field(o, "queued_ms", m.queued_ms, true);
    detail::json_field(o, "generation_ms", m.generation_ms);
    detail::json_field(o, "retrieval_ms", m.retrieval_ms);
    detail::json_field(o, "first_token_ms", m.first_token_ms);
    detail::json_field(o, "end_to_end_ms", m.end_to_end_ms);
    o << ", \"decode_steps\": " << m.decode_steps << ", \"retrieval_substages\": " << m.retrieval_substages << '}';
    return o.str();
}

/// One JSON object of `m`.
/// @code
/// std::puts(frugal::rag::to_json(runtime.metrics()).c_str());
/// @endcode
[[nodiscard]] inline std::string to_json(const rag_runtime_metrics& m) {
    std::ostringstream o;
    o << '{';
    detail::json_field(o, "elapsed_ms", m.elapsed_ms, true);
    detail::json_field(o, "generation_busy", m.generation_busy);
    detail::json_field(o, "retrieval_busy", m.retrieval_busy);
    detail::json_field(o, "generation_batch_mean", m.generation_batch_mean);
    detail::json_field(o, "retrieval_batch_mean", m.retrieval_batch_mean);
    o << ", \"generation_batches\": " << m.generation_batches << ", \"retrieval_batches\": " << m.retrieval_batches
      << ", \"generation_batch_max\": " << m.generation_batch_max << ", \"retrieval_batch_max\": " << m.retrieval_batch_max
      << ", \"submitted\": " << m.submitted << ", \"in_flight\": " << m.in_flight << ", \"queued\": " << m.queued
      << ", \"finished\": " << m.finished << ", \"cancelled\": " << m.cancelled << ", \"timed_out\": " << m.timed_out
      << ", \"failed\": " << m.failed << '}';
    return o.str();
}

/// How one submission is watched.
struct rag_submit_options {
    /// The request times out (status timed_out) when it has not ended by then.
    std::optional<std::chrono::steady_clock::time_point> deadline{};
    /// A stop request cancels it (status cancelled).
    std::stop_token stop{};
    /// Called once with the result, on a runtime thread or in the destructor (keep it short;
    /// it may submit more requests).
    std::function<void(const rag_result&)> on_done{};
};

/// The runtime's knobs.
struct rag_runtime_options {
    rag_schedule_options schedule{};
    /// Requests in flight at most; later submissions wait in order (their time there is `queued_ms`).
    std::size_t max_in_flight = 256;
    /// A generation or retrieval stage of a request that has run (since it became ready)
    /// longer than this times the request out. Infinity: no limit.
    double stage_timeout_ms = std::numeric_limits<double>::infinity();
};

/// The RAG scheduler in wall-clock time (see the file comment). The generator is used only
/// on the runtime's generation thread and the retriever only on its retrieval thread (the
/// executor's workers run the scans of `search(batch, executor)` for a
/// `rag_parallel_retriever`). A generator or retriever that throws fails the requests of
/// that batch only; a router or user node that throws fails its request only. The destructor
/// cancels what has not ended (status cancelled), delivers every result, and joins.
/// @code
/// frugal::thread_pool cpu(8);
/// frugal::rag::rag_runtime rt(engine, retriever, cpu, {.max_in_flight = 128});
/// auto answer = rt.submit(graph, {.input = "What is RAG?"});
/// frugal::rag::rag_result r = answer.get();   // r.state.text("answer"), r.metrics.end_to_end_ms
/// @endcode
template <rag_generator G, rag_retriever R, executor E>
class rag_runtime {
    static constexpr double stop_poll_ms = 2.0;

public:
    using core_type = rag_scheduler<G, R>;

    rag_runtime(G& gen, R& ret, E& ex, rag_runtime_options opt = {})
        : gen_(gen), ret_(ret), ex_(ex), opt_(std::move(opt)), core_(gen, ret, opt_.schedule) {
        FRUGAL_CHECK(opt_.max_in_flight > 0, "rag_runtime: an admission limit of 0 admits nothing");
        FRUGAL_CHECK(!std::isnan(opt_.stage_timeout_ms) && opt_.stage_timeout_ms > 0.0, "rag_runtime: stage timeout ",
                     opt_.stage_timeout_ms, " ms (must be > 0)");
        start_ = clock_.now_ms();
        generation_ = std::jthread([this] { generation_loop(); });
        retrieval_ = std::jthread([this] { retrieval_loop(); });
    }
    rag_runtime(const rag_runtime&) = delete;
    rag_runtime& operator=(const rag_runtime&) = delete;
    ~rag_runtime() { shutdown(); }

    /// Calls `f` (under the runtime's lock, in call order) with every call into the decision
    /// core: what a replay needs to reproduce the run's decisions.
    void set_observer(typename core_type::observer f) {
        std::lock_guard lock(mutex_);
        core_.set_observer(std::move(f));
    }

    /// Submits a request on `graph` (which must outlive it) with its initial `state`, from
    /// any thread. Throws on an invalid workflow, a deadline already past, or a runtime
    /// shutting down; otherwise the future (and `options.on_done`) get the result.
    std::future<rag_result> submit(const rag_graph& graph, rag_state state, rag_submit_options options = {}) {
        graph.validate();
        FRUGAL_CHECK(!options.deadline || *options.deadline > std::chrono::steady_clock::now(),
                     "rag_runtime::submit: the deadline has already passed");
        auto w = std::make_shared<watch>();
        w->graph = &graph;
        w->state = std::move(state);
        w->on_done = std::move(options.on_done);
        w->stop = std::move(options.stop);
        std::future<rag_result> f = w->promise.get_future();
        std::vector<delivery> out;
        {
            std::lock_guard lock(mutex_);
            FRUGAL_CHECK(!stopping_, "rag_runtime::submit: the runtime is shutting down");
            w->submitted = clock_.now_ms();
            if (options.deadline) w->deadline = clock_.ms_at(*options.deadline);
            ++submitted_;
            waiting_.push_back(std::move(w));
            admit(out);
            ++delivering_;
        }
        wake_.notify_all();
        deliver(out);
        finish_delivery();
        return f;
    }

    /// Blocks until every request submitted so far has ended.
    void drain() {
        std::unique_lock lock(mutex_);
        idle_.wait(lock, [&] { return waiting_.empty() && core_.in_flight() == 0 && delivering_ == 0; });
    }

    /// The sides' and requests' figures so far.
    [[nodiscard]] rag_runtime_metrics metrics() const {
        std::lock_guard lock(mutex_);
        const rag_run& s = core_.statistics();
        rag_runtime_metrics m;
        m.elapsed_ms = clock_.now_ms() - start_;
        m.generation_busy = m.elapsed_ms > 0.0 ? s.gpu_busy / m.elapsed_ms : 0.0;
        m.retrieval_busy = m.elapsed_ms > 0.0 ? s.cpu_busy / m.elapsed_ms : 0.0;
        m.generation_batches = s.gpu_batches;
        m.retrieval_batches = s.cpu_batches;
        m.generation_batch_mean = s.gpu_batches > 0 ? double(s.gpu_batch_members) / double(s.gpu_batches) : 0.0;
        m.retrieval_batch_mean = s.cpu_batches > 0 ? double(s.cpu_batch_members) / double(s.cpu_batches) : 0.0;
        m.generation_batch_max = s.gpu_batch_max;
        m.retrieval_batch_max = s.cpu_batch_max;
        m.submitted = submitted_;
        m.in_flight = core_.in_flight();
        m.queued = waiting_.size();
        m.finished = ended_[0];
        m.cancelled = ended_[1];
        m.timed_out = ended_[2];
        m.failed = ended_[3];
        return m;
    }

private:
    // A submitted request: what it returns to, and its watches.
    struct watch {
        const rag_graph* graph = nullptr;
        rag_state state;
        std::promise<rag_result> promise;
        std::function<void(const rag_result&)> on_done;
        std::stop_token stop;
        double submitted = 0.0, admitted = 0.0;
        double deadline = std::numeric_limits<double>::infinity();
        std::size_t id = 0;
    };
    struct delivery {
        std::shared_ptr<watch> w;
        rag_result result;
    };

    // Admits waiting requests up to the limit (lock held).
    void admit(std::vector<delivery>& out) {
        while (!waiting_.empty() && core_.in_flight() < opt_.max_in_flight) {
            std::shared_ptr<watch> w = std::move(waiting_.front());
            waiting_.pop_front();
            const double now = clock_.now_ms();
            if (w->stop.stop_requested() || now >= w->deadline) {
                rag_result r;
                r.status = w->stop.stop_requested() ? rag_status::cancelled : rag_status::timed_out;
                r.error = w->stop.stop_requested() ? "cancelled before it was admitted" : "its deadline passed before it was admitted";
                r.state = std::move(w->state);
                r.metrics.queued_ms = r.metrics.end_to_end_ms = now - w->submitted;
                count(r.status);
                out.push_back({std::move(w), std::move(r)});
                continue;
            }
            w->admitted = now;
            w->id = core_.submit(*w->graph, std::move(w->state), now);
            watches_.emplace(w->id, std::move(w));
            collect(out);  // a request can end at once (a router that fails)
        }
    }

    // Moves the core's ended requests into deliveries (lock held).
    void collect(std::vector<delivery>& out) {
        for (rag_outcome& o : core_.take_finished()) {
            auto it = watches_.find(o.state.request);
            FRUGAL_ASSERT(it != watches_.end());
            std::shared_ptr<watch> w = std::move(it->second);
            watches_.erase(it);
            rag_result r;
            r.status = o.status;
            r.error = std::move(o.error);
            r.exception = o.exception;
            r.metrics.queued_ms = w->admitted - w->submitted;
            r.metrics.generation_ms = o.generation_ms;
            r.metrics.retrieval_ms = o.retrieval_ms;
            r.metrics.first_token_ms = o.first_token >= 0.0 ? o.first_token - w->submitted : -1.0;
            r.metrics.end_to_end_ms = o.finish - w->submitted;
            r.metrics.decode_steps = o.decode_steps;
            r.metrics.retrieval_substages = o.retrieval_substages;
            r.state = std::move(o.state);
            count(r.status);
            out.push_back({std::move(w), std::move(r)});
        }
    }
    void count(rag_status s) { ++ended_[static_cast<std::size_t>(s)]; }

    // Outside the lock: each result goes to its callback, then its future.
    void deliver(std::vector<delivery>& out) {
        for (delivery& d : out) {
            if (d.w->on_done) {
                try {
                    d.w->on_done(d.result);
                } catch (...) {  // a callback's error is the caller's; the future still gets the result
                }
            }
            d.w->promise.set_value(std::move(d.result));
        }
        out.clear();
    }
    void finish_delivery() {
        {
            std::lock_guard lock(mutex_);
            --delivering_;
        }
        idle_.notify_all();
    }

    // Stops, deadlines and stage timeouts that have come (lock held); when to look again. Stop
    // tokens are polled (every `stop_poll_ms` while one is watched) rather than given a
    // stop_callback, which would run on the stopping thread and could not take the lock
    // without risking a deadlock with its registration.
    double expire(double now) {
        double next = std::numeric_limits<double>::infinity();
        for (auto& [id, w] : watches_) {
            if (w->stop.stop_requested()) {
                core_.cancel(id, rag_status::cancelled, "cancelled by its stop token", now);
                continue;
            }
            if (now >= w->deadline) {
                core_.cancel(id, rag_status::timed_out, "its deadline passed", now);
                continue;
            }
            next = std::min(next, w->deadline);
            if (w->stop.stop_possible()) next = std::min(next, now + stop_poll_ms);
        }
        if (std::isfinite(opt_.stage_timeout_ms)) {
            core_.time_out_stages(now, opt_.stage_timeout_ms);
            next = std::min(next, now + opt_.stage_timeout_ms / 4);  // stages started since are checked then
        }
        return next;
    }

    // Waits (lock held) until `work` holds, the runtime stops, or a deadline is due.
    template <class Work>
    bool wait_for_work(std::unique_lock<std::mutex>& lock, Work work,
                       std::vector<delivery>& out) {
        while (true) {
            const double next = expire(clock_.now_ms());
            collect(out);
            admit(out);
            if (!out.empty()) return true;  // deliver first, then come back
            if (stopping_) return false;
            if (work()) return true;
            const auto pred = [&] { return stopping_ || work(); };
            if (std::isfinite(next)) {
                const auto until = clock_.epoch + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                                                      std::chrono::duration<double, std::milli>(next));
                wake_.wait_until(lock, until, pred);
            } else {
                wake_.wait(lock, pred);
            }
        }
    }

    void generation_loop() {
        std::vector<delivery> out;
        while (true) {
            std::optional<generation_batch> b;
            {
                std::unique_lock lock(mutex_);
                if (!wait_for_work(lock, [&] { return core_.generation_work(); }, out)) return;
                if (out.empty()) b = core_.next_generation_batch(clock_.now_ms());
                ++delivering_;
            }
            wake_.notify_all();  // settled verdicts may have moved requests on to a retrieval
            deliver(out);
            finish_delivery();
            if (!b) continue;
            const double t0 = clock_.now_ms();
            std::exception_ptr failure;
            generation_report rep;
            try {
                rep = run_generation_batch(gen_, *b);
            } catch (...) {
                failure = std::current_exception();
            }
            const double t1 = clock_.now_ms();
            {
                std::lock_guard lock(mutex_);
                if (failure) core_.generation_failed(*b, failure, t1);
                else core_.generation_done(*b, rep, t1 - t0, t1);
                collect(out);
                admit(out);
                ++delivering_;
            }
            wake_.notify_all();  // the retrieval side may have work now
            deliver(out);
            finish_delivery();
        }
    }

    void retrieval_loop() {
        std::vector<delivery> out;
        while (true) {
            std::optional<retrieval_batch<rag_query_t<R>>> b;
            {
                std::unique_lock lock(mutex_);
                if (!wait_for_work(lock, [&] { return core_.retrieval_work(); }, out)) return;
                if (out.empty()) b = core_.next_retrieval_batch(clock_.now_ms());
                ++delivering_;
            }
            wake_.notify_all();  // settled verdicts may be the generation side's work
            deliver(out);
            finish_delivery();
            if (!b) continue;
            const double t0 = clock_.now_ms();
            std::exception_ptr failure;
            try {
                const std::span<const retrieval_slot<rag_query_t<R>>> slots(b->slots);
                if constexpr (rag_parallel_retriever<R, E>) (void)ret_.search(slots, ex_);
                else (void)ret_.search(slots);
            } catch (...) {
                failure = std::current_exception();
            }
            const double t1 = clock_.now_ms();
            {
                std::lock_guard lock(mutex_);
                if (failure) core_.retrieval_failed(*b, failure, t1);
                else core_.retrieval_done(*b, t1 - t0, t1);
                collect(out);
                admit(out);
                ++delivering_;
            }
            wake_.notify_all();
            deliver(out);
            finish_delivery();
        }
    }

    void shutdown() {
        {
            std::lock_guard lock(mutex_);
            stopping_ = true;
        }
        wake_.notify_all();
        generation_.join();
        retrieval_.join();
        // No batch is in flight now: what is left ends here, cancelled, and the generator
        // drops the generations it holds.
        std::vector<delivery> out;
        {
            std::lock_guard lock(mutex_);
            const double now = clock_.now_ms();
            for (auto& [id, w] : watches_) core_.cancel(id, rag_status::cancelled, "the runtime stopped", now);
            if (auto b = core_.next_generation_batch(now)) {
                FRUGAL_ASSERT(b->slots.empty());
                try {
                    core_.generation_done(*b, run_generation_batch(gen_, *b), 0.0, now);
                } catch (...) {  // a discard that throws at shutdown: nothing is left to fail
                }
            }
            collect(out);
            while (!waiting_.empty()) {
                std::shared_ptr<watch> w = std::move(waiting_.front());
                waiting_.pop_front();
                rag_result r;
                r.status = rag_status::cancelled;
                r.error = "the runtime stopped before it was admitted";
                r.state = std::move(w->state);
                r.metrics.queued_ms = r.metrics.end_to_end_ms = now - w->submitted;
                count(r.status);
                out.push_back({std::move(w), std::move(r)});
            }
        }
        deliver(out);
    }

    G& gen_;
    R& ret_;
    E& ex_;
    rag_runtime_options opt_;
    steady_clock_ms clock_;
    mutable std::mutex mutex_;
    std::condition_variable wake_, idle_;
    core_type core_;
    std::deque<std::shared_ptr<watch>> waiting_;                     // submitted, not admitted
    std::unordered_map<std::size_t, std::shared_ptr<watch>> watches_;  // admitted, by core id
    std::size_t submitted_ = 0, delivering_ = 0;
    std::size_t ended_[4] = {0, 0, 0, 0};  // by rag_status
    bool stopping_ = false;
    double start_ = 0.0;
    std::jthread generation_, retrieval_;  // last: they start after everything above exists
};

}  // namespace frugal::rag
