#pragma once
/// @file
/// ghost_queue: the hashes of entries that left a cache, oldest first (ARC's B1 and B2, 2Q's
/// A1out, S3-FIFO's ghost FIFO, LIRS's non-resident blocks).

#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>
#include <vector>

#include "frugal/core/error.hpp"

namespace frugal::cache::detail {

/// A queue of (hash, weight, stamp) records of evicted entries, oldest at the front, with
/// their total weight: push_back, pop_front, find and erase by hash, all O(1) amortized and
/// allocation-free once grown. Records sit in a ring indexed by a running sequence number; a
/// hash table of linear probing maps a hash to its record, in 8-byte slots (32 bits of the
/// hash as a tag, the low 32 bits of the sequence number). A slot whose record left the ring
/// (popped: its number is below the front's; or erased: marked) is dead: lookups pass over
/// it, insertions reuse it, and the table is rebuilt without dead slots when they pile up.
/// Popping the front touches only the ring, and telling a slot live or dead needs no ring
/// access, so a ghost-based policy's miss costs one table probe to look up and one to record
/// (the ring record is read only when the tag matches). Hand-written because a ghost record churns on every miss and std::unordered_map
/// allocates a node per insertion (Boost 1.74, the Debian version, predates
/// boost::unordered_flat_map). Hashes are assumed well mixed (they come from `hash_mix`); at
/// most one record per hash.
class ghost_queue {
public:
    struct record {
        std::uint64_t hash = 0, weight = 0, stamp = 0;
        bool live = false;
    };

    ghost_queue() : ring_(16), ring_mask_(15) { rebuild(16); }

    [[nodiscard]] std::uint64_t weight() const noexcept { return weight_; }
    [[nodiscard]] std::size_t size() const noexcept { return live_; }
    [[nodiscard]] bool empty() const noexcept { return live_ == 0; }

    /// The record of `hash`, or nullopt.
    [[nodiscard]] std::optional<record> find(std::uint64_t hash) const noexcept {
        const std::size_t i = lookup(hash);
        if (i == npos) return std::nullopt;
        return ring_[table_[i].seq & ring_mask_];
    }

    /// Appends a record (replacing an older record of the same hash): one walk of the probe run.
    void push_back(std::uint64_t hash, std::uint64_t weight, std::uint64_t stamp = 0) {
        if (tail_ - head_ == ring_.size()) grow_ring();
        FRUGAL_CHECK(ring_.size() < (std::size_t{1} << 30), "ghost_queue: more than 2^30 records");
        if ((used_ + 1) * 2 > table_.size()) rebuild(std::max<std::size_t>(16, std::bit_ceil((live_ + 1) * 4)));
        const std::uint32_t tag = tag_of(hash);
        std::size_t i = hash & table_mask_, reuse = npos;
        for (;; i = (i + 1) & table_mask_) {
            slot& s = table_[i];
            if (s.state == free_slot) break;
            if (!live_slot(s)) {
                if (reuse == npos) reuse = i;
            } else if (s.tag == tag) {
                record& r = ring_[full_seq(s) & ring_mask_];
                if (r.live && r.hash == hash) {  // an older record of this hash: replaced
                    r.live = false;
                    weight_ -= r.weight;
                    --live_;
                    s.state = dead;
                    if (reuse == npos) reuse = i;
                }
            }
        }
        if (reuse == npos) {
            reuse = i;
            ++used_;
        }
        ring_[tail_ & ring_mask_] = record{hash, weight, stamp, true};
        table_[reuse] = slot{tag, static_cast<std::uint32_t>(tail_ & seq_mask), used};
        ++tail_;
        ++live_;
        weight_ += weight;
    }

    /// The oldest record (nullopt when empty), without removing it.
    [[nodiscard]] std::optional<record> front() noexcept {
        skip_dead();
        if (head_ == tail_) return std::nullopt;
        return ring_[head_ & ring_mask_];
    }

    /// Removes the oldest record; returns it (nullopt when empty). Touches only the ring: its
    /// table slot reads as dead from now on.
    std::optional<record> pop_front() noexcept {
        skip_dead();
        if (head_ == tail_) return std::nullopt;
        record& r = ring_[head_ & ring_mask_];
        const record out = r;
        r.live = false;
        weight_ -= out.weight;
        --live_;
        ++head_;
        skip_dead();
        return out;
    }

    /// Removes the record of `hash`; returns whether there was one.
    bool erase(std::uint64_t hash) noexcept {
        const std::size_t i = lookup(hash);
        if (i == npos) return false;
        record& r = ring_[table_[i].seq & ring_mask_];
        r.live = false;
        weight_ -= r.weight;
        --live_;
        table_[i].state = dead;  // stays used (a later key's probe may run through it)
        return true;
    }

    void clear() noexcept {
        for (auto& s : table_) s = slot{};
        for (auto& r : ring_) r.live = false;
        head_ = tail_ = 0;
        live_ = used_ = 0;
        weight_ = 0;
    }

private:
    static constexpr std::size_t npos = std::numeric_limits<std::size_t>::max();
    enum : std::uint8_t { free_slot, used, dead };
    // 8 bytes: the tag, 30 low bits of the sequence number and the state.
    struct slot {
        std::uint32_t tag = 0;
        std::uint32_t seq : 30 = 0;
        std::uint32_t state : 2 = free_slot;
    };
    static std::uint32_t tag_of(std::uint64_t hash) noexcept { return static_cast<std::uint32_t>(hash >> 32); }

