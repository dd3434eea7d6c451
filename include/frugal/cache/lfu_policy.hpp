#pragma once
/// @file
/// lfu_policy: least-frequently-used replacement in O(1) per access, and `lfu_cache`.

#include <cstddef>
#include <cstdint>
#include <functional>

#include "frugal/cache/basic_cache_fwd.hpp"
#include "frugal/cache/priority_buckets.hpp"

namespace frugal::cache {

/// Least-frequently-used replacement in O(1) per access (frequency buckets, Shah, Mitra and
/// Matani 2010): the victim has the fewest accesses since it entered the cache, the least
/// recently promoted among equals. Pinning and unpinning are O(log b), b the number of
/// distinct frequencies.
/// @code
/// frugal::cache::basic_cache<int, std::string, frugal::cache::lfu_policy> c(100);
/// @endcode
struct lfu_policy {
    struct node_data : detail::bucket_node_data {
        std::uint64_t frequency = 0;
    };
    template <class Node>
    class state {
    public:
        explicit state(std::size_t /*capacity*/) {}
        void admit(Node& n, double /*cost*/) {
            n.frequency = 1;
            buckets_.insert(n, 1);
        }
        void touch(Node& n) {
            ++n.frequency;
            buckets_.increment(n);
        }
        void remove(Node& n) noexcept { buckets_.erase(n); }
        void reattach(Node& n) { buckets_.insert(n, n.frequency); }
        void replace(Node& n, double /*cost*/) { buckets_.insert(n, ++n.frequency); }  // one more access
        void evict(Node& n) noexcept { buckets_.erase(n); }
        [[nodiscard]] Node* victim() noexcept { return buckets_.front(); }
        void set_capacity(std::size_t) noexcept {}

    private:
        detail::priority_buckets<Node, std::uint64_t> buckets_;
    };
};
static_assert(cache_policy<lfu_policy>);

/// An O(1) LFU cache of `capacity` weight units (entries by default).
/// @code
/// frugal::cache::lfu_cache<std::uint64_t, int> c(1000);
/// @endcode
template <class Key, class Value, class Weigher = unit_weigher, class Hash = std::hash<Key>,
          class KeyEqual = std::equal_to<Key>, class Index = intrusive_index>
using lfu_cache = basic_cache<Key, Value, lfu_policy, Weigher, Hash, KeyEqual, Index>;

}  // namespace frugal::cache
