#pragma once
/// @file
/// prefix_tree: PerCache's knowledge bank, a tree of chunk-id sequences whose nodes hold the
/// caller's handles to per-chunk tensors, under a byte budget with leaf-only eviction.

#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <unordered_map>
#include <utility>
#include <vector>

#include <boost/intrusive/set.hpp>
#include <boost/pool/pool.hpp>

#if __has_include(<fcntl.h>) && __has_include(<unistd.h>)
#include <fcntl.h>
#include <unistd.h>
#define FRUGAL_PREFIX_TREE_FSYNC 1
#endif

#include "frugal/core/assert.hpp"
#include "frugal/core/error.hpp"
#include "frugal/core/hash.hpp"
#include "frugal/core/huge_page_allocator.hpp"
#include "frugal/core/memory_budget.hpp"

namespace frugal::cache {

namespace detail {
/// Hash index of a prefix tree's nodes by (parent, chunk id): open addressing with linear
/// probing over (hash, node) slots, the slot number kept in the node, so that unlinking an
/// evicted leaf is one store (a tombstone) and no probe. Hand-written because Boost.Intrusive's
/// unordered containers are singly linked (an erase walks the bucket to the predecessor, one
/// dependent cache miss per step: 70% of an eviction at 1M nodes, measured) and Boost 1.74
/// predates boost::unordered_flat_map. `Node` has `hash` and `slot` members.
template <class Node>
class slot_index {
    struct slot {
        std::size_t hash;
        Node* node;  // nullptr: empty; tombstone(): erased
    };
    using slot_vector = std::vector<slot, huge_page_allocator<slot>>;

public:
    /// The node with `hash` for which `same(node)` holds, or nullptr.
    template <class Same>
    [[nodiscard]] Node* find(std::size_t hash, Same&& same) const {
        for (std::size_t i = hash & mask_;; i = (i + 1) & mask_) {
            const slot& s = slots_[i];
            if (s.node == nullptr) return nullptr;
            if (s.hash == hash && s.node != tombstone() && same(*s.node)) return s.node;
        }
    }
    void insert(Node& n) {
        if ((used_ + 1) * 4 > slots_.size() * 3) rehash(std::max<std::size_t>(16, std::bit_ceil((live_ + 1) * 8 / 3)));
        if (place(n)) ++used_;
        ++live_;
    }
    void erase(Node& n) noexcept {
        FRUGAL_ASSERT(slots_[n.slot].node == &n);
        slots_[n.slot].node = tombstone();
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
        n.slot = i;
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
    slot_vector slots_ = slot_vector(16, slot{0, nullptr});
    std::size_t mask_ = 15, live_ = 0, used_ = 0;  // used_: live + tombstones
};

/// Boost.Pool's block source on `huge_page_allocator`. The pool doubles its blocks as it
/// grows, so a large tree's nodes sit in blocks of many megabytes, where an eviction's
/// random steps (the victim, its parent) would otherwise miss the TLB. Boost.Pool frees a
/// block without its size, which the allocator needs back: it rides in front of the block.
struct huge_page_pool_blocks {
    using size_type = std::size_t;
    using difference_type = std::ptrdiff_t;
    static constexpr std::size_t header = alignof(std::max_align_t);

