#pragma once
/// @file
/// basic_cache: the generic key/value cache core every frugal cache is built on.

#include <algorithm>
#include <array>
#include <chrono>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <new>
#include <type_traits>
#include <utility>
#include <vector>

#include "frugal/cache/basic_cache_fwd.hpp"
#include "frugal/cache/cache_index.hpp"
#include "frugal/cache/cache_policy.hpp"
#include "frugal/cache/eviction_reason.hpp"
#include "frugal/core/assert.hpp"
#include "frugal/core/error.hpp"
#include "frugal/core/hash.hpp"

namespace frugal::cache {


/// Time to live of a cache's entries (see `basic_cache::set_expiry`): `ttl` after the entry
/// was written (put), or after its last access when `after_access` is set. `clock` gives the
/// time (std::chrono::steady_clock by default; inject a fake one in tests).
/// @code
/// c.set_expiry({.ttl = std::chrono::minutes(5), .after_access = true});
/// @endcode
struct expiry {
    using clock_type = std::function<std::chrono::steady_clock::time_point()>;
    std::chrono::nanoseconds ttl{0};
    bool after_access = false;
    clock_type clock = [] { return std::chrono::steady_clock::now(); };
};

/// The `Expiry` argument of `basic_cache` for caches without a time to live (the default):
/// entries carry no deadline and lookups read no clock.
struct no_expiry {};
/// The `Expiry` argument of `basic_cache` for caches whose entries may expire
/// (`basic_cache::set_expiry`): each entry carries an 8-byte deadline.
/// @code
/// frugal::cache::expiring_cache<std::string, reply, frugal::cache::lru_policy> c(10000);
/// c.set_expiry({.ttl = std::chrono::minutes(10)});
/// @endcode
struct with_expiry {};

namespace detail {
/// The deadline an entry carries when its cache has expiry (nothing otherwise).
template <bool>
struct entry_deadline {};
template <>
struct entry_deadline<true> {
    std::int64_t expires_at = 0;  // steady-clock nanoseconds; 0: never
};
}  // namespace detail

/// Counters of a cache since construction or the last `reset_stats()`.
/// @code
/// auto s = cache.stats();
/// double hr = s.hit_ratio();
/// auto by_policy = s.evicted(frugal::cache::eviction_reason::capacity);
/// @endcode
struct cache_stats {
    std::uint64_t hits = 0, misses = 0;
    std::uint64_t bytes_hit = 0;   ///< weight of the entries that hit
    std::uint64_t insertions = 0;  ///< admitted new keys
    std::array<std::uint64_t, eviction_reason_count> evictions{};

