#pragma once
/// @file
/// sharded_cache: an opt-in thread-safe wrapper of any frugal cache, by lock striping.

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>  // std::lock_guard
#include <optional>
#include <utility>
#include <vector>

#include "frugal/cache/basic_cache.hpp"
#include "frugal/core/error.hpp"
#include "frugal/core/hash.hpp"
#include "frugal/core/spin_lock.hpp"

namespace frugal::cache {

/// A thread-safe cache made of `shards` independent caches (`Cache`, e.g. `lru_cache<K, V>`),
/// each behind its own mutex; a key always maps to the same shard, so each shard's policy
/// decides alone over its capacity / shards. Caches are single-threaded by default; use this
/// wrapper when several threads share one. Values leave the lock as copies (`get`) or are
/// visited under it (`visit`).
/// @code
/// frugal::cache::sharded_cache<frugal::cache::lru_cache<std::uint64_t, block>> c(100000, 16);
/// c.put(7, b);                                  // from any thread
/// std::optional<block> v = c.get(7);
/// @endcode
template <class Cache, class Hash = std::hash<typename Cache::key_type>>
class sharded_cache {
public:
    using key_type = typename Cache::key_type;
    using mapped_type = typename Cache::mapped_type;

    /// `capacity` split evenly over `shards` (the remainder to the first ones); each shard
    /// gets at least 1. `cache_args` (a weigher, ...) follow the capacity in each shard's
    /// constructor.
    template <class... CacheArgs>
    sharded_cache(std::size_t capacity, std::size_t shards, Hash hash = {}, const CacheArgs&... cache_args)
        : hash_(std::move(hash)) {
        FRUGAL_CHECK(shards > 0, "sharded_cache: 0 shards");
        FRUGAL_CHECK(capacity >= shards, "sharded_cache: capacity ", capacity, " is below the shard count ", shards);
        shards_.reserve(shards);
        for (std::size_t s = 0; s < shards; ++s)
            shards_.push_back(std::make_unique<shard>(capacity / shards + (s < capacity % shards ? 1 : 0), cache_args...));
    }

    /// A copy of the value of `key` (a hit counts as an access), or nullopt.
    [[nodiscard]] std::optional<mapped_type> get(const key_type& key) {
        shard& s = shard_of(key);
        std::lock_guard lock(s.mutex);
        if (const mapped_type* v = s.cache.get(key)) return *v;
        return std::nullopt;
    }
    /// Calls `f(value)` under the shard's lock when `key` is present (a hit); returns whether it was.
    template <class F>
    bool visit(const key_type& key, F&& f) {
        shard& s = shard_of(key);
        std::lock_guard lock(s.mutex);
        mapped_type* v = s.cache.get(key);
        if (v == nullptr) return false;
        std::invoke(f, *v);
        return true;
    }
    /// Inserts or replaces; see `basic_cache::put`.
    template <class K, class V>
    put_result put(K&& key, V&& value, double cost = 1.0) {
        shard& s = shard_of(key);
        std::lock_guard lock(s.mutex);
        return s.cache.put(std::forward<K>(key), std::forward<V>(value), cost);
    }
    bool erase(const key_type& key) {
        shard& s = shard_of(key);
        std::lock_guard lock(s.mutex);
        return s.cache.erase(key);
    }
    /// Pins `key` (see `basic_cache::pin`); returns whether it was present.
    bool pin(const key_type& key) {
        shard& s = shard_of(key);
        std::lock_guard lock(s.mutex);
        return s.cache.pin(key) != nullptr;
    }
    void unpin(const key_type& key) {
        shard& s = shard_of(key);
        std::lock_guard lock(s.mutex);
        s.cache.unpin(key);
    }
    /// Sets the eviction callback of every shard; it runs under that shard's lock.
    void set_eviction_callback(const typename Cache::callback_type& cb) {
        for (auto& s : shards_) {
            std::lock_guard lock(s->mutex);
            s->cache.set_eviction_callback(cb);
        }
    }

    /// Statistics summed over the shards (each read under its lock).
    [[nodiscard]] cache_stats stats() const {
        cache_stats total;
        for (const auto& s : shards_) {
            std::lock_guard lock(s->mutex);
            const cache_stats& st = s->cache.stats();
            total.hits += st.hits;
            total.misses += st.misses;
            total.bytes_hit += st.bytes_hit;
            total.insertions += st.insertions;
            for (std::size_t r = 0; r < eviction_reason_count; ++r) total.evictions[r] += st.evictions[r];
        }
        return total;
    }
    [[nodiscard]] std::size_t size() const {
        std::size_t n = 0;
        for (const auto& s : shards_) {
            std::lock_guard lock(s->mutex);
            n += s->cache.size();
        }
        return n;
    }
    [[nodiscard]] std::size_t shard_count() const noexcept { return shards_.size(); }

private:
    // Each shard on its own cache lines: two threads working on neighbouring shards do not
    // bounce one line between their cores. A spin lock: a shard operation is a few memory
    // accesses, far shorter than std::mutex's sleep and wake-up when two threads meet on a
    // hot shard, so a waiter spins instead.
    struct alignas(64) shard {
        template <class... CacheArgs>
        explicit shard(std::size_t capacity, const CacheArgs&... cache_args) : cache(capacity, cache_args...) {}
        mutable spin_lock mutex;
        Cache cache;
    };
    // The shard comes from another mix of the key's hash than the one each shard's index
    // uses (hash_mix): with the same bits choosing both, a shard's keys would share their low
    // bucket bits and crowd a fraction of its buckets. Multiply-shift maps the top 32 bits
    // onto any shard count.
    shard& shard_of(const key_type& key) {
        const std::uint64_t h = hash_combine(static_cast<std::uint64_t>(hash_(key)), 0x5851F42D4C957F2Dull) >> 32;
        return *shards_[static_cast<std::size_t>((h * shards_.size()) >> 32)];
    }

    [[no_unique_address]] Hash hash_;
    std::vector<std::unique_ptr<shard>> shards_;
};

}  // namespace frugal::cache