    static char* malloc(size_type bytes) noexcept {  // nullptr on failure, as Boost.Pool expects
        try {
            char* block = huge_page_allocator<char>{}.allocate(header + bytes);
            std::memcpy(block, &bytes, sizeof bytes);
            return block + header;
        } catch (const std::bad_alloc&) {
            return nullptr;
        }
    }
    static void free(char* p) noexcept {
        size_type bytes;
        std::memcpy(&bytes, p - header, sizeof bytes);
        huge_page_allocator<char>{}.deallocate(p - header, header + bytes);
    }
};
}  // namespace detail

/// Eviction order of a prefix tree's leaves: least recently used first.
/// @code
/// frugal::cache::prefix_tree<int, int, frugal::cache::tree_lru> t(frugal::memory_budget(1 << 20));
/// @endcode
struct tree_lru {
    static double priority(std::uint64_t /*frequency*/, std::uint64_t tick, double /*cost*/, std::size_t /*bytes*/,
                           double /*clock*/) noexcept {
        return static_cast<double>(tick);
    }
};
/// Eviction order of a prefix tree's leaves: fewest accesses first (oldest among equals);
/// PerCache's knowledge-bank policy (section 4.1.3), the default.
/// @code
/// frugal::cache::prefix_tree<int, int, frugal::cache::tree_lfu> t(frugal::memory_budget(1 << 20));
/// @endcode
struct tree_lfu {
    static double priority(std::uint64_t frequency, std::uint64_t, double, std::size_t, double) noexcept {
        return static_cast<double>(frequency);
    }
};
/// Eviction order of a prefix tree's leaves: PGDSF (RAGCache), clock + frequency x cost /
/// bytes, the clock raised to each evicted priority.
/// @code
/// frugal::cache::prefix_tree<int, int, frugal::cache::tree_gdsf> t(frugal::memory_budget(1 << 20));
/// t.insert(chunks, values);   // values[i].cost = prefill time of chunk i
/// @endcode
struct tree_gdsf {
    static double priority(std::uint64_t frequency, std::uint64_t, double cost, std::size_t bytes, double clock) noexcept {
        return clock + static_cast<double>(frequency) * cost / static_cast<double>(bytes);
    }
};

/// What the tree stores for one chunk: the caller's handle to its tensors (a device pointer,
/// a file offset), their size in bytes and the cost of recomputing them (for `tree_gdsf`).
/// @code
/// frugal::cache::chunk_value<std::uint64_t> v{.handle = file_offset, .bytes = kv_bytes, .cost = prefill_ms};
/// @endcode
template <class Handle>
struct chunk_value {
    Handle handle;
    std::size_t bytes;
    double cost = 1.0;
};

/// PerCache's knowledge bank (section 4.1.1): a tree keyed by sequences of chunk ids, one node
/// per (prefix, chunk) holding the handle to that chunk's QKV tensors. `match` finds the
/// longest cached prefix of a sequence and pins it until the returned handle is released;
/// `insert` adds the rest; when the bytes exceed the budget, unpinned leaves are evicted in
/// `Policy` order, O(log n) per eviction (an intrusive red-black tree of the evictable leaves:
/// no heap rebuild per eviction). `save`/`load` persist the index crash-safely.
/// @code
/// frugal::cache::prefix_tree<std::uint32_t, std::uint64_t> tree(frugal::memory_budget::mib(512));
/// auto m = tree.match(chunks);                 // m.length() chunks reusable, pinned
/// std::vector<frugal::cache::chunk_value<std::uint64_t>> v = prefill(chunks, m.length());
/// tree.insert(chunks, v);                      // values for positions < m.length() are ignored
/// m.release();
/// @endcode
template <class ChunkId, class Handle, class Policy = tree_lfu, class Hash = std::hash<ChunkId>>
class prefix_tree {
    struct node;
    // A node is found by (parent, chunk id) in one hash index over the whole tree: no map per
    // node, and unlinking an evicted leaf from its parent is one store.
    struct tree_key {
        node* parent;
        ChunkId id;
    };
    using leaf_hook = boost::intrusive::set_base_hook<boost::intrusive::link_mode<boost::intrusive::normal_link>,
                                                      boost::intrusive::optimize_size<true>>;
    struct node : leaf_hook {
        node(tree_key k, chunk_value<Handle> v, std::size_t h) : key(std::move(k)), value(std::move(v)), hash(h) {}
        tree_key key;
        chunk_value<Handle> value;
        std::size_t hash, slot = 0;
        std::uint64_t frequency = 0, tick = 0;
        double priority = 0;
        // pins and children apart: GCC merges `pins == 0 && children == 0` into one 8-byte
        // load, which right after an eviction's 4-byte `--children` cannot be forwarded from
        // the store and waits for every older store to commit, the index's tombstone (a cache
        // miss in a large tree) among them (docs/caches.md).
        std::uint32_t pins = 0, depth = 0, children = 0;
        bool in_leaf_set = false;
    };
    struct leaf_order {
        bool operator()(const node& a, const node& b) const noexcept {
            return a.priority < b.priority || (a.priority == b.priority && a.tick < b.tick);
        }
    };
    using leaf_set = boost::intrusive::multiset<node, boost::intrusive::compare<leaf_order>>;
    using index_type = detail::slot_index<node>;
    static_assert(alignof(node) <= __STDCPP_DEFAULT_NEW_ALIGNMENT__, "prefix_tree: over-aligned chunk id or handle");