    [[nodiscard]] std::uint64_t evicted(eviction_reason r) const noexcept {
        return evictions[static_cast<std::size_t>(r)];
    }
    [[nodiscard]] double hit_ratio() const noexcept {
        const auto n = hits + misses;
        return n == 0 ? 0.0 : static_cast<double>(hits) / static_cast<double>(n);
    }
};

/// Weighs every entry as 1: the capacity counts entries (the default weigher).
/// @code
/// frugal::cache::lru_cache<int, int, frugal::cache::unit_weigher> c(100);   // 100 entries
/// @endcode
struct unit_weigher {
    template <class Key, class Value>
    constexpr std::size_t operator()(const Key&, const Value&) const noexcept {
        return 1;
    }
};

/// A weigher returns the cost of an entry in capacity units (bytes, pages, entries).
/// @code
/// auto bytes = [](const int&, const std::string& s) { return s.size(); };
/// static_assert(frugal::cache::cache_weigher<decltype(bytes), int, std::string>);
/// @endcode
template <class W, class Key, class Value>
concept cache_weigher = std::is_invocable_r_v<std::size_t, const W&, const Key&, const Value&>;

/// Result of `basic_cache::put`.
/// @code
/// if (c.put(k, v) == frugal::cache::put_result::rejected) keep_elsewhere(k);
/// @endcode
enum class put_result : std::uint8_t {
    inserted,  ///< a new key was admitted
    replaced,  ///< the key was present; its value was replaced
    rejected,  ///< not admitted (heavier than the budget, no unpinned entry left to evict, or
               ///< refused by the policy's admission filter)
};

/// One cache entry: the user's key and value, its weight and pin count, the index hook and
/// the policy's per-entry data (list hooks, frequency, priority).
template <class Key, class Value, class PolicyData, class IndexHook, bool Deadline = false>
struct cache_node : PolicyData, detail::entry_deadline<Deadline> {
    template <class K, class V>
    cache_node(K&& k, V&& v, std::size_t w, std::size_t h)
        : key(std::forward<K>(k)), value(std::forward<V>(v)), weight(w), hash(h) {}
    cache_node(const cache_node&) = delete;
    cache_node& operator=(const cache_node&) = delete;
    IndexHook index_hook;
    Key key;
    Value value;
    std::uint32_t pins = 0;  // beside the value: fills its padding when the value is small
    std::size_t weight;
    std::size_t hash;
};

/// Generic cache: any key and value, a `cache_policy` (`lru_policy`, `lfu_policy`,
/// `lfuda_policy`, `gdsf_policy`, `wtinylfu_policy`, `s3fifo_policy`, `sieve_policy`,
/// `arc_policy`, `lirs_policy`, `two_queue_policy`) and a weigher that sets what the capacity
/// counts (entries by default; bytes with a byte weigher).
///
/// Pinned entries (`pin`) are never evicted; when the unpinned rest cannot make room the new
/// entry is refused (`put_result::rejected`, callback reason `rejected`), never the budget
/// exceeded. An entry heavier than the whole capacity is refused the same way, before
/// anything is evicted, and so is a new key the policy's admission filter refuses
/// (`admitted_policy`; `cache_policy`'s `accepts`). Every entry that leaves passes through
/// the eviction callback with its reason: eviction, refusal, replacement, erase, clear,
/// expiry and destruction of the cache (reason `destroyed`, pinned entries included), so a
/// callback that frees what the values own loses nothing. With `Expiry = with_expiry` (`expiring_cache`) entries may be given a
/// time to live (`set_expiry`). Hits, replacements and (in steady state) misses allocate nothing:
/// entries sit on Boost.Intrusive hooks and freed entries are recycled.
/// @code
/// frugal::cache::lru_cache<std::uint64_t, block_handle> c(1000);
/// c.set_eviction_callback([](auto& key, auto& value, frugal::cache::eviction_reason) { release(value); });
/// if (auto* v = c.get(42)) use(*v); else c.put(42, load(42));
/// @endcode
template <class Key, class Value, class Policy, class Weigher, class Hash, class KeyEqual, class Index, class Expiry>
    requires cache_policy<Policy> && (std::same_as<Expiry, no_expiry> || std::same_as<Expiry, with_expiry>)
class basic_cache {
    static constexpr bool expiring = std::same_as<Expiry, with_expiry>;

public:
    using key_type = Key;
    using mapped_type = Value;
    using policy_type = Policy;
    using node_type = cache_node<Key, Value, typename Policy::node_data, typename Index::hook, expiring>;
    using callback_type = std::function<void(const Key&, Value&, eviction_reason)>;
    static_assert(cache_policy<Policy, node_type>);

    /// A cache of `capacity` weight units (entries with `unit_weigher`). Extra arguments go to
    /// the policy state (e.g. a W-TinyLFU window fraction).
    template <class... PolicyArgs>
    explicit basic_cache(std::size_t capacity, Weigher weigher = {}, Hash hash = {}, KeyEqual eq = {},
                         PolicyArgs&&... policy_args)
        : capacity_(checked_capacity(capacity)), weigher_(std::move(weigher)), hash_(std::move(hash)),
          index_(std::move(eq)), policy_(capacity, std::forward<PolicyArgs>(policy_args)...) {}
    basic_cache(const basic_cache&) = delete;
    basic_cache& operator=(const basic_cache&) = delete;
    /// Passes every entry still held, pinned ones included, through the eviction callback
    /// (reason `destroyed`), then frees them. The callback must not throw here.
    ~basic_cache() {
        std::vector<node_type*> all;
        all.reserve(index_.size());
        index_.for_each([&](node_type& n) { all.push_back(&n); });
        for (node_type* n : all) {
            if (n->pins == 0) policy_.remove(*n);
            index_.erase(*n);
            notify(n->key, n->value, eviction_reason::destroyed);
            destroy(n);
        }
        for (void* p : free_) ::operator delete(p, node_align);
    }

