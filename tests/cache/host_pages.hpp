#pragma once
// A pool of host pages for the tiered prefix tree's tests, and the oracle of a page's
// contents: every page the engine computes is a function of its chunk key, so a page
// loaded from a tier can be checked byte for byte.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include <frugal/cache/page_keys.hpp>

namespace frugal::cache_model {

/// `count` pages of `bytes` each; counts what is taken so a leak or a double release shows.
class host_pages {
public:
    using handle_type = std::uint32_t;
    host_pages(std::size_t count, std::size_t bytes) : bytes_(bytes), data_(count * bytes), used_(count, false) {
        for (std::size_t i = count; i-- > 0;) free_.push_back(static_cast<handle_type>(i));
    }
    std::optional<handle_type> allocate() {
        if (free_.empty() || allocations_left_ == 0) return std::nullopt;
        if (allocations_left_ > 0) --allocations_left_;
        const handle_type p = free_.back();
        free_.pop_back();
        used_[p] = true;
        return p;
    }
    void release(handle_type p) {
        if (p >= used_.size() || !used_[p]) ++bad_releases_;
        else {
            used_[p] = false;
            free_.push_back(p);
        }
    }
    [[nodiscard]] std::size_t page_bytes() const { return bytes_; }
    std::span<std::byte> bytes(handle_type p) { return std::span(data_).subspan(std::size_t{p} * bytes_, bytes_); }

    [[nodiscard]] std::size_t in_use() const { return used_.size() - free_.size(); }
    [[nodiscard]] std::size_t bad_releases() const { return bad_releases_; }
    /// Lets only `n` more allocations succeed (-1: no limit).
    void limit_allocations(long n) { allocations_left_ = n; }

    /// A page the engine computed for `key`: filled with the key's contents.
    handle_type compute(const frugal::cache::tier_key& key) {
        const handle_type p = *allocate();
        fill(key, bytes(p));
        return p;
    }
    /// Whether page `p` holds `key`'s contents.
    bool holds(handle_type p, const frugal::cache::tier_key& key) {
        std::vector<std::byte> want(bytes_);
        fill(key, want);
        const auto got = bytes(p);
        return std::equal(got.begin(), got.end(), want.begin());
    }
    static void fill(const frugal::cache::tier_key& key, std::span<std::byte> out) {
        std::uint64_t x = key.high ^ (key.low << 1);
        for (auto& b : out) {  // splitmix64 steps
            x += 0x9E3779B97F4A7C15ull;
            std::uint64_t z = x;
            z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
            z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
            b = std::byte(z ^ (z >> 31));
        }
    }

private:
    std::size_t bytes_;
    std::vector<std::byte> data_;
    std::vector<bool> used_;
    std::vector<handle_type> free_;
    std::size_t bad_releases_ = 0;
    long allocations_left_ = -1;
};

/// A request as an engine serves it over a tiered prefix tree: match, compute the pages after
/// the match into `pool`, insert them, give back what the tree did not take, release.
template <class Tree>
void serve(Tree& tree, host_pages& pool, std::span<const frugal::cache::tier_key> keys) {
    auto hit = tree.match(keys);
    std::vector<host_pages::handle_type> fresh;
    for (std::size_t i = hit.lock.length(); i < keys.size(); ++i) fresh.push_back(pool.compute(keys[i]));
    const auto r = tree.insert(hit.lock, keys, fresh);
    const std::size_t first = keys.size() - fresh.size();
    for (std::size_t i = first; i < keys.size(); ++i)  // pages the tree did not take stay ours
        if (i < r.existing || i >= r.cached) pool.release(fresh[i - first]);
    hit.lock.release();
}

/// Whether every page `lock` holds has its key's contents.
template <class Lock>
bool pages_hold(host_pages& pool, const Lock& lock, std::span<const frugal::cache::tier_key> keys) {
    for (std::size_t i = 0; i < lock.length(); ++i)
        if (!pool.holds(lock.handle(i), keys[i])) return false;
    return true;
}

}  // namespace frugal::cache_model
