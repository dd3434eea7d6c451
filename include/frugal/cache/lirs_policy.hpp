#pragma once
/// @file
/// lirs_policy: Low Inter-reference Recency Set replacement, and `lirs_cache`.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <limits>
#include <vector>

#include <boost/intrusive/list.hpp>

#include "frugal/cache/basic_cache_fwd.hpp"
#include "frugal/cache/ghost_queue.hpp"
#include "frugal/cache/lru_policy.hpp"

namespace frugal::cache {

namespace detail {
struct lirs_stack_tag;
using lirs_stack_hook = boost::intrusive::list_base_hook<boost::intrusive::tag<lirs_stack_tag>,
                                                         boost::intrusive::link_mode<boost::intrusive::normal_link>>;
/// A record of LIRS's stack S: a resident entry or a non-resident ghost.
struct lirs_stack_record : lirs_stack_hook {
    std::size_t stack_weight = 0;  // the weight it had when it entered S
    bool ghost = false;
};
}  // namespace detail

/// LIRS (Jiang and Zhang, "LIRS: An Efficient Low Inter-reference Recency Set Replacement
/// Policy to Improve Buffer Cache Performance", SIGMETRICS 2002), with the decisions of
/// libCacheSim's LIRS.c at its default parameters. Entries whose last two accesses were close
/// (low inter-reference recency, LIR) hold 99% of the capacity (the HIR share is at least one
/// unit); the rest holds resident HIR entries in a queue Q, the only ones evicted. The stack S
/// orders resident entries and non-resident ghosts by recency and is pruned down to its bottom
/// LIR entry; its weight is bounded by twice the capacity, the oldest ghosts leaving first.
///
/// A new key is LIR while the LIR set has room, else HIR (in S and at Q's tail). A ghost
/// accessed again becomes LIR; a resident HIR entry hit while in S becomes LIR; both make room
/// by moving the bottom LIR entry to Q's tail (pruning S). As in libCacheSim, a resident HIR
/// entry hit while out of S also moves the bottom LIR entry to Q (when the LIR set is full)
/// before it goes to S's top and Q's tail. Where libCacheSim evicts Q's oldest entry during a
/// hit to make room in Q, Q runs over its share instead and that entry is evicted first at the
/// next insertion that needs room: a hit never evicts, and an entry is never held beyond the
/// capacity (libCacheSim keeps such an entry resident unaccounted when Q holds one entry).
/// @code
/// frugal::cache::lirs_cache<std::uint64_t, int> c(1000);
/// @endcode
struct lirs_policy {
    struct node_data : detail::lru_hook, detail::lirs_stack_record {
        bool lir = false;
        bool in_stack = false;
    };
    template <class Node>
    class state {
        using record = detail::lirs_stack_record;
        struct ghost_record : record {
            std::uint64_t hash = 0;
        };

    public:
        explicit state(std::size_t capacity) { set_capacity(capacity); }
        state(const state&) = delete;
        state& operator=(const state&) = delete;
        ~state() { stack_.clear(); }

        /// A new key: a ghost in S goes to S's top and the LIR set makes room for it.
        void expect(std::size_t h, std::size_t weight) {
            pending_ = nullptr;
            const auto g = ghosts_.find(h);
            if (!g) return;
            auto* r = reinterpret_cast<ghost_record*>(static_cast<std::uintptr_t>(g->stamp));
            ghosts_.erase(h);  // no longer a ghost to drop (libCacheSim's NH list)
            to_top(*r);
            pending_ = r;
            while (lir_weight_ + weight > lir_max_ && demote_bottom()) {
            }
        }
        void admit(Node& n, double /*cost*/) {
            ghost_record* g = pending_ != nullptr && pending_->hash == n.hash ? pending_ : nullptr;
            pending_ = nullptr;
            if (g != nullptr) {  // the ghost's place at S's top goes to the entry
                stack_.insert(stack_.iterator_to(*g), n);
                n.stack_weight = n.weight;
                stack_weight_ += n.weight;
                drop_ghost(*g);
                n.in_stack = true;
                make_lir(n);
            } else if (lir_weight_ + n.weight <= lir_max_) {
                push_top(n);
                make_lir(n);
            } else {
                push_top(n);
                n.lir = false;
                q_.push_back(n);
            }
            limit_stack();
        }
        void touch(Node& n) {
            if (n.lir) {
                to_top(n);
                prune();
            } else if (n.in_stack) {  // an HIR entry in S: becomes LIR
                to_top(n);
                q_.erase(n);
                while (lir_weight_ + n.weight > lir_max_ && demote_bottom()) {
                }
                make_lir(n);
            } else {  // an HIR entry out of S: to Q's tail and S's top
                q_.move_to_back(n);
                while (lir_weight_ + n.weight > lir_max_ && demote_bottom()) {
                }
                push_top(n);
            }
            limit_stack();
        }
        void remove(Node& n) noexcept {
            if (n.in_stack) unlink(n);
            if (n.lir) {
                lir_weight_ -= n.weight;
                prune();
            } else {
                q_.erase(n);
            }
        }
        void reattach(Node& n) {
            push_top(n);
            if (n.lir) {
                lir_weight_ += n.weight;
                while (lir_weight_ > lir_max_ && demote_bottom()) {
                }
            } else {
                q_.push_back(n);
            }
        }
        void replace(Node& n, double /*cost*/) {
            reattach(n);
            touch(n);
        }
        /// Q's oldest entry (S's bottom LIR entry when Q is empty).
        [[nodiscard]] Node* victim() noexcept {
            if (Node* v = q_.front()) return v;
            prune();
            if (stack_.empty() || stack_.front().ghost) return nullptr;
            return &static_cast<Node&>(static_cast<node_data&>(stack_.front()));
        }
        void evict(Node& n) {
            if (n.lir) {
                remove(n);
                return;
            }
            if (!n.in_stack) {
                q_.erase(n);
                return;
            }
            // A resident HIR entry in S stays there as a non-resident ghost, in its place. The
            // two allocations come first, so a bad_alloc leaves the policy as it was.
            ghost_record& g = new_ghost();
            try {
                ghosts_.push_back(n.hash, n.stack_weight, static_cast<std::uint64_t>(reinterpret_cast<std::uintptr_t>(&g)));
            } catch (...) {
                free_.push_back(&g);  // within the capacity reserved in new_ghost
                throw;
            }
            q_.erase(n);
            g.hash = n.hash;
            g.stack_weight = n.stack_weight;
            stack_.insert(stack_.iterator_to(n), g);
            stack_.erase(stack_.iterator_to(n));
            n.in_stack = false;
        }
        void set_capacity(std::size_t capacity) {
            capacity_ = capacity;
            const auto hir = std::max<std::size_t>(1, static_cast<std::size_t>(static_cast<double>(capacity) * 0.01));
            lir_max_ = capacity > hir ? capacity - hir : 0;
            while (lir_weight_ > lir_max_ && demote_bottom()) {
            }
            limit_stack();
        }
        [[nodiscard]] std::size_t lir_weight() const noexcept { return lir_weight_; }
        [[nodiscard]] std::size_t hir_weight() const noexcept { return q_.weight(); }

