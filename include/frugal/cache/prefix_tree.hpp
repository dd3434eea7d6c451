#pragma once
/// @file
/// prefix_tree: PerCache's knowledge bank and a serving engine's KV prefix cache, a tree of
/// chunk (or page) sequences whose nodes hold the caller's handles to their tensors, under a
/// byte budget with leaf-only eviction by any `cache_policy`, request locks and namespaces.

#include <algorithm>
#include <bit>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <functional>
#include <limits>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <unordered_map>
#include <utility>
#include <vector>

#include <boost/pool/pool.hpp>

#include "frugal/cache/cache_index.hpp"
#include "frugal/cache/cache_policy.hpp"
#include "frugal/cache/eviction_reason.hpp"
#include "frugal/cache/lfu_policy.hpp"
#include "frugal/cache/page_keys.hpp"
#include "frugal/core/assert.hpp"
#include "frugal/core/atomic_file.hpp"
#include "frugal/core/checked.hpp"
#include "frugal/core/error.hpp"
#include "frugal/core/hash.hpp"
#include "frugal/core/huge_page_allocator.hpp"
#include "frugal/core/memory_budget.hpp"
#include "frugal/core/record_file.hpp"

namespace frugal::cache {

namespace detail {
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
/// A prefix tree node's last access time, kept only for policies that order by it.
template <bool Kept>
struct access_time {};
template <>
struct access_time<true> {
    std::uint64_t last_access = 0;
};
}  // namespace detail


/// What the tree stores for one chunk: the caller's handle to its tensors (a device pointer,
/// a file offset), their size in bytes and the cost of recomputing them (for `gdsf_policy`).
/// @code
/// frugal::cache::chunk_value<std::uint64_t> v{.handle = file_offset, .bytes = kv_bytes, .cost = prefill_ms};
/// @endcode
template <class Handle>
struct chunk_value {
    Handle handle;
    std::size_t bytes;
    double cost = 1.0;
};

/// PerCache's knowledge bank (section 4.1.1) and a serving engine's KV prefix cache: a tree
/// keyed by sequences of chunk ids (or `page_keys`), one node per (prefix, chunk) holding the
/// handle to that chunk's tensors, with a namespace key (model or adapter) separating trees
/// that share ids.
///
/// - `match` finds the longest cached prefix of a sequence and returns it as a request lock
///   (`prefix_match`): the locked path is never evicted until the lock is released.
/// - `insert(lock, ...)` adds the rest of the sequence and extends the lock over it, so the
///   chunks a running request just prefilled stay protected until it finishes (as SGLang's
///   RadixCache locks them); `insert` without a lock releases the path on return.
/// - When the bytes exceed the budget, unpinned leaves are evicted in the order of `Policy`
///   (any `cache_policy`: `lfu_policy`, PerCache's choice and the default; `lru_policy`;
///   `gdsf_policy`, RAGCache's PGDSF with cost = recompute time; `s3fifo_policy`, ...). Only
///   unpinned leaves are in the policy: a node enters it when it becomes one (its pins
///   released, or its last child evicted) and re-enters as the cache core reattaches an
///   unpinned entry; every access along a path counts for each node on it. With `lru_policy`
///   a node re-enters at the place of its last access (creation or match), so leaves are
///   ranked by last access as SGLang's RadixCache ranks them.
/// - A chunk that cannot fit beside the locked bytes is refused before anything is evicted.
/// - `evict(bytes)` frees at least that much where possible and reports what left.
/// - Every chunk that leaves (evicted, cleared, replaced by `load`, or still held when the tree
///   is destroyed) passes through the eviction callback with its reason.
/// - `save`/`load` persist the index crash-safely and validate it on load.
/// @code
/// frugal::cache::prefix_tree<std::uint32_t, std::uint64_t> tree(frugal::memory_budget::mib(512));
/// auto lock = tree.match(chunks);              // lock.length() chunks reusable, locked
/// std::vector<frugal::cache::chunk_value<std::uint64_t>> v = prefill(chunks, lock.length());
/// tree.insert(lock, chunks, v);                // the new chunks join the request's lock
/// decode(...);
/// lock.release();                              // the request finished: evictable again
/// @endcode
template <class ChunkId, class Handle, class Policy = lfu_policy, class Hash = std::hash<ChunkId>>
    requires cache_policy<Policy>
class prefix_tree {
    struct node;
    // A node is found by (parent, chunk id) in one hash index over the whole tree: no map per
    // node, and unlinking an evicted leaf from its parent is one store. Roots carry the
    // namespace key instead of a parent.
    struct tree_key {
        node* parent;
        ChunkId id;
        std::uint64_t ns;
        friend bool operator==(const tree_key&, const tree_key&) = default;
    };
    // With a policy whose victim order is the order of last access (LRU), nodes keep their
    // access time and a leaf that becomes evictable again (its last child evicted, its lock
    // released) takes its place by that time, as SGLang's RadixCache ranks leaves; other
    // policies reattach it as their rules say.
    static constexpr bool orders_by_access = requires { requires Policy::access_ordered; };
    struct node : Policy::node_data, detail::access_time<orders_by_access> {
        node(tree_key k, const chunk_value<Handle>& v, std::size_t h)
            : key(std::move(k)), handle(v.handle), chunk_cost(v.cost), weight(v.bytes), hash(h) {}
        tree_key key;
        Handle handle;
        double chunk_cost;
        std::size_t weight;  // bytes (the policies' weight)
        std::size_t hash;
        slot_index::hook index_hook;
        // pins and children apart: GCC merges `pins == 0 && children == 0` into one 8-byte
        // load, which right after an eviction's 4-byte `--children` cannot be forwarded from
        // the store and waits for every older store to commit, the index's tombstone (a cache
        // miss in a large tree) among them.
        std::uint32_t pins = 0, depth = 0, children = 0;
        bool in_policy = false;
        bool admitted = false;  // the policy has seen it (admit)
    };
    using index_type = slot_index::type<node, void, std::equal_to<tree_key>>;
    using policy_state = typename Policy::template state<node>;
    static_assert(cache_policy<Policy, node>);
    static_assert(alignof(node) <= __STDCPP_DEFAULT_NEW_ALIGNMENT__, "prefix_tree: over-aligned chunk id or handle");

