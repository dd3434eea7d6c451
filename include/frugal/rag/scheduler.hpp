#pragma once
/// @file
/// HedraRAG's scheduler as a decision core (sections 3.1, 4.2, 4.3, 4.5): it owns every
/// request's walk through its RAGraph and makes every choice (wavefront batching, Eq. 1
/// sub-stage budgets, similarity-aware cluster order, speculative generation and retrieval,
/// rollback), but runs nothing and reads no clock. Its caller asks for the next generation
/// batch whenever the generation side (the GPU) is free and for the next retrieval batch
/// whenever the retrieval side (the CPU) is free, runs them (both may be in flight at once),
/// and reports each one's completion with the time it ended. The drivers: `rag_runtime`
/// (wall clock, two threads) and frugal::sim's virtual-clock loop; given the same calls with
/// the same times, a core makes the same decisions.

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <limits>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "frugal/core/assert.hpp"
#include "frugal/core/error.hpp"
#include "frugal/rag/cluster_order.hpp"
#include "frugal/rag/engine.hpp"
#include "frugal/rag/substage.hpp"
#include "frugal/rag/workflow.hpp"
#include "frugal/retrieve/top_k.hpp"

namespace frugal::rag {

/// Which scheduler runs the requests (HedraRAG Figure 5).
enum class rag_policy : std::uint8_t {
    /// (a) "general RAG frameworks" (LangChain-style chains over an engine): one loop calls
    /// the LLM engine and the vector index in turn, so the GPU and the CPU never work at the
    /// same time. The engine decodes step by step with continuous batching; a retrieval call
    /// searches every queued query's full probe list and blocks the loop until it returns.
    /// Whichever side's oldest ready stage has waited longer goes next.
    sequential,
    /// (b) naive asynchronous integration (the paper's FlashRAG-based baseline): GPU and CPU
    /// run concurrently; the GPU decodes step by step (continuous batching), the CPU searches
    /// every queued query's full probe list in one call.
    naive_async,
    /// (c) HedraRAG: both sides cut into sub-stages of the Eq. 1 budget, new work joins at
    /// every sub-stage, plus similarity-aware cluster order and speculative generation and
    /// retrieval when the GPU or CPU is under-used.
    wavefront,
};

/// The scheduler's name as the bench and the docs print it.
[[nodiscard]] constexpr const char* rag_policy_name(rag_policy p) noexcept {
    return p == rag_policy::sequential ? "sequential" : p == rag_policy::naive_async ? "naive_async" : "wavefront";
}

/// Knobs of the scheduler.
struct rag_schedule_options {
    rag_policy policy = rag_policy::wavefront;
    bool speculate = true;                ///< speculative generation (wavefront only)
    double beta_ms = 0.5;                 ///< Eq. 1's per-dispatch scheduling overhead
    std::size_t speculate_below = 16;     ///< tau * T_max of 4.3 as a generation batch size
    std::size_t speculate_after = 1;      ///< retrieval sub-stages before speculation may start
    std::size_t doc_tokens = 128;         ///< context tokens per retrieved document
    /// Similarity-aware cluster order (4.3) from each request's local cache of its previous
    /// retrieval's top `history` results (wavefront only; applied when the retriever is a
    /// rag_ordered_retriever, which locates the results' clusters).
    bool reorder = true;
    std::size_t history = 20;
    /// Speculative retrieval (4.3): once `speculate_retrieval_at` of a generation's steps are
    /// done and fewer than `speculate_retrieval_below` requests are retrieving (the paper's
    /// tau T_max for retrieval, 32), the next retrieval starts with the query of the state the
    /// generator previews from its partial output; when the generation ends it is kept if
    /// its query equals the final one, else discarded and re-run (its results still guide the
    /// cluster order). Wavefront only; the scheduler throws when it is asked for and the
    /// generator is not a rag_previewing_generator or the retriever not a rag_ordered_retriever.
    /// Off by default: it pays only when a partial generation's query is often the final one
    /// (a `query_of` that reads a query the generation emits early, e.g. a sub-question).
    bool speculate_retrieval = false;
    double speculate_retrieval_at = 0.5;
    std::size_t speculate_retrieval_below = 32;
};

/// How a request ended.
enum class rag_status : std::uint8_t {
    finished,   ///< reached END
    cancelled,  ///< `cancel` (the runtime: its stop token)
    timed_out,  ///< its deadline or a stage timeout passed (the runtime's)
    failed,     ///< its generator, retriever, router or user node threw
};

[[nodiscard]] constexpr const char* rag_status_name(rag_status s) noexcept {
    return s == rag_status::finished ? "finished" : s == rag_status::cancelled ? "cancelled"
                                                 : s == rag_status::timed_out ? "timed_out"
                                                                              : "failed";
}

/// What happened to one request; times in ms on the caller's clock.
struct rag_outcome {
    double arrival = 0.0, finish = 0.0;  ///< submitted, ended
    rag_state state;
    rag_status status = rag_status::finished;
    std::string error;             ///< why it failed, was cancelled or timed out ("" when finished)
    std::exception_ptr exception;  ///< what its generator, retriever, router or user node threw
    double generation_ms = 0.0;    ///< durations of the generation batches it was in
    double retrieval_ms = 0.0;     ///< durations of the retrieval batches it was in
    double first_token = -1.0;     ///< end of the first decode step of its last kept generation (-1: none)
    std::size_t decode_steps = 0, retrieval_substages = 0;
    [[nodiscard]] double latency() const noexcept { return finish - arrival; }
};

/// Busy times and counters of a run.
struct rag_run {
    std::vector<rag_outcome> requests;
    double makespan = 0.0, gpu_busy = 0.0, cpu_busy = 0.0;
    std::size_t gpu_batches = 0, cpu_batches = 0, speculations = 0, rollbacks = 0;
    std::size_t gpu_batch_members = 0, cpu_batch_members = 0, gpu_batch_max = 0, cpu_batch_max = 0;
    std::size_t retrieval_speculations = 0, retrieval_rollbacks = 0;  ///< speculative retrievals, and those discarded
    std::size_t retrievals = 0;       ///< completed (non-speculative) retrieval stages
    /// Over those: clusters searched, in search order, until every final result had been found
    /// (needs a rag_ordered_retriever to locate the results; 0 otherwise).
    std::size_t clusters_to_final = 0;

