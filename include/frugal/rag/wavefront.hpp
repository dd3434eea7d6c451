#pragma once
/// @file
/// HedraRAG's wavefront scheduler (sections 3.1, 4.2, 4.3, 4.5) over a generator and a
/// retriever concept: many concurrent requests walk their RAGraphs; each cycle the ready
/// nodes are cut into sub-stages (Eq. 1), batched by kind and dispatched to the GPU
/// (generation) and CPU (retrieval) side, which run concurrently; speculative generation
/// starts from partial retrieval results and is rolled back on mismatch. The baselines of
/// the paper (sequential stage execution, naive asynchronous pipeline) run on the same
/// engine so that they are compared on equal terms.

#include <algorithm>
#include <cmath>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <limits>
#include <optional>
#include <set>
#include <span>
#include <type_traits>
#include <utility>
#include <vector>

#include "frugal/core/assert.hpp"
#include "frugal/core/error.hpp"
#include "frugal/rag/cluster_order.hpp"
#include "frugal/rag/substage.hpp"
#include "frugal/rag/workflow.hpp"
#include "frugal/retrieve/top_k.hpp"

namespace frugal::rag {

/// One request's decode step in a generation batch. Step 0 starts a new generation of
/// `node` for the request (prefill its prompt from `state` and `docs`); later steps extend
/// it. A generation ends with the generator's `commit` (kept) or `discard` (a speculative
/// generation whose documents were not the final ones, 4.3), and the next generation of
/// the request starts at step 0 again. `context` is the prompt, documents and steps so far
/// in tokens, as the scheduler estimates it.
struct generation_slot {
    std::size_t request = 0, step = 0, context = 0;
    const rag_node* node = nullptr;
    const rag_state* state = nullptr;
    std::span<const std::uint64_t> docs;
    bool speculative = false;  ///< conditioned on a partial top-k (4.3): may be discarded
};

/// One request's share of a retrieval batch: its query (the retriever's own type, from
/// `query_of`), the clusters to search now, in order, and the top-k heap kept across the
/// request's sub-stages.
template <class Query>
struct retrieval_slot {
    std::size_t request = 0;
    const Query* query = nullptr;
    std::span<const std::size_t> clusters;
    retrieve::top_k* results = nullptr;
};

/// The LLM engine as the scheduler drives it, which owns what it generates (text, KV cache)
/// per request: `step(batch)` runs one decode step for every slot and returns its duration
/// in ms; `step_time(batch, context)` estimates a step for sub-stage budgeting;
/// `length(state, node)` is the number of steps the node will decode; `commit(state, node)`
/// keeps the request's current generation and writes its outputs into the state (what
/// conditional edges and the next retrieval read); `discard(request)` drops it (frees its KV).
/// @code
/// static_assert(frugal::rag::rag_generator<my_engine>);
/// @endcode
template <class G>
concept rag_generator = requires(G& g, const G& cg, std::span<const generation_slot> batch, rag_state& s,
                                 const rag_state& cs, const rag_node& n, std::size_t count) {
    { g.step(batch) } -> std::convertible_to<double>;
    { cg.step_time(count, count) } -> std::convertible_to<double>;
    { cg.length(cs, n) } -> std::convertible_to<std::size_t>;
    g.commit(s, n);
    g.discard(count);
};

/// A generator that can also write into a state what its unfinished generation has
/// produced so far, as `commit` would (`preview(state, node)`, the generation going on):
/// speculative retrieval (4.3) asks the retriever for the query of that previewed state.
/// @code
/// static_assert(frugal::rag::rag_previewing_generator<frugal::sim::simulated_generator>);
/// @endcode
template <class G>
concept rag_previewing_generator = rag_generator<G> && requires(const G& g, rag_state& s, const rag_node& n) {
    g.preview(s, n);
};

/// A generator whose generations may end before `length` steps, at an end-of-sequence token:
/// after each step the scheduler asks `stopped(request)`, and a generation that stopped is
/// over (committed, or discarded if it was a speculation that turned out wrong) like one
/// that ran all its steps. `length(state, node)` is then the most steps a node may take.
/// @code
/// static_assert(frugal::rag::rag_stopping_generator<frugal::sim::simulated_generator>);
/// @endcode
template <class G>
concept rag_stopping_generator = rag_generator<G> && requires(const G& g, std::size_t request) {
    { g.stopped(request) } -> std::convertible_to<bool>;
};

/// The query type of retriever R: what its `query_of(state, node)` returns.
template <class R>
using rag_query_t = std::remove_cvref_t<decltype(std::declval<const R&>().query_of(std::declval<const rag_state&>(),
                                                                                   std::declval<const rag_node&>()))>;

/// The vector index as the scheduler drives it: `query_of(state, node)` names the query
/// of the request's retrieval at `node` from its state (the question, the text generated
/// so far: an embedding, or whatever `probe` takes; compared with == to validate a
/// speculative retrieval); `probe(query)` lists the clusters it searches, in order;
/// `cluster_time(c)` estimates the time cluster c adds to a batch; `search(batch)` searches
/// each slot's clusters into its heap and returns the duration in ms.
/// @code
/// static_assert(frugal::rag::rag_retriever<frugal::rag::ivf_retriever<frugal::retrieve::ivf_flat, my_embedder>>);
/// @endcode
template <class R>
concept rag_retriever =
    requires(const R& cr, const rag_state& s, const rag_node& n) { cr.query_of(s, n); } &&
    std::copyable<rag_query_t<R>> && std::equality_comparable<rag_query_t<R>> &&
    requires(R& r, const R& cr, const rag_query_t<R>& q, std::span<const retrieval_slot<rag_query_t<R>>> batch,
             std::size_t c) {
        { cr.probe(q) } -> std::convertible_to<std::vector<std::size_t>>;
        { cr.cluster_time(c) } -> std::convertible_to<double>;
        { r.search(batch) } -> std::convertible_to<double>;
    };

/// A retriever that also names the cluster each result came from (`list_of(id)`): the
/// scheduler then applies the similarity-aware cluster order of 4.3 with each request's
/// local cache of previous results, and can run speculative retrieval.
/// @code
/// static_assert(frugal::rag::rag_ordered_retriever<frugal::rag::ivf_retriever<frugal::retrieve::ivf_flat, my_embedder>>);
/// @endcode
template <class R>
concept rag_ordered_retriever = rag_retriever<R> && requires(const R& r, std::uint64_t id) {
    { r.list_of(id) } -> std::convertible_to<std::size_t>;
};

/// Which scheduler runs the requests (HedraRAG Figure 5).
enum class rag_policy : std::uint8_t {
    /// (a) "general RAG frameworks" (LangChain-style chains over an engine): one loop calls
    /// the LLM engine and the vector index in turn, so the GPU and the CPU never work at the
    /// same time. The engine decodes step by step with continuous batching; a retrieval call
    /// searches every queued query's full probe list and blocks the loop until it returns.
    /// Whichever side's oldest ready stage has waited longer goes next.
    sequential,
    /// (b) naive asynchronous integration: GPU and CPU run concurrently; the GPU decodes
    /// step by step (continuous batching), the CPU searches every queued query's full
    /// probe list in one call.
    naive_async,
    /// (c) HedraRAG: both sides cut into sub-stages of the Eq. 1 budget, new work joins at
    /// every sub-stage, plus similarity-aware cluster order and speculative generation and
    /// retrieval when the GPU or CPU is under-used.
    wavefront,
};

/// Knobs of `schedule_rag`.
struct rag_schedule_options {
    rag_policy policy = rag_policy::wavefront;
    bool speculate = true;                ///< speculative generation (wavefront only)
    double beta_ms = 0.5;                 ///< Eq. 1's per-dispatch scheduling overhead, charged to every batch
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
    /// cluster order). Wavefront only; `schedule_rag` throws when it is asked for and the
    /// generator is not a rag_previewing_generator or the retriever not a rag_ordered_retriever.
    /// Off by default: it pays only when a partial generation's query is often the final one
    /// (a `query_of` that reads a query the generation emits early, e.g. a sub-question).
    bool speculate_retrieval = false;
    double speculate_retrieval_at = 0.5;
    std::size_t speculate_retrieval_below = 32;
};

/// A request: its arrival time (ms), its workflow and its initial state.
struct rag_request {
    double arrival = 0.0;
    const rag_graph* graph = nullptr;
    rag_state state;
};

/// What happened to one request.
struct rag_outcome {
    double arrival = 0.0, finish = 0.0;
    rag_state state;
    [[nodiscard]] double latency() const noexcept { return finish - arrival; }
};

/// The whole run: per-request outcomes (input order), busy times, counters.
struct rag_run {
    std::vector<rag_outcome> requests;
    double makespan = 0.0, gpu_busy = 0.0, cpu_busy = 0.0;
    std::size_t gpu_batches = 0, cpu_batches = 0, speculations = 0, rollbacks = 0;
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

/// HedraRAG's wavefront scheduler as an object an engine keeps across its serving loop
/// (HedraRAG 3.1, 4.2, 4.3, 4.5): requests are submitted as they arrive and finish in
/// any order; `run_until(t)` advances the scheduler's clock to t, dispatching batches to the
/// generator (the GPU side) and the retriever (the CPU side) and completing them as their
/// durations elapse; `take_finished()` hands back the requests done since the last call.
/// The two sides each run one batch at a time, concurrently on the scheduler's clock; the
/// generator and the retriever are called on the calling thread and report how long each
/// batch took (measured, or modelled as in frugal::sim). Submitting the requests in input
/// order, each before the clock passes its arrival, gives exactly the run `schedule_rag`
/// gives with all of them up front. Request ids count submissions from 0; state stays
/// valid while others come and go.
/// @code
/// frugal::rag::rag_scheduler sched(engine, retriever, {.policy = frugal::rag::rag_policy::wavefront});
/// for (double t = 0;; t += 10) {
///     for (auto& r : arrivals_before(t)) sched.submit(std::move(r));
///     sched.run_until(t);
///     for (auto& done : sched.take_finished()) reply(done.state.request, done.state.text("answer"));
/// }
/// @endcode
template <rag_generator G, rag_retriever R>
class rag_scheduler {
    using query_type = rag_query_t<R>;

public:
    rag_scheduler(G& gen, R& ret, const rag_schedule_options& opt = {}) : gen_(gen), ret_(ret), opt_(opt) {
        FRUGAL_CHECK(std::isfinite(opt.beta_ms) && opt.beta_ms > 0.0, "rag_scheduler: beta ", opt.beta_ms, " ms (must be > 0)");
        FRUGAL_CHECK(opt.history > 0, "rag_scheduler: history of 0 results");
        FRUGAL_CHECK(opt.speculate_retrieval_at > 0.0 && opt.speculate_retrieval_at < 1.0,
                     "rag_scheduler: speculate_retrieval_at ", opt.speculate_retrieval_at, " is outside (0, 1)");
        FRUGAL_CHECK(!opt.speculate_retrieval || speculative_retrieval,
                     "rag_scheduler: speculate_retrieval needs a generator with preview(state, node) "
                     "(rag_previewing_generator) and a retriever with list_of(id) (rag_ordered_retriever)");
    }