    // Nodes, their index and the evictable leaves. Nodes live in a Boost.Pool: contiguous
    // blocks, a freed node is the next one allocated (an eviction followed by an insert
    // reuses the slot it just touched), and no malloc/free per chunk.
    struct store {
        boost::pool<detail::huge_page_pool_blocks> pool{sizeof(node)};
        index_type index;
        leaf_set leaves;
        store() = default;
        store(const store&) = delete;
        store& operator=(const store&) = delete;
        ~store() {
            leaves.clear();
            std::vector<node*> all;
            all.reserve(index.size());
            index.for_each([&](node& n) { all.push_back(&n); });
            for (node* n : all) n->~node();
        }
        node* find(node* parent, const ChunkId& id) const {
            return index.find(hash_of(parent, id), [&](const node& n) { return n.key.parent == parent && n.key.id == id; });
        }
        node* create(node* parent, const ChunkId& id, chunk_value<Handle> v) {
            void* p = (pool.malloc)();
            if (p == nullptr) throw std::bad_alloc();
            node* n = nullptr;
            try {
                n = ::new (p) node(tree_key{parent, id}, std::move(v), hash_of(parent, id));
                index.insert(*n);
            } catch (...) {
                if (n != nullptr) n->~node();
                (pool.free)(p);
                throw;
            }
            if (parent != nullptr) {
                ++parent->children;
                n->depth = parent->depth + 1;
            }
            return n;
        }
        void destroy(node* n) noexcept {
            index.erase(*n);
            if (n->key.parent != nullptr) --n->key.parent->children;
            n->~node();
            (pool.free)(n);
        }
        static std::size_t hash_of(const node* parent, const ChunkId& id) {
            return static_cast<std::size_t>(hash_mix(Hash{}(id) ^ hash_mix(reinterpret_cast<std::uintptr_t>(parent))));
        }
    };

public:
    /// Called for each evicted chunk: free its tensors or demote them to a lower tier.
    using eviction_callback = std::function<void(const ChunkId&, Handle&, std::size_t bytes)>;

    /// A pinned longest cached prefix, from `match`. Move-only; releases its pins on
    /// destruction or `release()`.
    class prefix_match {
    public:
        prefix_match() = default;
        prefix_match(prefix_match&& o) noexcept : tree_(std::exchange(o.tree_, nullptr)), path_(std::move(o.path_)) {}
        prefix_match& operator=(prefix_match&& o) noexcept {
            if (this != &o) {
                release();
                tree_ = std::exchange(o.tree_, nullptr);
                path_ = std::move(o.path_);
            }
            return *this;
        }
        ~prefix_match() { release(); }
        /// Number of leading chunks that are cached.
        [[nodiscard]] std::size_t length() const noexcept { return path_.size(); }
        /// Handle of the i-th cached chunk (i < length()).
        [[nodiscard]] const Handle& handle(std::size_t i) const {
            FRUGAL_CHECK_AS(frugal::out_of_range, i < path_.size(), "prefix_match: chunk ", i, " >= length ", path_.size());
            return path_[i]->value.handle;
        }
        /// Drops the pins; the chunks become evictable again.
        void release() noexcept {
            if (tree_ != nullptr) tree_->unpin_path(path_);
            tree_ = nullptr;
            path_.clear();
        }

    private:
        friend class prefix_tree;
        prefix_tree* tree_ = nullptr;
        std::vector<node*> path_;
    };

    /// Result of `insert`: positions [0, existing) were cached already, [existing, cached)
    /// were added (their handles now belong to the tree), [cached, n) did not fit in the
    /// budget beside the pinned chunks and stay the caller's.
    struct insert_result {
        std::size_t existing = 0, cached = 0;
    };

    explicit prefix_tree(memory_budget budget) : budget_(budget.bytes()), s_(std::make_unique<store>()) {}
    prefix_tree(const prefix_tree&) = delete;
    prefix_tree& operator=(const prefix_tree&) = delete;

    void set_eviction_callback(eviction_callback cb) { on_evict_ = std::move(cb); }

