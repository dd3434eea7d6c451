#pragma once
/// @file
/// CoordGen's progressive graph switching (section 3.2, Eq. 1-2, Appendix A): while
/// C prefill chunks run through N blocks under the prefill graph G1, load each block's
/// decode graph G2 behind the compute of other blocks. Plans come from the paper's greedy
/// (Eq. 2), a greedy with local improvement, or an exact branch and bound, and are all
/// scored by replaying them on `frugal::schedule::timeline`.

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>
#include <utility>
#include <vector>

#include "frugal/core/error.hpp"
#include "frugal/schedule/timeline.hpp"

namespace frugal::schedule {

/// Per-block cost estimates of one prefill. Block i runs once per chunk, in block order,
/// chunk after chunk; a chunk of block i takes `prefill_compute[i]` under G1 and
/// `decode_compute[i]` under G2 (G2 executed repeatedly on sub-chunks), and switching
/// block i from G1 to G2 takes `load[i]` on the I/O channel. A block's load may not
/// overlap that block's own compute (its G1 memory is what G2 replaces).
/// @code
/// frugal::schedule::graph_switch_problem p{.prefill_compute = {1, 1}, .decode_compute = {1.2, 1.2},
///                                .load = {2, 2}, .chunks = 2};
/// @endcode
struct graph_switch_problem {
    std::vector<double> prefill_compute;
    std::vector<double> decode_compute;
    std::vector<double> load;
    std::size_t chunks = 1;

    /// The number of blocks N.
    [[nodiscard]] std::size_t blocks() const noexcept { return load.size(); }