    /// Admits `request`, arriving at `request.arrival` (ms, not before the clock: >= the last
    /// run_until time), and returns its id, which becomes `state.request`. Throws on a missing
    /// or invalid workflow or a bad arrival time.
    std::size_t submit(rag_request request) {
        const std::size_t id = base_ + live_.size();
        FRUGAL_CHECK(request.graph != nullptr, "rag_scheduler: request ", id, " has no workflow");
        FRUGAL_CHECK(std::isfinite(request.arrival) && request.arrival >= 0.0 && request.arrival >= horizon_,
                     "rag_scheduler: request ", id, " arrives at ", request.arrival, ", before the scheduler's clock ",
                     horizon_);
        request.graph->validate();
        request.state.request = id;
        arrivals_.emplace(request.arrival, id);
        live& l = live_.emplace_back();
        l.req = std::move(request);
        l.history.emplace(opt_.history);
        return id;
    }

    /// Runs every event (batch ends, arrivals) before time `t` (ms): afterwards no request
    /// may arrive before t. Throws if `t` is NaN or earlier than a previous `t`.
    void run_until(double t) {
        FRUGAL_CHECK(!std::isnan(t) && t >= horizon_, "rag_scheduler::run_until: time ", t, " is before ", horizon_);
        horizon_ = t;
        while (true) {
            dispatch();
            double next = arrivals_.empty() ? std::numeric_limits<double>::infinity() : arrivals_.begin()->first;
            if (gpu_.running) next = std::min(next, gpu_.end);
            if (cpu_.running) next = std::min(next, cpu_.end);
            if (!(next < t)) return;
            now_ = next;
            if (gpu_.running && gpu_.end == now_) complete_gpu();
            if (cpu_.running && cpu_.end == now_) complete_cpu();
            while (!arrivals_.empty() && arrivals_.begin()->first <= now_) {
                const std::size_t id = arrivals_.begin()->second;
                arrivals_.erase(arrivals_.begin());
                advance(at(id), rag_start);
            }
        }
    }