    /// Called with (key, value, reason) whenever an entry leaves the cache or is refused.
    void set_eviction_callback(callback_type cb) { on_evict_ = std::move(cb); }

    /// Gives entries a time to live (see `expiry`), from the next write or access on; a zero
    /// `ttl` turns expiry off. An expired entry is removed (reason `expired`) when it is next
    /// looked up, or by `purge_expired`; until then it may also leave by eviction, `size()`
    /// counts it, and `peek`, `contains` and `for_each` pass it over. Pinned
    /// entries do not expire while pinned. Only with `Expiry = with_expiry`.
    void set_expiry(expiry e)
        requires expiring
    {
        FRUGAL_CHECK(e.ttl.count() >= 0, "basic_cache::set_expiry: negative time to live ", e.ttl.count(), " ns");
        FRUGAL_CHECK(e.ttl.count() == 0 || e.clock, "basic_cache::set_expiry: a time to live needs a clock");
        expiry_ = std::move(e);
    }

    /// Removes every unpinned entry whose time to live ran out (reason `expired`); returns
    /// how many. O(n).
    std::size_t purge_expired()
        requires expiring
    {
        if (expiry_.ttl.count() == 0) return 0;
        const std::int64_t now = now_ns();
        std::vector<node_type*> dead;
        index_.for_each([&](node_type& n) {
            if (n.pins == 0 && expired(n, now)) dead.push_back(&n);
        });
        for (node_type* n : dead) remove(n, eviction_reason::expired);
        return dead.size();
    }

    /// The value of `key` (a hit: the policy records the access), or nullptr (a miss).
    [[nodiscard]] Value* get(const Key& key) {
        node_type* n = access(key);
        return n == nullptr ? nullptr : &n->value;
    }

    /// The value of `key` without counting an access; nullptr when absent or expired (an
    /// expired entry stays until a lookup, `purge_expired` or an eviction removes it).
    /// @code
    /// if (const auto* v = cache.peek(key)) use(*v);   // LRU order unchanged
    /// @endcode
    [[nodiscard]] const Value* peek(const Key& key) const { return const_cast<basic_cache*>(this)->peek(key); }
    [[nodiscard]] Value* peek(const Key& key) {
        node_type* n = index_.find(key, hash_of(key));
        return n == nullptr || stale(*n) ? nullptr : &n->value;
    }

    /// Calls `f(key, value)` for every entry that has not expired, in no particular order,
    /// without counting accesses. `f` must not modify the cache.
    /// @code
    /// cache.for_each([&](const auto& key, const auto& value) { total += value.size(); });
    /// @endcode
    template <class F>
    void for_each(F&& f) const {
        const_cast<basic_cache*>(this)->index_.for_each([&](node_type& n) {
            if (!stale(n)) f(std::as_const(n.key), std::as_const(n.value));
        });
    }
    /// Whether `key` is held and has not expired (no access counted).
    /// @code
    /// if (!cache.contains(key)) cache.put(key, load(key));
    /// @endcode
    [[nodiscard]] bool contains(const Key& key) const { return peek(key) != nullptr; }