    /// The longest cached prefix of `sequence`, pinned (never evicted) until released. Each
    /// matched chunk counts one access.
    [[nodiscard]] prefix_match match(std::span<const ChunkId> sequence) {
        prefix_match m;
        m.tree_ = this;
        node* parent = nullptr;
        for (const ChunkId& id : sequence) {
            node* n = s_->find(parent, id);
            if (n == nullptr) break;
            touch(*n);
            pin(*n);
            m.path_.push_back(n);
            parent = n;
        }
        return m;
    }

    /// Length of the longest cached prefix of `sequence`, without pinning or counting an access.
    [[nodiscard]] std::size_t cached_length(std::span<const ChunkId> sequence) const {
        node* parent = nullptr;
        std::size_t n = 0;
        for (; n < sequence.size(); ++n) {
            parent = s_->find(parent, sequence[n]);
            if (parent == nullptr) break;
        }
        return n;
    }

    /// Adds `sequence` with `values[i]` for chunk i (values.size() == sequence.size()); the
    /// values of chunks already cached are ignored. Evicts unpinned leaves (never the path
    /// being inserted) until the new chunks fit; stops at the first chunk that cannot fit.
    insert_result insert(std::span<const ChunkId> sequence, std::span<const chunk_value<Handle>> values) {
        FRUGAL_CHECK(values.size() == sequence.size(), "prefix_tree::insert: ", values.size(),
                     " values for a sequence of ", sequence.size(), " chunks");
        for (const auto& v : values)
            FRUGAL_CHECK(v.bytes > 0 && v.cost >= 0, "prefix_tree::insert: chunk bytes ", v.bytes, " and cost ", v.cost,
                         " must be positive and non-negative");
        insert_result r;
        std::vector<node*> path;
        node* parent = nullptr;
        for (; r.existing < sequence.size(); ++r.existing) {
            node* n = s_->find(parent, sequence[r.existing]);
            if (n == nullptr) break;
            pin(*n);
            path.push_back(n);
            parent = n;
        }
        r.cached = r.existing;
        for (; r.cached < sequence.size(); ++r.cached) {
            const auto& v = values[r.cached];
            while (bytes_ + v.bytes > budget_ && evict_one()) {
            }
            if (bytes_ + v.bytes > budget_) break;
            node* n = s_->create(parent, sequence[r.cached], v);
            bytes_ += v.bytes;
            touch(*n);
            pin(*n);
            path.push_back(n);
            parent = n;
        }
        unpin_path(path);
        return r;
    }

    /// Evicts the policy's first unpinned leaf; false when every leaf is pinned (or none).
    /// O(log n).
    bool evict_one() {
        leaf_set& leaves = s_->leaves;
        if (leaves.empty()) return false;
        node& victim = *leaves.begin();
        leaves.erase(leaves.begin());
        victim.in_leaf_set = false;
        clock_ = victim.priority;
        if (on_evict_) on_evict_(victim.key.id, victim.value.handle, victim.value.bytes);
        bytes_ -= victim.value.bytes;
        ++evictions_;
        node* parent = victim.key.parent;
        s_->destroy(&victim);
        if (parent != nullptr) maybe_enter_set(*parent);
        return true;
    }

    /// Changes the budget, evicting unpinned leaves down to it where possible.
    void set_budget(memory_budget budget) {
        budget_ = budget.bytes();
        while (bytes_ > budget_ && evict_one()) {
        }
    }

    [[nodiscard]] std::size_t bytes() const noexcept { return bytes_; }
    [[nodiscard]] std::size_t budget() const noexcept { return budget_; }
    /// Number of cached chunks (tree nodes).
    [[nodiscard]] std::size_t size() const noexcept { return s_->index.size(); }
    [[nodiscard]] std::uint64_t evictions() const noexcept { return evictions_; }

