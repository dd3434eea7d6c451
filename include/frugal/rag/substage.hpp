#pragma once
/// @file
/// HedraRAG's sub-stage pipelining (section 4.2, Eq. 1): the sub-stage time budget,
/// the partitioner that cuts retrieval requests (clusters) and generation (decode steps)
/// into sub-stages of about that cost, and the KV-cache size of 4.4 Eq. 2.

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <span>
#include <utility>
#include <vector>

#include "frugal/core/error.hpp"

namespace frugal::rag {

/// Expected latency improvement of sub-stage budget `mb` (HedraRAG Eq. 1): a waiting
/// request saves (t_retrieval - mb) / 2 on average and pays `beta` scheduling overhead
/// for each of the t_retrieval / mb sub-stages. The paper prints the overhead term with
/// a plus sign, which would make Δ decrease monotonically (no argmax); the text calls it
/// an overhead, so frugal subtracts it.
/// @code
/// double gain = frugal::rag::substage_gain(40.0, 0.5, 6.0);  // ms
/// @endcode
[[nodiscard]] inline double substage_gain(double t_retrieval, double beta, double mb) {
    FRUGAL_CHECK(std::isfinite(t_retrieval) && t_retrieval > 0.0, "sub-stage: retrieval time ", t_retrieval,
                 " (must be > 0)");
    FRUGAL_CHECK(std::isfinite(beta) && beta > 0.0, "sub-stage: overhead beta ", beta, " (must be > 0)");
    FRUGAL_CHECK(std::isfinite(mb) && mb > 0.0, "sub-stage: budget ", mb, " (must be > 0)");
    return (t_retrieval - mb) / 2.0 - t_retrieval / mb * beta;
}

/// The budget mb maximizing Eq. 1 on (0, t_retrieval]: sqrt(2 t_retrieval beta), capped at
/// t_retrieval (no split pays when beta >= t_retrieval / 2).
/// @code
/// double mb = frugal::rag::substage_budget(40.0, 0.5);  // sqrt(40) ~ 6.3 ms
/// @endcode
[[nodiscard]] inline double substage_budget(double t_retrieval, double beta) {
    (void)substage_gain(t_retrieval, beta, t_retrieval);  // validates the arguments
    return std::min(t_retrieval, std::sqrt(2.0 * t_retrieval * beta));
}

/// Cuts a sequence of work items into consecutive sub-stages: items are added to the
/// current sub-stage until the next one would exceed `budget` (an item larger than the
/// budget forms its own sub-stage). For retrieval the items are a request's clusters in
/// probe order; for generation, its decode steps. Returns half-open [begin, end) ranges;
/// this greedy fill gives the fewest sub-stages that respect the budget.
/// @code
/// auto stages = frugal::rag::partition_by_budget(cluster_ms, frugal::rag::substage_budget(t_r, beta));
/// @endcode
[[nodiscard]] inline std::vector<std::pair<std::size_t, std::size_t>> partition_by_budget(std::span<const double> costs,
                                                                                        double budget) {
    FRUGAL_CHECK(!costs.empty(), "sub-stage partition: empty cost list");
    FRUGAL_CHECK(std::isfinite(budget) && budget > 0.0, "sub-stage partition: budget ", budget, " (must be > 0)");
    std::vector<std::pair<std::size_t, std::size_t>> out;
    std::size_t begin = 0;
    double sum = 0.0;
    for (std::size_t i = 0; i < costs.size(); ++i) {
        FRUGAL_CHECK(std::isfinite(costs[i]) && costs[i] >= 0.0, "sub-stage partition: item ", i, " costs ", costs[i],
                     " (must be finite and >= 0)");
        if (i > begin && sum + costs[i] > budget) {
            out.emplace_back(begin, i);
            begin = i;
            sum = 0.0;
        }
        sum += costs[i];
    }
    out.emplace_back(begin, costs.size());
    return out;
}

/// Cluster search costs estimated from IVF list sizes: `per_cluster + per_vector * size`
/// (a fixed cost per probed list plus a scan proportional to its length).
/// @code
/// auto ms = frugal::rag::cluster_costs_from_list_sizes(list_sizes, 0.02, 1e-4);
/// @endcode
[[nodiscard]] inline std::vector<double> cluster_costs_from_list_sizes(std::span<const std::size_t> list_sizes,
                                                                      double per_cluster, double per_vector) {
    FRUGAL_CHECK(!list_sizes.empty(), "cluster costs: empty list of cluster sizes");
    FRUGAL_CHECK(std::isfinite(per_cluster) && per_cluster >= 0.0 && std::isfinite(per_vector) && per_vector >= 0.0,
                 "cluster costs: per-cluster ", per_cluster, " and per-vector ", per_vector, " costs must be >= 0");
    std::vector<double> out;
    out.reserve(list_sizes.size());
    for (std::size_t s : list_sizes) out.push_back(per_cluster + per_vector * static_cast<double>(s));
    return out;
}

/// A measured throughput curve: throughput at increasing x (bytes of KV cache, or bytes of
/// GPU index cache), linear in between, constant beyond the ends.
struct throughput_curve {
    std::vector<double> x, throughput;