    /// Inserts `key` or replaces its value, then evicts by the policy until the weight fits.
    /// `cost` is the miss cost used by cost-aware policies (GDSF: finite and >= 0); others
    /// ignore it. A pinned key cannot be replaced (its value is in use): that throws.
    ///
    /// A replacement keeps the entry's history and counts as one access: LRU makes it the most
    /// recent, LFU adds one to its frequency, LFUDA/GDSF add one and recompute the priority
    /// with the new cost and weight, W-TinyLFU keeps its segment (a probation entry is
    /// promoted) and counts it in the sketch. Room for a heavier value is made among the other
    /// entries; a value that cannot fit beside the pinned ones removes the entry (the old
    /// value `replaced`) and is refused (`rejected`).
    template <class K, class V>
    put_result put(K&& key, V&& value, double cost = 1.0) {
        FRUGAL_CHECK(cost >= 0 && cost <= std::numeric_limits<double>::max(), "basic_cache::put: miss cost ", cost,
                     " is not a finite non-negative number");
        const std::size_t h = hash_of(key);
        const std::size_t w = weigher_(std::as_const(key), std::as_const(value));
        if (node_type* n = index_.find(key, h)) return replace_value(*n, std::forward<V>(value), w, cost);
        const auto r = insert_new(std::forward<K>(key), std::forward<V>(value), w, h, cost);
        if (r == put_result::inserted) ++stats_.insertions;
        return r;
    }

    /// Removes `key`; false when absent. Throws when the key is pinned.
    bool erase(const Key& key) {
        node_type* n = index_.find(key, hash_of(key));
        if (n == nullptr) return false;
        FRUGAL_CHECK(n->pins == 0, "basic_cache::erase: the key is pinned (", n->pins, " pins)");
        remove(n, eviction_reason::erased);
        return true;
    }

    /// Removes every unpinned entry (reason `cleared`); pinned ones stay.
    void clear() {
        while (node_type* v = policy_.victim()) remove(v, eviction_reason::cleared);
    }

    /// Pins `key` (reference counted): it is not evicted until as many `unpin` calls. Counts
    /// as an access. Returns the value, or nullptr when absent (a miss).
    Value* pin(const Key& key) {
        node_type* n = access(key);
        if (n == nullptr) return nullptr;
        FRUGAL_CHECK(n->pins < std::numeric_limits<std::uint32_t>::max(), "basic_cache::pin: the key already has ",
                     n->pins, " pins, the most a key can hold");
        if (n->pins++ == 0) {
            policy_.remove(*n);
            pinned_weight_ += n->weight;
        }
        return &n->value;
    }

    /// Releases one pin of `key`; throws when the key is absent or not pinned.
    void unpin(const Key& key) {
        node_type* n = index_.find(key, hash_of(key));
        FRUGAL_CHECK(n != nullptr && n->pins > 0, "basic_cache::unpin: the key is not pinned");
        if (--n->pins == 0) {
            pinned_weight_ -= n->weight;
            policy_.reattach(*n);
            evict_to_fit(0);  // the capacity may have shrunk while it was pinned
        }
    }

    /// Pin count of `key` (0 when absent or unpinned).
    [[nodiscard]] std::uint32_t pins(const Key& key) const {
        node_type* n = const_cast<basic_cache*>(this)->index_.find(key, hash_of(key));
        return n == nullptr ? 0 : n->pins;
    }

    /// Changes the capacity, evicting unpinned entries down to it where possible.
    void set_capacity(std::size_t capacity) {
        capacity_ = checked_capacity(capacity);
        policy_.set_capacity(capacity);
        evict_to_fit(0);
    }

    [[nodiscard]] std::size_t size() const noexcept { return index_.size(); }
    [[nodiscard]] std::size_t weight() const noexcept { return weight_; }
    [[nodiscard]] std::size_t capacity() const noexcept { return capacity_; }
    [[nodiscard]] const cache_stats& stats() const noexcept { return stats_; }
    void reset_stats() noexcept { stats_ = {}; }
    [[nodiscard]] const auto& policy() const noexcept { return policy_; }

private:
    using policy_state = typename Policy::template state<node_type>;

