// frugal._overhead: the C++ side of python/benchmarks/overhead.py. Each function runs in C++ the
// same calls a Python loop makes through the bindings and returns the seconds they took, so
// the benchmark prints the bindings' cost as a ratio against the C++ call in the same run.

#include <chrono>
#include <cstdint>
#include <memory>
#include <vector>

#include <frugal/cache/basic_cache.hpp>
#include <frugal/cache/lru_policy.hpp>
#include <frugal/core/thread_pool.hpp>
#include <frugal/draft/drafter.hpp>
#include <frugal/draft/speculator.hpp>

#include "common.hpp"

namespace frugal::python {
namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// (seconds, tokens drafted) for `rounds` calls of the round function that `setup(prompts)`
// returns, timed without the GIL and without the setup.
template <class Setup>
py::tuple time_drafting(py::list prompts, std::size_t rounds, Setup setup) {
    std::vector<array_view<std::int32_t>> p;
    for (py::handle h : prompts) p.emplace_back(h, "prompt");
    std::size_t drafted = 0;
    double s = 0;
    {
        py::gil_scoped_release release;
        auto round = setup(p);
        const auto t0 = std::chrono::steady_clock::now();
        for (std::size_t r = 0; r < rounds; ++r) drafted += round();
        s = seconds_since(t0);
    }
    return py::make_tuple(s, drafted);
}

}  // namespace

void bind_overhead(py::module_ m) {
    m.def("cache_get_put",
          [](py::handle keys, std::size_t capacity) {
              const array_view<std::int64_t> k(keys, "keys");
              py::gil_scoped_release release;
              cache::lru_cache<std::int64_t, std::int64_t> c(capacity);
              const auto t0 = std::chrono::steady_clock::now();
              for (const std::int64_t key : k.span()) {
                  (void)c.get(key);
                  c.put(key, key);
              }
              return seconds_since(t0);
          },
          py::arg("keys"), py::arg("capacity"),
          "Seconds for get(key) then put(key, key) for each of `keys` on a C++ lru_cache<int64, int64>.");
    m.def("drafter_chain",
          [](py::list prompts, std::size_t rounds) {
              return time_drafting(prompts, rounds, [](const auto& p) {
                  std::vector<std::unique_ptr<draft::drafter<std::int32_t>>> drafters;
                  for (const auto& prompt : p) {
                      drafters.push_back(std::make_unique<draft::drafter<std::int32_t>>());
                      drafters.back()->begin(prompt.span());
                  }
                  return [drafters = std::move(drafters)] {
                      std::size_t drafted = 0;
                      for (auto& d : drafters) drafted += d->chain().size();
                      return drafted;
                  };
              });
          },
          py::arg("prompts"), py::arg("rounds"),
          "(seconds, tokens drafted) for `rounds` rounds of chain() on one drafter per prompt (C++ drafters).");
    m.def("speculator_propose",
          [](py::list prompts, std::size_t rounds) {
              return time_drafting(prompts, rounds, [](const auto& p) {
                  auto spec = std::make_unique<draft::speculator<std::int32_t>>();
                  std::vector<draft::request_id> ids;
                  for (const auto& prompt : p) {
                      ids.push_back(ids.size());
                      spec->start(ids.back(), prompt.span());
                  }
                  return [spec = std::move(spec), ids = std::move(ids)] {
                      std::size_t drafted = 0;
                      for (const auto* tree : spec->propose(ids, default_thread_pool())) drafted += tree->tokens.size();
                      return drafted;
                  };
              });
          },
          py::arg("prompts"), py::arg("rounds"),
          "(seconds, tree nodes drafted) for `rounds` batch drafts of one request per prompt (a C++ speculator on "
          "frugal's default thread pool).");
}

}  // namespace frugal::python
