#pragma once
// `frugal-bench cache --tier disk|redis --processes N`: engine processes sharing a cache tier.
// Multi-turn conversations (each turn extends the previous one) are served by N processes,
// each turn routed to a random process, in lockstep rounds (turn t of every conversation,
// then t + 1). Each process keeps KV pages in a frugal `tiered_prefix_tree` (LRU, write-
// through) under a memory budget of 1/8 of the working set, over the shared tier or, alone,
// over none: a match loads the run of pages memory misses from the tier, and the pages the
// process computes are written to it. Every page's content is a function of its key, so a
// page loaded from the tier is checked byte for byte.

#include <cstddef>
#include <filesystem>
#include <string>
#include <vector>

#include "../../tests/draft/replay.hpp"
#include "harness.hpp"

namespace frugal::bench {

struct tier_bench_settings {
    std::string tier = "disk";                 ///< disk | redis
    std::vector<std::size_t> processes{2, 4};
    std::string redis;                         ///< HOST:PORT of a server to use; empty: start one
    std::size_t kv_bytes_per_token = 32768;    ///< a 1B-class model's K and V, all layers
    std::size_t page_tokens = 64;
    std::size_t conversations = 64, turns = 4;
    std::filesystem::path dir;                 ///< the disk tier's folder (empty: a temporary one)
    std::uint32_t seed = 7;
};

/// Per process count: `tier`, `processes`, `workload`, `shared_over_alone` (the smallest, over
/// the processes, of prefix tokens served from cache with the shared tier over the same
/// without it), `wrong_pages`, and for Redis `get_ratio_to_redis_benchmark` (the tier's get
/// throughput in page bytes over redis-benchmark's GET throughput, same value size and
/// pipeline depth, same server, same run).
std::vector<record> tier_records(const std::vector<testing::token_record>& data, const std::string& workload,
                                 const tier_bench_settings& s);

}  // namespace frugal::bench