    /// Throws `frugal::invalid_argument` on empty or mismatched lists, negative or
    /// non-finite times, or zero chunks.
    void validate() const {
        FRUGAL_CHECK(!load.empty(), "graph switch: empty block list");
        FRUGAL_CHECK(prefill_compute.size() == load.size() && decode_compute.size() == load.size(),
                     "graph switch: ", prefill_compute.size(), " prefill times, ", decode_compute.size(),
                     " decode times and ", load.size(), " load times (must be equal)");
        FRUGAL_CHECK(chunks >= 1, "graph switch: zero prefill chunks");
        for (const auto* list : {&prefill_compute, &decode_compute, &load})
            for (std::size_t i = 0; i < list->size(); ++i)
                FRUGAL_CHECK(std::isfinite((*list)[i]) && (*list)[i] >= 0.0, "graph switch: block ", i,
                             " has time ", (*list)[i], " (must be finite and >= 0)");
    }
};

/// A switching plan: for each block, the first chunk it runs under G2; `chunks` means
/// the block switches after prefill (its load may still overlap the last chunk's compute
/// of later blocks). Loads run in order of (switch chunk, block), which is optimal for a
/// given assignment: the load windows are nested in time order (an exchange argument).
/// @code
/// frugal::schedule::graph_switch_plan plan{.switch_chunk = {2, 1, 0}};
/// @endcode
struct graph_switch_plan {
    std::vector<std::size_t> switch_chunk;
    friend bool operator==(const graph_switch_plan&, const graph_switch_plan&) = default;
};

/// The two-resource timeline of a plan and the ids of its tasks: compute (c, i) is
/// `compute_task[c * N + i]`, the load of block i is `load_task[i]`.
/// @code
/// auto s = frugal::schedule::graph_switch_timeline(problem, plan);
/// double start_of_last_load = s.schedule.simulate().start[s.load_task.back()];
/// @endcode
struct graph_switch_schedule {
    timeline schedule;
    std::vector<std::size_t> compute_task, load_task;
};

namespace detail {
inline void check_plan(const graph_switch_problem& p, const graph_switch_plan& plan) {
    FRUGAL_CHECK(plan.switch_chunk.size() == p.blocks(), "graph switch: plan has ", plan.switch_chunk.size(),
                 " blocks, the problem ", p.blocks());
    for (std::size_t i = 0; i < plan.switch_chunk.size(); ++i)
        FRUGAL_CHECK(plan.switch_chunk[i] <= p.chunks, "graph switch: block ", i, " switches at chunk ",
                     plan.switch_chunk[i], " > chunks = ", p.chunks);
}
}  // namespace detail

/// Builds the two-resource timeline of `plan`: compute tasks for every (chunk, block) in
/// execution order and one I/O task per block, with a block's load after its last G1
/// compute and before its first G2 compute.
/// @code
/// double makespan = frugal::schedule::graph_switch_timeline(problem, plan).schedule.simulate().makespan;
/// @endcode
[[nodiscard]] inline graph_switch_schedule graph_switch_timeline(const graph_switch_problem& p,
                                                                   const graph_switch_plan& plan) {
    p.validate();
    detail::check_plan(p, plan);
    const std::size_t n = p.blocks(), c_total = p.chunks;
    graph_switch_schedule out;
    out.compute_task.resize(n * c_total);
    out.load_task.resize(n);
    auto add_load = [&](std::size_t c, std::size_t i) {
        if (c == 0) {
            out.load_task[i] = out.schedule.add(resource::io, p.load[i]);
        } else {
            const std::size_t release = out.compute_task[(c - 1) * n + i];
            out.load_task[i] = out.schedule.add(resource::io, p.load[i], {release});
        }
    };
    for (std::size_t c = 0; c < c_total; ++c)
        for (std::size_t i = 0; i < n; ++i) {
            const std::size_t sw = plan.switch_chunk[i];
            if (sw == c) {
                add_load(c, i);
                out.compute_task[c * n + i] =
                    out.schedule.add(resource::compute, p.decode_compute[i], {out.load_task[i]});
            } else {
                out.compute_task[c * n + i] =
                    out.schedule.add(resource::compute, sw < c ? p.decode_compute[i] : p.prefill_compute[i]);
            }
        }
    for (std::size_t i = 0; i < n; ++i)
        if (plan.switch_chunk[i] == c_total) add_load(c_total, i);
    return out;
}

/// The makespan of `plan` (prefill done and every block switched), replayed on the
/// timeline simulator.
/// @code
/// double t = frugal::schedule::graph_switch_makespan(problem, frugal::schedule::greedy_graph_switch(problem));
/// @endcode
[[nodiscard]] inline double graph_switch_makespan(const graph_switch_problem& p, const graph_switch_plan& plan) {
    return graph_switch_timeline(p, plan).schedule.simulate().makespan;
}

namespace detail {
// The same replay as graph_switch_timeline() in closed loop form, for the inner loops of
// the searches (no allocation per call beyond `end`); tests check it against the timeline.
inline double fast_switch_makespan(const graph_switch_problem& p, const std::vector<std::size_t>& plan,
                                   std::vector<double>& end) {
    const std::size_t n = p.blocks(), c_total = p.chunks;
    end.resize(n * c_total);
    double comp = 0.0, io = 0.0;
    for (std::size_t c = 0; c < c_total; ++c)
        for (std::size_t i = 0; i < n; ++i) {
            const std::size_t t = c * n + i, sw = plan[i];
            double start = comp;
            if (sw == c) {
                io = std::max(io, c == 0 ? 0.0 : end[t - n]) + p.load[i];
                start = std::max(start, io);
            }
            comp = start + (sw <= c ? p.decode_compute[i] : p.prefill_compute[i]);
            end[t] = comp;
        }
    for (std::size_t i = 0; i < n; ++i)
        if (plan[i] == c_total) io = std::max(io, end[(c_total - 1) * n + i]) + p.load[i];
    return std::max(comp, io);
}
}  // namespace detail

namespace detail {
// CoordGen's greedy (Eq. 2), literally: walk the compute sequence; take the last block not
// yet switched, and overlap its load with the minimal number k of consecutive upcoming
// block computations whose estimated time covers it (Eq. 1), stopping before that block's
// own next compute; the block then runs under G2 from that compute on. Blocks still
// unswitched when prefill ends switch afterwards. The first stage of greedy_graph_switch;
// frugal::sim::paper_greedy_graph_switch exposes it alone as the paper's baseline.
[[nodiscard]] inline graph_switch_plan eq2_greedy_switch(const graph_switch_problem& p) {
    p.validate();
    const std::size_t n = p.blocks(), c_total = p.chunks, ops = n * c_total;
    graph_switch_plan plan{std::vector<std::size_t>(n, c_total)};
    auto estimate = [&](std::size_t op) {
        const std::size_t c = op / n, i = op % n;
        return plan.switch_chunk[i] <= c ? p.decode_compute[i] : p.prefill_compute[i];
    };
    std::size_t pos = 0, unswitched = n;
    while (unswitched > 0 && pos < ops) {
        const std::size_t j = unswitched - 1;  // the last block not switched
        const std::size_t b = pos % n, c = pos / n;
        std::size_t window_start = pos;
        std::size_t next = j >= b ? c * n + j : (c + 1) * n + j;  // j's next compute
        if (next == pos) {  // the load cannot overlap j's own compute: start after it
            window_start = pos + 1;
            next += n;
        }
        std::size_t k_end = window_start;  // window [window_start, k_end)
        double covered = 0.0;
        while (k_end < std::min(next, ops) && covered < p.load[j]) covered += estimate(k_end++);
        if (k_end == window_start) k_end = window_start + 1;  // zero-length load: advance anyway
        plan.switch_chunk[j] = std::min(next / n, c_total);
        --unswitched;
        pos = k_end;
    }
    return plan;
}
}  // namespace detail

/// frugal's greedy: the paper's greedy (Eq. 2) followed by local improvement, moving one
/// block's switch chunk or exchanging the switch chunks of two blocks while the simulated
/// makespan drops. Never worse than the paper's greedy.
/// @code
/// auto plan = frugal::schedule::greedy_graph_switch(problem);
/// @endcode
[[nodiscard]] inline graph_switch_plan greedy_graph_switch(const graph_switch_problem& p) {
    graph_switch_plan plan = detail::eq2_greedy_switch(p);
    const std::size_t n = p.blocks(), c_total = p.chunks;
    std::vector<double> scratch;
    std::vector<std::size_t>& x = plan.switch_chunk;
    double best = detail::fast_switch_makespan(p, x, scratch);
    for (bool improved = true; improved;) {
        improved = false;
        for (std::size_t i = 0; i < n; ++i)
            for (std::size_t c = 0; c <= c_total; ++c) {
                if (c == x[i]) continue;
                const std::size_t old = x[i];
                x[i] = c;
                const double m = detail::fast_switch_makespan(p, x, scratch);
                if (m < best - 1e-12 * std::max(1.0, best)) {
                    best = m;
                    improved = true;
                } else {
                    x[i] = old;
                }
            }
        for (std::size_t i = 0; i < n; ++i)
            for (std::size_t j = i + 1; j < n; ++j) {
                if (x[i] == x[j]) continue;
                std::swap(x[i], x[j]);
                const double m = detail::fast_switch_makespan(p, x, scratch);
                if (m < best - 1e-12 * std::max(1.0, best)) {
                    best = m;
                    improved = true;
                } else {
                    std::swap(x[i], x[j]);
                }
            }
    }
    return plan;
}

namespace detail {
// Depth-first branch and bound over the compute sequence: at each compute of a block not
// yet switched, either switch it right before this compute or not; the state is the
// exact replay of fast_switch_makespan() so far. Pruned by the remaining compute at the
// cheaper graph, the I/O still owed, and bound() below.
class switch_branch_and_bound {
public:
    explicit switch_branch_and_bound(const graph_switch_problem& p, std::vector<std::size_t> incumbent)
        : p_(p), n_(p.blocks()), c_(p.chunks), best_plan_(std::move(incumbent)), plan_(n_, p.chunks),
          end_(n_ * p.chunks) {
        best_ = fast_switch_makespan(p_, best_plan_, end_);
        cheap_suffix_.assign(n_ * c_ + 1, 0.0);
        for (std::size_t t = n_ * c_; t-- > 0;) {
            const std::size_t i = t % n_;
            cheap_suffix_[t] = cheap_suffix_[t + 1] + std::min(p_.prefill_compute[i], p_.decode_compute[i]);
        }
        double unswitched_load = 0.0;
        for (double s : p_.load) unswitched_load += s;
        const double root_bound = std::max(cheap_suffix_[0], unswitched_load);
        if (best_ > root_bound * (1.0 + eps)) search(0, 0.0, 0.0, unswitched_load, 0.0);
    }
    [[nodiscard]] std::vector<std::size_t> plan() && { return std::move(best_plan_); }

private:
    static constexpr double eps = 1e-12;

