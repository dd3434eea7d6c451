#pragma once
// `frugal-bench rag --real`: the RAG runtime in wall-clock time on this machine (real
// retrieval, a device stand-in for the generator) for sequential, naive_async and wavefront,
// with the simulation's prediction for the same configuration beside each figure.

#include <cstddef>
#include <cstdint>
#include <vector>

#include "harness.hpp"

namespace frugal::bench {

struct rag_real_settings {
    bool quick = false;             ///< a tiny corpus and few requests (the harness check)
    std::size_t vectors = 1000000;  ///< corpus rows (128-d)
    std::size_t lists = 1024;       ///< IVF lists
    double latency_factor = 3.0;    ///< sustained: mean latency <= factor x the unloaded sequential latency
    std::uint64_t seed = 42;
};

/// Records with `mode` real or simulation, `workflow`, `config` (retrieval-heavy,
/// generation-heavy), `scheduler` and `sustained_rate`; a `summary` per configuration with the
/// wavefront / naive_async ratios; and one `decision` record (`decision_us_per_batch` with
/// 256 requests in flight).
std::vector<record> rag_real_run(const rag_real_settings& s);

}  // namespace frugal::bench
