// kmeans1d against the long-double O(k n^2) oracle of tests/prune (kmeans1d_oracle.hpp) on
// pools of every magnitude: raw finite doubles (so spreads up to 3.6e308, subnormals, signed
// zeros), ties, and floats through the counting sort. One object is refitted across the pools
// of an input, as the pruner does, so stale buffers would show.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "../prune/kmeans1d_oracle.hpp"
#include "fuzz.hpp"

namespace {

double decode_score(frugal::fuzz::input& in, const std::vector<double>& earlier) {
    switch (in.below(4)) {
    case 0: {  // any finite double
        const double x = in.take<double>();
        return std::isfinite(x) ? x : 0.0;
    }
    case 1:  // a tie with an earlier score
        return earlier.empty() ? 0.0 : earlier[in.below(earlier.size())];
    case 2:  // small integers: many ties, ordinary spreads
        return static_cast<double>(static_cast<int>(in.below(9)) - 4);
    default:  // a decimal of any magnitude
        return (in.below(2) != 0 ? -1.0 : 1.0) * static_cast<double>(1 + in.below(999)) *
               std::pow(10.0, static_cast<int>(in.below(636)) - 330);
    }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    if (!frugal::testing::wide_oracle_available) return 0;
    frugal::fuzz::input in(data, size);
    frugal::prune::kmeans1d km;
    for (int pool = 0; pool < 4 && !in.empty(); ++pool) {
        const std::size_t n = 1 + in.below(24);
        const std::size_t k_max = 1 + in.below(10);
        const bool as_float = in.below(2) != 0;
        std::vector<double> x;
        for (std::size_t i = 0; i < n; ++i) {
            double v = decode_score(in, x);
            if (as_float) {
                constexpr double fmax = std::numeric_limits<float>::max();
                v = static_cast<double>(static_cast<float>(v < -fmax ? -fmax : v > fmax ? fmax : v));
            }
            x.push_back(v);
        }
        try {
            if (as_float) {
                const std::vector<float> xf(x.begin(), x.end());
                km.fit(std::span<const float>(xf), k_max);
            } else {
                km.fit(std::span<const double>(x), k_max);
            }
        } catch (const frugal::error& e) {
            FRUGAL_FUZZ_CHECK(false, "fit threw on a finite pool of %zu: %s", n, e.what());
        }
        FRUGAL_FUZZ_CHECK(km.k_max() == (k_max < n ? k_max : n), "k_max %zu for %zu of %zu", km.k_max(), k_max, n);
        const std::string why = frugal::testing::check_kmeans1d(x, km);
        FRUGAL_FUZZ_CHECK(why.empty(), "%s pool of %zu: %s", as_float ? "float" : "double", n, why.c_str());
    }
    return 0;
}
