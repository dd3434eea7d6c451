// Per-eviction cost of frugal::cache::prefix_tree as the tree grows from 1k to 1M nodes, in steady
// state (the tree stays at its size: every eviction is paired with an insertion).
//
// - prefix_tree_evict_one: a batch of evict_one() calls (timed in thread CPU time; an iteration is one batch,
//   the `ns_per_eviction` counter is the figure), then as many chunks inserted under random
//   prefixes with random costs (untimed), so that the victims keep coming from everywhere in
//   the tree and the GDSF order, not from one end of memory.
// - prefix_tree_drain_lru: a batch of evict_one() calls on an LRU tree filled in one pass, so
//   that the victims come in insertion order, which is also their order in memory; refilled
//   (untimed) when nearly empty. Cache misses on the victims and their parents are then rare.
// - prefix_tree_insert_evict: one new chunk under a random prefix of a full tree, which
//   evicts one leaf: eviction plus the insertion's lookups of a random prefix.
// - heap_rebuild: a radix cache that rebuilds a heap of its leaves per eviction (the same
//   number of leaves in a std::vector), the baseline that grows linearly.
//
// At the end it prints, for each benchmark, the CPU time at the largest size over the one at
// the smallest (the 1M/1k ratio: 1 is flat; heap_rebuild shows what linear looks like).
#include <algorithm>
#include <ctime>
#include <cstdint>
#include <cstdio>
#include <map>
#include <random>
#include <string>
#include <vector>

#include <benchmark/benchmark.h>

#include <frugal/cache/gdsf_policy.hpp>
#include <frugal/cache/lru_policy.hpp>
#include <frugal/cache/prefix_tree.hpp>