    // extra: compute owed beyond the cheap graph by blocks switched so far (their remaining
    // G2 computes cost d > min(p, d)).
    void search(std::size_t t, double comp, double io, double unswitched_load, double extra) {
        const std::size_t ops = n_ * c_;
        if (t == ops) {
            double tail_io = io;
            for (std::size_t i = 0; i < n_; ++i)
                if (plan_[i] == c_) tail_io = std::max(tail_io, end_[(c_ - 1) * n_ + i]) + p_.load[i];
            const double m = std::max(comp, tail_io);
            if (m < best_ * (1.0 - eps)) {
                best_ = m;
                best_plan_ = plan_;
            }
            return;
        }
        if (std::max(comp + cheap_suffix_[t] + extra, io + unswitched_load) >= best_ * (1.0 - eps)) return;
        if (bound(t, comp, io, best_ * (1.0 - eps)) >= best_ * (1.0 - eps)) return;
        const std::size_t c = t / n_, i = t % n_;
        const double pi = p_.prefill_compute[i], di = p_.decode_compute[i];
        const double cheap = std::min(pi, di);
        if (plan_[i] < c) {  // already switched
            end_[t] = comp + di;
            search(t + 1, end_[t], io, unswitched_load, extra - (di - cheap));
            return;
        }
        // Remaining computes of block i after this one, if it switches now.
        const double later = static_cast<double>(c_ - 1 - c) * (di - cheap);
        const double io_now = std::max(io, c == 0 ? 0.0 : end_[t - n_]) + p_.load[i];
        auto switch_now = [&] {
            plan_[i] = c;
            end_[t] = std::max(comp, io_now) + di;
            search(t + 1, end_[t], io_now, unswitched_load - p_.load[i], extra + later);
            plan_[i] = c_;
        };
        auto stay = [&] {
            end_[t] = comp + pi;
            search(t + 1, end_[t], io, unswitched_load, extra);
        };
        // Staying first finds the late switches (cheap in compute) first, so the incumbent
        // tightens and prunes early. The order changes only the search time and, among plans
        // of equal makespan, which one is returned.
        stay();
        switch_now();
    }