    // Nodes and their index. Nodes live in a Boost.Pool: contiguous blocks, a freed node is
    // the next one allocated (an eviction followed by an insert reuses the slot it just
    // touched), and no malloc/free per chunk.
    struct store {
        boost::pool<detail::huge_page_pool_blocks> pool{sizeof(node)};
        index_type index;
        store() = default;
        store(const store&) = delete;
        store& operator=(const store&) = delete;
        ~store() {
            std::vector<node*> all;
            all.reserve(index.size());
            index.for_each([&](node& n) { all.push_back(&n); });
            for (node* n : all) n->~node();
        }
        node* find(node* parent, const ChunkId& id, std::uint64_t ns) const {
            return index.find(tree_key{parent, id, ns}, hash_of(parent, id, ns));
        }
        node* create(node* parent, const ChunkId& id, std::uint64_t ns, const chunk_value<Handle>& v) {
            void* p = (pool.malloc)();
            if (p == nullptr) throw std::bad_alloc();
            node* n = nullptr;
            try {
                n = ::new (p) node(tree_key{parent, id, ns}, v, hash_of(parent, id, ns));
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
        static std::size_t hash_of(const node* parent, const ChunkId& id, std::uint64_t ns) {
            const std::uint64_t up = parent == nullptr ? hash_combine(ns, 0x9E3779B97F4A7C15ull)
                                                       : hash_mix(reinterpret_cast<std::uintptr_t>(parent));
            return static_cast<std::size_t>(hash_mix(Hash{}(id) ^ up));
        }
    };

public:
    /// Called for each chunk that leaves the tree, with its reason (`capacity`: evicted by the
    /// policy; `cleared`: by `clear` or replaced by `load`; `destroyed`: the tree went away):
    /// free its tensors or demote them to a lower tier.
    using eviction_callback = std::function<void(const ChunkId&, Handle&, std::size_t bytes, eviction_reason)>;

    /// A request lock on a cached prefix, from `match` (and extended by `insert`). Move-only;
    /// releases its pins on destruction or `release()`. Release every lock before the tree
    /// is destroyed.
    class prefix_match {
    public:
        prefix_match() = default;
        prefix_match(prefix_match&& o) noexcept
            : tree_(std::exchange(o.tree_, nullptr)), maker_(o.maker_), path_(std::move(o.path_)), ns_(o.ns_) {}
        prefix_match& operator=(prefix_match&& o) noexcept {
            if (this != &o) {
                release();
                tree_ = std::exchange(o.tree_, nullptr);
                maker_ = o.maker_;
                path_ = std::move(o.path_);
                ns_ = o.ns_;
            }
            return *this;
        }
        ~prefix_match() { release(); }
        /// Number of leading chunks that are cached and locked.
        [[nodiscard]] std::size_t length() const noexcept { return path_.size(); }
        /// Handle of the i-th locked chunk (i < length()).
        [[nodiscard]] const Handle& handle(std::size_t i) const {
            FRUGAL_CHECK_AS(frugal::out_of_range, i < path_.size(), "prefix_match: chunk ", i, " >= length ", path_.size());
            return path_[i]->handle;
        }
        /// The namespace key the lock was taken in.
        [[nodiscard]] std::uint64_t namespace_key() const noexcept { return ns_; }
        /// Drops the pins; the chunks become evictable again (nothing is evicted or reported
        /// here). The lock still belongs to the tree that made it: `insert` takes it back only there.
        void release() noexcept {
            if (tree_ != nullptr) tree_->unpin_path(path_);
            tree_ = nullptr;
            path_.clear();
        }

    private:
        friend class prefix_tree;
        prefix_tree* tree_ = nullptr;   // the tree whose chunks it pins (null when released)
        prefix_tree* maker_ = nullptr;  // the tree that made or first took it (null: never used)
        std::vector<node*> path_;
        std::uint64_t ns_ = 0;
    };

    /// Result of `insert`: positions [0, existing) were cached already, [existing, cached)
    /// were added (their handles now belong to the tree), [cached, n) were refused (they
    /// cannot fit in the budget beside the locked chunks) and stay the caller's.
    struct insert_result {
        std::size_t existing = 0, cached = 0;
    };

    /// What `evict(bytes)` freed.
    struct evict_result {
        std::size_t bytes = 0, chunks = 0;
    };

    explicit prefix_tree(memory_budget budget)
        : budget_(budget.bytes()), s_(std::make_unique<store>()), policy_(std::make_unique<policy_state>(budget_)) {}
    prefix_tree(const prefix_tree&) = delete;
    prefix_tree& operator=(const prefix_tree&) = delete;
    /// Passes every chunk still held through the eviction callback (reason `destroyed`),
    /// locked ones included. The callback must not throw here.
    ~prefix_tree() {
        if (!on_evict_) return;
        s_->index.for_each([&](node& n) { on_evict_(n.key.id, n.handle, n.weight, eviction_reason::destroyed); });
    }

    /// Sets the eviction callback: `f(id, handle, bytes, reason)`, or `f(id, handle, bytes)`
    /// when the reason does not matter.
    template <class F>
    void set_eviction_callback(F f) {
        if constexpr (std::is_invocable_v<F&, const ChunkId&, Handle&, std::size_t, eviction_reason>) {
            on_evict_ = std::move(f);
        } else {
            static_assert(std::is_invocable_v<F&, const ChunkId&, Handle&, std::size_t>,
                          "prefix_tree: the callback takes (id, handle, bytes[, reason])");
            on_evict_ = [g = std::move(f)](const ChunkId& id, Handle& h, std::size_t b, eviction_reason) mutable { g(id, h, b); };
        }
    }

    /// The longest cached prefix of `sequence` in namespace `ns`, locked (never evicted) until
    /// released. Each matched chunk counts one access.
    [[nodiscard]] prefix_match match(std::span<const ChunkId> sequence, std::uint64_t ns = 0) {
        prefix_match m;
        m.tree_ = m.maker_ = this;
        m.ns_ = ns;
        node* parent = nullptr;
        for (const ChunkId& id : sequence) {
            node* n = s_->find(parent, id, ns);
            if (n == nullptr) break;
            access(*n);
            pin(*n);
            m.path_.push_back(n);
            parent = n;
        }
        return m;
    }

    /// Length of the longest cached prefix of `sequence` in namespace `ns`, without locking or
    /// counting an access.
    [[nodiscard]] std::size_t cached_length(std::span<const ChunkId> sequence, std::uint64_t ns = 0) const {
        node* parent = nullptr;
        std::size_t n = 0;
        for (; n < sequence.size(); ++n) {
            parent = s_->find(parent, sequence[n], ns);
            if (parent == nullptr) break;
        }
        return n;
    }

    /// Adds `sequence` with `values[i]` for chunk i (values.size() == sequence.size()) under
    /// the request lock `lock` and extends the lock over every chunk of the result: the ones
    /// that were cached and the ones added, which stay protected until `lock.release()`.
    /// `lock` is empty or from `match` on a prefix of `sequence` (in its namespace). Values of
    /// chunks already cached are ignored. Evicts unpinned leaves until each new chunk fits;
    /// stops at the first chunk that cannot fit beside the locked ones (refused before
    /// anything is evicted for it).
    insert_result insert(prefix_match& lock, std::span<const ChunkId> sequence, std::span<const chunk_value<Handle>> values) {
        FRUGAL_CHECK(values.size() == sequence.size(), "prefix_tree::insert: ", values.size(), " values for a sequence of ",
                     sequence.size(), " chunks");
        for (const auto& v : values)
            FRUGAL_CHECK(v.bytes > 0 && v.cost >= 0 && v.cost <= std::numeric_limits<double>::max(),
                         "prefix_tree::insert: chunk bytes ", v.bytes, " and cost ", v.cost,
                         " must be positive and finite non-negative");
        // A lock (even a released one) stays with the tree that made it, so whoever keeps that
        // tree alive for the lock (the Python binding does) keeps the right one alive.
        FRUGAL_CHECK(lock.maker_ == nullptr || lock.maker_ == this, "prefix_tree::insert: the lock belongs to another tree");
        FRUGAL_CHECK(lock.length() <= sequence.size(), "prefix_tree::insert: a lock of ", lock.length(),
                     " chunks on a sequence of ", sequence.size());
        for (std::size_t i = 0; i < lock.length(); ++i)
            FRUGAL_CHECK(lock.path_[i]->key.id == sequence[i], "prefix_tree::insert: the lock does not cover a prefix of the "
                                                               "sequence (chunk ", i, " differs)");
        lock.tree_ = lock.maker_ = this;
        const std::uint64_t ns = lock.ns_;
        insert_result r;
        r.existing = lock.length();
        node* parent = lock.path_.empty() ? nullptr : lock.path_.back();
        for (; r.existing < sequence.size(); ++r.existing) {
            node* n = s_->find(parent, sequence[r.existing], ns);
            if (n == nullptr) break;
            pin(*n);
            lock.path_.push_back(n);
            parent = n;
        }
        r.cached = r.existing;
        for (; r.cached < sequence.size(); ++r.cached) {
            const auto& v = values[r.cached];
            if (!fits(pinned_bytes_, v.bytes)) break;  // refused before any eviction
            const std::size_t h = store::hash_of(parent, sequence[r.cached], ns);
            if constexpr (expects_newcomers<policy_state>) policy_->expect(h, v.bytes);
            while (!fits(bytes_, v.bytes) && evict_one()) {
            }
            FRUGAL_ASSERT(fits(bytes_, v.bytes));
            node* n = s_->create(parent, sequence[r.cached], ns, v);
            stamp(*n);
            bytes_ += v.bytes;
            if constexpr (expects_newcomers<policy_state>) {
                // Right after expect(), as the policy's ghost bookkeeping needs.
                policy_->admit(*n, v.cost);
                n->admitted = n->in_policy = true;
            }
            pin(*n);
            lock.path_.push_back(n);
            parent = n;
        }
        return r;
    }

    /// `insert` without a request lock: the path is released on return (it may be evicted by
    /// the next insertion).
    insert_result insert(std::span<const ChunkId> sequence, std::span<const chunk_value<Handle>> values, std::uint64_t ns = 0) {
        prefix_match lock;
        lock.ns_ = ns;
        return insert(lock, sequence, values);
    }

    /// Evicts the policy's first unpinned leaf; false when every leaf is pinned (or none).
    bool evict_one() { return evict_victim(eviction_reason::capacity) > 0; }

    /// Evicts unpinned leaves until at least `bytes` were freed or none is left; reports what
    /// left (each chunk also goes through the callback).
    evict_result evict(std::size_t bytes) {
        evict_result r;
        while (r.bytes < bytes) {
            const std::size_t freed = evict_victim(eviction_reason::capacity);
            if (freed == 0) break;
            r.bytes += freed;
            ++r.chunks;
        }
        return r;
    }

    /// Removes every unlocked chunk (reason `cleared`); locked paths stay.
    void clear() {
        while (evict_victim(eviction_reason::cleared) > 0) {
        }
    }

    /// Changes the budget, evicting unpinned leaves down to it where possible.
    void set_budget(memory_budget budget) {
        budget_ = budget.bytes();
        policy_->set_capacity(budget_);
        while (bytes_ > budget_ && evict_one()) {
        }
    }

    [[nodiscard]] std::size_t bytes() const noexcept { return bytes_; }
    [[nodiscard]] std::size_t budget() const noexcept { return budget_; }
    /// Bytes of the locked chunks (what no eviction can free).
    [[nodiscard]] std::size_t locked_bytes() const noexcept { return pinned_bytes_; }
    /// Number of cached chunks (tree nodes).
    [[nodiscard]] std::size_t size() const noexcept { return s_->index.size(); }
    [[nodiscard]] std::uint64_t evictions() const noexcept { return evictions_; }

    /// Writes the index (every chunk: its parent, namespace, id, handle, bytes, cost and, for
    /// policies that count them, its frequency) to `path` with `write_file_atomically` (a
    /// crash leaves the old file or the new one). Needs trivially copyable ids and handles.
    void save(const std::filesystem::path& path) const
        requires(std::is_trivially_copyable_v<ChunkId> && std::is_trivially_copyable_v<Handle>)
    {
        record_file_writer out(file_format);
        out.append(static_cast<std::uint32_t>(sizeof(ChunkId)));
        out.append(static_cast<std::uint32_t>(sizeof(Handle)));
        out.append(static_cast<std::uint64_t>(size()));
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
            out.append(parent);
            out.append(n->key.ns);
            out.append(n->key.id);
            out.append(n->handle);
            out.append(static_cast<std::uint64_t>(n->weight));
            out.append(n->chunk_cost);
            out.append(frequency_of(*n));
        }
        std::move(out).save(path);
    }