    /// Runs until every submitted request has finished. Throws if one never can (a
    /// scheduler stall).
    void run() {
        run_until(std::numeric_limits<double>::infinity());
        horizon_ = now_;  // submissions may go on from the last event
        FRUGAL_CHECK(in_flight() == 0, "rag_scheduler: ", in_flight(), " requests never finished (scheduler stall)");
    }

    /// The requests that finished since the last call, in finishing order: arrival, finish
    /// and final state (its `request` is the id `submit` returned).
    [[nodiscard]] std::vector<rag_outcome> take_finished() {
        std::vector<rag_outcome> out;
        for (std::size_t id : finished_) {
            live& l = at(id);
            out.push_back({l.req.arrival, l.finish, std::move(l.req.state)});
            l.taken = true;
        }
        finished_.clear();
        while (!live_.empty() && live_.front().taken) {  // forget the finished prefix
            live_.pop_front();
            ++base_;
        }
        return out;
    }

    /// The scheduler's clock: the time of the last event run (ms).
    [[nodiscard]] double now() const noexcept { return now_; }
    /// Requests submitted and not yet finished.
    [[nodiscard]] std::size_t in_flight() const noexcept { return submitted() - done_; }
    /// Requests submitted so far.
    [[nodiscard]] std::size_t submitted() const noexcept { return base_ + live_.size(); }
    /// Busy times and counters so far (`requests` empty; `makespan` is the last finish).
    [[nodiscard]] const rag_run& statistics() const noexcept { return stats_; }

private:
    struct gen_part {
        bool active = false, busy = false, speculative = false;
        rag_node_id node = 0;
        std::size_t steps = 0, length = 0;
        std::vector<std::uint64_t> docs;
    };
    struct ret_part {
        bool active = false, busy = false;
        bool speculative = false, discard = false;  // started from a partial generation; rolled back while busy
        rag_node_id node = 0;
        std::size_t k = 0;  // the node's top-k
        std::optional<query_type> query;
        std::vector<std::size_t> probe;
        std::size_t next = 0, substages = 0;
        std::optional<retrieve::top_k> found;  // holds max(top_k, history) results when reordering
    };
    struct live {
        rag_request req;
        rag_node_id at = rag_start;
        double ready_at = 0.0, finish = 0.0;
        bool done = false, taken = false;
        gen_part gen;
        ret_part ret;
        std::optional<retrieval_history> history;  // the request's local cache (4.3)
        std::optional<bool> verdict;  // speculation outcome waiting for the GPU batch to return
    };
    struct side {
        bool running = false;
        double end = 0.0;
        std::vector<std::size_t> members;
    };