    [[nodiscard]] double mean_latency() const {
        double s = 0.0;
        for (const auto& r : requests) s += r.latency();
        return requests.empty() ? 0.0 : s / static_cast<double>(requests.size());
    }
};

/// A generation batch to run: `discards` first (each request's generation in progress is
/// dropped), then `steps` decode steps (a sub-stage), each over the members that have steps
/// left: member i starts at `slots[i].step` and ends its generation at `lengths[i]` (or at
/// an end of sequence, for a rag_stopping_generator). `run_generation_batch` runs it.
struct generation_batch {
    std::uint64_t id = 0;
    std::vector<generation_slot> slots;
    std::vector<std::size_t> lengths;
    std::size_t steps = 0;
    std::vector<std::size_t> discards;
};

/// What running a generation batch did: the decode steps each member ran, and the summed
/// duration the generator returned (the wall-clock driver times the batch itself).
struct generation_report {
    std::vector<std::size_t> steps_run;
    std::vector<std::uint8_t> stopped;  ///< 1: the member's generation ended at an end of sequence
    double duration_ms = 0.0;
    double first_step_ms = 0.0;  ///< the first step's duration (time to first token)
};

/// A retrieval batch to run: each slot's clusters searched into its heap.
template <class Query>
struct retrieval_batch {
    std::uint64_t id = 0;
    std::vector<retrieval_slot<Query>> slots;
};

/// Runs `b` on `gen` (its discards, then its decode steps) and reports what it did.
/// @code
/// auto batch = core.next_generation_batch(now);
/// if (batch) core.generation_done(*batch, frugal::rag::run_generation_batch(engine, *batch), now + elapsed);
/// @endcode
template <rag_generator G>
generation_report run_generation_batch(G& gen, const generation_batch& b) {
    for (std::size_t r : b.discards) gen.discard(r);
    generation_report rep;
    rep.steps_run.assign(b.slots.size(), 0);
    rep.stopped.assign(b.slots.size(), 0);
    std::vector<std::size_t> ends = b.lengths;
    std::vector<generation_slot> step;
    for (std::size_t s = 0; s < b.steps; ++s) {
        step.clear();
        std::vector<std::size_t> members;
        for (std::size_t i = 0; i < b.slots.size(); ++i) {
            const std::size_t at = b.slots[i].step + rep.steps_run[i];
            if (at >= ends[i]) continue;
            generation_slot sl = b.slots[i];
            sl.step = at;
            sl.context += rep.steps_run[i];
            step.push_back(sl);
            members.push_back(i);
        }
        if (step.empty()) break;
        const double d = static_cast<double>(gen.step(std::span<const generation_slot>(step)));
        if (s == 0) rep.first_step_ms = d;
        rep.duration_ms += d;
        for (std::size_t i : members) {
            ++rep.steps_run[i];
            if constexpr (rag_stopping_generator<G>) {
                const std::size_t at = b.slots[i].step + rep.steps_run[i];
                if (at < ends[i] && gen.stopped(b.slots[i].request)) {  // end of sequence
                    ends[i] = at;
                    rep.stopped[i] = 1;
                }
            }
        }
    }
    return rep;
}

/// One call into the scheduler as an observer sees it (record and replay): the time, the
/// batch, its members (request ids) and `detail` (a generation batch: its steps, then each
/// member's start step and length; a report: the steps each member ran; a retrieval batch:
/// each member's cluster count, then the clusters; a cancel: the status).
struct rag_trace_event {
    enum class kind : std::uint8_t { submit, generation_batch, generation_done, retrieval_batch, retrieval_done, cancel, failed };
    kind what = kind::submit;
    double now = 0.0, duration = 0.0;
    std::uint64_t batch = 0;
    std::vector<std::size_t> members;
    std::vector<std::size_t> detail;
    friend bool operator==(const rag_trace_event&, const rag_trace_event&) = default;
};

/// HedraRAG's scheduler (the decision core; see the file comment). Requests are submitted
/// as they arrive and end in any order; the driver alternates, per side, between asking for
/// a batch and reporting it done, and collects ended requests with `take_finished`. Time is
/// the caller's (ms; each call's `now`, clamped to be non-decreasing). Not thread-safe: the
/// driver serialises its calls (`rag_runtime` holds a mutex), and may run a generation batch
/// and a retrieval batch at once. The generator is called only from `next_generation_batch`
/// and `generation_done` and the retriever only from `next_retrieval_batch` and
/// `retrieval_done`, so each is used by one side (see the concepts). Slots point into the
/// scheduler's per-request state, valid until the batch is reported. Request ids are the
/// caller's, or count submissions from 0.
/// @code
/// frugal::rag::rag_scheduler core(engine, index, {.policy = frugal::rag::rag_policy::wavefront});
/// const std::size_t id = core.submit(graph, {.input = "What is RAG?"}, now_ms());
/// if (auto b = core.next_retrieval_batch(now_ms())) {
///     index.search(b->slots);
///     core.retrieval_done(*b, elapsed_ms, now_ms());
/// }
/// @endcode
template <rag_generator G, rag_retriever R>
class rag_scheduler {
public:
    using query_type = rag_query_t<R>;
    using observer = std::function<void(const rag_trace_event&)>;

