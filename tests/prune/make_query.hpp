#pragma once
// A score_trajectory from rows of per-layer scores, one row per candidate (prune tests).

#include <vector>

#include <frugal/prune/trajectory.hpp>

namespace frugal::testing {

inline frugal::prune::score_trajectory make_query(const std::vector<std::vector<float>>& rows) {
    frugal::prune::score_trajectory q(rows.size(), rows.front().size());
    for (std::size_t c = 0; c < rows.size(); ++c)
        for (std::size_t l = 0; l < rows[c].size(); ++l) q.at(c, l) = rows[c][l];
    return q;
}

}  // namespace frugal::testing
