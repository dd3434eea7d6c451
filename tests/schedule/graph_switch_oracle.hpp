#pragma once
// The graph-switch oracle of the schedule tests and fuzz target: every assignment of switch
// chunks and (optionally) every order of the loads on the I/O channel, each built directly
// on the timeline (loads added in the permuted order) and simulated. Independent of the
// plan's load order and of the solvers' arithmetic.
#include <algorithm>
#include <cstddef>
#include <limits>
#include <numeric>
#include <vector>

#include "frugal/core/error.hpp"
#include "frugal/schedule/graph_switch.hpp"
#include "frugal/schedule/timeline.hpp"

namespace frugal::schedule::testing {

/// The minimal makespan of `p` over every assignment, and every load order when
/// `every_load_order` (n! x (chunks + 1)^n replays; else loads in the plan's order).
inline double brute_force_optimum(const graph_switch_problem& p, bool every_load_order = true) {
    const std::size_t n = p.blocks(), c_total = p.chunks;
    std::size_t assignments = 1;
    for (std::size_t i = 0; i < n; ++i) assignments *= c_total + 1;
    double best = std::numeric_limits<double>::infinity();
    std::vector<std::size_t> sw(n), order(n);
    for (std::size_t code = 0; code < assignments; ++code) {
        for (std::size_t i = 0, x = code; i < n; ++i, x /= c_total + 1) sw[i] = x % (c_total + 1);
        if (!every_load_order) {
            best = std::min(best, graph_switch_makespan(p, graph_switch_plan{sw}));
            continue;
        }
        std::iota(order.begin(), order.end(), 0);
        do {
            timeline t;
            std::vector<std::size_t> op(n * c_total);
            for (std::size_t c = 0; c < c_total; ++c)
                for (std::size_t i = 0; i < n; ++i)
                    op[c * n + i] = t.add(resource::compute, sw[i] <= c ? p.decode_compute[i] : p.prefill_compute[i]);
            for (std::size_t i : order) {
                const std::size_t c = sw[i];
                const std::size_t load = t.add(resource::io, p.load[i]);
                if (c > 0) t.add_dependency(load, op[(c - 1) * n + i]);
                if (c < c_total) t.add_dependency(op[c * n + i], load);
            }
            try {
                best = std::min(best, t.simulate().makespan);
            } catch (const frugal::invalid_argument&) {
                // This load order deadlocks (a load queued behind one that waits for a
                // later compute): not a feasible schedule.
            }
        } while (std::next_permutation(order.begin(), order.end()));
    }
    return best;
}

}  // namespace frugal::schedule::testing
