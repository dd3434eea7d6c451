// Listing 1 of HedraRAG in C++: a HyDE and a Multistep workflow built with the RAGraph
// primitives, served together in simulation mode by the sequential baseline and by the
// wavefront scheduler. Both give every request the same answer; the wavefront is faster.
#include <cstdio>
#include <vector>

#include <frugal/sim/rag_simulation.hpp>
#include <frugal/rag/scheduler.hpp>
#include <frugal/sim/rag_event_loop.hpp>
#include <frugal/rag/workflow.hpp>

int main() {
    using frugal::rag::rag_end;
    using frugal::rag::rag_start;
    // HyDE-style workflow (Listing 1, lines 4-10).
    frugal::rag::rag_graph g1;
    g1.add_generation(0, "Generate a hypothesis for {input}.", 64);
    g1.add_retrieval(1, "query=hypopara", 5);
    g1.add_generation(2, "Answer {query} using {docs}.", 128);
    g1.add_edge(rag_start, 0);
    g1.add_edge(0, 1);
    g1.add_edge(1, 2);
    g1.add_edge(2, rag_end);
    // Multistep-style workflow (lines 12-20): loop while sub-questions remain.
    frugal::rag::rag_graph g2;
    g2.add_generation(0, "Decompose {input} into subquestions.", 48);
    g2.add_retrieval(1, "query=subquestion", 2);
    g2.add_generation(2, "Answer {subquestion} using {docs}.", 96);
    g2.add_edge(rag_start, 0);
    g2.add_edge(0, 1);
    g2.add_edge(1, 2);
    g2.add_edge(
        2, [](const frugal::rag::rag_state& s) { return s.visited(2) < 3 ? frugal::rag::rag_node_id{1} : rag_end; },
        {1, rag_end});
    g2.bound_visits(1, 3);  // every loop has a bound
    g1.validate();
    g2.validate();

    // 200 requests, half of each workflow, arriving at 6 per second.
    const std::vector<frugal::sim::rag_mix_entry> mix{{&g1, 1.0}, {&g2, 1.0}};
    const auto requests = frugal::sim::poisson_requests(mix, 6.0, 200, 1);
    auto serve = [&](frugal::rag::rag_policy policy) {
        frugal::sim::simulated_generator gen;
        frugal::sim::simulated_retriever ret;
        return frugal::sim::schedule_rag(requests, gen, ret, {.policy = policy});
    };
    const auto seq = serve(frugal::rag::rag_policy::sequential);
    const auto wave = serve(frugal::rag::rag_policy::wavefront);
    bool same = true;
    for (std::size_t i = 0; i < requests.size(); ++i)
        same = same && seq.requests[i].state.values == wave.requests[i].state.values;
    std::printf("sequential: mean latency %.0f ms\n", seq.mean_latency());
    std::printf("wavefront:  mean latency %.0f ms (%zu speculative generations, %zu rolled back)\n",
                wave.mean_latency(), wave.speculations, wave.rollbacks);
    std::printf("same answers: %s\n", same ? "yes" : "no");
    return same ? 0 : 1;
}
