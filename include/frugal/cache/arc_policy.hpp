#pragma once
/// @file
/// arc_policy: Adaptive Replacement Cache, and `arc_cache`.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <functional>

#include "frugal/cache/basic_cache_fwd.hpp"
#include "frugal/cache/ghost_queue.hpp"
#include "frugal/cache/lru_policy.hpp"

namespace frugal::cache {

/// ARC (Megiddo and Modha, "ARC: A Self-Tuning, Low Overhead Replacement Cache", FAST 2003),
/// Fig. 4 of the paper: T1 holds entries seen once recently, T2 entries seen at least twice;
/// the ghost lists B1 and B2 remember the hashes evicted from each. A miss whose hash is in B1
/// raises the target size p of T1 by max(1, |B2| / |B1|), one in B2 lowers it by
/// max(1, |B1| / |B2|), and the entry enters T2; any other miss enters T1, after trimming B1
/// (when |T1| + |B1| reaches the capacity) or B2 (when the directory reaches twice the
/// capacity). REPLACE evicts T1's least recent entry into B1 when |T1| exceeds p (or equals it
/// on a B2 hit), else T2's into B2. With unit weights this is the paper's algorithm exactly
/// (its OLTP hit ratios are reproduced in the tests); with byte weights sizes are weights and
/// the adaptation steps are scaled by the newcomer's weight.
/// @code
/// frugal::cache::arc_cache<std::uint64_t, int> c(1000);
/// @endcode
struct arc_policy {
    struct node_data : detail::lru_hook {
        bool in_t2 = false;
    };
    template <class Node>
    class state : public detail::on_recency_lists<state<Node>, Node> {
    public:
        explicit state(std::size_t capacity) : capacity_(capacity) {}
        void expect(std::size_t h, std::size_t weight) noexcept {
            pending_hash_ = h;
            incoming_ = weight;
            first_eviction_ = true;
            const double w = static_cast<double>(weight == 0 ? 1 : weight);
            const auto b1 = static_cast<double>(b1_.weight()), b2 = static_cast<double>(b2_.weight());
            if (b1_.erase(h)) {
                pending_ = ghost::b1;
                p_ = std::min(p_ + w * std::max(1.0, b1 > 0 ? b2 / b1 : 1.0), static_cast<double>(capacity_));
            } else if (b2_.erase(h)) {
                pending_ = ghost::b2;
                p_ = std::max(p_ - w * std::max(1.0, b2 > 0 ? b1 / b2 : 1.0), 0.0);
            } else {
                pending_ = ghost::none;
            }
        }
        void admit(Node& n, double /*cost*/) noexcept {
            n.in_t2 = pending_ != ghost::none && pending_hash_ == n.hash;
            pending_ = ghost::none;
            incoming_ = 0;
            list(n).push_back(n);
        }
        void touch(Node& n) noexcept {
            if (n.in_t2) {
                t2_.move_to_back(n);
                return;
            }
            t1_.erase(n);
            n.in_t2 = true;
            t2_.push_back(n);
        }
        /// REPLACE's choice, after the directory trimming of the miss case at hand (Fig. 4).
        [[nodiscard]] Node* victim() noexcept {
            step_ = plan();
            switch (step_) {
                case step::drop_t1: return t1_.front();
                case step::replace:
                case step::trim_b1_replace:
                case step::trim_b2_replace: return replace_choice();
            }
            return nullptr;
        }
        void evict(Node& n) {
            // The ghost record first (it may allocate; a resident entry's hash is in no ghost
            // list, so recording it before the trims leaves the same lists).
            const bool to_ghost = step_ != step::drop_t1;
            if (to_ghost) (n.in_t2 ? b2_ : b1_).push_back(n.hash, n.weight);
            if (step_ == step::trim_b1_replace) b1_.pop_front();
            if (step_ == step::trim_b2_replace) b2_.pop_front();
            first_eviction_ = false;
            list(n).erase(n);
            if (!to_ghost) return;
            // With unit weights the paper's invariants make these no-ops; with byte weights one
            // trimmed record may be lighter than the one added.
            while (t1_.weight() + b1_.weight() > capacity_ && b1_.pop_front()) {
            }
            while (directory() > 2 * static_cast<std::uint64_t>(capacity_) && (b2_.pop_front() || b1_.pop_front())) {
            }
        }
        void set_capacity(std::size_t capacity) noexcept {
            capacity_ = capacity;
            p_ = std::min(p_, static_cast<double>(capacity));
        }
        /// The adaptive target size p of T1, in capacity units.
        [[nodiscard]] double target_t1() const noexcept { return p_; }
        [[nodiscard]] std::size_t t1_weight() const noexcept { return t1_.weight(); }
        [[nodiscard]] std::size_t t2_weight() const noexcept { return t2_.weight(); }

    private:
        enum class ghost : std::uint8_t { none, b1, b2 };
        enum class step : std::uint8_t { replace, trim_b1_replace, trim_b2_replace, drop_t1 };

        [[nodiscard]] std::uint64_t directory() const noexcept {
            return static_cast<std::uint64_t>(t1_.weight()) + t2_.weight() + b1_.weight() + b2_.weight();
        }
        // Case II/III: a ghost hit's first eviction is REPLACE alone. Case IV (and any further
        // eviction one newcomer needs): A when T1 + B1 would pass the capacity, else B.
        [[nodiscard]] step plan() const noexcept {
            if (first_eviction_ && pending_ != ghost::none) return step::replace;
            const std::uint64_t l1 = static_cast<std::uint64_t>(t1_.weight()) + b1_.weight();
            if (l1 + incoming_ > capacity_) {
                if (t1_.weight() >= capacity_) return step::drop_t1;
                return b1_.empty() ? step::replace : step::trim_b1_replace;
            }
            const bool full_directory = directory() >= 2 * static_cast<std::uint64_t>(capacity_) && !b2_.empty();
            return full_directory ? step::trim_b2_replace : step::replace;
        }
        [[nodiscard]] Node* replace_choice() noexcept {
            const auto t1 = static_cast<double>(t1_.weight());
            const bool from_t1 = !t1_.empty() && (t1 > p_ || (pending_ == ghost::b2 && t1 == p_) || t2_.empty());
            return from_t1 ? t1_.front() : t2_.front();
        }
        friend detail::on_recency_lists<state, Node>;
        detail::recency_list<Node>& list(const Node& n) noexcept { return n.in_t2 ? t2_ : t1_; }

        std::size_t capacity_;
        detail::recency_list<Node> t1_, t2_;
        detail::ghost_queue b1_, b2_;
        double p_ = 0;
        std::size_t pending_hash_ = 0;
        std::uint64_t incoming_ = 0;
        ghost pending_ = ghost::none;
        step step_ = step::replace;
        bool first_eviction_ = false;
    };
};
static_assert(cache_policy<arc_policy>);

/// An ARC cache of `capacity` weight units (entries by default).
/// @code
/// frugal::cache::arc_cache<std::uint64_t, int> c(1000);
/// @endcode
template <class Key, class Value, class Weigher = unit_weigher, class Hash = std::hash<Key>,
          class KeyEqual = std::equal_to<Key>, class Index = intrusive_index>
using arc_cache = basic_cache<Key, Value, arc_policy, Weigher, Hash, KeyEqual, Index>;

}  // namespace frugal::cache
