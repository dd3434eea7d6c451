// The graph-switch planners on tiny instances against exhaustive search: the exact branch
// and bound must reach the minimum over every assignment of switch chunks (and, for the
// smallest instances, every order of the loads on the I/O channel), each replayed on the
// timeline; frugal's greedy must lie between that optimum and the paper's greedy (Eq. 2).
// Costs are small multiples of 1/4, zeros included, so ties and empty windows are common.
#include <frugal/schedule/graph_switch.hpp>
#include <frugal/sim/paper_graph_switch.hpp>

#include <cmath>
#include <cstdint>

#include "../schedule/graph_switch_oracle.hpp"
#include "fuzz.hpp"

namespace {

using frugal::schedule::graph_switch_makespan;
using frugal::schedule::graph_switch_problem;

double cost(frugal::fuzz::input& in) { return static_cast<double>(in.take<std::uint8_t>() % 17) / 4.0; }

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    frugal::fuzz::input in(data, size);
    graph_switch_problem p;
    const std::size_t n = 1 + in.take<std::uint8_t>() % 5;
    p.chunks = 1 + in.take<std::uint8_t>() % 3;
    for (std::size_t i = 0; i < n; ++i) {
        p.prefill_compute.push_back(cost(in));
        p.decode_compute.push_back(cost(in));
        p.load.push_back(cost(in));
    }
    const double best = frugal::schedule::testing::brute_force_optimum(p, /*every_load_order=*/n <= 3);
    const double exact = graph_switch_makespan(p, frugal::schedule::exact_graph_switch(p));
    const double greedy = graph_switch_makespan(p, frugal::schedule::greedy_graph_switch(p));
    const double paper = graph_switch_makespan(p, frugal::sim::paper_greedy_graph_switch(p));
    const double eps = 1e-9 * (1.0 + best);
    FRUGAL_FUZZ_CHECK(std::abs(exact - best) <= eps, "n %zu chunks %zu: exact %.17g, exhaustive %.17g", n, p.chunks,
                      exact, best);
    FRUGAL_FUZZ_CHECK(greedy >= best - eps && greedy <= paper + eps, "n %zu: optimum %.17g, greedy %.17g, paper %.17g",
                      n, best, greedy, paper);
    return 0;
}
