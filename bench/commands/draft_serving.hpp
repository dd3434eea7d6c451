#pragma once
// `frugal-bench draft --cost-model M --batch 1,8,32,64`: drafts as a serving batch gets
// them. Each file is replayed as a batch of concurrent requests in lockstep (continuous
// batching: a finished request's slot takes the next record), every step verifies each
// request's draft plus its last token, and costs the cost model's step time for all the
// tokens verified; the throughput is compared with the same replay without speculation.

#include <cstddef>
#include <string>
#include <vector>

#include <frugal/draft/verification_cost.hpp>

#include "../../tests/draft/replay.hpp"
#include "harness.hpp"

namespace frugal::bench {

struct serving_settings {
    std::string cost_name = "h100-7b";
    draft::roofline_cost cost = draft::roofline_cost::h100_7b();
    std::vector<std::size_t> batches{1, 8, 32, 64};
    std::vector<std::string> drafters{"pld", "sam", "sam-tree", "auto"};
    std::size_t max_draft = 10, tree_budget = 64, tree_depth = 0;  // tree_depth 0: max_draft
    bool history = true;
};

/// The cost models `--cost-model` names: h100-7b and cpu-1b (roofline_cost's).
draft::roofline_cost named_cost_model(const std::string& name);

/// Per drafter and batch: `speedup` (modelled throughput over no speculation), `mat`,
/// `drafted_per_step`, `max_draft`; PLD at K = 10, 64 and --max-draft. For `auto` (the
/// speculator's cost-aware propose) also a `calibration` record per batch (`ece`, and
/// `ece_uncalibrated` of the drafter's own probabilities) and the reliability per depth.
std::vector<record> serving_records(const std::vector<testing::token_record>& data, const serving_settings& s);

}  // namespace frugal::bench
