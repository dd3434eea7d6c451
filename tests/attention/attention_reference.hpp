#pragma once
// Independent oracles for the attention tests: a float64 naive attention and the mask
// written out from its definition (not through frugal::attention::attention_mask).

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

namespace frugal::testing {

enum class ref_mask { none, top_left, bottom_right, offset };

struct ref_mask_spec {
    ref_mask kind = ref_mask::none;
    std::int64_t offset = 0;  // for ref_mask::offset
    std::int64_t window = 0;  // 0 = unlimited
};

/// Query i sees key j: j <= i + diagonal and j > i + diagonal - window.
inline bool ref_visible(const ref_mask_spec& m, std::int64_t i, std::int64_t j, std::int64_t sq, std::int64_t skv) {
    if (m.kind == ref_mask::none) return true;
    const std::int64_t d = m.kind == ref_mask::top_left ? 0 : m.kind == ref_mask::bottom_right ? skv - sq : m.offset;
    if (j > i + d) return false;
    return m.window == 0 || j > i + d - m.window;
}

/// Row-major dense tensor [heads][tokens][dim] in double, filled with N(0, 1).
inline std::vector<float> normal_floats(std::size_t n, unsigned seed) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> dist;
    std::vector<float> x(n);
    for (auto& v : x) v = dist(rng);
    return x;
}

struct ref_result {
    std::vector<double> out;  // [q_heads][sq][d]
    std::vector<double> lse;  // [q_heads][sq], natural log; -inf for rows without keys
};

/// softmax(scale * q k^T + mask) v in double. `at(t, h, tok, c)` reads tensor t.
template <class Q, class K, class V>
ref_result ref_attention(std::size_t hq, std::size_t hkv, std::size_t sq, std::size_t skv, std::size_t d,
                         double scale, const ref_mask_spec& mask, Q q, K k, V v) {
    ref_result r{std::vector<double>(hq * sq * d, 0.0), std::vector<double>(hq * sq, 0.0)};
    std::vector<double> s(skv);
    for (std::size_t h = 0; h < hq; ++h) {
        const std::size_t g = h / (hq / hkv);
        for (std::size_t i = 0; i < sq; ++i) {
            double mx = -std::numeric_limits<double>::infinity();
            for (std::size_t j = 0; j < skv; ++j) {
                if (!ref_visible(mask, std::int64_t(i), std::int64_t(j), std::int64_t(sq), std::int64_t(skv))) {
                    s[j] = -std::numeric_limits<double>::infinity();
                    continue;
                }
                double acc = 0;
                for (std::size_t c = 0; c < d; ++c) acc += double(q(h, i, c)) * double(k(g, j, c));
                s[j] = acc * scale;
                mx = std::max(mx, s[j]);
            }
            if (mx == -std::numeric_limits<double>::infinity()) {
                r.lse[h * sq + i] = mx;
                continue;
            }
            double sum = 0;
            for (std::size_t j = 0; j < skv; ++j) {
                const double p = std::exp(s[j] - mx);
                sum += p;
                for (std::size_t c = 0; c < d; ++c) r.out[(h * sq + i) * d + c] += p * double(v(g, j, c));
            }
            for (std::size_t c = 0; c < d; ++c) r.out[(h * sq + i) * d + c] /= sum;
            r.lse[h * sq + i] = mx + std::log(sum);
        }
    }
    return r;
}

}  // namespace frugal::testing
