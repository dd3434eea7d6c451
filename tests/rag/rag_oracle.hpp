#pragma once
// The oracles of the wavefront scheduler's tests and fuzz target: a request walked through
// its graph alone, node by node, with whole-stage generation and a full search over the
// probe list, on fresh simulated models; and a generator wrapper that checks the
// engine-facing contract per request.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <span>
#include <vector>

#include "frugal/rag/scheduler.hpp"
#include "frugal/sim/rag_event_loop.hpp"
#include "frugal/rag/workflow.hpp"
#include "frugal/retrieve/top_k.hpp"
#include "frugal/sim/rag_simulation.hpp"

namespace frugal::rag::testing {

/// The state request `request` ends in when it runs alone from `s`.
inline rag_state walk_alone(const rag_graph& g, rag_state s, std::size_t request, std::size_t doc_tokens,
                            const sim::simulated_retriever::config& rc = {},
                            const sim::simulated_generator::config& gc = {}) {
    sim::simulated_generator gen(gc);
    sim::simulated_retriever ret(rc);
    s.request = request;
    rag_node_id at = rag_start;
    while (true) {
        at = g.next(at, s);
        if (at == rag_end) return s;
        const rag_node& n = g.node(at);
        if (n.kind == rag_node_kind::user) {
            n.action(s);
        } else if (n.kind == rag_node_kind::generation) {
            const std::size_t len = gen.length(s, n);
            std::vector<std::uint64_t> docs = s.retrieved.empty() ? std::vector<std::uint64_t>{} : s.retrieved.back();
            for (std::size_t step = 0; step < std::max<std::size_t>(1, len); ++step) {
                generation_slot slot{request, step, n.prompt_tokens + doc_tokens * docs.size() + step, &n, &s, docs};
                (void)gen.step(std::span<const generation_slot>(&slot, 1));
                if (gen.stopped(request)) break;  // end of sequence
            }
            gen.commit(s, n);
        } else {
            const std::uint64_t q = ret.query_of(s, n);
            retrieve::top_k best(n.top_k);
            const auto probe = ret.probe(q);
            retrieval_slot<std::uint64_t> slot{request, &q, probe, &best};
            (void)ret.search(std::span<const retrieval_slot<std::uint64_t>>(&slot, 1));
            s.retrieved.push_back(best.ids());
        }
        ++s.visits[at];
    }
}

/// The simulated generator, recording every breach of the generator contract: per request,
/// a generation starts at step 0 and runs its steps in order on one node, and ends with
/// exactly one commit (after all its steps, or at an end of sequence) or discard (of a
/// speculative generation only) before the next one starts.
class contract_generator {
public:
    explicit contract_generator(const sim::simulated_generator::config& c = {}) : inner_(c) {}

    double step(std::span<const generation_slot> batch) {
        for (const auto& s : batch) {
            open_generation& g = gens_[s.request];
            if (s.step == 0) {
                if (g.open) breach(s.request, "started a generation before ending the last");
                g = {true, s.speculative, 0, s.node};
            }
            if (!g.open || s.step != g.next_step || s.node != g.node || s.state == nullptr || s.state->request != s.request)
                breach(s.request, "step " + std::to_string(s.step) + " out of order");
            ++g.next_step;
        }
        return inner_.step(batch);
    }
    double step_time(std::size_t b, std::size_t c) const { return inner_.step_time(b, c); }
    std::size_t length(const rag_state& s, const rag_node& n) const { return inner_.length(s, n); }
    void commit(rag_state& s, const rag_node& n) {
        open_generation& g = gens_[s.request];
        if (!g.open || g.node != &n ||
            (g.next_step != std::max<std::size_t>(1, inner_.length(s, n)) && !inner_.stopped(s.request)))
            breach(s.request, "committed after " + std::to_string(g.next_step) + " steps");
        g.open = false;
        ++commits_;
        inner_.commit(s, n);
    }
    void discard(std::size_t request) {
        open_generation& g = gens_[request];
        if (!g.open || !g.speculative) breach(request, "discarded a generation that was not a running speculation");
        g.open = false;
        ++discards_;
        inner_.discard(request);
    }
    void preview(rag_state& s, const rag_node& n) const { inner_.preview(s, n); }
    bool stopped(std::size_t request) const { return inner_.stopped(request); }

    /// The breaches so far, and any generation still open (call after the run).
    [[nodiscard]] std::vector<std::string> breaches() const {
        std::vector<std::string> out = breaches_;
        for (const auto& [request, g] : gens_)
            if (g.open) out.push_back("request " + std::to_string(request) + " left a generation open");
        return out;
    }
    [[nodiscard]] std::size_t commits() const noexcept { return commits_; }
    [[nodiscard]] std::size_t discards() const noexcept { return discards_; }

private:
    struct open_generation {
        bool open = false, speculative = false;
        std::size_t next_step = 0;
        const rag_node* node = nullptr;
    };
    void breach(std::size_t request, const std::string& what) {
        breaches_.push_back("request " + std::to_string(request) + ": " + what);
    }
    sim::simulated_generator inner_;
    std::map<std::size_t, open_generation> gens_;
    std::vector<std::string> breaches_;
    std::size_t commits_ = 0, discards_ = 0;
};
static_assert(rag_previewing_generator<contract_generator>);

}  // namespace frugal::rag::testing
