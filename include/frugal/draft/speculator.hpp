#pragma once
/// @file
/// The request-level drafting API an engine's step loop calls (the shape of
/// SuffixDecoding's cache in ArcticInference and of vLLM's batched n-gram proposer): start
/// a request by id, append accepted tokens, propose drafts for a batch of ids in one call,
/// stop a request and hand its output to the live history.

#include <concepts>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <span>
#include <unordered_map>
#include <utility>
#include <vector>

#include "frugal/core/error.hpp"
#include "frugal/core/executor.hpp"
#include "frugal/draft/acceptance_calibrator.hpp"
#include "frugal/draft/draft_size.hpp"
#include "frugal/draft/drafter.hpp"
#include "frugal/draft/history.hpp"
#include "frugal/draft/verify.hpp"

namespace frugal::draft {

/// An engine's request id.
using request_id = std::uint64_t;

/// What `speculator::propose` drafts for each request.
enum class draft_shape {
    tree,   ///< `drafter::tree()`: best-first tree within `tree_budget`, depth `tree_depth`
    chain,  ///< `drafter::chain()`: one path of at most `max_draft` tokens
};

/// The drafters of an engine's live requests, by id, over one shared `live_history`.
///
/// `start(id, prompt)` begins a request; `append(id, tokens)` adds its accepted tokens;
/// `propose(ids, executor)` drafts for a batch of requests in one call, each request on one
/// worker of the caller's executor (requests are independent: the result does not depend
/// on the executor); `stop(id)` ends a request and returns its output, for the engine to
/// add to the history (`history.add(spec.stop(id))`). Other requests keep drafting from
/// their snapshots meanwhile. Calls that change the set of requests (`start`, `stop`) and
/// `append`/`propose` must not run concurrently with each other (the engine's step loop
/// makes them in turn); `propose` itself runs the batch in parallel.
///
/// Sized for serving: `propose(ids, ex, cost)` drafts each request's tree (or chain), then
/// keeps, across the whole batch, the nodes that pay for their verification under the
/// engine's `verification_cost` (`choose_draft_size`): with few requests it drafts deep,
/// near the cost's knee only what is almost certain, past it nothing. The probabilities it
/// weighs are calibrated by the speculator's `acceptance_calibrator`, which every request's
/// drafter teaches from the tokens appended after each draft (`append` after `propose`, as
/// a step loop does).
///
/// Errors (`frugal::invalid_argument`, naming the id): starting an id that is live, using
/// an id that was never started, using an id that was stopped (the last 4096 stopped ids
/// are remembered to say so), and an id twice in one batch. A batch is checked before any
/// request is drafted, so a failed call changes nothing.
/// @code
/// frugal::draft::live_history<int> history(1 << 20);
/// frugal::draft::speculator<int> spec({.tree_depth = 64, .tree_budget = 64}, &history);
/// spec.start(7, prompt);
/// auto drafts = spec.propose(std::vector<frugal::draft::request_id>{7}, frugal::default_thread_pool());
/// // verify drafts[0] with the model, then:
/// spec.append(7, accepted_tokens);
/// history.add(spec.stop(7));
/// auto sized = spec.propose(batch_ids, pool, frugal::draft::roofline_cost::h100_7b());  // for serving
/// @endcode
template <std::integral Token>
class speculator {
public:
    /// Requests drafted with `config` over `history` (optional; it must outlive this).
    explicit speculator(drafter_config config = {}, const live_history<Token>* history = nullptr)
        : config_(config), history_(history), calibrator_(std::make_unique<acceptance_calibrator>()) {
        (void)drafter<Token>(config_);  // validates the configuration now, not at the first start
    }

    /// Starts request `id` with its prompt.
    /// @code
    /// spec.start(id, prompt_tokens);
    /// @endcode
    void start(request_id id, std::span<const Token> prompt) {
        FRUGAL_CHECK(!requests_.contains(id), "speculator: request ", id, " is already started");
        drafter<Token> d(config_, history_, calibrator_.get());
        d.begin(prompt);
        requests_.emplace(id, entry{std::move(d), 0});
        stopped_.erase(id);
    }

