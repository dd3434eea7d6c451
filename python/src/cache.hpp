#pragma once
// What the two binding files of `frugal.cache` share: cache.cpp binds the caches, the prefix
// tree and the semantic cache; tier.cpp the tiers below memory and the tiered prefix tree.

#include <cstddef>

#include "common.hpp"

namespace frugal::python {

/// What a prefix tree's insert did (frugal.cache.InsertResult, of PrefixTree.insert and
/// TieredPrefixTree.insert alike): positions [0, existing) were cached already, [existing,
/// cached) were added.
struct insert_outcome {
    std::size_t existing, cached;
};

/// Binds DiskTier, RedisTier (with hiredis), TierNamespace, chunk_keys and TieredPrefixTree
/// (tier.cpp), after InsertResult.
void bind_tiers(py::module_& m);

}  // namespace frugal::python
