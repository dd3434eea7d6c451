#pragma once
/// @file
/// The virtual-clock driver of the RAG scheduler (simulation mode): an event loop that asks
/// the decision core for a generation batch whenever the generation side is free and a
/// retrieval batch whenever the retrieval side is free, runs them on the generator and
/// retriever (cost models: frugal::sim's rag_simulation.hpp) and reports each one at the
/// time its modelled duration ends. The wall-clock driver is rag::rag_runtime; both drive
/// the same `rag::rag_scheduler`.

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>
#include <set>
#include <utility>
#include <vector>

#include "frugal/core/error.hpp"
#include "frugal/rag/scheduler.hpp"
#include "frugal/rag/workflow.hpp"

namespace frugal::sim {

/// A simulated request: its arrival time (ms), its workflow and its initial state.
struct rag_request {
    double arrival = 0.0;
    const rag::rag_graph* graph = nullptr;
    rag::rag_state state;
};

/// The scheduler on a virtual clock: requests are submitted as they will arrive and finish in
/// any order; `run_until(t)` runs every event (batch ends, arrivals) before t, each batch
/// taking the duration the generator or retriever returns plus the options' `beta_ms`
/// (Eq. 1's dispatch overhead); `take_finished()` hands back the requests done since the
/// last call. Request ids count submissions from 0 (`state.request` of an outcome).
/// @code
/// frugal::sim::rag_event_loop loop(gen, ret, {.policy = frugal::rag::rag_policy::wavefront});
/// for (auto& r : frugal::sim::poisson_requests(mix, 20.0, 100, 42)) loop.submit(std::move(r));
/// loop.run();
/// for (auto& done : loop.take_finished()) use(done.latency());
/// @endcode
template <rag::rag_generator G, rag::rag_retriever R>
class rag_event_loop {
public:
    using core_type = rag::rag_scheduler<G, R>;

    rag_event_loop(G& gen, R& ret, const rag::rag_schedule_options& opt = {}) : gen_(gen), ret_(ret), core_(gen, ret, opt) {}

    /// The decision core (for an observer, or its statistics).
    [[nodiscard]] core_type& core() noexcept { return core_; }

    /// Queues `request` to arrive at `request.arrival` (ms, not before the clock) and returns
    /// its id. Throws on a missing or invalid workflow or a bad arrival time.
    std::size_t submit(rag_request request) {
        const std::size_t id = pending_.size();
        FRUGAL_CHECK(request.graph != nullptr, "rag_event_loop: request ", id, " has no workflow");
        FRUGAL_CHECK(std::isfinite(request.arrival) && request.arrival >= 0.0 && request.arrival >= horizon_,
                     "rag_event_loop: request ", id, " arrives at ", request.arrival, ", before the clock ", horizon_);
        request.graph->validate();
        arrivals_.emplace(request.arrival, id);
        pending_.push_back(std::move(request));
        return id;
    }

    /// Cancels request `id` (a submitted one) at the clock's time; false when it had ended.
    bool cancel(std::size_t id) {
        FRUGAL_CHECK_AS(frugal::out_of_range, id < pending_.size(), "rag_event_loop::cancel: unknown request ", id);
        if (arrivals_.erase({pending_[id].arrival, id})) {
            cancelled_.push_back(id);
            return true;
        }
        return core_.cancel(id, rag::rag_status::cancelled, "cancelled", now_);
    }

    /// Runs every event before time `t` (ms): afterwards no request may arrive before t.
    void run_until(double t) {
        FRUGAL_CHECK(!std::isnan(t) && t >= horizon_, "rag_event_loop::run_until: time ", t, " is before ", horizon_);
        horizon_ = t;
        while (true) {
            dispatch();
            double next = arrivals_.empty() ? std::numeric_limits<double>::infinity() : arrivals_.begin()->first;
            if (gpu_) next = std::min(next, gpu_->end);
            if (cpu_) next = std::min(next, cpu_->end);
            if (!(next < t)) return;
            now_ = next;
            if (gpu_ && gpu_->end == now_) {
                auto g = std::move(*gpu_);
                gpu_.reset();
                core_.generation_done(g.batch, g.report, g.end - g.start, now_);
            }
            if (cpu_ && cpu_->end == now_) {
                auto c = std::move(*cpu_);
                cpu_.reset();
                core_.retrieval_done(c.batch, c.end - c.start, now_);
            }
            while (!arrivals_.empty() && arrivals_.begin()->first <= now_) {
                const std::size_t id = arrivals_.begin()->second;
                arrivals_.erase(arrivals_.begin());
                (void)core_.submit(*pending_[id].graph, std::move(pending_[id].state), now_, id);
            }
        }
    }

