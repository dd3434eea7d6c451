// Per-eviction cost of frugal::prefix_tree as the tree grows from 1k to 1M nodes: each
// iteration inserts one new chunk into a full tree, which evicts exactly one leaf. With an
// intrusive red-black tree of evictable leaves both steps are O(log n), so the time per
// iteration stays nearly flat; a radix cache that rebuilds a heap of leaves per eviction
// (the `heap_rebuild` baseline, the same leaves in a std::vector) grows linearly.
#include <algorithm>
#include <cstdint>
#include <random>
#include <vector>

#include <benchmark/benchmark.h>

#include <frugal/cache/prefix_tree.hpp>

namespace {

using tree_type = frugal::prefix_tree<std::uint64_t, std::uint64_t, frugal::tree_gdsf>;
using value = frugal::chunk_value<std::uint64_t>;

// A three-level tree of about `n` nodes: n / 64 roots, n / 8 middle nodes, n leaves.
void fill(tree_type& tree, std::size_t n, std::mt19937_64& rng) {
    for (std::uint64_t i = 0; i < n; ++i) {
        const std::uint64_t s[3] = {i / 64, (1ull << 32) + i / 8, (2ull << 32) + i};
        const value v[3] = {{i, 1, 1.0}, {i, 1, 1.0}, {i, 1, 1.0 + static_cast<double>(rng() % 8)}};
        tree.insert(s, v);
    }
}

void prefix_tree_insert_evict(benchmark::State& state) {
    const auto n = static_cast<std::size_t>(state.range(0));
    std::mt19937_64 rng(1);
    tree_type tree(frugal::memory_budget(1ull << 40));
    fill(tree, n, rng);
    tree.set_budget(frugal::memory_budget(tree.bytes()));
    std::uint64_t next = 3ull << 32;
    const std::uint64_t before = tree.evictions();
    for (auto _ : state) {
        const std::uint64_t s[1] = {next++};
        const value v[1] = {{next, 1, 1.0}};
        benchmark::DoNotOptimize(tree.insert(s, v));
    }
    state.counters["nodes"] = static_cast<double>(tree.size());
    state.counters["evictions_per_iter"] =
        static_cast<double>(tree.evictions() - before) / static_cast<double>(state.iterations());
}
BENCHMARK(prefix_tree_insert_evict)->RangeMultiplier(10)->Range(1000, 1000000)->Unit(benchmark::kNanosecond);

// Eviction alone: evict_one() on a tree kept between n/2 and n nodes (refilled untimed).
void prefix_tree_evict_one(benchmark::State& state) {
    const auto n = static_cast<std::size_t>(state.range(0));
    std::mt19937_64 rng(1);
    tree_type tree(frugal::memory_budget(1ull << 40));
    fill(tree, n, rng);
    const std::size_t full = tree.size();
    std::uint64_t next = 3ull << 32;
    for (auto _ : state) {
        if (tree.size() < full / 2) {
            state.PauseTiming();
            while (tree.size() < full) {
                const std::uint64_t s[1] = {next++};
                const value v[1] = {{next, 1, 1.0 + static_cast<double>(rng() % 8)}};
                tree.insert(s, v);
            }
            state.ResumeTiming();
        }
        benchmark::DoNotOptimize(tree.evict_one());
    }
    state.counters["nodes"] = static_cast<double>(full);
}
BENCHMARK(prefix_tree_evict_one)->RangeMultiplier(10)->Range(1000, 1000000)->Unit(benchmark::kNanosecond);

// Baseline: rebuild a min-heap of all leaf priorities for every eviction.
void heap_rebuild(benchmark::State& state) {
    const auto n = static_cast<std::size_t>(state.range(0));
    std::mt19937_64 rng(1);
    std::vector<double> leaves(n);
    for (auto& x : leaves) x = static_cast<double>(rng() % 1000);
    std::vector<double> heap;
    for (auto _ : state) {
        heap = leaves;
        std::make_heap(heap.begin(), heap.end(), std::greater<>());
        std::pop_heap(heap.begin(), heap.end(), std::greater<>());
        benchmark::DoNotOptimize(heap.back());
    }
    state.counters["nodes"] = static_cast<double>(n);
}
BENCHMARK(heap_rebuild)->RangeMultiplier(10)->Range(1000, 1000000)->Unit(benchmark::kNanosecond);

}  // namespace