    [[nodiscard]] live& at(std::size_t id) { return live_[id - base_]; }

    static constexpr bool ordered = rag_ordered_retriever<R>;
    static constexpr bool speculative_retrieval = ordered && rag_previewing_generator<G>;
    [[nodiscard]] bool wavefront() const noexcept { return opt_.policy == rag_policy::wavefront; }
    // The node's top-k of the (possibly wider) heap.
    [[nodiscard]] static std::vector<std::uint64_t> result_ids(const ret_part& rp) {
        std::vector<std::uint64_t> ids = rp.found->ids();
        if (ids.size() > rp.k) ids.resize(rp.k);
        return ids;
    }
    // Remembers what a retrieval found so far, and where, as the request's local cache.
    void remember(live& l) {
        if constexpr (ordered) {
            if (!wavefront() || !opt_.reorder) return;
            std::vector<std::pair<std::uint64_t, std::size_t>> with_lists;
            for (std::uint64_t id : l.ret.found->ids()) with_lists.emplace_back(id, static_cast<std::size_t>(ret_.list_of(id)));
            l.history->remember(with_lists, std::span<const std::size_t>(l.ret.probe).first(l.ret.next));
        }
    }

    [[nodiscard]] bool gen_ready(const live& l) const { return l.gen.active && !l.gen.busy && l.gen.steps < l.gen.length; }
    [[nodiscard]] bool ret_ready(const live& l) const { return l.ret.active && !l.ret.busy && l.ret.next < l.ret.probe.size(); }

