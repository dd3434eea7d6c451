#include <frugal/rag/substage.hpp>

#include <gtest/gtest.h>

#include <random>
#include <vector>

namespace {

TEST(Substage, ClosedFormBudgetMatchesNumericSweep) {
    for (const auto& [t, beta] : std::vector<std::pair<double, double>>{{40, 0.5}, {10, 0.05}, {100, 2}, {3, 1}, {8, 5}}) {
        double best_mb = 0, best_gain = -INFINITY;
        const int steps = 200000;
        for (int k = 1; k <= steps; ++k) {
            const double mb = t * k / steps;
            const double gain = (t - mb) / 2 - t / mb * beta;  // Eq. 1, overhead subtracted
            if (gain > best_gain) best_gain = gain, best_mb = mb;
        }
        const double mb = frugal::rag::substage_budget(t, beta);
        EXPECT_NEAR(mb, best_mb, 2 * t / steps) << "t " << t << " beta " << beta;
        EXPECT_GE(frugal::rag::substage_gain(t, beta, mb), best_gain - 1e-9);
    }
    EXPECT_DOUBLE_EQ(frugal::rag::substage_budget(8, 5), 8.0);  // beta >= t / 2: do not split
}

TEST(Substage, PartitionIsTheFewestBudgetRespectingCut) {
    std::mt19937 rng(2);
    std::uniform_real_distribution<double> cost(0.0, 3.0);
    for (int trial = 0; trial < 200; ++trial) {
        const std::size_t n = 1 + trial % 11;
        std::vector<double> c(n);
        for (auto& x : c) x = cost(rng);
        const double budget = 0.5 + trial % 5;
        const auto stages = frugal::rag::partition_by_budget(c, budget);
        // Oracle: every cut set; a sub-stage is valid if within budget or a single item.
        std::size_t fewest = n;
        for (std::uint32_t cuts = 0; cuts < (1u << (n - 1)); ++cuts) {
            std::size_t count = 1;
            double sum = c[0];
            std::size_t len = 1;
            bool ok = true;
            for (std::size_t i = 1; i <= n && ok; ++i) {
                if (i == n || (cuts >> (i - 1) & 1u)) {
                    ok = len == 1 || sum <= budget;
                    if (i < n) ++count, sum = c[i], len = 1;
                } else {
                    sum += c[i], ++len;
                }
            }
            if (ok) fewest = std::min(fewest, count);
        }
        EXPECT_EQ(stages.size(), fewest) << "trial " << trial;
        std::size_t next = 0;
        for (const auto& [b, e] : stages) {
            EXPECT_EQ(b, next);
            EXPECT_LT(b, e);
            double sum = 0;
            for (std::size_t i = b; i < e; ++i) sum += c[i];
            EXPECT_TRUE(e - b == 1 || sum <= budget);
            next = e;
        }
        EXPECT_EQ(next, n);
    }
}

TEST(Substage, ClusterCostsFromListSizes) {
    const std::vector<std::size_t> sizes = {100, 0, 250};
    EXPECT_EQ(frugal::rag::cluster_costs_from_list_sizes(sizes, 1.0, 0.01), (std::vector<double>{2.0, 1.0, 3.5}));
}

TEST(Substage, KvSizeMatchesDenseSweep) {
    std::mt19937 rng(4);
    std::uniform_real_distribution<double> u(0.0, 1.0);
    for (int trial = 0; trial < 30; ++trial) {
        frugal::rag::throughput_curve g, r;
        double x = 0, tg = 0, tr = 0;
        for (int k = 0; k < 6; ++k) {
            x += 1 + 3 * u(rng);
            tg += 5 * u(rng);  // generation gains from KV cache
            tr += 5 * u(rng);  // retrieval gains from index cache
            g.x.push_back(x), g.throughput.push_back(tg);
            r.x.push_back(x), r.throughput.push_back(tr);
        }
        const double budget = 5 + 15 * u(rng);
        const auto [kv, value] = frugal::rag::select_kv_size(g, r, budget);
        double sweep = -1;
        for (int k = 0; k <= 100000; ++k) {
            const double v = budget * k / 100000;
            sweep = std::max(sweep, std::min(g.at(v), r.at(budget - v)));
        }
        EXPECT_GE(value, sweep - 1e-9) << "trial " << trial;
        EXPECT_NEAR(value, std::min(g.at(kv), r.at(budget - kv)), 1e-9);
        EXPECT_LE(value, sweep + 1e-3);
    }
}

TEST(Substage, RejectsBadInput) {
    EXPECT_THROW((void)frugal::rag::substage_budget(0, 1), frugal::invalid_argument);
    EXPECT_THROW((void)frugal::rag::substage_budget(-5, 1), frugal::invalid_argument);
    EXPECT_THROW((void)frugal::rag::substage_budget(10, 0), frugal::invalid_argument);
    EXPECT_THROW((void)frugal::rag::partition_by_budget({}, 1.0), frugal::invalid_argument);
    const std::vector<double> c = {1, 2};
    EXPECT_THROW((void)frugal::rag::partition_by_budget(c, 0.0), frugal::invalid_argument);
    const std::vector<double> neg = {1, -2};
    EXPECT_THROW((void)frugal::rag::partition_by_budget(neg, 1.0), frugal::invalid_argument);
    EXPECT_THROW((void)frugal::rag::cluster_costs_from_list_sizes({}, 1, 1), frugal::invalid_argument);
    frugal::rag::throughput_curve bad{{2, 1}, {1, 1}}, ok{{1}, {1}};
    EXPECT_THROW((void)frugal::rag::select_kv_size(bad, ok, 10), frugal::invalid_argument);
    EXPECT_THROW((void)frugal::rag::select_kv_size(ok, ok, 0), frugal::invalid_argument);
}

}  // namespace