    /// Appends the tokens the model accepted for request `id` (accepted draft tokens and the
    /// bonus token; never rejected ones).
    /// @code
    /// spec.append(id, emitted.tokens);
    /// @endcode
    void append(request_id id, std::span<const Token> accepted) { find(id).state.accept(accepted); }

    /// Drafts for every request of `ids` on `ex` (at most `max_workers` at once; 0: the
    /// executor's concurrency); `result[i]` points to the draft of `ids[i]`. The span is
    /// valid until the next `propose`; each draft until its request is drafted again or
    /// stopped.
    /// @code
    /// auto drafts = spec.propose(batch_ids, pool);
    /// for (std::size_t i = 0; i < drafts.size(); ++i) add_to_batch(batch_ids[i], *drafts[i]);
    /// @endcode
    template <executor E>
    std::span<const draft_tree<Token>* const> propose(std::span<const request_id> ids, E& ex,
                                                     draft_shape shape = draft_shape::tree,
                                                     std::size_t max_workers = 0) {
        enter_batch(ids);
        parallel_for(ex, ids.size(), max_workers != 0 ? max_workers : std::size_t(ex.concurrency()),
                     [&](std::size_t i, std::size_t) {
                         drafter<Token>& d = batch_entries_[i]->state;
                         results_[i] = shape == draft_shape::tree ? &d.tree() : &d.chain();
                     });
        return results_;
    }

    /// Drafts for every request of `ids` on `ex`, then keeps across the batch the nodes
    /// that maximise its expected tokens per ms under `cost` (class comment); `result[i]`
    /// is the draft of `ids[i]` (possibly empty), its probabilities the calibrated ones.
    /// Valid as `propose`'s. The batch verifies one token per request besides the drafts,
    /// plus `rest` (other requests' tokens in the same step, e.g. prefills).
    /// @code
    /// auto drafts = spec.propose(batch_ids, pool, frugal::draft::roofline_cost::h100_7b());
    /// @endcode
    template <executor E, verification_cost C>
    std::span<const draft_tree<Token>* const> propose(std::span<const request_id> ids, E& ex, const C& cost,
                                                     draft_shape shape = draft_shape::tree, batch_load rest = {},
                                                     std::size_t max_workers = 0) {
        enter_batch(ids);
        const acceptance_table table = calibrator_->table();  // one snapshot for the batch
        parallel_for(ex, ids.size(), max_workers != 0 ? max_workers : std::size_t(ex.concurrency()),
                     [&](std::size_t i, std::size_t) {
                         entry& e = *batch_entries_[i];
                         table.calibrate(shape == draft_shape::tree ? e.state.tree() : e.state.chain(), e.conditional,
                                         e.path);
                     });
        candidates_.clear();
        for (std::size_t i = 0; i < ids.size(); ++i) {
            const entry& e = *batch_entries_[i];
            for (std::size_t n = 0; n < e.path.size(); ++n)
                candidates_.push_back({e.path[n], static_cast<std::uint32_t>(i), static_cast<std::uint32_t>(n)});
        }
        const std::size_t m = choose_draft_size(std::span(candidates_),
                                                {ids.size() + rest.tokens, double(ids.size()) + rest.expected}, cost);
        for (entry* e : batch_entries_) e->keep.assign(e->state.last_draft().size(), 0);
        for (std::size_t k = 0; k < m; ++k) batch_entries_[candidates_[k].request]->keep[candidates_[k].node] = 1;
        for (std::size_t i = 0; i < ids.size(); ++i) {
            entry& e = *batch_entries_[i];
            keep_nodes(e.state.last_draft(), std::span<const char>(e.keep), std::span<const double>(e.conditional),
                       e.sized);
            results_[i] = &e.sized;
        }
        return results_;
    }
    /// `propose` with a cost, on the calling thread.
    template <verification_cost C>
    std::span<const draft_tree<Token>* const> propose(std::span<const request_id> ids, const C& cost,
                                                     draft_shape shape = draft_shape::tree, batch_load rest = {}) {
        inline_executor serial;
        return propose(ids, serial, cost, shape, rest, 1);
    }
    /// `propose` on the calling thread.
    std::span<const draft_tree<Token>* const> propose(std::span<const request_id> ids,
                                                     draft_shape shape = draft_shape::tree) {
        inline_executor serial;
        return propose(ids, serial, shape, 1);
    }

