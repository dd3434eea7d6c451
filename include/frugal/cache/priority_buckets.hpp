#pragma once
/// @file
/// priority_buckets: entries grouped in buckets of equal priority, buckets ordered by
/// priority; the engine of the LFU and LFUDA policies.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include <boost/intrusive/list.hpp>
#include <boost/intrusive/set.hpp>

#include "frugal/core/assert.hpp"

namespace frugal::cache::detail {

struct bucket_entry_tag;
/// Base hook of an entry inside its priority bucket.
using bucket_entry_hook = boost::intrusive::list_base_hook<boost::intrusive::tag<bucket_entry_tag>,
                                                           boost::intrusive::link_mode<boost::intrusive::normal_link>>;

/// Per-entry data of the bucket policies: the bucket hook and the bucket the entry is in.
struct bucket_node_data : bucket_entry_hook {
    void* bucket = nullptr;
};

/// Buckets of entries with equal priority in an intrusive red-black tree (O(log b) for an
/// arbitrary priority, O(1) for "the next priority up" as in O(1) LFU by Shah, Mitra and
/// Matani); within a bucket, entries are in the order they entered it. The victim is the
/// oldest entry of the lowest bucket.
template <class Node, class Priority>
class priority_buckets {
    using set_hook = boost::intrusive::set_base_hook<boost::intrusive::link_mode<boost::intrusive::normal_link>>;
    struct bucket : set_hook {
        Priority priority{};
        boost::intrusive::list<Node, boost::intrusive::base_hook<bucket_entry_hook>,
                               boost::intrusive::constant_time_size<true>>
            entries;
        friend bool operator<(const bucket& a, const bucket& b) noexcept { return a.priority < b.priority; }
    };
    struct priority_less {
        bool operator()(const Priority& p, const bucket& b) const noexcept { return p < b.priority; }
        bool operator()(const bucket& b, const Priority& p) const noexcept { return b.priority < p; }
    };
    using tree = boost::intrusive::set<bucket, boost::intrusive::constant_time_size<false>>;

public:
    priority_buckets() = default;
    priority_buckets(const priority_buckets&) = delete;
    priority_buckets& operator=(const priority_buckets&) = delete;
    ~priority_buckets() {
        for (auto& b : tree_) b.entries.clear();
        tree_.clear();
    }

    /// Appends `n` to the bucket of priority `p` (created when missing). O(log b).
    void insert(Node& n, Priority p) {
        typename tree::insert_commit_data data;
        auto [it, fresh] = tree_.insert_check(p, priority_less{}, data);
        if (fresh) {
            bucket* b = make(p);
            it = tree_.insert_commit(*b, data);
        }
        append(*it, n);
    }

    /// Moves `n` from its bucket of priority p to the one of priority p + 1. O(1).
    void increment(Node& n) {
        bucket& b = of(n);
        const Priority next_priority = b.priority + 1;
        auto next = std::next(tree_.iterator_to(b));
        if (next != tree_.end() && next->priority == next_priority) {
            b.entries.erase(b.entries.iterator_to(n));
            append(*next, n);
        } else if (b.entries.size() == 1) {
            b.priority = next_priority;  // order kept: next (if any) is above p + 1
            return;
        } else {
            b.entries.erase(b.entries.iterator_to(n));
            append(*tree_.insert_before(next, *make(next_priority)), n);
        }
        release_if_empty(b);
    }

    /// Unlinks `n` from its bucket. O(1).
    void erase(Node& n) noexcept {
        bucket& b = of(n);
        b.entries.erase(b.entries.iterator_to(n));
        n.bucket = nullptr;
        release_if_empty(b);
    }

    /// The oldest entry of the lowest-priority bucket, or nullptr.
    [[nodiscard]] Node* front() noexcept { return tree_.empty() ? nullptr : &tree_.begin()->entries.front(); }

private:
    static bucket& of(Node& n) noexcept {
        FRUGAL_ASSERT(n.bucket != nullptr);
        return *static_cast<bucket*>(n.bucket);
    }
    static void append(bucket& b, Node& n) noexcept {
        b.entries.push_back(n);
        n.bucket = &b;
    }
    void release_if_empty(bucket& b) noexcept {
        if (!b.entries.empty()) return;
        tree_.erase(tree_.iterator_to(b));
        spare_.push_back(&b);  // capacity reserved in make(): never reallocates here
    }
    // Buckets are recycled through `spare_` so that a hit allocates nothing once the number of
    // distinct priorities has peaked (a pool is simpler than an allocator here: buckets are
    // one type and the tree never owns them).
    bucket* make(Priority p) {
        bucket* b;
        if (spare_.empty()) {
            owned_.push_back(std::make_unique<bucket>());
            spare_.reserve(owned_.capacity());
            b = owned_.back().get();
        } else {
            b = spare_.back();
            spare_.pop_back();
        }
        b->priority = p;
        return b;
    }

    tree tree_;
    std::vector<std::unique_ptr<bucket>> owned_;
    std::vector<bucket*> spare_;
};

}  // namespace frugal::cache::detail