    // A used slot is live while its record is still in the ring: its sequence number (30 low
    // bits kept) is within [head, tail). The ring never holds 2^30 records (checked).
    static constexpr std::uint32_t seq_mask = (1u << 30) - 1;
    [[nodiscard]] bool in_ring(const slot& s) const noexcept {
        return ((s.seq - static_cast<std::uint32_t>(head_)) & seq_mask) < tail_ - head_;
    }
    [[nodiscard]] bool live_slot(const slot& s) const noexcept { return s.state == used && in_ring(s); }
    void skip_dead() noexcept {
        while (head_ != tail_ && !ring_[head_ & ring_mask_].live) ++head_;
    }
    [[nodiscard]] std::size_t lookup(std::uint64_t hash) const noexcept {
        const std::uint32_t tag = tag_of(hash);
        for (std::size_t i = hash & table_mask_;; i = (i + 1) & table_mask_) {
            const slot& s = table_[i];
            if (s.state == free_slot) return npos;
            if (s.tag == tag && live_slot(s)) {
                const record& r = ring_[full_seq(s) & ring_mask_];
                if (r.live && r.hash == hash) return i;
            }
        }
    }
    // The full sequence number of a slot in the ring.
    [[nodiscard]] std::uint64_t full_seq(const slot& s) const noexcept {
        return head_ + ((s.seq - static_cast<std::uint32_t>(head_)) & seq_mask);
    }
    // Puts (hash, seq) in the first empty or dead slot of its probe run; true if it was empty.
    bool place(std::uint64_t hash, std::uint64_t seq) noexcept {
        std::size_t i = hash & table_mask_;
        while (table_[i].state != free_slot && live_slot(table_[i])) i = (i + 1) & table_mask_;
        const bool was_empty = table_[i].state == free_slot;
        table_[i] = slot{tag_of(hash), static_cast<std::uint32_t>(seq & seq_mask), used};
        return was_empty;
    }
    // The table at `size` slots with the live records of the ring (dead slots dropped).
    void rebuild(std::size_t size) {
        table_.assign(size, slot{});
        table_mask_ = size - 1;
        used_ = 0;
        for (std::uint64_t s = head_; s != tail_; ++s) {
            const record& r = ring_[s & ring_mask_];
            if (r.live) used_ += place(r.hash, s) ? 1 : 0;
        }
    }
    // A full ring of mostly dead records is compacted (live records moved to the front),
    // otherwise doubled, and the table rebuilt for the new places: the ring stays within
    // 4 x the live records + 16.
    void grow_ring() {
        const bool compact = !ring_.empty() && live_ * 2 < ring_.size();
        std::vector<record> bigger(ring_.empty() ? 16 : compact ? ring_.size() : ring_.size() * 2);
        std::uint64_t n = 0;
        for (std::uint64_t s = head_; s != tail_; ++s) {
            const record& r = ring_[s & ring_mask_];
            if (r.live) bigger[n++] = r;
        }
        ring_.swap(bigger);
        ring_mask_ = ring_.size() - 1;
        head_ = 0;
        tail_ = n;
        rebuild(table_.size());
    }

    std::vector<record> ring_;
    std::vector<slot> table_;
    std::uint64_t ring_mask_ = 0, head_ = 0, tail_ = 0, weight_ = 0;
    std::size_t table_mask_ = 0, live_ = 0, used_ = 0;  // used_: live + dead slots
    static_assert(sizeof(slot) == 8);
};

/// A `ghost_queue` bounded by weight, with the newcomer bookkeeping the ghost-based policies
/// share: `expect` looks a new key up (forgetting it) before the evictions made for it,
/// `recalled` then tells `admit` whether that key was a ghost, and `remember` records an
/// evicted entry, dropping the oldest records to stay within the bound (an entry heavier than
/// the bound is not recorded).
class ghost_filter {
public:
    void set_limit(std::uint64_t limit) noexcept {
        limit_ = limit;
        while (queue_.weight() > limit_) queue_.pop_front();
    }
    void expect(std::uint64_t hash) noexcept {
        pending_hash_ = hash;
        pending_ = queue_.erase(hash);
    }
    /// Whether `hash` is the expected key and was a ghost (once).
    [[nodiscard]] bool recalled(std::uint64_t hash) noexcept {
        const bool hit = pending_ && pending_hash_ == hash;
        pending_ = false;
        return hit;
    }
    void remember(std::uint64_t hash, std::uint64_t weight, std::uint64_t stamp = 0) {
        if (weight > limit_) return;
        // The push first (it may allocate): a bad_alloc then leaves the queue as it was. The
        // newest record outlives the oldest, so trimming after it drops the same records.
        queue_.push_back(hash, weight, stamp);
        while (queue_.weight() > limit_) queue_.pop_front();
    }
    [[nodiscard]] ghost_queue& queue() noexcept { return queue_; }

private:
    ghost_queue queue_;
    std::uint64_t limit_ = 0, pending_hash_ = 0;
    bool pending_ = false;
};

}  // namespace frugal::cache::detail