    /// Writes the index (every chunk: its parent, id, handle, bytes, cost, frequency) to
    /// `path` crash-safely: a temporary file in the same folder, flushed and synced, then
    /// renamed over `path`. Needs trivially copyable ids and handles.
    void save(const std::filesystem::path& path) const
        requires(std::is_trivially_copyable_v<ChunkId> && std::is_trivially_copyable_v<Handle>)
    {
        std::string out(header_bytes, '\0');
        std::memcpy(out.data(), magic, 8);
        put(out, 8, format_version);
        put(out, 12, static_cast<std::uint32_t>(sizeof(ChunkId)));
        put(out, 16, static_cast<std::uint32_t>(sizeof(Handle)));
        put(out, 20, static_cast<std::uint64_t>(size()));
        // Records by depth, so that every parent is written before its children.
        std::vector<const node*> order;
        order.reserve(size());
        s_->index.for_each([&](node& n) { order.push_back(&n); });
        std::stable_sort(order.begin(), order.end(), [](const node* a, const node* b) { return a->depth < b->depth; });
        std::unordered_map<const node*, std::uint64_t> index_of;
        index_of.reserve(order.size());
        for (const node* n : order) {
            const std::uint64_t parent = n->key.parent == nullptr ? no_parent : index_of.at(n->key.parent);
            index_of.emplace(n, index_of.size());
            std::string rec(record_bytes, '\0');
            put(rec, 0, parent);
            std::memcpy(rec.data() + 8, &n->key.id, sizeof(ChunkId));
            std::memcpy(rec.data() + 8 + sizeof(ChunkId), &n->value.handle, sizeof(Handle));
            put(rec, 8 + sizeof(ChunkId) + sizeof(Handle), static_cast<std::uint64_t>(n->value.bytes));
            put(rec, 16 + sizeof(ChunkId) + sizeof(Handle), n->value.cost);
            put(rec, 24 + sizeof(ChunkId) + sizeof(Handle), n->frequency);
            out += rec;
        }
        std::string checksum(8, '\0');
        put(checksum, 0, fnv1a(std::string_view(out)));
        out += checksum;
        const std::filesystem::path tmp = path.string() + ".tmp";
        {
            std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
            f.write(out.data(), static_cast<std::streamsize>(out.size()));
            f.flush();
            if (!f) FRUGAL_FAIL(frugal::runtime_error, "prefix_tree::save: cannot write ", tmp);
        }
#ifdef FRUGAL_PREFIX_TREE_FSYNC
        if (int fd = ::open(tmp.c_str(), O_RDONLY); fd >= 0) {
            const int rc = ::fsync(fd);
            ::close(fd);
            if (rc != 0) FRUGAL_FAIL(frugal::runtime_error, "prefix_tree::save: fsync of ", tmp, " failed");
        }
#endif
        std::error_code ec;
        std::filesystem::rename(tmp, path, ec);
        if (ec) FRUGAL_FAIL(frugal::runtime_error, "prefix_tree::save: cannot rename ", tmp, " to ", path, ": ", ec.message());
    }

