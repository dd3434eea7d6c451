#pragma once
/// @file
/// admission_policy: what an admission filter provides to `admitted_policy`, stated once and
/// checked by a concept, and `admit_all`, the filter that lets every key in.

#include <concepts>
#include <cstddef>

namespace frugal::cache {

/// An admission filter: it answers whether a new key may take the place of the entry a
/// replacement policy would evict for it (libCacheSim's admissioner; TinyLFU's doorkeeper).
/// It sees keys by hash only (a well-mixed hash of the key) and holds no entries. An
/// admission `A` is constructed from the cache's capacity (in capacity units) and offers:
///
/// - `record(hash)`: one access to the key: a hit, or a new key offered to the cache (before
///   `admit` is asked about it);
/// - `admit(candidate, victim) -> bool`: whether the new key `candidate` may enter when the
///   cache must evict the entry `victim` to make room; false refuses the candidate;
/// - `hold(entries)`: the cache now holds `entries` entries (a filter sized by entries,
///   rather than by capacity units, grows with them);
/// - `set_capacity(c)`: the cache's capacity changed.
///
/// `record` and `admit` may not throw; `hold` and `set_capacity` only on allocation failure.
/// @code
/// static_assert(frugal::cache::admission_policy<frugal::cache::tinylfu_admission<>>);
/// frugal::cache::basic_cache<int, int, frugal::cache::admitted_policy<frugal::cache::tinylfu_admission<>,
///                                                                     frugal::cache::sieve_policy>> c(1000);
/// @endcode
template <class A>
concept admission_policy = std::constructible_from<A, std::size_t> &&
                           requires(A& a, std::size_t hash, std::size_t n) {
                               a.record(hash);
                               { a.admit(hash, hash) } -> std::same_as<bool>;
                               a.hold(n);
                               a.set_capacity(n);
                           };

/// The admission that refuses nothing: `admitted_policy<admit_all, P>` decides as `P` alone.
/// @code
/// frugal::cache::basic_cache<int, int, frugal::cache::admitted_policy<frugal::cache::admit_all,
///                                                                     frugal::cache::lru_policy>> c(100);
/// @endcode
struct admit_all {
    explicit constexpr admit_all(std::size_t /*capacity*/) noexcept {}
    constexpr void record(std::size_t /*hash*/) noexcept {}
    [[nodiscard]] constexpr bool admit(std::size_t /*candidate*/, std::size_t /*victim*/) const noexcept { return true; }
    constexpr void hold(std::size_t /*entries*/) noexcept {}
    constexpr void set_capacity(std::size_t /*capacity*/) noexcept {}
};
static_assert(admission_policy<admit_all>);

}  // namespace frugal::cache