    // Walks from node `from` to the next generation or retrieval node (running user nodes),
    // or finishes the request at END.
    void advance(live& l, rag_node_id from) {
        const rag_graph& g = *l.req.graph;
        for (std::size_t hops = 0;; ++hops) {
            FRUGAL_CHECK(hops <= 1000000, "rag_scheduler: request ", l.req.state.request,
                         " ran a million user nodes without reaching generation, retrieval or END");
            const rag_node_id to = g.next(from, l.req.state);
            if (to == rag_end) {
                l.done = true;
                l.finish = now_;
                stats_.makespan = std::max(stats_.makespan, now_);
                finished_.push_back(l.req.state.request);
                ++done_;
                return;
            }
            const rag_node& n = g.node(to);
            l.at = to;
            l.ready_at = now_;
            if (n.kind == rag_node_kind::user) {
                n.action(l.req.state);
                ++l.req.state.visits[to];
                from = to;
                continue;
            }
            if (n.kind == rag_node_kind::generation) start_generation(l, to, false);
            else start_retrieval(l, to);
            return;
        }
    }

    void start_generation(live& l, rag_node_id id, bool speculative) {
        const rag_node& n = l.req.graph->node(id);
        gen_part& gp = l.gen;
        gp.active = true;
        gp.speculative = speculative;
        gp.node = id;
        gp.steps = 0;
        gp.length = std::max<std::size_t>(1, gen_.length(l.req.state, n));
        if (speculative) gp.docs = result_ids(l.ret);
        else if (!l.req.state.retrieved.empty()) gp.docs = l.req.state.retrieved.back();
        else gp.docs.clear();
    }

    // Reaching retrieval node `id`: a speculative retrieval of it is validated (same query:
    // it becomes the real one; else it is rolled back), otherwise the retrieval starts.
    void start_retrieval(live& l, rag_node_id id) {
        query_type query = ret_.query_of(l.req.state, l.req.graph->node(id));
        ret_part& rp = l.ret;
        if (rp.active && rp.speculative) {
            FRUGAL_ASSERT(rp.node == id);
            if (rp.query == query) {
                rp.speculative = false;
                if (!rp.busy && rp.next == rp.probe.size()) finish_retrieval(l);
                return;
            }
            ++stats_.retrieval_rollbacks;
            remember(l);  // the discarded results still guide the order (4.3)
            if (rp.busy) {  // its batch is on the CPU: restart when it returns
                rp.discard = true;
                rp.speculative = false;
                return;
            }
        }
        begin_retrieval(l, id, std::move(query), false);
    }

