#pragma once
// One step of the random operation mix that checks a cache against a brute-force model (the
// policy tests and the fuzz target share it): a get, a put, an erase, a pin or an unpin, then
// the eviction logs, the weights and the budget compared.
#include <cstddef>
#include <string>
#include <utility>
#include <vector>

#include <frugal/cache/basic_cache.hpp>

namespace frugal::cache_model {

/// A cache under test, its model, the eviction log its callback fills and the pinned keys.
template <class Cache, class Model>
struct checked_pair {
    Cache& cache;
    Model& model;
    const std::vector<std::pair<int, frugal::cache::eviction_reason>>& log;
    std::vector<int> pinned;

    /// Applies operation `op` in [0, 100) to `key` on both; `draw()` gives a put's (weight,
    /// cost) and is called only for a put. Returns what disagreed, or an empty string.
    template <class Draw>
    std::string step(int op, int key, Draw&& draw) {
        if (op < 50) {
            if ((cache.get(key) != nullptr) != model.get(key)) return "get " + std::to_string(key);
        } else if (op < 85) {
            const auto [w, cost] = draw();
            if (model.pinned(key)) {
                if (!throws([&] { cache.put(key, w, cost); })) return "put of a pinned key did not throw";
            } else if (cache.put(key, w, cost) != model.put(key, w, cost)) {
                return "put " + std::to_string(key) + " weight " + std::to_string(w);
            }
        } else if (op < 90) {
            if (model.pinned(key)) {
                if (!throws([&] { cache.erase(key); })) return "erase of a pinned key did not throw";
            } else if (cache.erase(key) != model.erase(key)) {
                return "erase " + std::to_string(key);
            }
        } else if (op < 95) {
            const bool hit = model.pin(key);
            if ((cache.pin(key) != nullptr) != hit) return "pin " + std::to_string(key);
            if (hit) pinned.push_back(key);
        } else if (!pinned.empty()) {
            const std::size_t i = static_cast<std::size_t>(key) % pinned.size();
            cache.unpin(pinned[i]);
            model.unpin(pinned[i]);
            pinned.erase(pinned.begin() + static_cast<std::ptrdiff_t>(i));
        }
        if (log != model.log) return "eviction logs differ";
        if (cache.weight() != model.total()) return "weights differ";
        if (pinned.empty() && cache.weight() > cache.capacity()) return "over capacity";
        return {};
    }

private:
    template <class F>
    static bool throws(F&& f) {
        try {
            f();
        } catch (const frugal::invalid_argument&) {
            return true;
        }
        return false;
    }
};

}  // namespace frugal::cache_model