    static std::size_t checked_capacity(std::size_t capacity) {
        FRUGAL_CHECK(capacity > 0, "basic_cache: capacity 0 can hold nothing");
        return capacity;
    }
    template <class K>
    [[nodiscard]] std::size_t hash_of(const K& key) const {
        return static_cast<std::size_t>(hash_mix(hash_(key)));
    }
    [[nodiscard]] std::int64_t now_ns() const {
        return std::chrono::duration_cast<std::chrono::nanoseconds>(expiry_.clock().time_since_epoch()).count();
    }
    [[nodiscard]] static bool expired(const node_type& n, std::int64_t now) noexcept {
        return n.expires_at != 0 && now >= n.expires_at;
    }
    // An unpinned entry past its deadline: what a lookup would remove (reads the clock only
    // for an entry that has a deadline).
    [[nodiscard]] bool stale([[maybe_unused]] const node_type& n) const {
        if constexpr (expiring) {
            return n.expires_at != 0 && n.pins == 0 && expired(n, now_ns());
        } else {
            return false;
        }
    }
    void stamp([[maybe_unused]] node_type& n) {
        if constexpr (expiring) {
            if (expiry_.ttl.count() == 0) {
                n.expires_at = 0;
                return;
            }
            const std::int64_t now = now_ns(), ttl = expiry_.ttl.count();
            n.expires_at = now > std::numeric_limits<std::int64_t>::max() - ttl ? std::numeric_limits<std::int64_t>::max()
                                                                                 : std::max<std::int64_t>(1, now + ttl);
        }
    }
    node_type* access(const Key& key) {
        const std::size_t h = hash_of(key);
        node_type* n = index_.find(key, h);
        if constexpr (expiring) {
            if (n != nullptr && stale(*n)) {
                remove(n, eviction_reason::expired);
                n = nullptr;
            }
        }
        if (n == nullptr) {
            ++stats_.misses;
            return nullptr;
        }
        ++stats_.hits;
        stats_.bytes_hit += n->weight;
        if (n->pins == 0) policy_.touch(*n);
        if constexpr (expiring) {
            if (expiry_.after_access && n->expires_at != 0) stamp(*n);
        }
        return n;
    }
    // Whether `extra` more weight fits beside `held` (no overflow for any sizes).
    [[nodiscard]] bool fits(std::size_t held, std::size_t extra) const noexcept {
        return extra <= capacity_ && held <= capacity_ - extra;
    }

    // put's replacement path, apart from the lookup-and-insert path that a get/put loop takes.
    template <class V>
    put_result replace_value(node_type& n, V&& value, std::size_t w, double cost) {
        FRUGAL_CHECK(n.pins == 0, "basic_cache::put: the key is pinned (", n.pins,
                     " pins); release it before replacing its value");
        policy_.remove(n);
        weight_ -= n.weight;
        notify(n.key, n.value, eviction_reason::replaced);
        if (!fits(pinned_weight_, w)) {
            Value v(std::forward<V>(value));
            notify(n.key, v, eviction_reason::rejected);
            index_.erase(n);
            destroy(&n);
            return put_result::rejected;
        }
        try {
            n.value = std::forward<V>(value);
        } catch (...) {
            index_.erase(n);
            destroy(&n);
            throw;
        }
        n.weight = w;
        evict_to_fit(w);  // the entry is outside the policy: never its own victim
        weight_ += w;
        policy_.replace(n, cost);
        stamp(n);
        return put_result::replaced;
    }

    template <class K, class V>
    put_result insert_new(K&& key, V&& value, std::size_t w, std::size_t h, double cost) {
        // Heavier than the budget, or than what the pinned entries leave of it, or refused by
        // the policy's admission: refused before anything is evicted.
        bool refused = !fits(pinned_weight_, w);
        if constexpr (screens_newcomers<policy_state>) {
            if (!refused) refused = !policy_.accepts(h, w, !fits(weight_, w));
        }
        if (refused) {
            Value v(std::forward<V>(value));
            notify(key, v, eviction_reason::rejected);
            return put_result::rejected;
        }
        if constexpr (expects_newcomers<policy_state>) policy_.expect(h, w);
        // Room is made among the resident entries first (an admitted newcomer always enters);
        // the freed entry is recycled for it.
        evict_to_fit(w);
        FRUGAL_ASSERT(fits(weight_, w));
        link(std::forward<K>(key), std::forward<V>(value), w, h, cost);
        return put_result::inserted;
    }

