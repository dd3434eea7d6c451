// Interleaved A/B timing of kmeans1d between two frugal versions in one process (see
// scripts/ab-kmeans1d.sh). On a shared machine the same binary runs up to 1.5x faster or
// slower from one process to the next (CPU placement, frequency), which swamps a 5% change
// between two benchmark binaries; alternating the versions fit by fit inside one process
// gives both the same conditions. Prints p10 and p50 of the per-fit wall time and their
// ratios (new / old) on 16 pools in turn, grouped scores and uniform ones. The tool's own
// bias shows in an A/A run (REV = HEAD on a clean tree): new/old about 1.01 at n = 1000
// (the second of each pair runs a little slower), up to 1.1 at n = 200.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

std::size_t fit_old(const float* scores, std::size_t n, std::size_t k_max);
std::size_t fit_new(const float* scores, std::size_t n, std::size_t k_max);

namespace {

std::vector<float> pool(bool grouped, std::size_t n, std::uint64_t seed) {
    std::mt19937_64 rng(seed);
    std::normal_distribution<float> normal(0.0f, 0.05f);
    std::uniform_real_distribution<float> uniform(-3.0f, 5.0f);
    std::vector<float> x(n);
    for (std::size_t i = 0; i < n; ++i) x[i] = grouped ? 0.15f + 0.2f * float(i % 4) + normal(rng) : uniform(rng);
    return x;
}

double quantile(std::vector<double>& t, double q) {
    std::sort(t.begin(), t.end());
    return t[static_cast<std::size_t>(q * double(t.size() - 1))];
}

}  // namespace

int main(int argc, char** argv) {
    const std::size_t n = argc > 1 ? std::strtoul(argv[1], nullptr, 10) : 1000;
    const std::size_t k = argc > 2 ? std::strtoul(argv[2], nullptr, 10) : 8;
    const int fits = argc > 3 ? std::atoi(argv[3]) : 6000;
    for (const bool grouped : {true, false}) {
        std::vector<std::vector<float>> pools;
        for (std::uint64_t s = 0; s < 16; ++s) pools.push_back(pool(grouped, n, 100 + s));
        std::vector<double> t_old, t_new;
        std::size_t chosen_total = 0;  // printed, so that no fit can be optimised away
        for (int f = 0; f < fits; ++f) {
            const std::vector<float>& x = pools[static_cast<std::size_t>(f / 2) % pools.size()];
            const bool is_new = f % 2 != 0;
            const auto start = std::chrono::steady_clock::now();
            const std::size_t chosen = is_new ? fit_new(x.data(), n, k) : fit_old(x.data(), n, k);
            const double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count();
            chosen_total += chosen;
            if (f >= fits / 10) (is_new ? t_new : t_old).push_back(us);  // after a warm-up
        }
        const double o10 = quantile(t_old, 0.1), o50 = quantile(t_old, 0.5);
        const double n10 = quantile(t_new, 0.1), n50 = quantile(t_new, 0.5);
        std::printf("%-8s n=%zu k<=%zu  old p10 %6.1f us p50 %6.1f | new p10 %6.1f p50 %6.1f | new/old p10 %.3f p50 %.3f"
                    "  (k chosen, summed: %zu)\n",
                    grouped ? "grouped" : "uniform", n, k, o10, o50, n10, n50, n10 / o10, n50 / o50, chosen_total);
    }
}