    /// Throws unless x and throughput are equally long, non-empty, finite, >= 0 and x increases.
    void validate(const char* what) const {
        FRUGAL_CHECK(!x.empty() && x.size() == throughput.size(), "kv size: ", what, " curve has ", x.size(),
                     " points and ", throughput.size(), " throughputs (must be equal and non-empty)");
        for (std::size_t i = 0; i < x.size(); ++i) {
            FRUGAL_CHECK(std::isfinite(x[i]) && x[i] >= 0.0 && std::isfinite(throughput[i]) && throughput[i] >= 0.0,
                         "kv size: ", what, " curve point ", i, " is (", x[i], ", ", throughput[i], ")");
            FRUGAL_CHECK(i == 0 || x[i] > x[i - 1], "kv size: ", what, " curve x must increase at point ", i);
        }
    }
    /// The interpolated throughput at `v`.
    [[nodiscard]] double at(double v) const {
        if (v <= x.front()) return throughput.front();
        if (v >= x.back()) return throughput.back();
        const auto k = static_cast<std::size_t>(std::upper_bound(x.begin(), x.end(), v) - x.begin());
        const double f = (v - x[k - 1]) / (x[k] - x[k - 1]);
        return throughput[k - 1] + f * (throughput[k] - throughput[k - 1]);
    }
};

/// The KV-cache size of HedraRAG Eq. 2: argmax over KV size in [0, gpu_bytes] of
/// min(T_G(KV size), T_R(gpu_bytes - KV size)), where the GPU memory not given to the KV
/// cache caches index clusters. Both curves are measured at the expected request rates;
/// the maximum of the minimum of two piecewise-linear curves lies at a breakpoint or a
/// crossing, which are all examined, so the answer is exact. Ties go to the smaller KV.
/// @code
/// double kv = frugal::rag::select_kv_size(gen_curve, retrieval_curve, 24e9).first;
/// @endcode
[[nodiscard]] inline std::pair<double, double> select_kv_size(const throughput_curve& generation,
                                                              const throughput_curve& retrieval, double gpu_bytes) {
    generation.validate("generation");
    retrieval.validate("retrieval");
    FRUGAL_CHECK(std::isfinite(gpu_bytes) && gpu_bytes > 0.0, "kv size: GPU budget ", gpu_bytes, " (must be > 0)");
    std::vector<double> points = {0.0, gpu_bytes};
    for (double v : generation.x)
        if (v > 0.0 && v < gpu_bytes) points.push_back(v);
    for (double v : retrieval.x)
        if (gpu_bytes - v > 0.0 && gpu_bytes - v < gpu_bytes) points.push_back(gpu_bytes - v);
    std::sort(points.begin(), points.end());
    points.erase(std::unique(points.begin(), points.end()), points.end());
    auto value = [&](double kv) { return std::min(generation.at(kv), retrieval.at(gpu_bytes - kv)); };
    std::pair<double, double> best{0.0, value(0.0)};
    auto consider = [&](double kv) {
        if (const double v = value(kv); v > best.second) best = {kv, v};
    };
    for (std::size_t i = 0; i < points.size(); ++i) {
        consider(points[i]);
        if (i + 1 == points.size()) continue;
        // Both curves are linear on [a, b]: their crossing, if inside, is a candidate.
        const double a = points[i], b = points[i + 1];
        const double da = generation.at(a) - retrieval.at(gpu_bytes - a);
        const double db = generation.at(b) - retrieval.at(gpu_bytes - b);
        if ((da < 0.0) != (db < 0.0)) consider(a + (b - a) * da / (da - db));
    }
    return best;
}

}  // namespace frugal::rag