    template <class K, class V>
    node_type* link(K&& key, V&& value, std::size_t w, std::size_t h, double cost) {
        node_type* n = create(std::forward<K>(key), std::forward<V>(value), w, h);
        index_.insert(*n);
        weight_ += w;
        policy_.admit(*n, cost);
        stamp(*n);
        return n;
    }

    // Evicts policy victims until weight + extra fits (when nothing unpinned is left, the
    // weight can stay above a capacity lowered by set_capacity).
    void evict_to_fit(std::size_t extra) {
        while (!fits(weight_, extra)) {
            node_type* v = policy_.victim();
            if (v == nullptr) break;
            policy_.evict(*v);
            remove_unlinked(v, eviction_reason::capacity);
        }
    }

    void remove(node_type* n, eviction_reason why) {
        policy_.remove(*n);
        remove_unlinked(n, why);
    }
    void remove_unlinked(node_type* n, eviction_reason why) {
        weight_ -= n->weight;
        index_.erase(*n);
        notify(n->key, n->value, why);
        destroy(n);
    }
    void notify(const Key& k, Value& v, eviction_reason why) {
        ++stats_.evictions[static_cast<std::size_t>(why)];
        if (on_evict_) on_evict_(k, v, why);
    }

    // Freed entries are kept for reuse so that a miss in steady state allocates nothing
    // (a hand-written free list: std::pmr pools would also keep them, but add a virtual
    // call per allocation and cannot be bounded to the recent peak like this).
    template <class K, class V>
    node_type* create(K&& key, V&& value, std::size_t w, std::size_t h) {
        void* p;
        if (!free_.empty()) {
            p = free_.back();
            free_.pop_back();
        } else {
            p = ::operator new(sizeof(node_type), node_align);
        }
        try {
            return ::new (p) node_type(std::forward<K>(key), std::forward<V>(value), w, h);
        } catch (...) {
            free_.push_back(p);
            throw;
        }
    }
    void destroy(node_type* n) noexcept {
        n->~node_type();
        if (free_.size() < free_limit) {
            free_.push_back(n);  // reserved below: never reallocates
        } else {
            ::operator delete(n, node_align);
        }
    }
    static constexpr std::size_t free_limit = 64;
    // The natural alignment: over-aligning small entries to a cache line makes the allocator
    // pad each one and spreads the working set over more lines.
    static constexpr std::align_val_t node_align{alignof(node_type)};

    std::size_t capacity_;
    std::size_t weight_ = 0, pinned_weight_ = 0;
    [[no_unique_address]] Weigher weigher_;
    [[no_unique_address]] Hash hash_;
    typename Index::template type<node_type, Hash, KeyEqual> index_;
    policy_state policy_;
    cache_stats stats_;
    callback_type on_evict_;
    expiry expiry_{.clock = nullptr};
    std::vector<void*> free_ = [] {
        std::vector<void*> v;
        v.reserve(free_limit);
        return v;
    }();
};

/// A cache whose entries may be given a time to live (`basic_cache` with `with_expiry`).
/// @code
/// frugal::cache::expiring_cache<std::string, reply, frugal::cache::lru_policy> c(10000);
/// c.set_expiry({.ttl = std::chrono::minutes(10), .after_access = true});
/// @endcode
template <class Key, class Value, class Policy, class Weigher = unit_weigher, class Hash = std::hash<Key>,
          class KeyEqual = std::equal_to<Key>, class Index = intrusive_index>
using expiring_cache = basic_cache<Key, Value, Policy, Weigher, Hash, KeyEqual, Index, with_expiry>;

}  // namespace frugal::cache
