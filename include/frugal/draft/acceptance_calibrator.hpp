#pragma once
/// @file
/// Calibrated acceptance probabilities, learned online from what the model emits: a draft
/// tree's probabilities are the drafter's estimates; how often the model really emits each
/// drafted token, per estimate and per depth, is counted from the tokens accepted after
/// each draft, and the estimates are corrected by those counts.

#include <algorithm>
#include <array>
#include <atomic>
#include <cmath>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "frugal/draft/verify.hpp"

namespace frugal::draft {

namespace detail {
// The calibrator's cells: the drafter's conditional probability q in 23 bins (edges in
// 1/200ths, so a bin is one table lookup) by depth in 12 bins (1 to 49+).
inline constexpr std::array<std::uint8_t, 22> calibration_q_edges{1,  2,  4,  6,   10,  15,  20,  30,  40,  50,  60,
                                                                  80, 100, 120, 140, 160, 170, 180, 188, 194, 197, 199};
inline constexpr std::array<std::uint8_t, 11> calibration_depth_edges{2, 3, 4, 5, 7, 9, 13, 17, 25, 33, 49};
inline constexpr std::size_t calibration_q_bins = calibration_q_edges.size() + 1;
inline constexpr std::size_t calibration_depth_bins = calibration_depth_edges.size() + 1;
// bin[k]: the number of edges <= k.
template <std::size_t N, std::size_t E>
constexpr std::array<std::uint8_t, N> calibration_bins(const std::array<std::uint8_t, E>& edges) {
    std::array<std::uint8_t, N> bin{};
    for (std::size_t k = 0; k < N; ++k)
        for (const std::uint8_t e : edges) bin[k] = static_cast<std::uint8_t>(bin[k] + (e <= k));
    return bin;
}
inline constexpr auto calibration_q_bin_of = calibration_bins<201>(calibration_q_edges);
inline constexpr auto calibration_depth_bin_of = calibration_bins<50>(calibration_depth_edges);
// `q` in [0, 1].
[[nodiscard]] inline std::size_t calibration_q_bin(double q) noexcept {
    return calibration_q_bin_of[std::min<std::size_t>(200, static_cast<std::size_t>(q * 200))];
}
[[nodiscard]] inline std::size_t calibration_depth_bin(std::size_t depth) noexcept {
    return calibration_depth_bin_of[std::min<std::size_t>(49, depth)];
}
}  // namespace detail

/// A snapshot of an `acceptance_calibrator`'s corrections (`acceptance_calibrator::table()`):
/// plain numbers, so a batch's many nodes are calibrated at the cost of a multiply each.
/// @code
/// const frugal::draft::acceptance_table t = calibrator.table();
/// std::vector<double> path; t.path_probabilities(tree, path);
/// @endcode
class acceptance_table {
public:
    /// The largest calibrated probability (nothing drafted is certain).
    static constexpr double max_probability = 0.9999;

    /// No correction: every probability as the drafter gave it.
    acceptance_table() { factor_.fill(1.0); }

    /// The calibrated probability of a node the drafter gave probability `q` at `depth` (>= 1).
    [[nodiscard]] double probability(double q, std::size_t depth) const noexcept {
        const double p = std::clamp(q, 0.0, 1.0);
        return std::min(p * factor_[detail::calibration_q_bin(p) * detail::calibration_depth_bins +
                                    detail::calibration_depth_bin(depth)],
                        max_probability);
    }

    /// Every node's calibrated probability given its parent (`conditional`) and from the
    /// root (`path`), for a tree whose parents precede their children.
    template <std::integral Token>
    void calibrate(const draft_tree<Token>& tree, std::vector<double>& conditional, std::vector<double>& path) const {
        conditional.resize(tree.size());
        path.resize(tree.size());
        std::vector<std::uint32_t>& depth = scratch_depth();
        depth.resize(tree.size());
        for (std::size_t i = 0; i < tree.size(); ++i) {
            const std::int32_t parent = tree.parents[i];
            const auto up = static_cast<std::size_t>(parent);
            depth[i] = parent < 0 ? 1 : depth[up] + 1;
            conditional[i] = probability(tree.probabilities[i], depth[i]);
            path[i] = parent < 0 ? conditional[i] : conditional[i] * path[up];
        }
    }

private:
    friend class acceptance_calibrator;
    // Per-thread scratch: tables are read from many threads at once.
    static std::vector<std::uint32_t>& scratch_depth() {
        thread_local std::vector<std::uint32_t> depth;
        return depth;
    }
    std::array<double, detail::calibration_q_bins * detail::calibration_depth_bins> factor_{};
};

/// Online calibration of a drafter's node probabilities. `observe(tree, emitted)` takes a
/// draft and the tokens the model emitted after it (the accepted path and the bonus token,
/// or more): every node whose parent lies on the emitted path, no deeper than the emitted
/// tokens reach, is an observation, accepted when its token is the one the model emitted
/// there. Nodes the engine did not verify count too (their outcome is known from the
/// emitted tokens), so a drafter that drafted nothing still learns.
///
/// The correction: observations are counted in cells by the drafter's conditional
/// probability q (23 bins) and the node's depth (12 bins, 1 to 49+). A cell's factor is
/// (accepted + m x prior) / (sum of q + m), and its nodes' probabilities become q x factor
/// (at most `acceptance_table::max_probability`), where m = `prior_mass` pulls a sparse
/// cell to its q bin's factor over all depths, and that one to 1 (the drafter's own q). A
/// node's calibrated path probability is the product of the calibrated probabilities from
/// the root. `table()` takes a snapshot of the factors to calibrate with.
///
/// `observe` and `table` may run on any threads at once (relaxed atomic counters): a
/// speculator's requests, drafted in parallel, share one calibrator.
/// @code
/// frugal::draft::acceptance_calibrator cal;
/// frugal::draft::drafter<int> d({}, &history, &cal);   // the drafter reports to it
/// // or by hand, after verifying `tree`:  cal.observe(tree, emitted_tokens);
/// std::vector<double> conditional, path;
/// cal.table().calibrate(tree, conditional, path);
/// @endcode
class acceptance_calibrator {
public:
    /// Pseudo-observations' mass that pulls a cell to its parent estimate.
    static constexpr double prior_mass = 4.0;