    rag_scheduler(G& gen, R& ret, const rag_schedule_options& opt = {}) : gen_(gen), ret_(ret), opt_(opt) {
        FRUGAL_CHECK(std::isfinite(opt.beta_ms) && opt.beta_ms > 0.0, "rag_scheduler: beta ", opt.beta_ms, " ms (must be > 0)");
        FRUGAL_CHECK(opt.history > 0, "rag_scheduler: history of 0 results");
        FRUGAL_CHECK(opt.speculate_retrieval_at > 0.0 && opt.speculate_retrieval_at < 1.0,
                     "rag_scheduler: speculate_retrieval_at ", opt.speculate_retrieval_at, " is outside (0, 1)");
        FRUGAL_CHECK(!opt.speculate_retrieval || speculative_retrieval,
                     "rag_scheduler: speculate_retrieval needs a generator with preview(state, node) "
                     "(rag_previewing_generator) and a retriever with list_of(id) (rag_ordered_retriever)");
    }

    /// Calls `f` with every call made into the scheduler and every batch it returns.
    void set_observer(observer f) { observer_ = std::move(f); }

    [[nodiscard]] const rag_schedule_options& options() const noexcept { return opt_; }

    /// Admits a request on `graph` (which must outlive it) with its initial `state`, arriving
    /// at `now`, and returns its id (also `state.request`, what the generator and retriever
    /// see): `id` when given (it must not belong to a request still held), else the number of
    /// submissions so far. User nodes after START run here; a router or user node that throws
    /// fails the request (see `take_finished`). Throws on an invalid workflow, a NaN time or
    /// an id in use.
    std::size_t submit(const rag_graph& graph, rag_state state, double now, std::optional<std::size_t> id = {}) {
        tick(now, "submit");
        graph.validate();
        const std::size_t rid = id.value_or(submitted_);
        FRUGAL_CHECK(!seq_of_.contains(rid), "rag_scheduler::submit: request id ", rid, " is in use");
        seq_of_.emplace(rid, base_ + live_.size());
        ++submitted_;
        state.request = rid;
        live& l = live_.emplace_back();
        l.graph = &graph;
        l.state = std::move(state);
        l.arrival = now_;
        l.ready_at = now_;
        l.history.emplace(opt_.history);
        notify(rag_trace_event::kind::submit, 0, 0.0, {rid}, {});
        guarded(l, [&] { advance(l, rag_start); });
        return rid;
    }

    /// The next generation batch, when the generation side is free (nullopt: nothing to run
    /// now; ask again after the next report or submission). A batch with no slots only
    /// carries discards. A generator's `length` that throws fails its request, a `step_time`
    /// that throws the batch's members (as `next_retrieval_batch` fails a request whose
    /// retriever's `cluster_time` throws).
    [[nodiscard]] std::optional<generation_batch> next_generation_batch(double now) {
        tick(now, "next_generation_batch");
        FRUGAL_CHECK(!gpu_.running, "rag_scheduler::next_generation_batch: the last generation batch was not reported");
        settle_generations();
        if (opt_.policy == rag_policy::sequential && sequential_turn() != side_kind::generation) {
            if (discards_.empty()) return nothing<generation_batch>(rag_trace_event::kind::generation_batch);
            return discard_only();
        }
        generation_batch b;
        b.id = ++batches_;
        std::size_t ctx = 0, longest = 0;
        for (live& l : live_) {
            if (!gen_ready(l)) continue;
            gen_part& gp = l.gen;
            if (gp.length == 0) {
                guarded(l, [&] { gp.length = std::max<std::size_t>(1, gen_.length(l.state, l.graph->node(gp.node))); });
                if (l.ending) continue;  // its `length` threw: it failed alone
            }
            b.slots.push_back({l.state.request, gp.steps, context(l), &l.graph->node(gp.node), &l.state, gp.docs,
                               gp.speculative});
            b.lengths.push_back(gp.length);
            ctx += context(l);
            longest = std::max(longest, gp.length - gp.steps);
        }
        b.discards = std::move(discards_);
        discards_.clear();
        if (b.slots.empty() && b.discards.empty()) {
            --batches_;
            return nothing<generation_batch>(rag_trace_event::kind::generation_batch);
        }
        b.steps = b.slots.empty() ? 0 : 1;
        if (wavefront() && budget() > 0.0 && !b.slots.empty()) {
            // Generation sub-stage: as many decode steps as fit the Eq. 1 budget. An estimate
            // that throws fails the batch's members, as a step that throws would.
            try {
                const std::vector<double> costs(longest, gen_.step_time(b.slots.size(), ctx));
                b.steps = partition_by_budget(costs, budget()).front().second;
            } catch (...) {
                const std::exception_ptr error = std::current_exception();
                const std::string why = "the generator's step_time failed: " + what_of(error);
                for (const generation_slot& s : b.slots) {
                    fail(at(s.request), error, why);
                    end(at(s.request));
                }
                b.slots.clear();
                b.lengths.clear();
                b.discards.insert(b.discards.end(), discards_.begin(), discards_.end());  // the failed members' too
                discards_.clear();
                if (b.discards.empty()) {
                    --batches_;
                    return nothing<generation_batch>(rag_trace_event::kind::generation_batch);
                }
                b.steps = 0;
            }
        }
        for (const generation_slot& s : b.slots) at(s.request).gen.busy = true;
        gpu_ = {true, b.id, b.slots.size()};
        stats_.gpu_batch_members += b.slots.size();
        stats_.gpu_batch_max = std::max(stats_.gpu_batch_max, b.slots.size());
        if (observer_) {
            std::vector<std::size_t> members, detail{b.steps};
            for (const auto& s : b.slots) {
                members.push_back(s.request);
                detail.push_back(s.step);
            }
            detail.insert(detail.end(), b.lengths.begin(), b.lengths.end());
            detail.insert(detail.end(), b.discards.begin(), b.discards.end());
            notify(rag_trace_event::kind::generation_batch, b.id, 0.0, std::move(members), std::move(detail));
        }
        return b;
    }

