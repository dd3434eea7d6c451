// The graph-switch planners on tiny instances against exhaustive search: the exact branch
// and bound must reach the minimum over every assignment of switch chunks (and, for the
// smallest instances, every order of the loads on the I/O channel), each replayed on the
// timeline; frugal's greedy must lie between that optimum and the paper's greedy (Eq. 2).
// Costs are small multiples of 1/4, zeros included, so ties and empty windows are common.
#include <frugal/schedule/graph_switch.hpp>
#include <frugal/schedule/timeline.hpp>
#include <frugal/sim/paper_graph_switch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <numeric>
#include <vector>

#include "fuzz.hpp"

namespace {

using frugal::schedule::graph_switch_makespan;
using frugal::schedule::graph_switch_plan;
using frugal::schedule::graph_switch_problem;
using frugal::schedule::resource;

double cost(frugal::fuzz::input& in) { return static_cast<double>(in.take<std::uint8_t>() % 17) / 4.0; }

// The makespan of switch chunks `sw` with the loads issued in `order`, built directly on the
// timeline; +inf when that load order deadlocks.
double replay(const graph_switch_problem& p, const std::vector<std::size_t>& sw, const std::vector<std::size_t>& order) {
    const std::size_t n = p.blocks(), chunks = p.chunks;
    frugal::schedule::timeline t;
    std::vector<std::size_t> op(n * chunks);
    for (std::size_t c = 0; c < chunks; ++c)
        for (std::size_t i = 0; i < n; ++i)
            op[c * n + i] = t.add(resource::compute, sw[i] <= c ? p.decode_compute[i] : p.prefill_compute[i]);
    for (std::size_t i : order) {
        const std::size_t load = t.add(resource::io, p.load[i]);
        if (sw[i] > 0) t.add_dependency(load, op[(sw[i] - 1) * n + i]);
        if (sw[i] < chunks) t.add_dependency(op[sw[i] * n + i], load);
    }
    try {
        return t.simulate().makespan;
    } catch (const frugal::invalid_argument&) {
        return std::numeric_limits<double>::infinity();
    }
}

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
    const bool orders = n <= 3;  // every load order too: n! x (chunks + 1)^n replays
    double best = std::numeric_limits<double>::infinity();
    std::vector<std::size_t> sw(n), order(n);
    std::size_t assignments = 1;
    for (std::size_t i = 0; i < n; ++i) assignments *= p.chunks + 1;
    for (std::size_t code = 0; code < assignments; ++code) {
        for (std::size_t i = 0, x = code; i < n; ++i, x /= p.chunks + 1) sw[i] = x % (p.chunks + 1);
        if (!orders) {
            best = std::min(best, graph_switch_makespan(p, graph_switch_plan{sw}));
            continue;
        }
        std::iota(order.begin(), order.end(), 0);
        do best = std::min(best, replay(p, sw, order));
        while (std::next_permutation(order.begin(), order.end()));
    }
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
