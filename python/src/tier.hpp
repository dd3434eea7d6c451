#pragma once
// What tier.cpp (the tiers, the tiered prefix tree) and semantic.cpp (the QA bank over a
// tier) share: a Python tier object, the same tier as one C++ type, and the dispatch from a
// Python object to the tier it is.

#include <cstddef>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include <frugal/cache/disk_tier.hpp>
#include <frugal/cache/tier.hpp>
#ifdef FRUGAL_PYTHON_HAVE_REDIS
#include <frugal/backend/redis/redis_tier.hpp>
#endif

#include "common.hpp"

namespace frugal::python {

/// A tier behind a busy flag: one thread at a time, the GIL released around its I/O.
template <class Tier>
struct py_tier {
    template <class... Args>
    explicit py_tier(Args&&... args) : tier(std::forward<Args>(args)...) {}
    Tier tier;
    busy_flag busy;
};

/// Either Python tier as one `listable_tier`, so that a C++ structure over a tier is compiled
/// once. Its calls do not take the tier's busy flag: the structure's Python methods hold it
/// (busy()) for their whole length.
class any_tier {
public:
    template <class Tier>
    explicit any_tier(py_tier<Tier>& t)
        : busy_(&t.busy),
          exists_([&t](std::span<const cache::tier_key> k) { return t.tier.exists_prefix(k); }),
          get_([&t](std::span<const cache::tier_key> k, std::span<const std::span<std::byte>> out) { return t.tier.get(k, out); }),
          put_([&t](std::span<const cache::tier_key> k, std::span<const std::span<const std::byte>> v) { t.tier.put(k, v); }),
          read_([&t](const cache::tier_key& k) { return t.tier.read(k); }),
          keys_([&t] { return t.tier.keys(); }),
          stats_([&t] { return t.tier.stats(); }) {}
    std::size_t exists_prefix(std::span<const cache::tier_key> k) { return exists_(k); }
    std::size_t get(std::span<const cache::tier_key> k, std::span<const std::span<std::byte>> out) { return get_(k, out); }
    void put(std::span<const cache::tier_key> k, std::span<const std::span<const std::byte>> v) { put_(k, v); }
    [[nodiscard]] std::optional<std::string> read(const cache::tier_key& k) { return read_(k); }
    [[nodiscard]] std::vector<cache::tier_key> keys() { return keys_(); }
    [[nodiscard]] cache::tier_stats stats() const { return stats_(); }
    [[nodiscard]] busy_flag& busy() const noexcept { return *busy_; }

private:
    busy_flag* busy_;
    std::function<std::size_t(std::span<const cache::tier_key>)> exists_;
    std::function<std::size_t(std::span<const cache::tier_key>, std::span<const std::span<std::byte>>)> get_;
    std::function<void(std::span<const cache::tier_key>, std::span<const std::span<const std::byte>>)> put_;
    std::function<std::optional<std::string>(const cache::tier_key&)> read_;
    std::function<std::vector<cache::tier_key>()> keys_;
    std::function<cache::tier_stats()> stats_;
};
static_assert(cache::listable_tier<any_tier>);

/// The flags a call that reads or writes a tier holds: its object's busy flag, then the
/// tier's (a second thread in either raises).
struct tier_call_guard {
    tier_call_guard(busy_flag& object, const any_tier& tier, const char* who) : object_(object, who), tier_(tier.busy(), who) {}
    busy_flag::guard object_, tier_;
};

/// `fn(tier)` with `tier` cast to the DiskTier or RedisTier it is; any other object is a
/// TypeError naming the caller (`who`) and the argument (`arg`).
template <class Fn>
decltype(auto) visit_tier(py::handle tier, const char* who, const char* arg, Fn&& fn) {
    if (py::isinstance<py_tier<cache::disk_tier<>>>(tier)) return fn(tier.cast<py_tier<cache::disk_tier<>>&>());
#ifdef FRUGAL_PYTHON_HAVE_REDIS
    if (py::isinstance<py_tier<cache::redis_tier>>(tier)) return fn(tier.cast<py_tier<cache::redis_tier>&>());
#endif
    throw py::type_error(std::string(who) + ": " + arg + " must be a DiskTier or RedisTier, got " +
                         py::str(py::type::of(tier)).cast<std::string>());
}

}  // namespace frugal::python