    // Bounds over the blocks U not yet switched; returns a makespan no schedule from here
    // beats, or infinity when the third test shows none reaches `target`. (1) U's loads
    // run one at a time on the I/O channel, each after its block's latest compute so far:
    // serving them in release order is optimal for that relaxation. (2) Each block of U
    // either switches during prefill, adding at least max(d - p, 0) to the compute, or
    // after its last compute (which ends no earlier than the cheap-graph estimate e),
    // finishing at >= e + load. (3) The blocks switching after prefill load one at a time
    // in block order, after the loads of the blocks that must switch during prefill, each
    // no earlier than its e, all done by `target`; even the fractional knapsack keeping
    // the most extra compute off must leave the compute under `target`.
    double bound(std::size_t t, double comp, double io, double target) {
        const std::size_t ops = n_ * c_;
        releases_.clear();
        tails_.clear();
        double acc = comp;
        for (std::size_t u = t; u < ops; ++u) {
            const std::size_t i = u % n_, c = u / n_;
            acc += plan_[i] <= c ? p_.decode_compute[i] : std::min(p_.prefill_compute[i], p_.decode_compute[i]);
            if (c + 1 == c_ && plan_[i] == c_)
                tails_.push_back({acc, p_.load[i], std::max(p_.decode_compute[i] - p_.prefill_compute[i], 0.0)});
        }
        for (std::size_t i = 0; i < n_; ++i) {
            if (plan_[i] != c_) continue;
            // The latest compute of block i before t, if any, releases its load.
            std::size_t before = (t / n_) * n_ + i;
            if (before >= t) before = before >= n_ ? before - n_ : ops;
            releases_.push_back({before < t ? end_[before] : 0.0, p_.load[i]});
            if (c_ * n_ - n_ + i < t) tails_.push_back({end_[c_ * n_ - n_ + i], p_.load[i], inf});
        }
        std::sort(releases_.begin(), releases_.end());
        double cur = io;
        for (const auto& [r, s] : releases_) cur = std::max(cur, r) + s;
        // (2): sorted by e + load, descending; the first k switch during prefill.
        std::sort(tails_.begin(), tails_.end(),
                  [](const tail& a, const tail& b) { return a.end + a.load > b.end + b.load; });
        double compute_cost = acc, tail_bound = inf;
        for (std::size_t k = 0; k <= tails_.size(); ++k) {
            const double outside = k < tails_.size() ? tails_[k].end + tails_[k].load : 0.0;
            tail_bound = std::min(tail_bound, std::max(compute_cost, outside));
            if (k < tails_.size()) compute_cost += tails_[k].extra;
        }
        const double lower = std::max(cur, tail_bound);
        if (lower >= target) return lower;
        // (3): in order of e (= block order = the order of the loads after prefill), the
        // loads from position m on must fit between e_m and target (a chain of capacities).
        double extra = 0.0, prefill_load = 0.0;
        for (const auto& b : tails_)
            if (b.extra != inf) {
                extra += b.extra;
                if (b.end + b.load >= target) prefill_load += b.load;  // loads before every tail load
            }
        std::sort(tails_.begin(), tails_.end(), [](const tail& a, const tail& b) { return a.end < b.end; });
        capacity_.resize(tails_.size());
        order_.clear();
        for (std::size_t m = 0; m < tails_.size(); ++m) {
            capacity_[m] = target - (m == 0 ? std::max(io + prefill_load, tails_[0].end) : tails_[m].end);
            if (tails_[m].extra != inf && tails_[m].end + tails_[m].load < target) order_.push_back(m);
        }
        // Past their last compute: loaded after prefill, whatever the plan.
        for (std::size_t q = 0; q < tails_.size(); ++q)
            if (tails_[q].extra == inf)
                for (std::size_t m = 0; m <= q; ++m)
                    if ((capacity_[m] -= tails_[q].load) < 0.0) return inf;
        // The fractional relaxation over a chain of capacities is solved greedily, best
        // extra compute per unit of load first (a polymatroid).
        auto ratio = [&](std::size_t q) { return tails_[q].load > 0.0 ? tails_[q].extra / tails_[q].load : inf; };
        std::sort(order_.begin(), order_.end(), [&](std::size_t a, std::size_t b) { return ratio(a) > ratio(b); });
        double kept_off = 0.0;
        for (std::size_t q : order_) {
            if (tails_[q].load == 0.0) {
                kept_off += tails_[q].extra;
                continue;
            }
            double room = tails_[q].load;
            for (std::size_t m = 0; m <= q; ++m) room = std::min(room, capacity_[m]);
            if (room <= 0.0) continue;
            for (std::size_t m = 0; m <= q; ++m) capacity_[m] -= room;
            kept_off += tails_[q].extra * room / tails_[q].load;
        }
        return acc + extra - kept_off >= target ? inf : lower;
    }

