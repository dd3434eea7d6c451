#pragma once
// A brute-force model of frugal::cache::prefix_tree (a map from full prefixes to nodes, every
// eviction by a scan over all leaves) with LRU, LFU and GDSF leaf orders; shared by the unit
// test and the fuzz target.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <map>
#include <utility>
#include <vector>

#include <frugal/cache/prefix_tree.hpp>

namespace frugal::cache_model {

using seq = std::vector<int>;
using value = frugal::cache::chunk_value<int>;

enum class tree_kind { lru, lfu, gdsf };

// The leaves a policy may evict, by brute force: each entry's rank is recomputed by the
// policy's rule on every call, the victim found by a scan. LRU: the last time it was created
// or accessed (SGLang's RadixCache rule: a leaf that becomes evictable again keeps that time);
// LFU: (accesses, the last time it entered or was accessed); GDSF: (clock + accesses x cost /
// bytes computed then, that time), the clock raised to each evicted priority.
class policy_model {
public:
    explicit policy_model(tree_kind k) : kind_(k) {}
    struct entry {
        std::uint64_t freq = 0, stamp = 0;
        double priority = 0, cost = 1, bytes = 1;
        bool held = false;
    };
    void admit(entry& e, double cost, std::size_t bytes) {
        e.freq = 1;
        e.cost = cost;
        e.bytes = static_cast<double>(bytes);
        enter(e);
    }
    void touch(entry& e) {
        ++e.freq;
        enter(e);
    }
    void reattach(entry& e) {
        if (kind_ != tree_kind::lru) enter(e);
    }
    void evicted(const entry& e) {
        if (kind_ == tree_kind::gdsf) clock_ = e.priority;
    }
    bool before(const entry& a, const entry& b) const {
        if (kind_ == tree_kind::lru) return a.stamp < b.stamp;
        if (kind_ == tree_kind::lfu) return std::pair(a.freq, a.stamp) < std::pair(b.freq, b.stamp);
        return std::pair(a.priority, a.stamp) < std::pair(b.priority, b.stamp);
    }

private:
    void enter(entry& e) {
        e.stamp = ++time_;
        e.priority = clock_ + static_cast<double>(e.freq) * e.cost / e.bytes;
    }
    tree_kind kind_;
    std::uint64_t time_ = 0;
    double clock_ = 0;
};

// The tree by brute force: a map from full prefixes to nodes; the policy holds exactly the
// unpinned leaves; an access to a node outside the policy still counts for it.
class reference_tree {
public:
    reference_tree(tree_kind k, std::size_t budget) : model_(k), budget_(budget) {}
    std::vector<int> log;  // handles of evicted chunks

    std::size_t match(const seq& s, std::vector<seq>& pinned_paths) {
        std::size_t n = 0;
        for (; n < s.size(); ++n) {
            auto it = nodes_.find(seq(s.begin(), s.begin() + static_cast<long>(n) + 1));
            if (it == nodes_.end()) break;
            model_.touch(it->second.e);
            pin(it->second);
            pinned_paths.push_back(it->first);
        }
        return n;
    }
    void release(const std::vector<seq>& paths) {
        for (auto it = paths.rbegin(); it != paths.rend(); ++it) {
            node& n = nodes_.at(*it);
            if (--n.pins == 0) {
                pinned_bytes_ -= n.v.bytes;
                maybe_enter(*it);
            }
        }
        while (bytes_ > budget_ && evict()) {
        }
    }
    std::pair<std::size_t, std::size_t> insert(const seq& s, const std::vector<value>& v) {
        std::vector<seq> path;
        std::size_t existing = 0;
        for (; existing < s.size(); ++existing) {
            seq p(s.begin(), s.begin() + static_cast<long>(existing) + 1);
            auto it = nodes_.find(p);
            if (it == nodes_.end()) break;
            pin(it->second);
            path.push_back(p);
        }
        std::size_t cached = existing;
        for (; cached < s.size(); ++cached) {
            if (pinned_bytes_ + v[cached].bytes > budget_) break;  // refused before evicting
            while (bytes_ + v[cached].bytes > budget_ && evict()) {
            }
            seq p(s.begin(), s.begin() + static_cast<long>(cached) + 1);
            node& n = nodes_[p];
            n.v = v[cached];
            bytes_ += n.v.bytes;
            model_.admit(n.e, n.v.cost, n.v.bytes);
            pin(n);
            path.push_back(p);
        }
        release(path);
        return {existing, cached};
    }
    std::size_t bytes() const { return bytes_; }
    std::map<seq, int> contents() const {
        std::map<seq, int> c;
        for (auto& [p, n] : nodes_) c[p] = n.v.handle;
        return c;
    }

private:
    struct node {
        value v{};
        policy_model::entry e;
        int pins = 0;
    };
    void pin(node& n) {
        if (n.pins++ == 0) pinned_bytes_ += n.v.bytes;
        n.e.held = false;
    }
    bool is_leaf(const seq& p) const {
        auto it = nodes_.upper_bound(p);  // children sort right after their parent
        return it == nodes_.end() || it->first.size() <= p.size() || !std::equal(p.begin(), p.end(), it->first.begin());
    }
    void maybe_enter(const seq& p) {
        node& n = nodes_.at(p);
        if (n.pins == 0 && !n.e.held && is_leaf(p)) {
            model_.reattach(n.e);
            n.e.held = true;
        }
    }
    bool evict() {
        const seq* best = nullptr;
        for (auto& [p, n] : nodes_) {
            if (!n.e.held) continue;
            if (best == nullptr || model_.before(n.e, nodes_.at(*best).e)) best = &p;
        }
        if (best == nullptr) return false;
        const seq victim = *best;
        node& v = nodes_.at(victim);
        model_.evicted(v.e);
        log.push_back(v.v.handle);
        bytes_ -= v.v.bytes;
        nodes_.erase(victim);
        if (victim.size() > 1) maybe_enter(seq(victim.begin(), victim.end() - 1));
        return true;
    }
    policy_model model_;
    std::size_t budget_, bytes_ = 0, pinned_bytes_ = 0;
    std::map<seq, node> nodes_;
};

}  // namespace frugal::cache_model