    void begin_retrieval(live& l, rag_node_id id, query_type query, bool speculative) {
        const rag_node& n = l.req.graph->node(id);
        ret_part& rp = l.ret;
        rp.active = true;
        rp.speculative = speculative;
        rp.discard = false;
        rp.node = id;
        rp.k = n.top_k;
        rp.query = std::move(query);
        rp.probe = ret_.probe(*rp.query);
        FRUGAL_CHECK(!rp.probe.empty(), "rag_scheduler: the retriever probes no cluster for request ", l.req.state.request);
        const bool reorder = ordered && wavefront() && opt_.reorder;
        if (reorder) rp.probe = l.history->order(rp.probe);
        rp.next = 0;
        rp.substages = 0;
        rp.found.emplace(reorder ? std::max(n.top_k, opt_.history) : n.top_k);
        double t = 0.0;
        for (std::size_t c : rp.probe) t += ret_.cluster_time(c);
        retrieval_mean_ = (retrieval_mean_ * static_cast<double>(retrievals_) + t) / static_cast<double>(retrievals_ + 1);
        ++retrievals_;
    }

    [[nodiscard]] std::size_t context(const live& l) const {
        return l.req.graph->node(l.gen.node).prompt_tokens + opt_.doc_tokens * l.gen.docs.size() + l.gen.steps;
    }

    // Eq. 1's sub-stage budget from the running mean retrieval-stage time.
    [[nodiscard]] double budget() const {
        return retrievals_ == 0 || retrieval_mean_ <= 0.0 ? 0.0 : substage_budget(retrieval_mean_, opt_.beta_ms);
    }

    void dispatch() {
        if (opt_.policy == rag_policy::sequential) {
            if (gpu_.running || cpu_.running) return;
            double g = std::numeric_limits<double>::infinity(), r = g;
            for (const live& l : live_) {
                if (gen_ready(l)) g = std::min(g, l.ready_at);
                if (ret_ready(l)) r = std::min(r, l.ready_at);
            }
            if (g <= r && std::isfinite(g)) dispatch_gpu();
            else if (std::isfinite(r)) dispatch_cpu();
            return;
        }
        if (!gpu_.running) dispatch_gpu();
        if (!cpu_.running) dispatch_cpu();
    }

    void dispatch_gpu() {
        std::vector<std::size_t> batch;
        std::size_t ctx = 0, longest = 0;
        for (const live& l : live_)
            if (gen_ready(l)) {
                batch.push_back(l.req.state.request);
                ctx += context(l);
                longest = std::max(longest, l.gen.length - l.gen.steps);
            }
        if (batch.empty()) return;
        std::size_t steps = 1;
        if (opt_.policy == rag_policy::wavefront && budget() > 0.0) {
            // Generation sub-stage: as many decode steps as fit the Eq. 1 budget.
            const std::vector<double> costs(longest, gen_.step_time(batch.size(), ctx));
            steps = partition_by_budget(costs, budget()).front().second;
        }
        double d = opt_.beta_ms;
        std::vector<generation_slot> slots;
        for (std::size_t s = 0; s < steps; ++s) {
            slots.clear();
            for (std::size_t i : batch) {
                live& l = at(i);
                if (l.gen.steps == l.gen.length) continue;
                slots.push_back({i, l.gen.steps, context(l), &l.req.graph->node(l.gen.node), &l.req.state, l.gen.docs,
                                 l.gen.speculative});
            }
            if (slots.empty()) break;
            d += static_cast<double>(gen_.step(std::span<const generation_slot>(slots)));
            for (const auto& sl : slots) {
                gen_part& gp = at(sl.request).gen;
                ++gp.steps;
                if constexpr (rag_stopping_generator<G>) {
                    if (gp.steps < gp.length && gen_.stopped(sl.request)) gp.length = gp.steps;  // end of sequence
                }
            }
        }
        for (std::size_t i : batch) at(i).gen.busy = true;
        gpu_ = {true, now_ + d, std::move(batch)};
        stats_.gpu_busy += d;
        ++stats_.gpu_batches;
    }