    /// Replaces the contents with the index saved at `path`, after validating it: magic,
    /// version, id and handle sizes, length, parent links, duplicate children, positive
    /// sizes, finite costs, the total against the budget and a checksum. A corrupt file throws
    /// `frugal::runtime_error` and leaves the tree unchanged. Nothing may be locked; the old
    /// contents leave through the eviction callback (reason `cleared`).
    void load(const std::filesystem::path& path)
        requires(std::is_trivially_copyable_v<ChunkId> && std::is_trivially_copyable_v<Handle>)
    {
        FRUGAL_CHECK(pinned_ == 0, "prefix_tree::load: ", pinned_, " chunks are locked");
        const std::string bytes = read_whole_file(path, "prefix_tree::load");
        const record_file_reader in(std::as_bytes(std::span(bytes)), file_format, "prefix_tree::load", path);
        auto fail = [&](const auto&... why) { in.fail(why...); };
        std::size_t at = 0;
        const auto id_bytes = in.read<std::uint32_t>(at, "the chunk id size");
        const auto handle_bytes = in.read<std::uint32_t>(at, "the handle size");
        const auto count = in.read<std::uint64_t>(at, "the record count");
        if (id_bytes != sizeof(ChunkId) || handle_bytes != sizeof(Handle))
            fail("holds chunk ids / handles of ", id_bytes, "/", handle_bytes, " bytes, this tree's are ", sizeof(ChunkId),
                 "/", sizeof(Handle));
        const std::size_t records = in.body().size() - at;
        if (count > records / record_bytes || count * record_bytes != records)
            fail("has ", records, " bytes of records, not ", count, " records of ", record_bytes);
        in.check_checksum();
        // Build aside, then swap in: a failure leaves the tree as it was.
        auto fresh = std::make_unique<store>();
        std::vector<node*> nodes;
        std::vector<std::uint64_t> frequencies;
        nodes.reserve(count);
        frequencies.reserve(count);
        std::size_t total = 0;
        for (std::uint64_t i = 0; i < count; ++i) {
            const auto parent = in.read<std::uint64_t>(at, "a parent");
            const auto ns = in.read<std::uint64_t>(at, "a namespace");
            const auto id = in.read<ChunkId>(at, "a chunk id");
            const auto handle = in.read<Handle>(at, "a handle");
            const auto chunk_bytes = in.read<std::uint64_t>(at, "a size");
            const auto cost = in.read<double>(at, "a cost");
            const auto frequency = in.read<std::uint64_t>(at, "a frequency");
            if (parent != no_parent && parent >= i) fail("record ", i, " names parent ", parent, " that is not before it");
            if (parent != no_parent && ns != nodes[parent]->key.ns)
                fail("record ", i, " has namespace key ", ns, ", its parent ", nodes[parent]->key.ns);
            if (chunk_bytes == 0 || chunk_bytes > std::numeric_limits<std::size_t>::max() || !(cost >= 0) ||
                cost > std::numeric_limits<double>::max())
                fail("record ", i, " has bytes ", chunk_bytes, " and cost ", cost);
            if (chunk_bytes > budget_ - std::min(budget_, total))
                fail("the index holds more than ", budget_, " bytes, the budget (record ", i, ")");
            node* p = parent == no_parent ? nullptr : nodes[parent];
            if (fresh->find(p, id, ns) != nullptr) fail("record ", i, " duplicates a child id of its parent");
            node* n = fresh->create(p, id, ns, chunk_value<Handle>{handle, static_cast<std::size_t>(chunk_bytes), cost});
            stamp(*n);  // the file keeps no times: records in file order
            nodes.push_back(n);
            // A count no run reaches; bounded so later accesses cannot wrap it.
            if (frequency > max_frequency) fail("record ", i, " has frequency ", frequency, " above ", max_frequency);
            frequencies.push_back(frequency);
            total += static_cast<std::size_t>(chunk_bytes);
        }
        clear();
        FRUGAL_ASSERT(size() == 0);
        s_.swap(fresh);
        policy_ = std::make_unique<policy_state>(budget_);
        bytes_ = total;
        for (std::size_t i = 0; i < nodes.size(); ++i) {
            node& n = *nodes[i];
            policy_->admit(n, n.chunk_cost);
            policy_->remove(n);
            if constexpr (requires { n.frequency; }) n.frequency = std::max<std::uint64_t>(1, frequencies[i]);
            n.admitted = true;
            n.in_policy = false;
            maybe_enter_policy(n);
        }
    }

private:
    static constexpr record_file_format file_format{{'F', 'R', 'G', 'P', 'T', 'R', 'E', 'E'}, 2, "frugal prefix-tree index"};
    static constexpr std::size_t record_bytes = 40 + sizeof(ChunkId) + sizeof(Handle);
    static constexpr std::uint64_t no_parent = ~std::uint64_t{0};
    static constexpr std::uint64_t max_frequency = std::uint64_t{1} << 62;