    acceptance_calibrator() = default;
    acceptance_calibrator(const acceptance_calibrator&) = delete;
    acceptance_calibrator& operator=(const acceptance_calibrator&) = delete;

    /// Counts the nodes of `tree` whose outcome `emitted` (the tokens the model emitted
    /// after the draft, in order) decides.
    template <std::integral Token>
    void observe(const draft_tree<Token>& tree, std::span<const Token> emitted) {
        if (emitted.empty()) return;
        std::vector<std::uint32_t>& depth = acceptance_table::scratch_depth();
        depth.resize(tree.size());
        std::vector<char>& on_path = scratch_on_path();
        on_path.resize(tree.size());
        for (std::size_t i = 0; i < tree.size(); ++i) {
            const std::int32_t parent = tree.parents[i];
            const auto up = static_cast<std::size_t>(parent);
            depth[i] = parent < 0 ? 1 : depth[up] + 1;
            on_path[i] = 0;
            if ((parent >= 0 && !on_path[up]) || depth[i] > emitted.size()) continue;
            const bool accepted = tree.tokens[i] == emitted[depth[i] - 1];
            on_path[i] = accepted;
            observe(tree.probabilities[i], depth[i], accepted);
        }
    }

    /// Counts one decided node: the drafter gave it probability `q` at `depth` (>= 1),
    /// and its parent was accepted; `accepted` says whether it was too.
    void observe(double q, std::size_t depth, bool accepted) noexcept {
        const double p = std::clamp(q, 0.0, 1.0);
        const auto q_fixed = static_cast<std::uint64_t>(std::lround(p * q_scale));
        const std::size_t qb = detail::calibration_q_bin(p);
        for (const std::size_t i : {index(qb, detail::calibration_depth_bin(depth)), index(qb, depth_bins)}) {
            cells_[i].seen.fetch_add(1, std::memory_order_relaxed);
            cells_[i].accepted.fetch_add(accepted ? 1 : 0, std::memory_order_relaxed);
            cells_[i].q_sum.fetch_add(q_fixed, std::memory_order_relaxed);
        }
    }

    /// The corrections as they stand.
    [[nodiscard]] acceptance_table table() const noexcept {
        acceptance_table t;
        for (std::size_t q = 0; q < q_bins; ++q) {
            const double coarse = factor(cells_[index(q, depth_bins)], 1.0);
            for (std::size_t d = 0; d < depth_bins; ++d) t.factor_[q * depth_bins + d] = factor(cells_[index(q, d)], coarse);
        }
        return t;
    }

    /// Observations counted so far.
    [[nodiscard]] std::uint64_t observations() const noexcept {
        std::uint64_t n = 0;
        for (std::size_t q = 0; q < q_bins; ++q) n += cells_[index(q, depth_bins)].seen.load(std::memory_order_relaxed);
        return n;
    }

    /// Forgets every observation.
    void clear() noexcept {
        for (auto& c : cells_) {
            c.seen.store(0, std::memory_order_relaxed);
            c.accepted.store(0, std::memory_order_relaxed);
            c.q_sum.store(0, std::memory_order_relaxed);
        }
    }

private:
    static constexpr std::size_t q_bins = detail::calibration_q_bins, depth_bins = detail::calibration_depth_bins;
    // Sums of q in fixed point: atomic adds of integers are exact and cheap.
    static constexpr double q_scale = 1 << 20;

    struct cell {
        std::atomic<std::uint64_t> seen{0}, accepted{0}, q_sum{0};
    };

    // Column depth_bins holds the q bin's counts over all depths.
    [[nodiscard]] static constexpr std::size_t index(std::size_t q, std::size_t d) noexcept {
        return q * (depth_bins + 1) + d;
    }
    // (accepted + m x prior) / (sum of q + m): the ratio of what was accepted to what the
    // drafter predicted, pulled to `prior` while the cell is thin.
    [[nodiscard]] static double factor(const cell& c, double prior) noexcept {
        const double accepted = static_cast<double>(c.accepted.load(std::memory_order_relaxed));
        const double q_sum = static_cast<double>(c.q_sum.load(std::memory_order_relaxed)) / q_scale;
        return (accepted + prior_mass * prior) / (q_sum + prior_mass);
    }

    static std::vector<char>& scratch_on_path() {
        thread_local std::vector<char> on_path;
        return on_path;
    }

    std::array<cell, q_bins*(depth_bins + 1)> cells_{};
};

}  // namespace frugal::draft
