// kmeans1d against brute force over every set partition, the O(k n^2) recurrence and Lloyd as
// a floor. Built twice: as is (the row searches on the widest path the CPU runs) and with
// KMEANS1D_TEST_SCALAR (the scalar path, the one other architectures and compilers take, put
// in place before any fit), against the same oracles; and every path the CPU runs against
// the scalar one, bit for bit.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <span>
#include <vector>

#include <frugal/prune/kmeans1d.hpp>
#include <frugal/sim/kmeans1d_lloyd.hpp>

#include "kmeans1d_oracle.hpp"

#ifdef KMEANS1D_TEST_SCALAR
#define KMEANS1D_TEST(name) TEST(Kmeans1dPortable, name)
#else
#define KMEANS1D_TEST(name) TEST(Kmeans1d, name)
#endif

namespace {

using frugal::prune::kmeans1d;
namespace detail = frugal::prune::detail;

#ifdef KMEANS1D_TEST_SCALAR
// Set during static initialisation, before any fit.
const bool scalar_path = (detail::kmeans1d_kernels_in_use().store(detail::kmeans1d_kernels_for("scalar")), true);
#endif

KMEANS1D_TEST(TakesThePathItWasBuiltFor) {
#ifdef KMEANS1D_TEST_SCALAR
    EXPECT_TRUE(scalar_path);
    EXPECT_STREQ(frugal::prune::kmeans1d_isa(), "scalar");
#else
    EXPECT_STREQ(frugal::prune::kmeans1d_isa(), detail::kmeans1d_kernels_for("avx2") != nullptr ? "avx2" : "scalar");
#endif
}

// Every path's fits against the scalar path's on pools long and short, grouped, tied and
// spread: the same boundaries for every k and the same bits of every figure.
KMEANS1D_TEST(EveryPathGivesTheScalarBits) {
    struct fit_bits {
        std::vector<std::size_t> bounds;
        std::vector<std::uint64_t> figures;  // sse(k) and bic(k)
        bool operator==(const fit_bits&) const = default;
    };
    const auto fit_with = [](const detail::kmeans1d_kernels* kernels, const std::vector<double>& x, std::size_t k_max) {
        std::atomic<const detail::kmeans1d_kernels*>& in_use = detail::kmeans1d_kernels_in_use();
        const detail::kmeans1d_kernels* before = in_use.exchange(kernels);
        kmeans1d km;
        km.fit(std::span<const double>(x), k_max);
        in_use.store(before);
        fit_bits r;
        for (std::size_t k = 1; k <= km.k_max(); ++k) {
            std::vector<std::size_t> b(k + 1);
            km.boundaries(k, b);
            r.bounds.insert(r.bounds.end(), b.begin(), b.end());
            r.figures.push_back(std::bit_cast<std::uint64_t>(km.sse(k)));
            r.figures.push_back(std::bit_cast<std::uint64_t>(km.bic(k)));
        }
        return r;
    };
    const detail::kmeans1d_kernels* scalar = detail::kmeans1d_kernels_for("scalar");
    std::mt19937_64 rng(41);
    std::normal_distribution<double> normal(0.0, 1.0);
    for (const char* isa : {"avx2"}) {
        const detail::kmeans1d_kernels* kernels = detail::kmeans1d_kernels_for(isa);
        if (kernels == nullptr) {
            std::printf("[ note ] no %s path on this CPU or build\n", isa);
            continue;
        }
        for (int rep = 0; rep < 200; ++rep) {
            const std::size_t n = 1 + rng() % (rep % 4 == 0 ? 1500 : 90), k_max = 1 + rng() % 12;
            std::vector<double> x(n);
            for (std::size_t i = 0; i < n; ++i) {
                switch (rep % 4) {
                case 0: x[i] = 0.15 + 0.2 * static_cast<double>(i % 4) + 0.05 * normal(rng); break;
                case 1: x[i] = static_cast<double>(rng() % 6); break;  // ties
                case 2: x[i] = 1e4 + std::exp(2.0 * normal(rng)); break;
                default: x[i] = std::ldexp(normal(rng), static_cast<int>(rng() % 80) - 40); break;
                }
            }
            ASSERT_TRUE(fit_with(kernels, x, k_max) == fit_with(scalar, x, k_max))
                << isa << " rep " << rep << " n " << n;
        }
    }
}

// Minimal SSE for each number of non-empty blocks 1..n over ALL set partitions of x
// (restricted growth strings), not only the contiguous ones the DP considers.
std::vector<double> brute_force_sse(const std::vector<double>& x) {
    const std::size_t n = x.size();
    std::vector<double> best(n + 1, std::numeric_limits<double>::infinity());
    std::vector<std::size_t> a(n, 0), maxv(n, 0);
    std::vector<double> sum(n), sq(n);
    std::vector<std::size_t> cnt(n);
    while (true) {
        const std::size_t blocks = *std::max_element(a.begin(), a.end()) + 1;
        std::fill(sum.begin(), sum.begin() + blocks, 0.0);
        std::fill(sq.begin(), sq.begin() + blocks, 0.0);
        std::fill(cnt.begin(), cnt.begin() + blocks, 0);
        for (std::size_t i = 0; i < n; ++i) { sum[a[i]] += x[i]; ++cnt[a[i]]; }
        double sse = 0.0;
        for (std::size_t i = 0; i < n; ++i) {
            const double d = x[i] - sum[a[i]] / double(cnt[a[i]]);
            sse += d * d;
        }
        best[blocks] = std::min(best[blocks], sse);
        // next restricted growth string: a[i] <= 1 + max(a[0..i-1])
        std::size_t i = n - 1;
        while (i > 0 && a[i] == maxv[i - 1] + 1) --i;
        if (i == 0) break;
        ++a[i];
        maxv[i] = std::max(maxv[i - 1], a[i]);
        for (std::size_t j = i + 1; j < n; ++j) { a[j] = 0; maxv[j] = maxv[i]; }
    }
    return best;
}

void expect_matches_brute_force(const std::vector<double>& x) {
    const auto best = brute_force_sse(x);
    kmeans1d km;
    km.fit(std::span<const double>(x), x.size());
    double scale = 1.0;
    for (double v : x) scale = std::max(scale, v * v);
    for (std::size_t k = 1; k <= x.size(); ++k) {
        EXPECT_NEAR(km.sse(k), best[k], 1e-9 * scale * double(x.size())) << "n = " << x.size() << " k = " << k;
        const auto r = km.clustering(k);
        EXPECT_NEAR(r.sse, best[k], 1e-9 * scale * double(x.size()));
        // an independent recomputation of the reported partition's SSE
        std::vector<double> s(k, 0.0);
        std::vector<double> c(k, 0.0);
        for (std::size_t i = 0; i < x.size(); ++i) { s[r.labels[i]] += x[i]; c[r.labels[i]] += 1; }
        double sse = 0.0;
        for (std::size_t i = 0; i < x.size(); ++i) {
            ASSERT_GT(c[r.labels[i]], 0);
            const double d = x[i] - s[r.labels[i]] / c[r.labels[i]];
            sse += d * d;
        }
        EXPECT_NEAR(sse, best[k], 1e-9 * scale * double(x.size()));
    }
}

KMEANS1D_TEST(MatchesBruteForceOverAllPartitions) {
    std::mt19937 rng(7);
    std::normal_distribution<double> normal;
    for (std::size_t n = 1; n <= 9; ++n) {
        for (int rep = 0; rep < 3; ++rep) {
            std::vector<double> x(n);
            for (auto& v : x) v = normal(rng) * 3.0;
            expect_matches_brute_force(x);
        }
    }
}

KMEANS1D_TEST(MatchesBruteForceAtTwelvePointsWithTiesAndOffset) {
    // duplicates and a large common offset: the median shift keeps the prefix sums exact
    std::vector<double> x = {1e4 + 0.5, 1e4 + 0.1, 1e4 + 0.5, 1e4 + 3.0, 1e4 + 2.9, 1e4 - 1.0,
                             1e4 + 0.1, 1e4 + 7.5, 1e4 + 7.4, 1e4 - 1.2, 1e4 + 0.5, 1e4 + 3.1};
    const auto best = brute_force_sse(x);
    kmeans1d km;
    km.fit(std::span<const double>(x), 12);
    for (std::size_t k = 1; k <= 12; ++k) EXPECT_NEAR(km.sse(k), best[k], 1e-6) << "k = " << k;
}

KMEANS1D_TEST(MatchesQuadraticDynamicProgrammeOnLargerPools) {
    std::mt19937 rng(5);
    std::normal_distribution<double> normal;
    std::uniform_real_distribution<double> uniform;
    for (int shape = 0; shape < 4; ++shape) {
        std::vector<double> x(240);
        for (std::size_t i = 0; i < x.size(); ++i) {
            switch (shape) {
            case 0: x[i] = uniform(rng); break;                                  // no structure
            case 1: x[i] = 0.2 * double(i % 4) + 0.03 * normal(rng); break;      // separated groups
            case 2: x[i] = std::round(uniform(rng) * 6.0) / 6.0; break;          // heavy ties
            default: x[i] = 1e4 + std::exp(2.0 * normal(rng)); break;            // skewed, large offset
            }
        }
        const auto best = frugal::testing::optimal_sse(x, 8);
        kmeans1d km;
        km.fit(std::span<const double>(x), 8);
        for (std::size_t k = 1; k <= 8; ++k) {
            const double tol = 1e-9 * (1.0 + best[1]);
            EXPECT_NEAR(km.sse(k), best[k], tol) << "shape " << shape << " k " << k;
            EXPECT_NEAR(km.clustering(k).sse, best[k], tol) << "shape " << shape << " k " << k;
        }
        // refitting a smaller pool in the same object reuses its buffers and stays exact
        std::vector<double> head(x.begin(), x.begin() + 37);
        const auto head_best = frugal::testing::optimal_sse(head, 5);
        km.fit(std::span<const double>(head), 5);
        for (std::size_t k = 1; k <= 5; ++k) EXPECT_NEAR(km.sse(k), head_best[k], 1e-9 * (1.0 + head_best[1]));
    }
}

KMEANS1D_TEST(FloatPoolsSortStablyAndMatchTheQuadraticProgramme) {
    // Float scores take the counting sort: check order() against a stable sort and the
    // DP (its swept short stretches included) against the O(k n^2) oracle, on shapes that
    // give the sort's buckets collisions, signed zeros and negative values, and on pools
    // packed next to a huge outlier, which the insertion pass hands to pdqsort, and on scores
    // spanning the whole float range (whose width overflows a float).
    std::mt19937 rng(11);
    std::normal_distribution<float> normal;
    std::uniform_real_distribution<float> uniform;
    for (int shape = 0; shape < 6; ++shape) {
        const std::size_t n = shape == 4 ? 1000 : 300;
        std::vector<float> x(n);
        for (std::size_t i = 0; i < n; ++i) {
            switch (shape) {
            case 0: x[i] = uniform(rng); break;
            case 1: x[i] = 0.15f + 0.2f * float(i % 4) + 0.05f * normal(rng); break;
            case 2: x[i] = float(int(uniform(rng) * 5.0f)) - 2.0f; break;           // ties, negatives
            case 3: x[i] = (i % 2 ? -0.0f : 0.0f) + (i % 7 == 0 ? 1.0f : 0.0f); break;  // signed zeros
            case 4: x[i] = i == 0 ? 1e6f : 1.0f + 1e-3f * uniform(rng); break;     // packed + outlier
            default: {  // extremes, subnormals and ordinary scores of both signs
                constexpr float extremes[] = {std::numeric_limits<float>::max(), std::numeric_limits<float>::denorm_min(),
                                              std::numeric_limits<float>::min(), 0.0f};
                const float sign = i % 2 ? -1.0f : 1.0f;
                x[i] = sign * (i % 3 == 0 ? extremes[(i / 3) % 4] : normal(rng));
            }
            }
        }
        kmeans1d km;
        km.fit(std::span<const float>(x), 8);
        std::vector<std::uint32_t> expected(n);
        for (std::size_t i = 0; i < n; ++i) expected[i] = static_cast<std::uint32_t>(i);
        // by value, then by position (signed zeros compare equal); not std::stable_sort, whose
        // nothrow buffer this binary's counting operator delete does not pair with
        std::sort(expected.begin(), expected.end(), [&](std::uint32_t a, std::uint32_t b) {
            return x[a] < x[b] || (x[a] == x[b] && a < b);
        });
        const auto order = km.order();
        ASSERT_TRUE(std::equal(order.begin(), order.end(), expected.begin())) << "shape " << shape;
        // an outlier of 1e6 leaves the small clusters' costs below rounding; 3e38 squared, all
        if (shape >= 4) continue;
        const auto best = frugal::testing::optimal_sse(std::vector<double>(x.begin(), x.end()), 8);
        for (std::size_t k = 1; k <= 8; ++k) {
            const double tol = 1e-9 * (1.0 + best[1]);
            EXPECT_NEAR(km.sse(k), best[k], tol) << "shape " << shape << " k " << k;
            EXPECT_NEAR(km.clustering(k).sse, best[k], tol) << "shape " << shape << " k " << k;
        }
    }
}

KMEANS1D_TEST(ReportedSseStaysExactBesideAHugeOutlier) {
    // A lone score of 1e30 makes the prefix sums of squares 1e60, whose rounding alone
    // (about 1e44) outweighs the other clusters' spread: sse(k), withinss and the BIC must
    // still be the k - 1 optimal clusters of the ordinary scores (the O(k n^2) oracle on
    // them) plus a zero for the outlier's own cluster. Double and float pools.
    std::mt19937 rng(13);
    std::uniform_real_distribution<float> uniform(1.0f, 2.0f);
    std::vector<float> small(200);
    for (float& v : small) v = uniform(rng);
    const auto best = frugal::testing::optimal_sse(std::vector<double>(small.begin(), small.end()), 7);
    std::vector<float> xf = small;
    xf.insert(xf.begin() + 57, 1e30f);
    const std::vector<double> xd(xf.begin(), xf.end());
    kmeans1d from_double, from_float;
    from_double.fit(std::span<const double>(xd), 8);
    from_float.fit(std::span<const float>(xf), 8);
    for (const kmeans1d* km : {&from_double, &from_float}) {
        for (std::size_t k = 2; k <= 8; ++k) {
            const double tol = 1e-9 * best[1];
            EXPECT_NEAR(km->sse(k), best[k - 1], tol) << "k " << k;
            const auto r = km->clustering(k);
            EXPECT_NEAR(r.sse, best[k - 1], tol) << "k " << k;
            EXPECT_EQ(r.sizes[k - 1], 1u) << "k " << k;
            EXPECT_EQ(r.withinss[k - 1], 0.0) << "k " << k;
            EXPECT_TRUE(std::isfinite(km->bic(k))) << "k " << k;
        }
        EXPECT_GE(km->select_k_bic(), 2u);
    }
}

KMEANS1D_TEST(TwoClustersOfALargePoolMatchWelfordSplits) {
    // k = 2 over 6000 points: the single row minimum spans every split (the long-range path);
    // the oracle scans all splits with Welford's running mean and M2 from both ends.
    std::mt19937 rng(9);
    std::normal_distribution<double> normal;
    std::vector<double> x(6000);
    for (std::size_t i = 0; i < x.size(); ++i) x[i] = (i % 3 == 0 ? 5.0 : 0.0) + normal(rng);
    std::vector<double> sorted = x;
    std::sort(sorted.begin(), sorted.end());
    const std::size_t n = sorted.size();
    std::vector<double> left(n + 1, 0.0), right(n + 1, 0.0);  // SSE of the first / last m points
    double mean = 0.0, m2 = 0.0;
    for (std::size_t m = 1; m <= n; ++m) {
        const double d = sorted[m - 1] - mean;
        mean += d / double(m);
        m2 += d * (sorted[m - 1] - mean);
        left[m] = m2;
    }
    mean = m2 = 0.0;
    for (std::size_t m = 1; m <= n; ++m) {
        const double d = sorted[n - m] - mean;
        mean += d / double(m);
        m2 += d * (sorted[n - m] - mean);
        right[m] = m2;
    }
    double best = std::numeric_limits<double>::infinity();
    for (std::size_t m = 1; m < n; ++m) best = std::min(best, left[m] + right[n - m]);
    kmeans1d km;
    km.fit(std::span<const double>(x), 2);
    EXPECT_NEAR(km.sse(1), left[n], 1e-9 * left[n]);
    EXPECT_NEAR(km.sse(2), best, 1e-9 * left[n]);
    EXPECT_NEAR(km.clustering(2).sse, best, 1e-9 * left[n]);  // the split, not only its cost
    km.fit(std::span<const double>(x), 3);  // row 2 solved at every end, long ranges on top
    EXPECT_NEAR(km.sse(2), best, 1e-9 * left[n]);
    EXPECT_NEAR(km.clustering(2).sse, best, 1e-9 * left[n]);
    EXPECT_LE(km.sse(3), km.sse(2));
}

// Issue 23, item 1: scores spread wider than about 1.3e154 overflowed the squares (NaN
// costs, an out-of-range split, a crash at {1e300, 0}); centroids taken from prefix-sum
// differences lost small clusters beside large ones; the two-pass fallback misreported
// {1e30 x3, 0, 1}. Each reproducer against the long-double oracle.
KMEANS1D_TEST(ExtremeMagnitudesMatchTheLongDoubleOracle) {
    if (!frugal::testing::wide_oracle_available) GTEST_SKIP() << "long double cannot hold squared doubles here";
    const std::vector<std::vector<double>> pools = {
        {1e300, 0},                           // crashed
        {1e300, -1e300, 0, 1},                // spread 2e300
        {1.2e154, -1.2e154, 3, 1, 2},         // just below the overflow: SSE was infinite
        {1e20, 1e20, 1e20, 0, 1},             // centroid of {0, 1} reported as 0
        {1e30, 1e30, 1e30, 0, 1},             // SSE reported as 5.94e28
        {std::numeric_limits<double>::max(), -std::numeric_limits<double>::max(), 0, 1},
        {std::numeric_limits<double>::max(), std::numeric_limits<double>::max(), 1e308, -1e308},
        {1e-310, 2e-310, 5e-310, 0, std::numeric_limits<double>::denorm_min()},  // subnormals
    };
    for (const auto& x : pools) {
        kmeans1d km;
        km.fit(std::span<const double>(x), x.size());
        EXPECT_EQ(frugal::testing::check_kmeans1d(x, km), "") << "pool of " << x.size() << " starting " << x[0];
    }
}

KMEANS1D_TEST(IssueReproducersGiveTheRightFigures) {
    kmeans1d km;
    const std::vector<double> two = {1e300, 0};
    km.fit(std::span<const double>(two), 2);
    auto r = km.clustering(2);
    EXPECT_EQ(r.labels, (std::vector<std::uint32_t>{1, 0}));
    EXPECT_EQ(r.centroids, (std::vector<double>{0.0, 1e300}));
    EXPECT_EQ(km.sse(2), 0.0);
    EXPECT_TRUE(std::isinf(km.sse(1)));  // 5e599: past the double range
    EXPECT_TRUE(std::isfinite(km.bic(1)) && std::isfinite(km.bic(2)));
    EXPECT_EQ(km.select_k_bic(), 2u);

    const std::vector<double> huge3 = {1e30, 1e30, 1e30, 0, 1};
    km.fit(std::span<const double>(huge3), 2);
    EXPECT_EQ(km.sse(2), 0.5);  // {0, 1} and {1e30 x3}
    r = km.clustering(2);
    EXPECT_EQ(r.centroids, (std::vector<double>{0.5, 1e30}));
    EXPECT_EQ(r.withinss, (std::vector<double>{0.5, 0.0}));

    const std::vector<double> huge20 = {1e20, 1e20, 1e20, 0, 1};
    km.fit(std::span<const double>(huge20), 3);
    r = km.clustering(3);
    // whichever optimal-within-rounding partition the DP takes, each centroid is its
    // cluster's: the cluster holding 1 has centroid 1 or 0.5, never 0
    const double centroid_of_one = r.centroids[r.labels[4]];
    EXPECT_TRUE(centroid_of_one == 1.0 || centroid_of_one == 0.5) << centroid_of_one;
}

KMEANS1D_TEST(RandomPoolsOfEveryMagnitudeMatchTheLongDoubleOracle) {
    if (!frugal::testing::wide_oracle_available) GTEST_SKIP() << "long double cannot hold squared doubles here";
    std::mt19937_64 rng(23);
    std::uniform_int_distribution<int> exponent(-330, 308), coin(0, 3);
    std::uniform_real_distribution<double> mantissa(1.0, 10.0);
    for (int rep = 0; rep < 60; ++rep) {
        const std::size_t n = 1 + rng() % 24;
        std::vector<double> x(n);
        const int centre = exponent(rng), width = coin(rng) == 0 ? 600 : 4;  // wide or clustered magnitudes
        for (std::size_t i = 0; i < n; ++i) {
            if (i > 0 && coin(rng) == 0) {
                x[i] = x[rng() % i];  // a tie
                continue;
            }
            const int e = std::clamp(centre + static_cast<int>(rng() % (2 * width + 1)) - width, -330, 307);
            x[i] = (coin(rng) < 2 ? -1.0 : 1.0) * mantissa(rng) * std::pow(10.0, e);
        }
        kmeans1d km;
        km.fit(std::span<const double>(x), std::min<std::size_t>(n, 1 + rng() % 8));
        ASSERT_EQ(frugal::testing::check_kmeans1d(x, km), "") << "rep " << rep << ::testing::PrintToString(x);
        std::vector<float> xf(n);
        for (std::size_t i = 0; i < n; ++i) xf[i] = static_cast<float>(std::clamp(x[i], -3e38, 3e38));
        km.fit(std::span<const float>(xf), std::min<std::size_t>(n, 1 + rng() % 8));
        ASSERT_EQ(frugal::testing::check_kmeans1d(std::vector<double>(xf.begin(), xf.end()), km), "") << "float rep " << rep;
    }
}

KMEANS1D_TEST(NeverWorseThanLloydWithTenRestarts) {
    std::mt19937 rng(11);
    std::normal_distribution<double> normal;
    for (int rep = 0; rep < 5; ++rep) {
        std::vector<float> x(200);
        for (std::size_t i = 0; i < x.size(); ++i) x[i] = float(normal(rng) + 4.0 * double(i % 5) * (rep % 2));
        kmeans1d km;
        km.fit(std::span<const float>(x), 8);
        for (std::size_t k = 1; k <= 8; ++k) {
            const auto lloyd = frugal::sim::kmeans1d_lloyd(std::span<const float>(x), k, 10, 1234 + rep);
            EXPECT_LE(km.sse(k), lloyd.sse * (1 + 1e-12) + 1e-9) << "rep " << rep << " k " << k;
        }
    }
}

KMEANS1D_TEST(BicMatchesDirectLikelihoodAndFindsSeparatedGroups) {
    std::mt19937 rng(3);
    std::normal_distribution<double> normal(0.0, 0.1);
    std::vector<double> x;
    for (double centre : {0.0, 3.0, 7.0})
        for (int i = 0; i < 15; ++i) x.push_back(centre + normal(rng));
    kmeans1d km;
    km.fit(std::span<const double>(x), 8);
    EXPECT_EQ(km.select_k_bic(), 3u);
    // the likelihood evaluated point by point from the reported clustering
    for (std::size_t k = 1; k <= 8; ++k) {
        const auto r = km.clustering(k);
        double loglik = 0.0;
        for (std::size_t i = 0; i < x.size(); ++i) {
            const std::size_t c = r.labels[i];
            const double m = double(r.sizes[c]);
            const double var = r.sizes[c] > 1 ? r.withinss[c] / (m - 1) : 0.0;
            loglik += std::log(m / double(x.size()));
            if (var > 0)
                loglik += -0.5 * std::log(2 * M_PI * var) - (x[i] - r.centroids[c]) * (x[i] - r.centroids[c]) / (2 * var);
        }
        const double bic = 2 * loglik - (3.0 * double(k) - 1) * std::log(double(x.size()));
        EXPECT_NEAR(km.bic(k), bic, 1e-6 * std::abs(bic)) << "k = " << k;
    }
}

KMEANS1D_TEST(EqualScoresAndBadInput) {
    std::vector<float> same(6, 0.25f);
    kmeans1d km;
    km.fit(std::span<const float>(same), 4);
    EXPECT_EQ(km.select_k_bic(), 1u);
    EXPECT_EQ(km.sse(3), 0.0);
    std::vector<float> empty;
    EXPECT_THROW(km.fit(std::span<const float>(empty), 2), frugal::invalid_argument);
    std::vector<float> bad = {0.1f, std::numeric_limits<float>::quiet_NaN()};
    EXPECT_THROW(km.fit(std::span<const float>(bad), 2), frugal::invalid_argument);
    bad[1] = std::numeric_limits<float>::infinity();
    EXPECT_THROW(km.fit(std::span<const float>(bad), 2), frugal::invalid_argument);
    EXPECT_THROW(km.fit(std::span<const float>(same), 0), frugal::invalid_argument);
    km.fit(std::span<const float>(same), 10);
    EXPECT_EQ(km.k_max(), 6u);  // capped at the pool size
    EXPECT_THROW((void)km.sse(7), frugal::invalid_argument);
    EXPECT_THROW((void)frugal::prune::kmeans1d_optimal(std::span<const float>(same), 7), frugal::invalid_argument);
    EXPECT_THROW((void)frugal::sim::kmeans1d_lloyd(std::span<const float>(same), 0, 1, 1), frugal::invalid_argument);
}

}  // namespace
