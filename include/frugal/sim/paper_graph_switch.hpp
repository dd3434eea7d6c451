#pragma once
/// @file
/// paper_greedy_graph_switch: CoordGen's own greedy graph-switch plan (Eq. 2), the baseline
/// `frugal::schedule::greedy_graph_switch` improves on.

#include "frugal/schedule/graph_switch.hpp"

namespace frugal::sim {

/// The paper's greedy (Eq. 2), literally: walk the compute sequence; take the last block
/// not yet switched, and overlap its load with the minimal number k of consecutive
/// upcoming block computations whose estimated time covers it (Eq. 1), stopping before
/// that block's own next compute; the block then runs under G2 from that compute on.
/// Blocks still unswitched when prefill ends switch afterwards.
/// @code
/// auto plan = frugal::sim::paper_greedy_graph_switch(problem);
/// @endcode
[[nodiscard]] inline schedule::graph_switch_plan paper_greedy_graph_switch(const schedule::graph_switch_problem& p) {
    return schedule::detail::eq2_greedy_switch(p);
}

}  // namespace frugal::sim