    /// Reports that `b` ran (`report` from `run_generation_batch`, or the engine's own run),
    /// taking `duration_ms` (the driver's measure: wall time, or the report's modelled sum).
    /// Generations that reached their length (or an end of sequence) are committed, which may
    /// finish requests or start their next stage.
    void generation_done(const generation_batch& b, const generation_report& report, double duration_ms, double now) {
        tick(now, "generation_done");
        check_batch(b.id, gpu_, "generation_done");
        FRUGAL_CHECK(report.steps_run.size() == b.slots.size() && report.stopped.size() == b.slots.size(),
                     "rag_scheduler::generation_done: ", report.steps_run.size(), " step counts and ",
                     report.stopped.size(), " stops for ", b.slots.size(), " slots");
        FRUGAL_CHECK(std::isfinite(duration_ms) && duration_ms >= 0.0, "rag_scheduler::generation_done: duration ",
                     duration_ms, " ms");
        gpu_ = {};
        if (!b.slots.empty()) {
            stats_.gpu_busy += duration_ms;
            ++stats_.gpu_batches;
        }
        if (observer_) {
            std::vector<std::size_t> members;
            for (const auto& s : b.slots) members.push_back(s.request);
            notify(rag_trace_event::kind::generation_done, b.id, duration_ms, std::move(members), report.steps_run);
        }
        std::size_t cpu_load = 0;
        for (const live& l : live_) cpu_load += l.ret.active ? 1 : 0;
        const double first_step = report.duration_ms > 0.0 ? duration_ms * report.first_step_ms / report.duration_ms
                                                          : duration_ms;
        for (std::size_t i = 0; i < b.slots.size(); ++i) {
            live& l = at(b.slots[i].request);
            gen_part& gp = l.gen;
            gp.busy = false;
            const std::size_t ran = report.steps_run[i];
            FRUGAL_CHECK(ran <= b.steps && gp.steps + ran <= gp.length, "rag_scheduler::generation_done: request ",
                         b.slots[i].request, " ran ", ran, " steps of a batch of ", b.steps);
            l.generation_ms += duration_ms;
            l.decode_steps += ran;
            if (gp.steps == 0 && ran > 0) gp.first_token = now_ - duration_ms + first_step;
            gp.steps += ran;
            if (report.stopped[i] != 0) gp.length = gp.steps;  // ended at an end of sequence
            if (l.ending) {  // cancelled or failed while on the GPU
                end(l);
                continue;
            }
            guarded(l, [&] {
                if (l.verdict) apply_verdict(l);
                else if (!gp.speculative && gp.active && gp.steps == gp.length) finish_generation(l);
                else maybe_speculate_retrieval(l, cpu_load);
            });
        }
    }

    /// Reports that `b` threw `error` (the generator failed): its members fail with it.
    void generation_failed(const generation_batch& b, std::exception_ptr error, double now) {
        tick(now, "generation_failed");
        check_batch(b.id, gpu_, "generation_failed");
        gpu_ = {};
        fail_batch(b.id, b.slots, &live::gen, error, "the generator failed");
    }

    /// The next retrieval batch, when the retrieval side is free (nullopt: nothing to run now).
    [[nodiscard]] std::optional<retrieval_batch<query_type>> next_retrieval_batch(double now) {
        tick(now, "next_retrieval_batch");
        FRUGAL_CHECK(!cpu_.running, "rag_scheduler::next_retrieval_batch: the last retrieval batch was not reported");
        settle_retrievals();
        if (opt_.policy == rag_policy::sequential && sequential_turn() != side_kind::retrieval)
            return nothing<retrieval_batch<query_type>>(rag_trace_event::kind::retrieval_batch);
        retrieval_batch<query_type> b;
        const double mb = budget();
        for (live& l : live_) {
            if (!ret_ready(l)) continue;
            ret_part& rp = l.ret;
            std::size_t end = rp.probe.size();
            if (wavefront() && mb > 0.0) {
                // Retrieval sub-stage: this request's next clusters up to the budget (4.2).
                guarded(l, [&] {
                    std::vector<double> costs;
                    for (std::size_t k = rp.next; k < end; ++k) costs.push_back(ret_.cluster_time(rp.probe[k]));
                    end = rp.next + partition_by_budget(costs, mb).front().second;
                });
                if (l.ending) continue;  // its `cluster_time` threw: it failed alone
            }
            b.slots.push_back({l.state.request, &*rp.query, std::span<const std::size_t>(rp.probe).subspan(rp.next, end - rp.next),
                               &*rp.found});
            rp.next = end;
            rp.busy = true;
        }
        if (b.slots.empty()) return nothing<retrieval_batch<query_type>>(rag_trace_event::kind::retrieval_batch);
        b.id = ++batches_;
        cpu_ = {true, b.id, b.slots.size()};
        stats_.cpu_batch_members += b.slots.size();
        stats_.cpu_batch_max = std::max(stats_.cpu_batch_max, b.slots.size());
        if (observer_) {
            std::vector<std::size_t> members, detail;
            for (const auto& s : b.slots) {
                members.push_back(s.request);
                detail.push_back(s.clusters.size());
            }
            for (const auto& s : b.slots) detail.insert(detail.end(), s.clusters.begin(), s.clusters.end());
            notify(rag_trace_event::kind::retrieval_batch, b.id, 0.0, std::move(members), std::move(detail));
        }
        return b;
    }

