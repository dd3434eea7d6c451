#pragma once
/// @file
/// ghost_queue: the hashes of entries that left a cache, oldest first (ARC's B1 and B2, 2Q's
/// A1out, S3-FIFO's ghost FIFO, LIRS's non-resident blocks).

#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>
#include <vector>

#include "frugal/core/assert.hpp"

namespace frugal::cache::detail {

/// A queue of (hash, weight, stamp) records of evicted entries, oldest at the front, with
/// their total weight: push_back, pop_front, find and erase by hash, all O(1) amortized and
/// allocation-free once grown. Records sit in a ring indexed by a running sequence number
/// (an erased record is marked dead and skipped by pop_front); a hash table of linear probing
/// with backward-shift deletion maps a hash to its sequence number. Hand-written because a
/// ghost record churns on every miss and std::unordered_map allocates a node per insertion
/// (Boost 1.74, the Debian version, predates boost::unordered_flat_map). Hashes are assumed
/// well mixed (they come from `hash_mix`); at most one record per hash.
class ghost_queue {
public:
    struct record {
        std::uint64_t hash = 0, weight = 0, stamp = 0;
        bool live = false;
    };

    ghost_queue() { rehash(16); }

    [[nodiscard]] std::uint64_t weight() const noexcept { return weight_; }
    [[nodiscard]] std::size_t size() const noexcept { return live_; }
    [[nodiscard]] bool empty() const noexcept { return live_ == 0; }

    /// The record of `hash`, or nullopt.
    [[nodiscard]] std::optional<record> find(std::uint64_t hash) const noexcept {
        const std::size_t i = lookup(hash);
        if (i == npos) return std::nullopt;
        return ring_[table_[i].seq & ring_mask_];
    }

    /// Appends a record (replacing an older record of the same hash).
    void push_back(std::uint64_t hash, std::uint64_t weight, std::uint64_t stamp = 0) {
        erase(hash);
        if (tail_ - head_ == ring_.size()) grow_ring();
        ring_[tail_ & ring_mask_] = record{hash, weight, stamp, true};
        if ((live_ + 1) * 2 > table_.size()) rehash(table_.size() * 2);
        insert_slot(hash, tail_);
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

    /// Removes the oldest record; returns it (nullopt when empty).
    std::optional<record> pop_front() noexcept {
        skip_dead();
        if (head_ == tail_) return std::nullopt;
        record r = ring_[head_ & ring_mask_];
        erase(r.hash);
        skip_dead();
        return r;
    }

    /// Removes the record of `hash`; returns whether there was one.
    bool erase(std::uint64_t hash) noexcept {
        const std::size_t i = lookup(hash);
        if (i == npos) return false;
        record& r = ring_[table_[i].seq & ring_mask_];
        r.live = false;
        weight_ -= r.weight;
        --live_;
        erase_slot(i);
        return true;
    }

    void clear() noexcept {
        for (auto& s : table_) s.seq = empty_seq;
        head_ = tail_ = 0;
        live_ = 0;
        weight_ = 0;
    }

private:
    static constexpr std::uint64_t empty_seq = std::numeric_limits<std::uint64_t>::max();
    static constexpr std::size_t npos = std::numeric_limits<std::size_t>::max();
    struct slot {
        std::uint64_t hash = 0, seq = empty_seq;
    };

    void skip_dead() noexcept {
        while (head_ != tail_ && !ring_[head_ & ring_mask_].live) ++head_;
    }
    [[nodiscard]] std::size_t lookup(std::uint64_t hash) const noexcept {
        for (std::size_t i = hash & table_mask_;; i = (i + 1) & table_mask_) {
            if (table_[i].seq == empty_seq) return npos;
            if (table_[i].hash == hash) return i;
        }
    }
    void insert_slot(std::uint64_t hash, std::uint64_t seq) noexcept {
        std::size_t i = hash & table_mask_;
        while (table_[i].seq != empty_seq) i = (i + 1) & table_mask_;
        table_[i] = slot{hash, seq};
    }
    // Backward-shift deletion: no tombstones, so lookups stay short however many erasures.
    void erase_slot(std::size_t i) noexcept {
        for (std::size_t j = (i + 1) & table_mask_;; j = (j + 1) & table_mask_) {
            if (table_[j].seq == empty_seq) break;
            const std::size_t home = table_[j].hash & table_mask_;
            // Move j back into the hole at i unless its home lies cyclically in (i, j].
            const bool stays = i <= j ? (i < home && home <= j) : (i < home || home <= j);
            if (stays) continue;
            table_[i] = table_[j];
            i = j;
        }
        table_[i].seq = empty_seq;
    }
    void rehash(std::size_t size) {
        std::vector<slot> old(size);
        old.swap(table_);
        table_mask_ = size - 1;
        for (const slot& s : old)
            if (s.seq != empty_seq) insert_slot(s.hash, s.seq);
    }
    // A full ring of mostly dead records is compacted (live records renumbered from 0, the
    // table rebuilt), otherwise doubled: the ring stays within 4 x the live records + 16.
    void grow_ring() {
        const bool compact = !ring_.empty() && live_ * 2 < ring_.size();
        std::vector<record> bigger(ring_.empty() ? 16 : compact ? ring_.size() : ring_.size() * 2);
        const std::uint64_t mask = bigger.size() - 1;
        if (compact) {
            std::uint64_t seq = 0;
            for (auto& s : table_) s.seq = empty_seq;
            for (std::uint64_t s = head_; s != tail_; ++s) {
                const record& r = ring_[s & ring_mask_];
                if (!r.live) continue;
                bigger[seq & mask] = r;
                insert_slot(r.hash, seq++);
            }
            head_ = 0;
            tail_ = seq;
        } else {
            for (std::uint64_t s = head_; s != tail_; ++s) bigger[s & mask] = ring_[s & ring_mask_];
        }
        ring_.swap(bigger);
        ring_mask_ = mask;
    }

    std::vector<record> ring_;
    std::vector<slot> table_;
    std::uint64_t ring_mask_ = 0, head_ = 0, tail_ = 0, weight_ = 0;
    std::size_t table_mask_ = 0, live_ = 0;
};

}  // namespace frugal::cache::detail