    /// Ends request `id` and returns its output (every token appended since `start`).
    /// @code
    /// history.add(spec.stop(id));
    /// @endcode
    std::vector<Token> stop(request_id id) {
        auto& e = find(id);
        const auto out = e.state.output();
        std::vector<Token> output(out.begin(), out.end());
        requests_.erase(id);
        // The newest stop of an id is the one remembered: an id started and stopped again
        // leaves its older stop in the queue, which must not forget the newer one.
        stopped_[id] = ++stops_;
        stopped_order_.emplace_back(id, stops_);
        if (stopped_order_.size() > remembered_stops) {
            const auto [old, when] = stopped_order_.front();
            if (const auto it = stopped_.find(old); it != stopped_.end() && it->second == when) stopped_.erase(it);
            stopped_order_.pop_front();
        }
        return output;
    }

    /// The drafter of request `id` (its matches, context and output).
    [[nodiscard]] const drafter<Token>& request(request_id id) const { return find(id).state; }
    /// The calibrator the requests' drafters teach and the cost-aware `propose` reads.
    [[nodiscard]] const acceptance_calibrator& calibrator() const noexcept { return *calibrator_; }
    /// Number of live requests.
    [[nodiscard]] std::size_t size() const noexcept { return requests_.size(); }
    /// True when `id` is live.
    [[nodiscard]] bool contains(request_id id) const { return requests_.contains(id); }

private:
    static constexpr std::size_t remembered_stops = 4096;
    struct entry {
        drafter<Token> state;
        std::uint64_t batch;  // the last batch that named it (duplicate check)
        // Cost-aware propose: the draft's calibrated probabilities, the nodes kept, the result.
        std::vector<double> conditional{}, path{};
        std::vector<char> keep{};
        draft_tree<Token> sized{};
    };

    // Checks a batch (every id live, none twice) before anything is drafted.
    void enter_batch(std::span<const request_id> ids) {
        ++batch_;
        batch_entries_.clear();
        for (const request_id id : ids) {
            entry& e = find(id);
            FRUGAL_CHECK(e.batch != batch_, "speculator: request ", id, " appears twice in one batch");
            e.batch = batch_;
            batch_entries_.push_back(&e);
        }
        results_.assign(ids.size(), nullptr);
    }

    template <class Self>
    static auto& find_in(Self& self, request_id id) {
        const auto it = self.requests_.find(id);
        if (it == self.requests_.end()) {
            FRUGAL_CHECK(!self.stopped_.contains(id), "speculator: request ", id, " was stopped");
            FRUGAL_FAIL(frugal::invalid_argument, "speculator: unknown request ", id, " (never started)");
        }
        return it->second;
    }
    entry& find(request_id id) { return find_in(*this, id); }
    const entry& find(request_id id) const { return find_in(*this, id); }

    drafter_config config_;
    const live_history<Token>* history_;
    std::unique_ptr<acceptance_calibrator> calibrator_;  // stable address: the drafters hold it
    std::unordered_map<request_id, entry> requests_;
    std::unordered_map<request_id, std::uint64_t> stopped_;          // id -> number of its last stop
    std::deque<std::pair<request_id, std::uint64_t>> stopped_order_;  // the last remembered_stops stops
    std::uint64_t stops_ = 0;
    std::uint64_t batch_ = 0;
    std::vector<entry*> batch_entries_;
    std::vector<const draft_tree<Token>*> results_;
    std::vector<draft_candidate> candidates_;
};

}  // namespace frugal::draft