    struct tail {
        double end, load, extra;  // lower bound of the last compute's end; extra = inf: past it
    };
    static constexpr double inf = std::numeric_limits<double>::infinity();

    const graph_switch_problem& p_;
    std::size_t n_, c_;
    std::vector<std::pair<double, double>> releases_;
    std::vector<tail> tails_;
    std::vector<double> capacity_;
    std::vector<std::size_t> order_;
    double best_ = std::numeric_limits<double>::infinity();
    std::vector<std::size_t> best_plan_, plan_;
    std::vector<double> end_, cheap_suffix_;
};
}  // namespace detail

/// The optimal plan (minimal makespan) by branch and bound, started from
/// `greedy_graph_switch`. The problem is NP-hard (Appendix A: 2-Partition reduces to it),
/// so the search is exponential in the worst case; it accepts up to 24 blocks.
/// @code
/// auto best = frugal::schedule::exact_graph_switch(problem);
/// double gap = frugal::schedule::graph_switch_makespan(problem, frugal::schedule::greedy_graph_switch(problem)) /
///              frugal::schedule::graph_switch_makespan(problem, best) - 1;
/// @endcode
[[nodiscard]] inline graph_switch_plan exact_graph_switch(const graph_switch_problem& p) {
    p.validate();
    FRUGAL_CHECK(p.blocks() <= 24, "exact graph switch: ", p.blocks(), " blocks (at most 24)");
    return {std::move(detail::switch_branch_and_bound(p, greedy_graph_switch(p).switch_chunk)).plan()};
}

/// Re-estimation between requests: keeps the cost estimates of a `graph_switch_problem`
/// and moves each toward measured times by an exponential moving average with weight
/// `alpha` (1 = trust the last measurement only), so the next plan uses fresh costs.
/// @code
/// frugal::schedule::graph_switch_estimator est(profiled, 0.5);
/// est.observe_load(3, measured_ms);
/// auto plan = frugal::schedule::greedy_graph_switch(est.estimate());
/// @endcode
class graph_switch_estimator {
public:
    graph_switch_estimator(graph_switch_problem initial, double alpha) : est_(std::move(initial)), alpha_(alpha) {
        est_.validate();
        FRUGAL_CHECK(alpha > 0.0 && alpha <= 1.0, "graph switch estimator: alpha = ", alpha, " (must be in (0, 1])");
    }
    /// A measured per-chunk compute time of `block` under G1.
    void observe_prefill_compute(std::size_t block, double measured) { update(est_.prefill_compute, block, measured); }
    /// A measured per-chunk compute time of `block` under G2.
    void observe_decode_compute(std::size_t block, double measured) { update(est_.decode_compute, block, measured); }
    /// A measured G2 load time of `block`.
    void observe_load(std::size_t block, double measured) { update(est_.load, block, measured); }
    /// The current estimates, ready for the next plan.
    [[nodiscard]] const graph_switch_problem& estimate() const noexcept { return est_; }

private:
    void update(std::vector<double>& v, std::size_t block, double measured) {
        FRUGAL_CHECK_AS(frugal::out_of_range, block < v.size(), "graph switch estimator: block ", block,
                        " >= ", v.size());
        FRUGAL_CHECK(std::isfinite(measured) && measured >= 0.0, "graph switch estimator: measured time ",
                     measured, " (must be finite and >= 0)");
        v[block] += alpha_ * (measured - v[block]);
    }

    graph_switch_problem est_;
    double alpha_;
};

}  // namespace frugal::schedule
