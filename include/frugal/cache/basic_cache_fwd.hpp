#pragma once
/// @file
/// The declaration of `basic_cache` (defined in basic_cache.hpp) with its defaults, so that a
/// policy header can name its cache (`lru_cache` = `basic_cache<..., lru_policy>`) without
/// depending on the container. Include basic_cache.hpp to make one.

#include <concepts>
#include <functional>

#include "frugal/cache/cache_policy.hpp"

namespace frugal::cache {

struct unit_weigher;
struct intrusive_index;
struct no_expiry;
struct with_expiry;

template <class Key, class Value, class Policy, class Weigher = unit_weigher, class Hash = std::hash<Key>,
          class KeyEqual = std::equal_to<Key>, class Index = intrusive_index, class Expiry = no_expiry>
    requires cache_policy<Policy> && (std::same_as<Expiry, no_expiry> || std::same_as<Expiry, with_expiry>)
class basic_cache;

}  // namespace frugal::cache