    private:
        using stack_list = boost::intrusive::list<record, boost::intrusive::base_hook<detail::lirs_stack_hook>,
                                                  boost::intrusive::constant_time_size<false>>;

        void make_lir(Node& n) noexcept {
            n.lir = true;
            lir_weight_ += n.weight;
        }
        void push_top(Node& n) {
            n.stack_weight = n.weight;
            stack_.push_back(n);
            stack_weight_ += n.weight;
            n.in_stack = true;
        }
        void to_top(record& r) noexcept { stack_.splice(stack_.end(), stack_, stack_.iterator_to(r)); }
        void unlink(Node& n) noexcept {
            stack_.erase(stack_.iterator_to(static_cast<record&>(n)));
            stack_weight_ -= n.stack_weight;
            n.in_stack = false;
        }
        // Stack pruning: HIR records leave S's bottom until an LIR entry is there (S's top
        // record stays, as in libCacheSim).
        void prune() noexcept {
            while (!stack_.empty() && std::next(stack_.begin()) != stack_.end()) {
                record& r = stack_.front();
                if (r.ghost) {
                    auto& g = static_cast<ghost_record&>(r);
                    ghosts_.erase(g.hash);
                    drop_ghost(g);
                    continue;
                }
                Node& n = static_cast<Node&>(static_cast<node_data&>(r));
                if (n.lir) return;
                unlink(n);
            }
        }
        // The bottom LIR entry moves to Q's tail and S is pruned; false when S holds no LIR entry.
        bool demote_bottom() {
            prune();
            if (stack_.empty() || stack_.front().ghost) return false;
            Node& b = static_cast<Node&>(static_cast<node_data&>(stack_.front()));
            if (!b.lir) return false;
            unlink(b);
            b.lir = false;
            lir_weight_ -= b.weight;
            q_.push_back(b);
            prune();
            return true;
        }
        // S's weight stays within twice the capacity: the oldest ghosts leave it (after each
        // access, as libCacheSim's limitStack).
        void limit_stack() noexcept {
            const std::size_t bound =
                capacity_ > std::numeric_limits<std::size_t>::max() / 2 ? std::numeric_limits<std::size_t>::max() : 2 * capacity_;
            while (stack_weight_ > bound) {
                const auto oldest = ghosts_.pop_front();
                if (!oldest) return;
                drop_ghost(*reinterpret_cast<ghost_record*>(static_cast<std::uintptr_t>(oldest->stamp)));
            }
        }
        ghost_record& new_ghost() {
            ghost_record* g;
            if (!free_.empty()) {
                g = free_.back();
                free_.pop_back();
            } else {
                g = &pool_.emplace_back();
                free_.reserve(pool_.size());  // so that drop_ghost never allocates
            }
            g->ghost = true;
            return *g;
        }
        // Takes a ghost out of S (its queue record already gone) and recycles it.
        void drop_ghost(ghost_record& g) noexcept {
            stack_.erase(stack_.iterator_to(static_cast<record&>(g)));
            stack_weight_ -= g.stack_weight;
            if (pending_ == &g) pending_ = nullptr;
            free_.push_back(&g);  // within the capacity reserved in new_ghost
        }

        stack_list stack_;                       // S, bottom first
        detail::recency_list<Node> q_;           // resident HIR entries, oldest first
        detail::ghost_queue ghosts_;             // non-resident ghosts by hash, oldest first
        std::deque<ghost_record> pool_;          // ghost records (stable addresses)
        std::vector<ghost_record*> free_;        // recycled ghost records
        ghost_record* pending_ = nullptr;        // the expected newcomer's ghost
        std::size_t capacity_ = 0, lir_max_ = 0, lir_weight_ = 0, stack_weight_ = 0;
    };
};
static_assert(cache_policy<lirs_policy>);

/// A LIRS cache of `capacity` weight units (entries by default).
/// @code
/// frugal::cache::lirs_cache<std::uint64_t, int> c(1000);
/// @endcode
template <class Key, class Value, class Weigher = unit_weigher, class Hash = std::hash<Key>,
          class KeyEqual = std::equal_to<Key>, class Index = intrusive_index>
using lirs_cache = basic_cache<Key, Value, lirs_policy, Weigher, Hash, KeyEqual, Index>;

}  // namespace frugal::cache