    void dispatch_cpu() {
        std::vector<std::size_t> batch;
        for (const live& l : live_)
            if (ret_ready(l)) batch.push_back(l.req.state.request);
        if (batch.empty()) return;
        const double mb = budget();
        std::vector<retrieval_slot<query_type>> slots;
        for (std::size_t i : batch) {
            live& l = at(i);
            std::size_t end = l.ret.probe.size();
            if (opt_.policy == rag_policy::wavefront && mb > 0.0) {
                // Retrieval sub-stage: this request's next clusters up to the budget (4.2).
                std::vector<double> costs;
                for (std::size_t k = l.ret.next; k < end; ++k) costs.push_back(ret_.cluster_time(l.ret.probe[k]));
                end = l.ret.next + partition_by_budget(costs, mb).front().second;
            }
            slots.push_back({i, &*l.ret.query,
                             std::span<const std::size_t>(l.ret.probe).subspan(l.ret.next, end - l.ret.next),
                             &*l.ret.found});
            l.ret.next = end;
            l.ret.busy = true;
        }
        const double d = opt_.beta_ms + static_cast<double>(ret_.search(std::span<const retrieval_slot<query_type>>(slots)));
        cpu_ = {true, now_ + d, std::move(batch)};
        stats_.cpu_busy += d;
        ++stats_.cpu_batches;
    }

    void finish_generation(live& l) {
        gen_.commit(l.req.state, l.req.graph->node(l.gen.node));
        ++l.req.state.visits[l.gen.node];
        l.gen.active = false;
        advance(l, l.gen.node);
    }

    // Validates a speculative generation against the final retrieval results (4.3).
    void apply_verdict(live& l) {
        const bool same = *l.verdict;
        l.verdict.reset();
        l.gen.speculative = false;
        l.at = l.gen.node;
        l.ready_at = now_;
        if (!same) {
            ++stats_.rollbacks;
            if (l.gen.steps > 0) gen_.discard(l.req.state.request);  // else the generator never saw it
            l.gen.steps = 0;
            l.gen.length = std::max<std::size_t>(1, gen_.length(l.req.state, l.req.graph->node(l.gen.node)));
            l.gen.docs = l.req.state.retrieved.back();
            return;
        }
        if (l.gen.steps == l.gen.length) finish_generation(l);
    }

    void complete_gpu() {
        side s = std::move(gpu_);
        gpu_ = {};
        std::size_t cpu_load = 0;
        for (const live& l : live_) cpu_load += l.ret.active ? 1 : 0;
        for (std::size_t i : s.members) {
            live& l = at(i);
            l.gen.busy = false;
            if (l.verdict) apply_verdict(l);
            else if (!l.gen.speculative && l.gen.active && l.gen.steps == l.gen.length) finish_generation(l);
            else maybe_speculate_retrieval(l, cpu_load);
        }
    }

    void finish_retrieval(live& l) {
        const rag_node_id r = l.ret.node;
        remember(l);
        l.req.state.retrieved.push_back(result_ids(l.ret));
        ++l.req.state.visits[r];
        l.ret.active = false;
        ++stats_.retrievals;
        if constexpr (ordered) {
            std::size_t needed = 0;
            for (std::uint64_t id : l.req.state.retrieved.back()) {
                const auto at = std::find(l.ret.probe.begin(), l.ret.probe.end(), static_cast<std::size_t>(ret_.list_of(id)));
                needed = std::max(needed, static_cast<std::size_t>(at - l.ret.probe.begin()) + 1);
            }
            stats_.clusters_to_final += needed;
        }
        if (l.gen.active) {  // a speculative generation is running: validate it
            l.verdict = l.gen.docs == l.req.state.retrieved.back();
            if (!l.gen.busy) apply_verdict(l);
        } else {
            advance(l, r);
        }
    }

    // Speculative retrieval (4.3) from the partial text of a generation whose plain edge
    // leads to a retrieval node, when the CPU side is under-used.
    void maybe_speculate_retrieval([[maybe_unused]] live& l, [[maybe_unused]] std::size_t& cpu_load) {
        if constexpr (speculative_retrieval) {
            if (!wavefront() || !opt_.speculate_retrieval || !l.gen.active || l.gen.speculative || l.ret.active ||
                cpu_load >= opt_.speculate_retrieval_below || l.gen.steps >= l.gen.length ||
                static_cast<double>(l.gen.steps) < opt_.speculate_retrieval_at * static_cast<double>(l.gen.length))
                return;
            const rag_graph& g = *l.req.graph;
            if (g.conditional(l.gen.node)) return;
            const rag_node_id to = g.next(l.gen.node, l.req.state);
            if (to == rag_end || g.node(to).kind != rag_node_kind::retrieval) return;
            // The query the finished generation would send, from its output so far: the state
            // as it will be when the retrieval node is reached, with the previewed output.
            rag_state st = l.req.state;
            gen_.preview(st, g.node(l.gen.node));
            ++st.visits[l.gen.node];
            begin_retrieval(l, to, ret_.query_of(st, g.node(to)), true);
            ++cpu_load;
            ++stats_.retrieval_speculations;
        }
    }