    static std::uint64_t frequency_of(const node& n) noexcept {
        if constexpr (requires { n.frequency; }) {
            return n.frequency;
        } else {
            return 1;
        }
    }
    // Whether `extra` more bytes fit beside `held` (no overflow for any sizes).
    [[nodiscard]] bool fits(std::size_t held, std::size_t extra) const noexcept {
        return extra <= budget_ && held <= budget_ - extra;
    }

    // An access to `n`: the policy records it whether or not `n` is an evictable leaf now.
    void access(node& n) {
        stamp(n);
        if (n.in_policy) {
            policy_->touch(n);
            return;
        }
        enter_policy(n);
        policy_->touch(n);
        policy_->remove(n);
        n.in_policy = false;
    }
    // A chunk added while locked is admitted when it first enters the policy (policies without
    // ghosts; one set operation instead of three per new chunk).
    void enter_policy(node& n) {
        if constexpr (orders_by_access) {
            if (!n.admitted) {
                policy_->admit(n, n.chunk_cost);
                policy_->remove(n);
                n.admitted = true;
            }
            policy_->reattach_ordered(n, [](const node& a, const node& b) { return a.last_access < b.last_access; });
        } else if (n.admitted) {
            policy_->reattach(n);
        } else {
            policy_->admit(n, n.chunk_cost);
            n.admitted = true;
        }
        n.in_policy = true;
    }
    // A new access time for `n` (its creation or an access), with policies that order by it.
    void stamp([[maybe_unused]] node& n) noexcept {
        if constexpr (orders_by_access) n.last_access = ++clock_;
    }
    void pin(node& n) {
        FRUGAL_CHECK(n.pins < std::numeric_limits<std::uint32_t>::max(), "prefix_tree: a chunk already has ", n.pins,
                     " locks, the most it can hold");
        if (n.pins++ == 0) {
            ++pinned_;
            pinned_bytes_ += n.weight;
        }
        if (n.in_policy) {
            policy_->remove(n);
            n.in_policy = false;
        }
    }
    void unpin_path(const std::vector<node*>& path) noexcept {
        for (auto it = path.rbegin(); it != path.rend(); ++it) {
            node& n = **it;
            FRUGAL_ASSERT(n.pins > 0);
            if (--n.pins == 0) {
                --pinned_;
                pinned_bytes_ -= n.weight;
                maybe_enter_policy(n);
            }
        }
        // No eviction here (SGLang's lock release does none either): a release runs in
        // destructors, where an eviction callback that throws would end the process. A tree
        // left above a budget lowered under locks evicts when it next adds a chunk, or at
        // evict / set_budget.
    }
    // An unpinned leaf is one the policy may evict.
    void maybe_enter_policy(node& n) {
        if (n.pins == 0 && n.children == 0 && !n.in_policy) enter_policy(n);
    }
    // Evicts the policy's victim; returns its bytes (0: nothing evictable).
    std::size_t evict_victim(eviction_reason why) {
        node* victim = policy_->victim();
        if (victim == nullptr) return 0;
        if (why == eviction_reason::capacity) {
            policy_->evict(*victim);
        } else {
            policy_->remove(*victim);
        }
        victim->in_policy = false;
        if (on_evict_) on_evict_(victim->key.id, victim->handle, victim->weight, why);
        bytes_ -= victim->weight;
        ++evictions_;
        const std::size_t freed = victim->weight;
        node* parent = victim->key.parent;
        s_->destroy(victim);
        if (parent != nullptr) maybe_enter_policy(*parent);
        return freed;
    }

    std::size_t budget_, bytes_ = 0, pinned_ = 0, pinned_bytes_ = 0;
    std::uint64_t evictions_ = 0, clock_ = 0;
    std::unique_ptr<store> s_;
    std::unique_ptr<policy_state> policy_;
    eviction_callback on_evict_;
};

}  // namespace frugal::cache
