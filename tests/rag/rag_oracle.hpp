#pragma once
// The one-request oracle of the wavefront scheduler's tests and fuzz target: a request
// walked through its graph alone, node by node, with whole-stage generation and a full
// search over the probe list, on fresh simulated models.
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "frugal/rag/wavefront.hpp"
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
            for (std::size_t step = 0; step < len; ++step) {
                generation_slot slot{request, step, n.prompt_tokens + doc_tokens * docs.size() + step, &n, &s, docs};
                (void)gen.step(std::span<const generation_slot>(&slot, 1));
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

}  // namespace frugal::rag::testing
