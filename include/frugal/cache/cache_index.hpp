#pragma once
/// @file
/// The index of a cache's entries by key, stated once as a concept (`cache_index`), and its
/// implementations side by side: `intrusive_index` (the default of `basic_cache`),
/// `map_index` (any unordered map) and `slot_index` (open addressing, the default of
/// `prefix_tree`).

#include <algorithm>
#include <bit>
#include <concepts>
#include <cstddef>
#include <functional>
#include <type_traits>
#include <utility>
#include <vector>

#include <boost/intrusive/unordered_set.hpp>  // also unordered_multiset

#include "frugal/core/assert.hpp"
#include "frugal/core/huge_page_allocator.hpp"

namespace frugal::cache {

namespace detail {
/// The smallest entry an index must work on: a key, its hash and the index's hook.
template <class Index, class Key>
struct index_probe_node {
    typename Index::hook index_hook;
    Key key;
    std::size_t hash = 0;
};
}  // namespace detail

/// An index of a cache's entries by key. The entries carry what it needs: `Index::hook`, a
/// member every entry holds as `index_hook`; `key`; and `hash`, the key's well-mixed hash,
/// computed once by the cache. `Index::type<Node, Hash, KeyEqual>` is the index over entries
/// of type `Node`, constructible from a `KeyEqual`, and offers:
/// - `find(key, hash)`: the entry whose key equals `key`, or nullptr (never allocates);
/// - `insert(n)`: adds `n`, whose key is absent (may allocate to grow);
/// - `erase(n)`: removes `n`, which it holds (never allocates or throws);
/// - `size()`, and `for_each(f)`: `f(n)` for every entry held, in no particular order.
/// The index never owns, moves or frees the entries.
/// @code
/// static_assert(frugal::cache::cache_index<frugal::cache::slot_index, int>);
/// frugal::cache::basic_cache<int, int, frugal::cache::lru_policy, frugal::cache::unit_weigher, std::hash<int>,
///                            std::equal_to<int>, frugal::cache::slot_index> c(100);
/// @endcode
template <class I, class Key, class Node = detail::index_probe_node<I, Key>, class Hash = std::hash<Key>,
          class KeyEqual = std::equal_to<Key>>
concept cache_index = requires { typename I::hook; } &&
                      std::constructible_from<typename I::template type<Node, Hash, KeyEqual>, KeyEqual> &&
                      requires(typename I::template type<Node, Hash, KeyEqual>& index, Node& n, const Key& key,
                               std::size_t hash, void (*f)(Node&)) {
                          { index.find(key, hash) } -> std::same_as<Node*>;
                          index.insert(n);
                          index.erase(n);
                          { index.size() } -> std::convertible_to<std::size_t>;
                          index.for_each(f);
                      };

/// A `cache_index` on Boost.Intrusive hooks inside the entries: lookups, inserts and erases
/// allocate nothing; only growth of the bucket array does (amortized, doubling). At least two
/// buckets per entry, so a lookup rarely walks past another entry (a cache miss each), at a
/// cost of 8 to 16 bytes of buckets per entry. The default index of `basic_cache`.
/// @code
/// frugal::cache::basic_cache<int, int, frugal::cache::lru_policy, frugal::cache::unit_weigher, std::hash<int>,
///                     std::equal_to<int>, frugal::cache::intrusive_index> c(100);
/// @endcode
struct intrusive_index {
    // The hash is kept in the entry (`cache_node::hash`), not in the hook: one word less.
    using hook = boost::intrusive::unordered_set_member_hook<boost::intrusive::link_mode<boost::intrusive::normal_link>>;

    template <class Node, class Hash, class KeyEqual>
    class type {
        struct node_hash {
            std::size_t operator()(const Node& n) const noexcept { return n.hash; }
        };
        struct node_equal {
            bool operator()(const Node& a, const Node& b) const { return a.hash == b.hash && KeyEqual{}(a.key, b.key); }
        };
        using set = boost::intrusive::unordered_multiset<
            Node, boost::intrusive::member_hook<Node, hook, &Node::index_hook>,
            boost::intrusive::hash<node_hash>, boost::intrusive::equal<node_equal>,
            boost::intrusive::power_2_buckets<true>, boost::intrusive::constant_time_size<true>>;
        using bucket_type = typename set::bucket_type;
        using bucket_traits = typename set::bucket_traits;

        struct key_hash {
            std::size_t h;
            std::size_t operator()(const auto&) const noexcept { return h; }
        };
        struct key_node_equal {
            const KeyEqual& eq;
            std::size_t h;
            template <class K>
            bool operator()(const K& k, const Node& n) const { return n.hash == h && eq(k, n.key); }
        };

    public:
        explicit type(KeyEqual eq = {}) : eq_(std::move(eq)), buckets_(initial), set_(bucket_traits(buckets_.data(), initial)) {}
        type(const type&) = delete;
        type& operator=(const type&) = delete;
        ~type() { set_.clear(); }

        template <class K>
        [[nodiscard]] Node* find(const K& key, std::size_t hash) {
            auto it = set_.find(key, key_hash{hash}, key_node_equal{eq_, hash});
            return it == set_.end() ? nullptr : &*it;
        }
        void insert(Node& n) {
            if (2 * (set_.size() + 1) > buckets_.size()) grow();  // load factor at most 1/2
            set_.insert(n);
        }
        void erase(Node& n) noexcept { set_.erase(set_.iterator_to(n)); }
        [[nodiscard]] std::size_t size() const noexcept { return set_.size(); }
        template <class F>
        void for_each(F&& f) {
            for (auto& n : set_) f(n);
        }