namespace {

using tree_type = frugal::cache::prefix_tree<std::uint64_t, std::uint64_t, frugal::cache::gdsf_policy>;
using value = frugal::cache::chunk_value<std::uint64_t>;

// A three-level tree of about `n` nodes: n / 64 roots, n / 8 middle nodes, n leaves.
void fill(tree_type& tree, std::size_t n, std::mt19937_64& rng) {
    for (std::uint64_t i = 0; i < n; ++i) {
        const std::uint64_t s[3] = {i / 64, (1ull << 32) + i / 8, (2ull << 32) + i};
        const value v[3] = {{i, 1, 1.0}, {i, 1, 1.0}, {i, 1, 1.0 + static_cast<double>(rng() % 8)}};
        tree.insert(s, v);
    }
}

// Inserts one new leaf (random cost) under a random middle node of the fill: 1 to 3 chunks,
// depending on how much of that prefix is still cached.
void insert_random_leaf(tree_type& tree, std::size_t n, std::uint64_t& next, std::mt19937_64& rng) {
    const std::uint64_t i = rng() % n;
    const std::uint64_t s[3] = {i / 64, (1ull << 32) + i / 8, (3ull << 32) + next++};
    const double cost = 1.0 + static_cast<double>(rng() % 8);
    const value v[3] = {{i, 1, 1.0}, {i, 1, 1.0}, {next, 1, cost}};
    benchmark::DoNotOptimize(tree.insert(s, v));
}

// CPU time of this thread (the machine may be shared: wall time would count other processes).
double thread_seconds() {
    timespec ts{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

// Evictions per timed batch: enough to dwarf the clock reads, few enough to leave the tree near its size.
std::size_t eviction_batch(std::size_t n) { return std::max<std::size_t>(1, std::min<std::size_t>(256, n / 16)); }

// Times batches of evict_one() in thread CPU time (manual time), calling `top_up` (untimed)
// before each batch, and reports the tree's size and the time per eviction.
template <class Tree, class TopUp>
void time_evictions(benchmark::State& state, Tree& tree, std::size_t batch, TopUp top_up) {
    const std::size_t full = tree.size();
    std::uint64_t evicted = 0;
    double seconds = 0;
    for (auto _ : state) {
        top_up();
        const double start = thread_seconds();
        for (std::size_t i = 0; i < batch; ++i) benchmark::DoNotOptimize(tree.evict_one());
        const double t = thread_seconds() - start;
        state.SetIterationTime(t);
        seconds += t;
        evicted += batch;
    }
    state.counters["nodes"] = static_cast<double>(full);
    state.counters["ns_per_eviction"] = seconds * 1e9 / static_cast<double>(evicted);
}

void prefix_tree_evict_one(benchmark::State& state) {
    const auto n = static_cast<std::size_t>(state.range(0));
    const std::size_t batch = eviction_batch(n);
    std::mt19937_64 rng(1);
    tree_type tree(frugal::memory_budget(1ull << 40));
    fill(tree, n, rng);
    const std::size_t full = tree.size();
    std::uint64_t next = 0;
    // Warm up to the steady state: the fill's eviction order is replaced by a mixed one.
    while (tree.evictions() < full) {
        for (std::size_t i = 0; i < batch; ++i) tree.evict_one();
        while (tree.size() < full) insert_random_leaf(tree, n, next, rng);
    }
    time_evictions(state, tree, batch, [&] {
        while (tree.size() < full) insert_random_leaf(tree, n, next, rng);
    });
}
BENCHMARK(prefix_tree_evict_one)->RangeMultiplier(10)->Range(1000, 1000000)->UseManualTime()->Unit(benchmark::kNanosecond);

// Draining a tree filled in one pass under LRU: the victims come in insertion order, which is
// also their order in memory, so what is timed is the eviction's own work, not cache misses.
void prefix_tree_drain_lru(benchmark::State& state) {
    using lru_tree = frugal::cache::prefix_tree<std::uint64_t, std::uint64_t, frugal::cache::lru_policy>;
    const auto n = static_cast<std::size_t>(state.range(0));
    const std::size_t batch = eviction_batch(n);
    lru_tree tree(frugal::memory_budget(1ull << 40));
    const auto refill = [&] {
        for (std::uint64_t i = 0; i < n; ++i) {
            const std::uint64_t s[3] = {i / 64, (1ull << 32) + i / 8, (2ull << 32) + i};
            const value v[3] = {{i, 1, 1.0}, {i, 1, 1.0}, {i, 1, 1.0}};
            tree.insert(s, v);
        }
    };
    refill();
    time_evictions(state, tree, batch, [&] {
        if (tree.size() < batch) refill();
    });
}
BENCHMARK(prefix_tree_drain_lru)->RangeMultiplier(10)->Range(1000, 1000000)->UseManualTime()->Unit(benchmark::kNanosecond);

void prefix_tree_insert_evict(benchmark::State& state) {
    const auto n = static_cast<std::size_t>(state.range(0));
    std::mt19937_64 rng(1);
    tree_type tree(frugal::memory_budget(1ull << 40));
    fill(tree, n, rng);
    tree.set_budget(frugal::memory_budget(tree.bytes()));
    std::uint64_t next = 0;
    for (std::size_t i = 0; i < n; ++i) insert_random_leaf(tree, n, next, rng);  // steady state
    const std::uint64_t before = tree.evictions();
    for (auto _ : state) insert_random_leaf(tree, n, next, rng);
    state.counters["nodes"] = static_cast<double>(tree.size());
    state.counters["evictions_per_iter"] =
        static_cast<double>(tree.evictions() - before) / static_cast<double>(state.iterations());
}
BENCHMARK(prefix_tree_insert_evict)->RangeMultiplier(10)->Range(1000, 1000000)->Unit(benchmark::kNanosecond);

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

// The console output, plus the largest-over-smallest time ratio of every benchmark family.
class ratio_reporter : public benchmark::ConsoleReporter {
public:
    void ReportRuns(const std::vector<Run>& runs) override {
        ConsoleReporter::ReportRuns(runs);
        for (const Run& r : runs) {
            if (r.run_type != Run::RT_Iteration || r.error_occurred) continue;
            const std::string name = r.run_name.function_name;
            const auto size = std::stoll(r.run_name.args);
            auto per_eviction = r.counters.find("ns_per_eviction");
            times_[name][size] = per_eviction != r.counters.end() ? per_eviction->second.value : r.GetAdjustedCPUTime();
        }
    }
    void Finalize() override {
        ConsoleReporter::Finalize();
        for (const auto& [name, by_size] : times_) {
            if (by_size.size() < 2) continue;
            const auto& [small, t_small] = *by_size.begin();
            const auto& [large, t_large] = *by_size.rbegin();
            std::printf("%s: %lld nodes %.1f ns, %lld nodes %.1f ns, ratio %lld/%lld = %.2fx\n", name.c_str(), small, t_small,
                        large, t_large, large, small, t_large / t_small);
        }
    }

private:
    std::map<std::string, std::map<long long, double>> times_;
};

}  // namespace

int main(int argc, char** argv) {
    benchmark::Initialize(&argc, argv);
    if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
    ratio_reporter reporter;
    benchmark::RunSpecifiedBenchmarks(&reporter);
    benchmark::Shutdown();
    return 0;
}