    /// Reports that `b` was searched, taking `duration_ms`.
    void retrieval_done(const retrieval_batch<query_type>& b, double duration_ms, double now) {
        tick(now, "retrieval_done");
        check_batch(b.id, cpu_, "retrieval_done");
        FRUGAL_CHECK(std::isfinite(duration_ms) && duration_ms >= 0.0, "rag_scheduler::retrieval_done: duration ",
                     duration_ms, " ms");
        cpu_ = {};
        stats_.cpu_busy += duration_ms;
        ++stats_.cpu_batches;
        if (observer_) {
            std::vector<std::size_t> members;
            for (const auto& s : b.slots) members.push_back(s.request);
            notify(rag_trace_event::kind::retrieval_done, b.id, duration_ms, std::move(members), {});
        }
        std::size_t gpu_load = 0;
        for (const live& l : live_) gpu_load += l.gen.active ? 1 : 0;
        for (const auto& s : b.slots) {
            live& l = at(s.request);
            ret_part& rp = l.ret;
            rp.busy = false;
            ++rp.substages;
            l.retrieval_ms += duration_ms;
            ++l.retrieval_substages;
            if (l.ending) {
                end(l);
                continue;
            }
            guarded(l, [&] { retrieved(l, gpu_load); });
        }
    }

    /// Reports that `b` threw `error` (the retriever failed): its members fail with it.
    void retrieval_failed(const retrieval_batch<query_type>& b, std::exception_ptr error, double now) {
        tick(now, "retrieval_failed");
        check_batch(b.id, cpu_, "retrieval_failed");
        cpu_ = {};
        fail_batch(b.id, b.slots, &live::ret, error, "the retriever failed");
    }

    /// Ends request `id` with `why` (cancelled or timed out) and `reason`; its generation is
    /// discarded at the next generation batch. A request in a batch in flight ends when that
    /// batch is reported. Returns false when it had already ended.
    bool cancel(std::size_t id, rag_status why, std::string reason, double now) {
        tick(now, "cancel");
        FRUGAL_CHECK(why == rag_status::cancelled || why == rag_status::timed_out, "rag_scheduler::cancel: status ",
                     rag_status_name(why), " (cancelled or timed_out)");
        if (!seq_of_.contains(id)) return false;  // never submitted, or ended and taken
        live& l = at(id);
        if (l.done || l.ending) return false;
        notify(rag_trace_event::kind::cancel, 0, 0.0, {id}, {static_cast<std::size_t>(why)});
        l.ending = true;
        l.status = why;
        l.error = std::move(reason);
        end(l);
        return true;
    }

    /// Times out every request whose current generation or retrieval stage became ready more
    /// than `limit_ms` before `now` (a driver's per-stage timeout); returns how many.
    std::size_t time_out_stages(double now, double limit_ms) {
        tick(now, "time_out_stages");
        FRUGAL_CHECK(!std::isnan(limit_ms) && limit_ms > 0.0, "rag_scheduler::time_out_stages: limit ", limit_ms,
                     " ms (must be > 0)");
        std::size_t n = 0;
        for (live& l : live_) {
            if (l.done || l.ending || l.at == rag_start || !(now_ - l.ready_at > limit_ms)) continue;
            std::string why = "stage " + std::to_string(l.at) + " (" + l.graph->node(l.at).name + ") ran longer than " +
                              std::to_string(limit_ms) + " ms";
            n += cancel(l.state.request, rag_status::timed_out, std::move(why), now_) ? 1 : 0;
        }
        return n;
    }

    /// The requests that ended since the last call, in ending order.
    [[nodiscard]] std::vector<rag_outcome> take_finished() {
        std::vector<rag_outcome> out;
        for (std::size_t id : finished_) {
            live& l = at(id);
            out.push_back({l.arrival, l.finish, std::move(l.state), l.status, std::move(l.error), std::move(l.exception),
                           l.generation_ms, l.retrieval_ms, l.first_token, l.decode_steps, l.retrieval_substages});
            l.taken = true;
        }
        finished_.clear();
        while (!live_.empty() && live_.front().taken) {  // forget the ended prefix
            seq_of_.erase(live_.front().state.request);
            live_.pop_front();
            ++base_;
        }
        return out;
    }

    /// Whether `next_generation_batch` has work now: a batch to return, or a verdict to apply
    /// (a driver waits for this).
    [[nodiscard]] bool generation_work() const {
        if (gpu_.running) return false;
        if (!discards_.empty()) return true;
        if (opt_.policy == rag_policy::sequential) return sequential_turn() == side_kind::generation;
        for (const live& l : live_)
            if (gen_ready(l) || verdict_due(l)) return true;
        return false;
    }
    /// Whether `next_retrieval_batch` has work now: a batch to return, or a query to make or
    /// validate (a driver waits for this).
    [[nodiscard]] bool retrieval_work() const {
        if (cpu_.running) return false;
        if (opt_.policy == rag_policy::sequential) return sequential_turn() == side_kind::retrieval;
        for (const live& l : live_)
            if (ret_ready(l) || validation_due(l)) return true;
        return false;
    }
    /// Whether a batch of each side is out (asked for and not yet reported).
    [[nodiscard]] bool generation_running() const noexcept { return gpu_.running; }
    [[nodiscard]] bool retrieval_running() const noexcept { return cpu_.running; }

    /// The time of the last call (ms).
    [[nodiscard]] double now() const noexcept { return now_; }
    /// Requests submitted and not yet ended.
    [[nodiscard]] std::size_t in_flight() const noexcept { return submitted() - done_; }
    /// Requests submitted so far.
    [[nodiscard]] std::size_t submitted() const noexcept { return submitted_; }
    /// Busy times and counters so far (`requests` empty; `makespan` is the last end).
    [[nodiscard]] const rag_run& statistics() const noexcept { return stats_; }

private:
    enum class side_kind : std::uint8_t { none, generation, retrieval };
    struct gen_part {
        bool active = false, busy = false, speculative = false;
        rag_node_id node = 0;
        std::size_t steps = 0, length = 0;  // length 0: not asked yet (the generation side asks)
        double first_token = -1.0;
        std::vector<std::uint64_t> docs;
    };
    struct ret_part {
        bool active = false, busy = false, started = false;
        bool speculative = false;  // started from a partial generation's previewed state
        bool validate = false;     // the node was reached while speculative: compare queries
        rag_node_id node = 0;
        std::size_t k = 0;  // the node's top-k
        std::optional<rag_state> previewed;  // a speculative retrieval's state, until its query is made
        std::optional<query_type> query;
        std::vector<std::size_t> probe;
        std::size_t next = 0, substages = 0;
        std::optional<retrieve::top_k> found;  // holds max(top_k, history) results when reordering
    };
    struct live {
        const rag_graph* graph = nullptr;
        rag_state state;
        rag_node_id at = rag_start;
        double arrival = 0.0, ready_at = 0.0, finish = 0.0;
        bool done = false, taken = false, ending = false;
        rag_status status = rag_status::finished;
        std::string error;
        std::exception_ptr exception;
        double generation_ms = 0.0, retrieval_ms = 0.0, first_token = -1.0;
        std::size_t decode_steps = 0, retrieval_substages = 0;
        gen_part gen;
        ret_part ret;
        std::optional<retrieval_history> history;  // the request's local cache (4.3)
        std::optional<bool> verdict;               // a speculative generation's documents were (not) the final ones
        std::vector<std::uint64_t> final_docs;     // the retrieval that decided the verdict
        rag_node_id final_node = 0;
    };
    struct side {
        bool running = false;
        std::uint64_t batch = 0;
        std::size_t members = 0;
    };