    void complete_cpu() {
        side s = std::move(cpu_);
        cpu_ = {};
        std::size_t gpu_load = 0;
        for (const live& l : live_) gpu_load += l.gen.active ? 1 : 0;
        for (std::size_t i : s.members) {
            live& l = at(i);
            l.ret.busy = false;
            ++l.ret.substages;
            if (l.ret.discard) {  // a speculative retrieval rolled back while on the CPU
                begin_retrieval(l, l.ret.node, ret_.query_of(l.req.state, l.req.graph->node(l.ret.node)), false);
                continue;
            }
            if (l.ret.speculative) continue;  // validated when its generation ends
            if (l.ret.next == l.ret.probe.size()) {
                finish_retrieval(l);
                continue;
            }
            // Speculative generation from the partial top-k when the GPU is under-used (4.3).
            const rag_graph& g = *l.req.graph;
            if (opt_.policy == rag_policy::wavefront && opt_.speculate && !l.gen.active &&
                l.ret.substages >= opt_.speculate_after && gpu_load < opt_.speculate_below && !g.conditional(l.ret.node)) {
                const rag_node_id to = g.next(l.ret.node, l.req.state);
                if (to != rag_end && g.node(to).kind == rag_node_kind::generation) {
                    start_generation(l, to, true);
                    ++gpu_load;
                    ++stats_.speculations;
                }
            }
        }
    }

    G& gen_;
    R& ret_;
    rag_schedule_options opt_;
    std::deque<live> live_;                             // requests base_, base_ + 1, ...
    std::size_t base_ = 0, done_ = 0;                   // the first id kept; requests finished
    std::set<std::pair<double, std::size_t>> arrivals_;  // submitted, not yet arrived: (arrival, id)
    std::vector<std::size_t> finished_;                 // finished, not yet taken
    double horizon_ = 0.0;                               // no request may arrive before it
    side gpu_, cpu_;
    double now_ = 0.0, retrieval_mean_ = 0.0;
    std::size_t retrievals_ = 0;
    rag_run stats_;
};

/// Runs `requests` through their workflows on `gen` and `ret` under `opt.policy` (a
/// rag_scheduler given every request up front, run to the end) and returns each request's
/// arrival, finish and final state, in input order. Time advances by the durations the
/// generator and retriever return, and the GPU side and the CPU side each run one batch at a
/// time, concurrently (the CPU-GPU pipeline of 4.5); with cost models (frugal::sim's
/// rag_simulation.hpp) this is the deterministic simulation mode. Speculative generations
/// that fail validation are re-run, so every policy produces the same states.
/// @code
/// auto g = frugal::rag::hyde_workflow();
/// frugal::sim::simulated_generator gen; frugal::sim::simulated_retriever ret;
/// std::vector<frugal::rag::rag_request> reqs{{0.0, &g, {}}, {5.0, &g, {}}};
/// auto run = frugal::rag::schedule_rag(reqs, gen, ret, {.policy = frugal::rag::rag_policy::wavefront});
/// @endcode
template <rag_generator G, rag_retriever R>
[[nodiscard]] rag_run schedule_rag(std::vector<rag_request> requests, G& gen, R& ret,
                                   const rag_schedule_options& opt = {}) {
    rag_scheduler<G, R> sched(gen, ret, opt);
    for (rag_request& r : requests) (void)sched.submit(std::move(r));
    sched.run();
    rag_run out = sched.statistics();
    out.requests.resize(requests.size());
    for (rag_outcome& o : sched.take_finished()) out.requests[o.state.request] = std::move(o);
    return out;
}

}  // namespace frugal::rag
