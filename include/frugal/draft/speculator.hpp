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
#include <span>
#include <unordered_map>
#include <utility>
#include <vector>

#include "frugal/core/error.hpp"
#include "frugal/core/executor.hpp"
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
/// @endcode
template <std::integral Token>
class speculator {
public:
    /// Requests drafted with `config` over `history` (optional; it must outlive this).
    explicit speculator(drafter_config config = {}, const live_history<Token>* history = nullptr)
        : config_(config), history_(history) {
        (void)drafter<Token>(config_);  // validates the configuration now, not at the first start
    }

    /// Starts request `id` with its prompt.
    /// @code
    /// spec.start(id, prompt_tokens);
    /// @endcode
    void start(request_id id, std::span<const Token> prompt) {
        FRUGAL_CHECK(!requests_.contains(id), "speculator: request ", id, " is already started");
        drafter<Token> d(config_, history_);
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
        ++batch_;
        batch_entries_.clear();
        for (const request_id id : ids) {
            entry& e = find(id);
            FRUGAL_CHECK(e.batch != batch_, "speculator: request ", id, " appears twice in one batch");
            e.batch = batch_;
            batch_entries_.push_back(&e);
        }
        results_.assign(ids.size(), nullptr);
        parallel_for(ex, ids.size(), max_workers != 0 ? max_workers : std::size_t(ex.concurrency()),
                     [&](std::size_t i, std::size_t) {
                         drafter<Token>& d = batch_entries_[i]->state;
                         results_[i] = shape == draft_shape::tree ? &d.tree() : &d.chain();
                     });
        return results_;
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
    /// Number of live requests.
    [[nodiscard]] std::size_t size() const noexcept { return requests_.size(); }
    /// True when `id` is live.
    [[nodiscard]] bool contains(request_id id) const { return requests_.contains(id); }

private:
    static constexpr std::size_t remembered_stops = 4096;
    struct entry {
        drafter<Token> state;
        std::uint64_t batch;  // the last batch that named it (duplicate check)
    };

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
    std::unordered_map<request_id, entry> requests_;
    std::unordered_map<request_id, std::uint64_t> stopped_;          // id -> number of its last stop
    std::deque<std::pair<request_id, std::uint64_t>> stopped_order_;  // the last remembered_stops stops
    std::uint64_t stops_ = 0;
    std::uint64_t batch_ = 0;
    std::vector<entry*> batch_entries_;
    std::vector<const draft_tree<Token>*> results_;
};

}  // namespace frugal::draft