    static constexpr bool ordered = rag_ordered_retriever<R>;
    static constexpr bool speculative_retrieval = ordered && rag_previewing_generator<G>;

    [[nodiscard]] live& at(std::size_t id) { return live_[seq_of_.at(id) - base_]; }
    [[nodiscard]] bool wavefront() const noexcept { return opt_.policy == rag_policy::wavefront; }

    void tick(double now, const char* who) {
        FRUGAL_CHECK(!std::isnan(now), "rag_scheduler::", who, ": time is NaN");
        now_ = std::max(now_, now);
    }
    void check_batch(std::uint64_t id, const side& s, const char* who) const {
        FRUGAL_CHECK(s.running && s.batch == id, "rag_scheduler::", who, ": batch ", id, " is not the one in flight");
    }
    void notify(typename rag_trace_event::kind k, std::uint64_t batch, double duration, std::vector<std::size_t> members,
                std::vector<std::size_t> detail) {
        if (observer_) observer_({k, now_, duration, batch, std::move(members), std::move(detail)});
    }
    // A side asked and got no batch: still a call an observer records (it settles work).
    template <class Batch>
    std::optional<Batch> nothing(typename rag_trace_event::kind k) {
        notify(k, 0, 0.0, {}, {});
        return std::nullopt;
    }

    // Runs `f` for request `l`; what a router, user node, generator or retriever call throws
    // fails this request only.
    template <class F>
    void guarded(live& l, F&& f) {
        try {
            f();
        } catch (const std::exception& e) {
            fail(l, std::current_exception(), e.what());
            end(l);
        } catch (...) {
            fail(l, std::current_exception(), "an unknown exception");
            end(l);
        }
    }
    // A batch of one side threw: its members (their `Part` no longer busy) fail with `error`.
    template <class Slots, class Part>
    void fail_batch(std::uint64_t batch, const Slots& slots, Part live::*part, const std::exception_ptr& error,
                    const char* reason) {
        std::vector<std::size_t> members;
        for (const auto& s : slots) members.push_back(s.request);
        notify(rag_trace_event::kind::failed, batch, 0.0, members, {});
        const std::string why = std::string(reason) + ": " + what_of(error);
        for (std::size_t id : members) {
            live& l = at(id);
            (l.*part).busy = false;
            fail(l, error, why);
            end(l);
        }
    }
    // The message of what `e` holds ("an unknown exception" when it is no std::exception).
    static std::string what_of(const std::exception_ptr& e) {
        try {
            std::rethrow_exception(e);
        } catch (const std::exception& x) {
            return x.what();
        } catch (...) {
            return "an unknown exception";
        }
    }
    void fail(live& l, std::exception_ptr e, std::string reason) {
        if (l.ending || l.done) return;
        l.ending = true;
        l.status = rag_status::failed;
        l.error = std::move(reason);
        l.exception = std::move(e);
    }
    // Ends an ending request once no batch holds it; a generation the generator holds is
    // discarded at the next generation batch.
    void end(live& l) {
        if (l.done || l.gen.busy || l.ret.busy) return;
        if (l.gen.active && l.gen.steps > 0) discards_.push_back(l.state.request);
        l.done = true;
        l.gen.active = l.ret.active = false;
        l.verdict.reset();
        l.finish = now_;
        stats_.makespan = std::max(stats_.makespan, now_);
        finished_.push_back(l.state.request);
        ++done_;
    }

    // The node's top-k of the (possibly wider) heap.
    [[nodiscard]] static std::vector<std::uint64_t> result_ids(const ret_part& rp) {
        std::vector<std::uint64_t> ids = rp.found->ids();
        if (ids.size() > rp.k) ids.resize(rp.k);
        return ids;
    }
    // Remembers what a retrieval found so far, and where, as the request's local cache.
    void remember(live& l) {
        if constexpr (ordered) {
            if (!wavefront() || !opt_.reorder || !l.ret.started) return;
            std::vector<std::pair<std::uint64_t, std::size_t>> with_lists;
            for (std::uint64_t id : l.ret.found->ids()) with_lists.emplace_back(id, static_cast<std::size_t>(ret_.list_of(id)));
            l.history->remember(with_lists, std::span<const std::size_t>(l.ret.probe).first(l.ret.next));
        }
    }

    [[nodiscard]] bool gen_ready(const live& l) const {
        return !l.ending && l.gen.active && !l.gen.busy && !l.verdict && (l.gen.length == 0 || l.gen.steps < l.gen.length);
    }
    [[nodiscard]] bool ret_ready(const live& l) const {
        return !l.ending && l.ret.active && !l.ret.busy && !l.ret.validate && (!l.ret.started || l.ret.next < l.ret.probe.size());
    }
    [[nodiscard]] static bool verdict_due(const live& l) { return !l.ending && !l.done && l.verdict && !l.gen.busy; }
    [[nodiscard]] static bool validation_due(const live& l) {
        return !l.ending && !l.done && l.ret.active && l.ret.validate && !l.ret.busy;
    }