    /// Runs until every submitted request has ended. Throws if one never can (a stall).
    void run() {
        run_until(std::numeric_limits<double>::infinity());
        horizon_ = now_;  // submissions may go on from the last event
        FRUGAL_CHECK(core_.in_flight() == 0 && arrivals_.empty(), "rag_event_loop: ", core_.in_flight(),
                     " requests never finished (scheduler stall)");
    }

    /// The requests that ended since the last call, in ending order (`state.request` is the
    /// id `submit` returned).
    [[nodiscard]] std::vector<rag::rag_outcome> take_finished() {
        std::vector<rag::rag_outcome> out = core_.take_finished();
        for (std::size_t id : cancelled_) {
            rag::rag_outcome o;
            o.arrival = o.finish = pending_[id].arrival;
            o.state = std::move(pending_[id].state);
            o.state.request = id;
            o.status = rag::rag_status::cancelled;
            o.error = "cancelled before it arrived";
            out.push_back(std::move(o));
        }
        cancelled_.clear();
        return out;
    }

    /// The clock: the time of the last event run (ms).
    [[nodiscard]] double now() const noexcept { return now_; }
    /// The same, as a `rag::rag_clock` (rag/clock.hpp).
    [[nodiscard]] double now_ms() const noexcept { return now_; }
    /// Requests submitted and not yet ended.
    [[nodiscard]] std::size_t in_flight() const noexcept { return core_.in_flight() + arrivals_.size(); }
    /// Busy times and counters so far (`requests` empty).
    [[nodiscard]] const rag::rag_run& statistics() const noexcept { return core_.statistics(); }

private:
    struct gpu_batch {
        rag::generation_batch batch;
        rag::generation_report report;
        double start = 0.0, end = 0.0;
    };
    struct cpu_batch {
        rag::retrieval_batch<rag::rag_query_t<R>> batch;
        double start = 0.0, end = 0.0;
    };

    // Asks each free side for a batch (the generation side first, as a GPU loop would) and
    // starts it; a retrieval side that settled work for the generation side lets it ask again.
    void dispatch() {
        const double beta = core_.options().beta_ms;
        for (int round = 0; round < 2; ++round) {
            while (!gpu_) {
                auto b = core_.next_generation_batch(now_);
                if (!b) break;
                rag::generation_report rep = rag::run_generation_batch(gen_, *b);
                if (b->slots.empty()) {  // discards only: no step, no time
                    core_.generation_done(*b, rep, 0.0, now_);
                    continue;
                }
                const double d = beta + rep.duration_ms;
                gpu_ = gpu_batch{std::move(*b), std::move(rep), now_, now_ + d};
            }
            if (!cpu_) {
                if (auto b = core_.next_retrieval_batch(now_)) {
                    const std::span<const rag::retrieval_slot<rag::rag_query_t<R>>> slots(b->slots);
                    const double d = beta + static_cast<double>(ret_.search(slots));
                    cpu_ = cpu_batch{std::move(*b), now_, now_ + d};
                }
            }
            if (gpu_ || !core_.generation_work()) return;
        }
    }

    G& gen_;
    R& ret_;
    core_type core_;
    std::vector<rag_request> pending_;                    // by id
    std::set<std::pair<double, std::size_t>> arrivals_;  // (arrival, id), not yet arrived
    std::vector<std::size_t> cancelled_;  // cancelled before they arrived
    std::optional<gpu_batch> gpu_;
    std::optional<cpu_batch> cpu_;
    double horizon_ = 0.0, now_ = 0.0;
};

/// Runs `requests` through their workflows on `gen` and `ret` under `opt.policy` on the
/// virtual clock (every request submitted up front, run to the end) and returns each
/// request's arrival, finish and final state, in input order. With cost models this is the
/// deterministic simulation mode. Speculative generations that fail validation are re-run,
/// so every policy produces the same states.
/// @code
/// auto g = frugal::rag::hyde_workflow();
/// frugal::sim::simulated_generator gen; frugal::sim::simulated_retriever ret;
/// std::vector<frugal::sim::rag_request> reqs{{0.0, &g, {}}, {5.0, &g, {}}};
/// auto run = frugal::sim::schedule_rag(reqs, gen, ret, {.policy = frugal::rag::rag_policy::wavefront});
/// @endcode
template <rag::rag_generator G, rag::rag_retriever R>
[[nodiscard]] rag::rag_run schedule_rag(std::vector<rag_request> requests, G& gen, R& ret,
                                        const rag::rag_schedule_options& opt = {}) {
    rag_event_loop<G, R> loop(gen, ret, opt);
    for (rag_request& r : requests) (void)loop.submit(std::move(r));
    loop.run();
    rag::rag_run out = loop.statistics();
    out.requests.resize(requests.size());
    for (rag::rag_outcome& o : loop.take_finished()) out.requests[o.state.request] = std::move(o);
    return out;
}

}  // namespace frugal::sim
