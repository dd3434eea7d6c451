#pragma once
// `frugal-bench draft --replicas 2,4,8`: engine replicas behind a load balancer, each with a
// drafting history of its own. The file's records arrive in order, each routed to a random
// replica, which replays it (sam or sam-tree) and then adds its output to its history. Alone,
// a replica's history holds only its own outputs; shared, every replica also publishes its
// outputs to a disk tier (`cache::shared_documents`) and all replicas pull the others' every
// `sync_every` requests. One replica holding every earlier output is the bound.

#include <cstddef>
#include <cstdint>
#include <vector>

#include <frugal/draft/drafter.hpp>

#include "../../tests/draft/replay.hpp"
#include "harness.hpp"

namespace frugal::bench {

struct replica_settings {
    std::vector<std::size_t> replicas{2, 4, 8};
    std::size_t sync_every = 16;  ///< requests between two pulls
    draft::drafter_config config{.max_draft = 10, .tree_depth = 10, .tree_budget = 64, .backoff = true};
    std::uint32_t seed = 7;       ///< of the routing
};

/// Per drafter (sam, sam-tree) and replica count: kind "replicas", `mat_one` (one replica,
/// every earlier output in its history), `mat_alone`, `mat_shared`, `shared_over_alone`,
/// `one_over_alone`, and `pulled` (outputs the replicas pulled from the tier in all).
std::vector<record> replica_records(const std::vector<testing::token_record>& data, const replica_settings& s);

}  // namespace frugal::bench