    // The sequential baseline: one side at a time, the one whose oldest ready stage waited longest.
    [[nodiscard]] side_kind sequential_turn() const {
        if (gpu_.running || cpu_.running) return side_kind::none;
        double g = std::numeric_limits<double>::infinity(), r = g;
        for (const live& l : live_) {
            if (gen_ready(l) || verdict_due(l)) g = std::min(g, l.ready_at);
            if (ret_ready(l) || validation_due(l)) r = std::min(r, l.ready_at);
        }
        if (g <= r && std::isfinite(g)) return side_kind::generation;
        return std::isfinite(r) ? side_kind::retrieval : side_kind::none;
    }
    [[nodiscard]] generation_batch discard_only() {
        generation_batch b;
        b.id = ++batches_;
        b.discards = std::move(discards_);
        discards_.clear();
        gpu_ = {true, b.id, 0};
        notify(rag_trace_event::kind::generation_batch, b.id, 0.0, {}, b.discards);
        return b;
    }

    // Walks from node `from` to the next generation or retrieval node (running user nodes),
    // or finishes the request at END. Throws what a router or user node throws.
    void advance(live& l, rag_node_id from) {
        const rag_graph& g = *l.graph;
        for (std::size_t hops = 0;; ++hops) {
            FRUGAL_CHECK(hops <= 1000000, "rag_scheduler: request ", l.state.request,
                         " ran a million user nodes without reaching generation, retrieval or END");
            const rag_node_id to = g.next(from, l.state);
            if (to == rag_end) {
                l.done = true;
                l.status = rag_status::finished;
                l.finish = now_;
                l.first_token = l.gen.first_token;
                stats_.makespan = std::max(stats_.makespan, now_);
                finished_.push_back(l.state.request);
                ++done_;
                return;
            }
            g.check_visit(to, l.state);
            const rag_node& n = g.node(to);
            l.at = to;
            l.ready_at = now_;
            if (n.kind == rag_node_kind::user) {
                n.action(l.state);
                ++l.state.visits[to];
                from = to;
                continue;
            }
            if (n.kind == rag_node_kind::generation) start_generation(l, to, false);
            else start_retrieval(l, to);
            return;
        }
    }

    void start_generation(live& l, rag_node_id id, bool speculative) {
        gen_part& gp = l.gen;
        gp.active = true;
        gp.speculative = speculative;
        gp.node = id;
        gp.steps = 0;
        gp.length = 0;
        gp.first_token = -1.0;
        if (speculative) gp.docs = result_ids(l.ret);
        else if (!l.state.retrieved.empty()) gp.docs = l.state.retrieved.back();
        else gp.docs.clear();
    }

    // Reaching retrieval node `id`: a speculative retrieval of it is validated on the
    // retrieval side (same query: it becomes the real one; else it is rolled back), otherwise
    // the retrieval starts there.
    void start_retrieval(live& l, rag_node_id id) {
        ret_part& rp = l.ret;
        if (rp.active && rp.speculative) {
            FRUGAL_ASSERT(rp.node == id);
            rp.validate = true;
            return;
        }
        begin_retrieval(l, id, std::nullopt);
    }

    // A retrieval of node `id` from the request's state (or a previewed one: speculative);
    // its query and probe list are made on the retrieval side.
    void begin_retrieval(live& l, rag_node_id id, std::optional<rag_state> previewed) {
        ret_part& rp = l.ret;
        rp.active = true;
        rp.started = false;
        rp.speculative = previewed.has_value();
        rp.validate = false;
        rp.node = id;
        rp.k = l.graph->node(id).top_k;
        rp.previewed = std::move(previewed);
        rp.query.reset();
        rp.probe.clear();
        rp.next = 0;
        rp.substages = 0;
    }

    // Retrieval side: makes the query and probe list of a retrieval not started yet.
    void make_query(live& l) {
        ret_part& rp = l.ret;
        const rag_node& n = l.graph->node(rp.node);
        rp.query = ret_.query_of(rp.previewed ? *rp.previewed : l.state, n);
        rp.previewed.reset();
        rp.probe = ret_.probe(*rp.query);
        FRUGAL_CHECK(!rp.probe.empty(), "rag_scheduler: the retriever probes no cluster for request ", l.state.request);
        const bool reorder = ordered && wavefront() && opt_.reorder;
        if (reorder) rp.probe = l.history->order(rp.probe);
        rp.found.emplace(reorder ? std::max(n.top_k, opt_.history) : n.top_k);
        rp.started = true;
        double t = 0.0;
        for (std::size_t c : rp.probe) t += ret_.cluster_time(c);
        retrieval_mean_ = (retrieval_mean_ * static_cast<double>(retrievals_) + t) / static_cast<double>(retrievals_ + 1);
        ++retrievals_;
    }

    // Retrieval side: starts the retrievals reached since the last batch and validates the
    // speculative ones whose node was reached.
    void settle_retrievals() {
        for (live& l : live_) {
            if (l.ending || !l.ret.active || l.ret.busy) continue;
            guarded(l, [&] {
                if (l.ret.validate) validate_retrieval(l);
                if (l.ret.active && !l.ret.started && !l.ret.validate) make_query(l);
            });
        }
    }

    // A speculative retrieval whose node was reached: kept when its query is the final one.
    void validate_retrieval(live& l) {
        ret_part& rp = l.ret;
        rp.validate = false;
        const query_type final_query = ret_.query_of(l.state, l.graph->node(rp.node));
        if (!rp.started) make_query(l);
        if (*rp.query == final_query) {
            rp.speculative = false;
            if (rp.next == rp.probe.size()) finish_retrieval(l);
            return;
        }
        ++stats_.retrieval_rollbacks;
        remember(l);  // the discarded results still guide the order (4.3)
        begin_retrieval(l, rp.node, std::nullopt);
        make_query(l);
    }