    /// Replaces the contents with the index saved at `path`, after validating it: magic,
    /// version, id and handle sizes, length, parent links, duplicate children, positive
    /// sizes, the total against the budget and a checksum. A corrupt file throws
    /// `frugal::runtime_error` and leaves the tree unchanged. Nothing may be pinned; the old
    /// contents are dropped without eviction callbacks (the index is being replaced).
    void load(const std::filesystem::path& path)
        requires(std::is_trivially_copyable_v<ChunkId> && std::is_trivially_copyable_v<Handle>)
    {
        std::ifstream f(path, std::ios::binary);
        if (!f) FRUGAL_FAIL(frugal::runtime_error, "prefix_tree::load: cannot open ", path);
        const std::string in{std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
        auto fail = [&](const auto&... why) { FRUGAL_FAIL(frugal::runtime_error, "prefix_tree::load: ", path, ": ", why...); };
        if (in.size() < header_bytes + 8 || std::memcmp(in.data(), magic, 8) != 0) fail("not a frugal prefix-tree index");
        if (get<std::uint32_t>(in, 8) != format_version) fail("format version ", get<std::uint32_t>(in, 8), " is not ", format_version);
        if (get<std::uint32_t>(in, 12) != sizeof(ChunkId) || get<std::uint32_t>(in, 16) != sizeof(Handle))
            fail("chunk id / handle sizes ", get<std::uint32_t>(in, 12), "/", get<std::uint32_t>(in, 16), " differ from this tree's ",
                 sizeof(ChunkId), "/", sizeof(Handle));
        const auto count = get<std::uint64_t>(in, 20);
        if (count > (in.size() - header_bytes - 8) / record_bytes || header_bytes + count * record_bytes + 8 != in.size())
            fail("length ", in.size(), " does not match ", count, " records");
        if (get<std::uint64_t>(in, in.size() - 8) != fnv1a(std::string_view(in).substr(0, in.size() - 8)))
            fail("checksum mismatch (truncated or modified)");
        // Build aside, then swap in: a failure leaves the tree as it was.
        auto fresh = std::make_unique<store>();
        std::vector<node*> nodes;
        nodes.reserve(count);
        std::size_t total = 0;
        for (std::uint64_t i = 0; i < count; ++i) {
            const std::size_t off = header_bytes + i * record_bytes;
            const auto parent = get<std::uint64_t>(in, off);
            ChunkId id;
            Handle handle;
            std::memcpy(&id, in.data() + off + 8, sizeof(ChunkId));
            std::memcpy(&handle, in.data() + off + 8 + sizeof(ChunkId), sizeof(Handle));
            const auto bytes = get<std::uint64_t>(in, off + 8 + sizeof(ChunkId) + sizeof(Handle));
            const auto cost = get<double>(in, off + 16 + sizeof(ChunkId) + sizeof(Handle));
            const auto frequency = get<std::uint64_t>(in, off + 24 + sizeof(ChunkId) + sizeof(Handle));
            if (parent != no_parent && parent >= i) fail("record ", i, " names parent ", parent, " that is not before it");
            if (bytes == 0 || !(cost >= 0)) fail("record ", i, " has bytes ", bytes, " and cost ", cost);
            node* p = parent == no_parent ? nullptr : nodes[parent];
            if (fresh->find(p, id) != nullptr) fail("record ", i, " duplicates a child id of its parent");
            node* n = fresh->create(p, id, chunk_value<Handle>{handle, static_cast<std::size_t>(bytes), cost});
            n->frequency = frequency;
            nodes.push_back(n);
            total += static_cast<std::size_t>(bytes);
        }
        if (total > budget_) fail("the index holds ", total, " bytes, over the budget of ", budget_);
        FRUGAL_CHECK(pinned_ == 0, "prefix_tree::load: ", pinned_, " chunks are pinned");
        s_.swap(fresh);
        bytes_ = total;
        for (node* n : nodes) {
            n->tick = ++tick_;
            n->priority = Policy::priority(n->frequency, n->tick, n->value.cost, n->value.bytes, clock_);
            maybe_enter_set(*n);
        }
    }

private:
    static constexpr char magic[9] = "FRGPTREE";
    static constexpr std::uint32_t format_version = 1;
    static constexpr std::size_t header_bytes = 28;
    static constexpr std::size_t record_bytes = 32 + sizeof(ChunkId) + sizeof(Handle);
    static constexpr std::uint64_t no_parent = ~std::uint64_t{0};

    template <class T>
    static void put(std::string& s, std::size_t off, T v) noexcept {
        std::memcpy(s.data() + off, &v, sizeof(T));
    }
    template <class T>
    static T get(const std::string& s, std::size_t off) noexcept {
        T v;
        std::memcpy(&v, s.data() + off, sizeof(T));
        return v;
    }

    void touch(node& n) {
        const bool was = n.in_leaf_set;
        if (was) leave_set(n);
        ++n.frequency;
        n.tick = ++tick_;
        n.priority = Policy::priority(n.frequency, n.tick, n.value.cost, n.value.bytes, clock_);
        if (was) maybe_enter_set(n);
    }
    void pin(node& n) {
        if (n.pins++ == 0) ++pinned_;
        if (n.in_leaf_set) leave_set(n);
    }
    void unpin_path(const std::vector<node*>& path) noexcept {
        for (auto it = path.rbegin(); it != path.rend(); ++it) {
            node& n = **it;
            FRUGAL_ASSERT(n.pins > 0);
            if (--n.pins == 0) {
                --pinned_;
                maybe_enter_set(n);
            }
        }
        while (bytes_ > budget_ && evict_one()) {
        }
    }
    void leave_set(node& n) noexcept {
        s_->leaves.erase(s_->leaves.iterator_to(n));
        n.in_leaf_set = false;
    }
    void maybe_enter_set(node& n) noexcept {
        if (n.pins == 0 && n.children == 0 && !n.in_leaf_set) {
            s_->leaves.insert(n);
            n.in_leaf_set = true;
        }
    }

    std::size_t budget_, bytes_ = 0, pinned_ = 0;
    std::uint64_t tick_ = 0, evictions_ = 0;
    double clock_ = 0;
    std::unique_ptr<store> s_;
    eviction_callback on_evict_;
};

}  // namespace frugal::cache
