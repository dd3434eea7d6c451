// Micro-benchmarks of the pruning hot path: exact 1-D k-means for every k <= 8 on 1000
// scores, on one pool and on pools in turn (against Lloyd with 10 k-means++ restarts at
// k = 8, the paper's clustering), and one cluster_pruner decision over 100 candidates.
#include <benchmark/benchmark.h>

#include <random>
#include <vector>

#include <frugal/prune/cluster_pruner.hpp>
#include <frugal/prune/kmeans1d.hpp>
#include <frugal/sim/kmeans1d_lloyd.hpp>

namespace {

std::vector<float> grouped_scores(std::size_t n, std::uint64_t seed) {
    std::mt19937_64 rng(seed);
    std::normal_distribution<float> normal(0.0f, 0.05f);
    std::vector<float> x(n);
    for (std::size_t i = 0; i < n; ++i) x[i] = 0.15f + 0.2f * float(i % 4) + normal(rng);
    return x;
}

void kmeans1d_exact_all_k(benchmark::State& state) {
    const auto x = grouped_scores(static_cast<std::size_t>(state.range(0)), 1);
    frugal::prune::kmeans1d km;
    for (auto _ : state) {
        km.fit(std::span<const float>(x), static_cast<std::size_t>(state.range(1)));
        benchmark::DoNotOptimize(km.select_k_bic());
    }
}
BENCHMARK(kmeans1d_exact_all_k)->Args({1000, 8})->Args({100, 6})->Unit(benchmark::kMicrosecond);

// The same on 16 pools in turn: the branch predictor cannot learn one pool's search
// pattern, as in pruning, where every decision sees new scores.
void kmeans1d_exact_all_k_fresh(benchmark::State& state) {
    std::vector<std::vector<float>> pools;
    for (std::uint64_t s = 0; s < 16; ++s) pools.push_back(grouped_scores(static_cast<std::size_t>(state.range(0)), s + 100));
    frugal::prune::kmeans1d km;
    std::size_t i = 0;
    for (auto _ : state) {
        km.fit(std::span<const float>(pools[i++ % pools.size()]), static_cast<std::size_t>(state.range(1)));
        benchmark::DoNotOptimize(km.select_k_bic());
    }
}
BENCHMARK(kmeans1d_exact_all_k_fresh)->Args({1000, 8})->Args({100, 6})->Unit(benchmark::kMicrosecond);

void kmeans1d_lloyd_10_restarts(benchmark::State& state) {
    const auto x = grouped_scores(static_cast<std::size_t>(state.range(0)), 1);
    for (auto _ : state)
        benchmark::DoNotOptimize(frugal::sim::kmeans1d_lloyd(std::span<const float>(x), 8, 10, 1).sse);
}
BENCHMARK(kmeans1d_lloyd_10_restarts)->Arg(1000)->Unit(benchmark::kMicrosecond);

// One decision over 100 candidates: CV, exact k-means with BIC over k <= 6, routing,
// rank-stability bookkeeping; the pool changes every iteration.
void cluster_pruner_decision(benchmark::State& state) {
    std::vector<std::vector<float>> pools;
    for (std::uint64_t s = 0; s < 64; ++s) pools.push_back(grouped_scores(100, s + 10));
    frugal::prune::cluster_pruner pruner({.threshold = 0.1});
    std::vector<frugal::prune::route> routes(100);
    std::size_t i = 0;
    for (auto _ : state) {
        auto step = pruner.decide(pools[i++ % pools.size()], 10, routes);
        benchmark::DoNotOptimize(step);
    }
}
BENCHMARK(cluster_pruner_decision)->Unit(benchmark::kMicrosecond);

}  // namespace
