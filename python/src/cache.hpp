#pragma once
// What the binding files of `frugal.cache` share: cache.cpp binds the caches and the prefix
// tree; tier.cpp the tiers below memory and the tiered prefix tree; semantic.cpp the QA banks.

#include <cstddef>

#include "common.hpp"

namespace frugal::python {

/// What a prefix tree's insert did (frugal.cache.InsertResult, of PrefixTree.insert and
/// TieredPrefixTree.insert alike): positions [0, existing) were cached already, [existing,
/// cached) were added.
struct insert_outcome {
    std::size_t existing, cached;
};

/// Binds DiskTier, RedisTier (with hiredis), TierNamespace, chunk_keys, TieredPrefixTree and
/// SharedDocuments (tier.cpp), after InsertResult.
void bind_tiers(py::module_& m);

/// Binds SemanticCache and TieredSemanticCache (semantic.cpp), after the tiers.
void bind_semantic(py::module_& m);

}  // namespace frugal::python
