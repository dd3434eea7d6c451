#pragma once
// Exact frequencies by hash (halved on request, never saturated, no collisions, never resized):
// a frequency sketch that lets a brute-force reference with a plain map of counts check TinyLFU
// admission decisions exactly; the real sketches are tested on their own (policy_test.cpp).
#include <cstddef>
#include <limits>
#include <unordered_map>

namespace frugal::cache_model {

struct exact_sketch {
    static constexpr std::size_t max_capacity = std::numeric_limits<std::size_t>::max();
    explicit exact_sketch(std::size_t) {}
    std::size_t capacity() const { return max_capacity; }  // never resized
    void resize(std::size_t) {}
    void increment(std::size_t h) { ++counts[h]; }
    unsigned estimate(std::size_t h) const {
        auto it = counts.find(h);
        return it == counts.end() ? 0u : it->second;
    }
    void halve() {
        for (auto& [h, c] : counts) c >>= 1;
    }
    std::unordered_map<std::size_t, unsigned> counts;
};

}  // namespace frugal::cache_model
