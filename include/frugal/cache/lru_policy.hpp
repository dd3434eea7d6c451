#pragma once
/// @file
/// lru_policy: least-recently-used replacement, O(1) per operation, and `lru_cache`.

#include <cstddef>
#include <functional>
#include <iterator>

#include <boost/intrusive/list.hpp>

#include "frugal/cache/basic_cache_fwd.hpp"

namespace frugal::cache {

namespace detail {
struct lru_tag;
/// Base hook of entries kept on a recency list (LRU, the W-TinyLFU segments).
using lru_hook = boost::intrusive::list_base_hook<boost::intrusive::tag<lru_tag>,
                                                  boost::intrusive::link_mode<boost::intrusive::normal_link>>;

/// An intrusive recency list of entries (least recent at the front) with its total weight.
template <class Node>
class recency_list {
public:
    recency_list() = default;
    recency_list(const recency_list&) = delete;
    recency_list& operator=(const recency_list&) = delete;
    ~recency_list() { list_.clear(); }
    void push_back(Node& n) noexcept {
        list_.push_back(n);
        weight_ += n.weight;
    }
    void erase(Node& n) noexcept {
        list_.erase(list_.iterator_to(n));
        weight_ -= n.weight;
    }
    void move_to_back(Node& n) noexcept { list_.splice(list_.end(), list_, list_.iterator_to(n)); }
    /// Inserts `n` into a list kept in the order `before` defines (a strict weak order: `n`
    /// goes after every entry `before(entry, n)` holds for), scanning from both ends at
    /// once, so the cost is the distance to the nearer end.
    template <class Before>
    void insert_ordered(Node& n, Before before) {
        auto back = list_.end(), front = list_.begin();
        while (true) {
            if (back == list_.begin()) {
                list_.push_front(n);
                break;
            }
            if (before(*std::prev(back), n)) {
                list_.insert(back, n);
                break;
            }
            --back;
            if (front == list_.end() || !before(*front, n)) {
                list_.insert(front, n);
                break;
            }
            ++front;
        }
        weight_ += n.weight;
    }
    [[nodiscard]] Node* front() noexcept { return list_.empty() ? nullptr : &list_.front(); }
    /// The entry after `n` (toward the back), or nullptr when `n` is the last.
    [[nodiscard]] Node* next(Node& n) noexcept {
        auto it = std::next(list_.iterator_to(n));
        return it == list_.end() ? nullptr : &*it;
    }
    [[nodiscard]] bool empty() const noexcept { return list_.empty(); }
    [[nodiscard]] std::size_t weight() const noexcept { return weight_; }
    [[nodiscard]] std::size_t size() const noexcept { return list_.size(); }

private:
    boost::intrusive::list<Node, boost::intrusive::base_hook<lru_hook>,
                           boost::intrusive::constant_time_size<true>>
        list_;
    std::size_t weight_ = 0;
};
/// remove, reattach and replace for a policy whose entries each sit on one of its recency
/// lists, the one `Derived::list(n)` names: remove unlinks the entry, reattach appends it to
/// the same list, replace reattaches it and counts one access (`Derived::touch`).
template <class Derived, class Node>
class on_recency_lists {
public:
    void remove(Node& n) noexcept { self().list(n).erase(n); }
    void reattach(Node& n) { self().list(n).push_back(n); }
    void replace(Node& n, double /*cost*/) {
        reattach(n);
        self().touch(n);
    }

private:
    Derived& self() noexcept { return static_cast<Derived&>(*this); }
};
}  // namespace detail

/// Least-recently-used replacement: the victim is the entry whose last access is oldest.
/// Reproduces the LRU hit ratios of the ARC paper (Megiddo & Modha, FAST'03) exactly.
/// @code
/// frugal::cache::basic_cache<int, std::string, frugal::cache::lru_policy> c(100);
/// @endcode
struct lru_policy {
    /// The victim order is the order of last access alone: an owner that keeps access times
    /// may reattach an entry at its place (`state::reattach_ordered`).
    static constexpr bool access_ordered = true;
    struct node_data : detail::lru_hook {};
    template <class Node>
    class state {
    public:
        explicit state(std::size_t /*capacity*/) {}
        void admit(Node& n, double /*cost*/) noexcept { list_.push_back(n); }
        void touch(Node& n) noexcept { list_.move_to_back(n); }
        void remove(Node& n) noexcept { list_.erase(n); }
        void reattach(Node& n) noexcept { list_.push_back(n); }
        /// Reattaches `n` at the place of its last access among the others, for an owner that
        /// keeps access times (`older(a, b)`: a was last accessed before b): the prefix tree,
        /// where a chunk becomes evictable again long after its last access.
        /// @code
        /// state.reattach_ordered(n, [](const auto& a, const auto& b) { return a.last_access < b.last_access; });
        /// @endcode
        template <class Older>
        void reattach_ordered(Node& n, Older older) {
            list_.insert_ordered(n, older);
        }
        void replace(Node& n, double /*cost*/) noexcept { list_.push_back(n); }  // most recent
        void evict(Node& n) noexcept { list_.erase(n); }
        [[nodiscard]] Node* victim() noexcept { return list_.front(); }
        void set_capacity(std::size_t) noexcept {}

    private:
        detail::recency_list<Node> list_;
    };
};
static_assert(cache_policy<lru_policy>);

/// An LRU cache of `capacity` weight units (entries by default).
/// @code
/// frugal::cache::lru_cache<std::uint64_t, int> c(1000);
/// c.put(7, 1);
/// int* v = c.get(7);
/// @endcode
template <class Key, class Value, class Weigher = unit_weigher, class Hash = std::hash<Key>,
          class KeyEqual = std::equal_to<Key>, class Index = intrusive_index>
using lru_cache = basic_cache<Key, Value, lru_policy, Weigher, Hash, KeyEqual, Index>;

}  // namespace frugal::cache
