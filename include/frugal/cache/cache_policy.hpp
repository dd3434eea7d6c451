#pragma once
/// @file
/// cache_policy: what a replacement policy provides to the caches that use it
/// (`basic_cache` and `prefix_tree`), stated once and checked by a concept.

#include <concepts>
#include <cstddef>

namespace frugal::cache {

namespace detail {
/// The smallest entry a policy must work on: its per-entry data, a weight and a hash.
template <class Policy>
struct policy_probe_node : Policy::node_data {
    std::size_t weight = 1;
    std::size_t hash = 0;
};
}  // namespace detail

/// A replacement policy for the caches of this module. A policy `P` provides:
///
/// - `P::node_data`, the per-entry data (list hooks, counters) every entry derives from;
/// - `P::state<Node>`, its state over entries of type `Node`, where `Node` derives from
///   `P::node_data` and has `std::size_t weight` (in capacity units) and `std::size_t hash`
///   (a well-mixed hash of the key) members. It is constructed from the capacity (then any
///   extra arguments the cache forwards) and offers:
///   - `admit(n, cost)`: `n` is a new entry (its miss cost for cost-aware policies);
///   - `touch(n)`: an access to `n`, which the policy holds;
///   - `remove(n)`: `n` leaves the policy's view without being its choice (pinned, in use,
///     erased, replaced); PRECONDITION: the policy holds `n`;
///   - `reattach(n)`: `n` returns after `remove`, keeping the history in its `node_data`;
///   - `replace(n, cost)`: `n` returns after `remove` with a new value, weight and cost,
///     which counts as one access;
///   - `victim()`: the entry the policy would evict next, or nullptr when it holds none; it
///     may reorganise its own segments (move entries between queues) but holds the same
///     entries afterwards, and asked again before any other call, it names the same entry;
///   - `evict(n)`: `n`, the last `victim()`, leaves by the policy's choice (a ghost entry
///     may remember its hash);
///   - `set_capacity(c)`: the capacity changed (the cache then evicts down to it).
/// - optionally `state::expect(hash, weight)`: called with a new key's hash and weight before
///   the evictions that make room for it, so a policy with ghost entries (ARC, LIRS, 2Q,
///   S3-FIFO) can look the key up before those evictions change its ghosts.
/// - optionally `state::accepts(hash, weight, needs_room) -> bool`: `basic_cache` asks it
///   first about every new key that fits beside the pinned entries (before `expect`), saying
///   whether room must be made for it; false refuses the key (`put_result::rejected`)
///   before anything is evicted, and the policy hears nothing more of it. Admission filters
///   (`admitted_policy`) answer it; the prefix tree never refuses a chunk and does not ask.
///
/// Every operation is called only on entries in the states above; none may throw except
/// `admit`, `touch`, `reattach`, `replace`, `expect`, `accepts` and `evict` (a ghost record)
/// on allocation failure, and `evict` only before it changes anything: the caches call it
/// before they drop the entry, so a failed eviction leaves both as they were.
/// @code
/// static_assert(frugal::cache::cache_policy<frugal::cache::lru_policy>);
/// frugal::cache::basic_cache<int, int, frugal::cache::s3fifo_policy> c(1000);
/// @endcode
template <class P, class Node = detail::policy_probe_node<P>>
concept cache_policy = requires { typename P::node_data; } &&
                       requires { typename P::template state<Node>; } &&
                       std::derived_from<Node, typename P::node_data> &&
                       std::constructible_from<typename P::template state<Node>, std::size_t> &&
                       requires(typename P::template state<Node>& s, Node& n, double cost, std::size_t c) {
                           s.admit(n, cost);
                           s.touch(n);
                           s.remove(n);
                           s.reattach(n);
                           s.replace(n, cost);
                           s.evict(n);
                           { s.victim() } -> std::same_as<Node*>;
                           s.set_capacity(c);
                       };

/// Whether the policy state `State` wants to hear of a new key before the evictions that
/// make room for it (see `cache_policy`).
template <class State>
concept expects_newcomers = requires(State& s, std::size_t h, std::size_t w) { s.expect(h, w); };

/// Whether the policy state `State` may refuse a new key before the cache makes room for it
/// (see `cache_policy`).
template <class State>
concept screens_newcomers = requires(State& s, std::size_t h, std::size_t w, bool needs_room) {
    { s.accepts(h, w, needs_room) } -> std::same_as<bool>;
};

}  // namespace frugal::cache