    private:
        static constexpr std::size_t initial = 16;
        void grow() {
            std::vector<bucket_type> bigger(buckets_.size() * 2);
            set_.rehash(bucket_traits(bigger.data(), bigger.size()));
            buckets_.swap(bigger);
        }
        [[no_unique_address]] KeyEqual eq_;
        std::vector<bucket_type> buckets_;
        set set_;
    };
};

/// A `cache_index` on any std::unordered_map-like `Map<Key, Node*, Hash, KeyEqual>`
/// (std::unordered_map, a flat map, a concurrent map): pick it to plug in your own map type.
/// @code
/// using my_cache = frugal::cache::basic_cache<int, float, frugal::cache::lru_policy, frugal::cache::unit_weigher,
///     std::hash<int>, std::equal_to<int>, frugal::cache::map_index<std::unordered_map>>;
/// @endcode
template <template <class, class, class, class, class...> class Map>
struct map_index {
    struct hook {};
    template <class Node, class Hash, class KeyEqual>
    class type {
    public:
        using key_type = std::remove_cvref_t<decltype(std::declval<Node&>().key)>;
        explicit type(KeyEqual eq = {}) : map_(16, Hash{}, std::move(eq)) {}
        template <class K>
        [[nodiscard]] Node* find(const K& key, std::size_t) {
            auto it = map_.find(key);
            return it == map_.end() ? nullptr : it->second;
        }
        void insert(Node& n) { map_.emplace(n.key, &n); }
        void erase(Node& n) { map_.erase(n.key); }
        [[nodiscard]] std::size_t size() const noexcept { return map_.size(); }
        template <class F>
        void for_each(F&& f) {
            for (auto& kv : map_) f(*kv.second);
        }

    private:
        Map<key_type, Node*, Hash, KeyEqual> map_;
    };
};

/// A `cache_index` by open addressing with linear probing over (hash, entry) slots, the slot
/// number kept in the entry's hook, so that unlinking an entry is one store (a tombstone)
/// and no probe. The default index of `prefix_tree`, whose evictions unlink a leaf each.
/// Hand-written because Boost.Intrusive's unordered containers are singly linked (an erase
/// walks the bucket to the predecessor, one dependent cache miss per step, which would
/// dominate an eviction in a large tree) and Boost 1.74 predates boost::unordered_flat_map.
/// The slots sit on huge pages where the system offers them (`huge_page_allocator`).
/// @code
/// frugal::cache::basic_cache<int, int, frugal::cache::lru_policy, frugal::cache::unit_weigher, std::hash<int>,
///                            std::equal_to<int>, frugal::cache::slot_index> c(100);
/// @endcode
struct slot_index {
    struct hook {
        std::size_t slot = 0;
    };

    template <class Node, class Hash, class KeyEqual>
    class type {
        struct slot {
            std::size_t hash;
            Node* node;  // nullptr: empty; tombstone(): erased
        };
        using slot_vector = std::vector<slot, huge_page_allocator<slot>>;

    public:
        explicit type(KeyEqual eq = {}) : eq_(std::move(eq)) {}
        type(const type&) = delete;
        type& operator=(const type&) = delete;

        template <class K>
        [[nodiscard]] Node* find(const K& key, std::size_t hash) const {
            for (std::size_t i = hash & mask_;; i = (i + 1) & mask_) {
                const slot& s = slots_[i];
                if (s.node == nullptr) return nullptr;
                if (s.hash == hash && s.node != tombstone() && eq_(key, s.node->key)) return s.node;
            }
        }
        void insert(Node& n) {
            if ((used_ + 1) * 4 > slots_.size() * 3) rehash(std::max<std::size_t>(16, std::bit_ceil((live_ + 1) * 8 / 3)));
            if (place(n)) ++used_;
            ++live_;
        }
        void erase(Node& n) noexcept {
            FRUGAL_ASSERT(slots_[n.index_hook.slot].node == &n);
            slots_[n.index_hook.slot].node = tombstone();
            --live_;
        }
        [[nodiscard]] std::size_t size() const noexcept { return live_; }
        template <class F>
        void for_each(F&& f) const {
            for (const slot& s : slots_)
                if (s.node != nullptr && s.node != tombstone()) f(*s.node);
        }

    private:
        static Node* tombstone() noexcept { return reinterpret_cast<Node*>(alignof(Node)); }
        // Puts `n` in the first empty or erased slot of its probe sequence; true if it was empty.
        bool place(Node& n) noexcept {
            std::size_t i = n.hash & mask_;
            while (slots_[i].node != nullptr && slots_[i].node != tombstone()) i = (i + 1) & mask_;
            const bool was_empty = slots_[i].node == nullptr;
            slots_[i] = slot{n.hash, &n};
            n.index_hook.slot = i;
            return was_empty;
        }
        // Rebuilds without tombstones at `size` slots (a power of two, under 3/8 full): O(live),
        // once per at least 3/8 x size insertions, so O(1) amortized.
        void rehash(std::size_t size) {
            slot_vector old(size, slot{0, nullptr});
            old.swap(slots_);
            mask_ = size - 1;
            used_ = 0;
            for (const slot& s : old)
                if (s.node != nullptr && s.node != tombstone()) used_ += place(*s.node) ? 1 : 0;
        }
        [[no_unique_address]] KeyEqual eq_;
        slot_vector slots_ = slot_vector(16, slot{0, nullptr});
        std::size_t mask_ = 15, live_ = 0, used_ = 0;  // used_: live + tombstones
    };
};

static_assert(cache_index<intrusive_index, int> && cache_index<slot_index, int>);

}  // namespace frugal::cache