    // Generation side: applies the verdicts on speculative generations whose retrieval ended.
    void settle_generations() {
        for (live& l : live_)
            if (verdict_due(l)) guarded(l, [&] { apply_verdict(l); });
    }

    [[nodiscard]] std::size_t context(const live& l) const {
        return l.graph->node(l.gen.node).prompt_tokens + opt_.doc_tokens * l.gen.docs.size() + l.gen.steps;
    }

    // Eq. 1's sub-stage budget from the running mean retrieval-stage time.
    [[nodiscard]] double budget() const {
        return retrievals_ == 0 || retrieval_mean_ <= 0.0 ? 0.0 : substage_budget(retrieval_mean_, opt_.beta_ms);
    }

    void finish_generation(live& l) {
        gen_.commit(l.state, l.graph->node(l.gen.node));
        ++l.state.visits[l.gen.node];
        l.gen.active = false;
        advance(l, l.gen.node);
    }

    // Generation side: a speculative generation's retrieval ended with `final_docs`.
    void apply_verdict(live& l) {
        const bool same = *l.verdict;
        l.verdict.reset();
        l.state.retrieved.push_back(std::move(l.final_docs));
        ++l.state.visits[l.final_node];
        l.gen.speculative = false;
        l.at = l.gen.node;
        l.ready_at = now_;
        if (!same) {
            ++stats_.rollbacks;
            if (l.gen.steps > 0) gen_.discard(l.state.request);  // else the generator never saw it
            l.gen.steps = 0;
            l.gen.length = 0;
            l.gen.first_token = -1.0;
            l.gen.docs = l.state.retrieved.back();
            return;
        }
        if (l.gen.length != 0 && l.gen.steps == l.gen.length) finish_generation(l);  // 0: never stepped yet
    }

    // Retrieval side: a retrieval batch returned for request `l`.
    void retrieved(live& l, std::size_t& gpu_load) {
        ret_part& rp = l.ret;
        if (rp.validate) validate_retrieval(l);
        if (!rp.active || rp.busy || !rp.started) return;
        if (rp.speculative) return;  // validated when its generation ends
        if (rp.next == rp.probe.size()) {
            finish_retrieval(l);
            return;
        }
        // Speculative generation from the partial top-k when the GPU is under-used (4.3).
        const rag_graph& g = *l.graph;
        if (wavefront() && opt_.speculate && !l.gen.active && rp.substages >= opt_.speculate_after &&
            gpu_load < opt_.speculate_below && !g.conditional(rp.node)) {
            const rag_node_id to = g.next(rp.node, l.state);
            if (to != rag_end && g.node(to).kind == rag_node_kind::generation) {
                start_generation(l, to, true);
                ++gpu_load;
                ++stats_.speculations;
            }
        }
    }

    void finish_retrieval(live& l) {
        ret_part& rp = l.ret;
        remember(l);
        std::vector<std::uint64_t> docs = result_ids(rp);
        rp.active = false;
        ++stats_.retrievals;
        if constexpr (ordered) {
            std::size_t needed = 0;
            for (std::uint64_t id : docs) {
                const auto it = std::find(rp.probe.begin(), rp.probe.end(), static_cast<std::size_t>(ret_.list_of(id)));
                needed = std::max(needed, static_cast<std::size_t>(it - rp.probe.begin()) + 1);
            }
            stats_.clusters_to_final += needed;
        }
        if (l.gen.active) {  // a speculative generation is running: the generation side validates it
            l.verdict = l.gen.docs == docs;
            l.final_docs = std::move(docs);
            l.final_node = rp.node;
            return;
        }
        l.state.retrieved.push_back(std::move(docs));
        ++l.state.visits[rp.node];
        advance(l, rp.node);
    }

    // Speculative retrieval (4.3) from the partial text of a generation whose plain edge
    // leads to a retrieval node, when the CPU side is under-used (generation side).
    void maybe_speculate_retrieval([[maybe_unused]] live& l, [[maybe_unused]] std::size_t& cpu_load) {
        if constexpr (speculative_retrieval) {
            if (!wavefront() || !opt_.speculate_retrieval || !l.gen.active || l.gen.speculative || l.ret.active ||
                cpu_load >= opt_.speculate_retrieval_below || l.gen.steps >= l.gen.length ||
                static_cast<double>(l.gen.steps) < opt_.speculate_retrieval_at * static_cast<double>(l.gen.length))
                return;
            const rag_graph& g = *l.graph;
            if (g.conditional(l.gen.node)) return;
            const rag_node_id to = g.next(l.gen.node, l.state);
            if (to == rag_end || g.node(to).kind != rag_node_kind::retrieval) return;
            // The state as it will be when the retrieval node is reached, with the previewed
            // output; the retrieval side makes its query.
            rag_state st = l.state;
            gen_.preview(st, g.node(l.gen.node));
            ++st.visits[l.gen.node];
            begin_retrieval(l, to, std::move(st));
            ++cpu_load;
            ++stats_.retrieval_speculations;
        }
    }

    G& gen_;
    R& ret_;
    rag_schedule_options opt_;
    observer observer_;
    std::deque<live> live_;                                // held requests, in submission order
    std::unordered_map<std::size_t, std::size_t> seq_of_;  // request id -> position in submission order
    std::size_t base_ = 0, done_ = 0, submitted_ = 0;      // the first position held; requests ended, submitted
    std::vector<std::size_t> finished_;
    std::vector<std::size_t> discards_;  // generations to drop at the next generation batch
    side gpu_, cpu_;
    std::uint64_t batches_ = 0;
    double now_ = 0.0, retrieval_mean_ = 0.0;
    std::size_t retrievals_ = 0;
    rag_run stats_;
};

}  // namespace frugal::rag
