#pragma once
/// @file
/// lirs_policy: Low Inter-reference Recency Set replacement, and `lirs_cache`.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>

#include "frugal/cache/basic_cache.hpp"
#include "frugal/cache/ghost_queue.hpp"
#include "frugal/cache/lru_policy.hpp"

namespace frugal::cache {

/// LIRS (Jiang and Zhang, "LIRS: An Efficient Low Inter-reference Recency Set Replacement
/// Policy to Improve Buffer Cache Performance", SIGMETRICS 2002): entries whose last two
/// accesses were close (low inter-reference recency, LIR) hold 99% of the capacity; the other
/// 1% holds resident HIR entries in a queue Q, the only ones evicted. The stack S orders
/// entries by recency down to its bottom LIR entry; an HIR entry accessed while still in S
/// (resident, or a non-resident ghost) has a lower IRR than that bottom and becomes LIR, the
/// bottom LIR entry moving to Q's tail. Until the LIR set is full every new entry is LIR.
///
/// S is kept implicitly: every access stamps the entry with a running clock, LIR entries sit
/// on an LRU list whose front is S's bottom, and an entry is in S when its stamp is newer than
/// that bottom's, so stack pruning costs nothing. Non-resident ghosts (hashes, weights and
/// stamps) are kept up to the capacity plus the HIR share, the oldest dropped first.
/// @code
/// frugal::cache::lirs_cache<std::uint64_t, int> c(1000);
/// @endcode
struct lirs_policy {
    struct node_data : detail::lru_hook {
        std::uint64_t stamp = 0;
        bool lir = false;
    };
    template <class Node>
    class state {
    public:
        explicit state(std::size_t capacity) { set_capacity(capacity); }
        void expect(std::size_t h, std::size_t /*weight*/) noexcept {
            pending_hash_ = h;
            const auto g = ghosts_.queue().find(h);
            pending_in_stack_ = g && in_stack(g->stamp);
            if (g) ghosts_.queue().erase(h);
        }
        void admit(Node& n, double /*cost*/) {
            const bool was_ghost = pending_in_stack_ && pending_hash_ == n.hash;
            pending_in_stack_ = false;
            n.stamp = ++clock_;
            n.lir = was_ghost || lir_.weight() + n.weight <= lir_max_;
            (n.lir ? lir_ : q_).push_back(n);
            if (n.lir) demote_overflow();
        }
        void touch(Node& n) {
            if (n.lir) {
                n.stamp = ++clock_;
                lir_.move_to_back(n);
                return;
            }
            const bool promote = in_stack(n.stamp);
            n.stamp = ++clock_;
            if (!promote) {
                q_.move_to_back(n);
                return;
            }
            q_.erase(n);
            n.lir = true;
            lir_.push_back(n);
            demote_overflow();
        }
        void remove(Node& n) noexcept { list(n).erase(n); }
        void reattach(Node& n) {
            n.stamp = ++clock_;
            list(n).push_back(n);
            if (n.lir) demote_overflow();
        }
        void replace(Node& n, double /*cost*/) {
            list(n).push_back(n);
            touch(n);
        }
        /// Q's front, the oldest resident HIR entry (S's bottom when Q is empty).
        [[nodiscard]] Node* victim() noexcept { return q_.empty() ? lir_.front() : q_.front(); }
        void evict(Node& n) {
            list(n).erase(n);
            if (n.lir || !in_stack(n.stamp)) return;
            // A resident HIR entry still in S stays there as a non-resident ghost.
            auto& q = ghosts_.queue();
            while (!q.empty() && !in_stack(q.front()->stamp)) q.pop_front();  // pruned from S
            ghosts_.remember(n.hash, n.weight, n.stamp);
        }
        void set_capacity(std::size_t capacity) {
            const auto hir = std::max<std::size_t>(1, static_cast<std::size_t>(static_cast<double>(capacity) * 0.01));
            lir_max_ = capacity > hir ? capacity - hir : 0;
            // With the LIR set full, S (LIR entries and ghosts) spans at most twice the
            // capacity, the bound libCacheSim puts on its stack.
            const std::size_t share = capacity - lir_max_;
            ghosts_.set_limit(capacity > std::numeric_limits<std::size_t>::max() - share ? std::numeric_limits<std::size_t>::max()
                                                                                       : capacity + share);
            demote_overflow();
        }
        [[nodiscard]] std::size_t lir_weight() const noexcept { return lir_.weight(); }
        [[nodiscard]] std::size_t hir_weight() const noexcept { return q_.weight(); }

    private:
        // In S: accessed after the bottom LIR entry (S is empty while there is none: pruning
        // removes every HIR record down to an LIR one).
        [[nodiscard]] bool in_stack(std::uint64_t stamp) noexcept {
            const Node* bottom = lir_.front();
            return bottom != nullptr && stamp > bottom->stamp;
        }
        // Bottom LIR entries move to Q's tail (their stamps now below the new bottom: out of S).
        void demote_overflow() {
            while (lir_.weight() > lir_max_ && lir_.size() > 1) {
                Node& b = *lir_.front();
                lir_.erase(b);
                b.lir = false;
                q_.push_back(b);
            }
        }
        detail::recency_list<Node>& list(const Node& n) noexcept { return n.lir ? lir_ : q_; }

        detail::recency_list<Node> lir_, q_;
        detail::ghost_filter ghosts_;
        std::uint64_t clock_ = 0;
        std::size_t lir_max_ = 0, pending_hash_ = 0;
        bool pending_in_stack_ = false;
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
