#pragma once
/// @file
/// tiered_prefix_tree: a prefix tree of KV pages in a process's memory over a cache tier (a
/// local disk, a Redis server other engine processes share): what memory drops goes to the
/// tier, and a prefix memory misses is loaded from the tier into pages the engine provides.

#include <algorithm>
#include <atomic>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <unordered_map>
#include <utility>
#include <vector>

#include "frugal/cache/cache_policy.hpp"
#include "frugal/cache/lru_policy.hpp"
#include "frugal/cache/page_keys.hpp"
#include "frugal/cache/prefix_tree.hpp"
#include "frugal/cache/tier.hpp"
#include "frugal/core/error.hpp"
#include "frugal/core/memory_budget.hpp"

namespace frugal::cache {

/// The engine's pages as a `tiered_prefix_tree` uses them: `allocate()` a free page (or
/// nullopt when none is free), `release(page)` one the tree let go, `page_bytes()` the size
/// of every page and `bytes(page)` its host memory (what the tier reads into and writes
/// from). A GPU engine passes its host-memory pages (SGLang HiCache's host tier) and moves
/// them to and from the device itself.
/// @code
/// struct host_pages {
///     using handle_type = std::uint32_t;
///     std::optional<std::uint32_t> allocate();
///     void release(std::uint32_t page);
///     std::size_t page_bytes() const;
///     std::span<std::byte> bytes(std::uint32_t page);
/// };
/// static_assert(frugal::cache::page_pool<host_pages>);
/// @endcode
template <class P>
concept page_pool = requires(P& p, const typename P::handle_type& h) {
    { p.allocate() } -> std::same_as<std::optional<typename P::handle_type>>;
    p.release(h);
    { p.page_bytes() } -> std::convertible_to<std::size_t>;
    { p.bytes(h) } -> std::convertible_to<std::span<std::byte>>;
};

/// When a page the engine computed reaches the tier: at once (`through`: other processes see
/// it as soon as it is inserted) or when memory drops it (`back`: fewer writes, a page
/// memory keeps is not shared until it leaves; `flush` writes them all).
enum class write_policy { through, back };

/// Counters of a `tiered_prefix_tree` since it was made.
struct tiered_stats {
    std::uint64_t pages_from_memory = 0;  ///< pages `match` found in memory
    std::uint64_t pages_from_tier = 0;    ///< pages `match` loaded from the tier
    std::uint64_t pages_written = 0;      ///< pages handed to the tier's put
    std::uint64_t write_failures = 0;     ///< puts the tier's storage failed (the page stays unshared)
};

/// A KV prefix cache in two levels: a `prefix_tree` of the engine's pages in memory (under a
/// byte budget, evicted by `Policy`, with request locks) over a `kv_tier` shared with other
/// processes or kept across restarts. Keys are the chained chunk keys of one
/// `tier_namespace` (`keys(tokens)`), so engines of another model, dtype, layout or page
/// size never read these pages.
///
/// - `match(keys)` locks the longest prefix memory holds, then asks the tier for the run of
///   pages that follows it (at most `max_pages_per_match`), loads it into pages taken from
///   the pool and adds them to the tree under the same lock: the result's `length()` pages
///   are ready, `from_tier` of them just loaded.
/// - `insert(lock, keys, pages)` adds the pages the engine computed for the chunks after the
///   lock, as `prefix_tree::insert` does; with `write_policy::through` they are written to
///   the tier at once, with `back` when memory evicts them (or at `flush`, or when the tree
///   is destroyed).
/// - Every page the tree lets go returns to the pool.
/// - `prefetch(keys)` prepares a request's load ahead of its `match` (when it is queued):
///   the engine runs the returned ticket's `load(tier)` on a thread of its own (with a tier
///   object of its own) while it computes, and `match(std::move(ticket))` takes the pages.
///
/// A tier that cannot be reached or fails a write costs hits, never correctness: the tiers
/// read a damaged or foreign entry as a miss. The tier and the pool must outlive the tree;
/// one thread at a time (an engine's scheduler thread).
/// @code
/// frugal::cache::tiered_prefix_tree<frugal::cache::redis_tier, host_pages> cache(
///     frugal::memory_budget::gib(8), tier, pages, ns);
/// const auto keys = cache.keys<int>(prompt);
/// auto hit = cache.match(keys);                  // hit.lock.length() pages ready
/// auto fresh = prefill(prompt, hit.lock.length());  // pages for keys[hit.lock.length()..]
/// cache.insert(hit.lock, keys, fresh);
/// decode(...);
/// hit.lock.release();
/// @endcode
template <kv_tier Tier, page_pool Pool, class Policy = lru_policy>
    requires cache_policy<Policy>
class tiered_prefix_tree {
public:
    using handle_type = typename Pool::handle_type;
    using tree_type = prefix_tree<tier_key, handle_type, Policy, tier_key_hash>;
    using prefix_match = typename tree_type::prefix_match;
    using insert_result = typename tree_type::insert_result;

    /// What `match` found: the lock over every ready page, and how many came from the tier
    /// (the last `from_tier` of the lock's pages).
    struct match_result {
        prefix_match lock;
        std::size_t from_tier = 0;
    };

    /// How the tree uses its tier.
    struct options {
        write_policy write = write_policy::through;
        std::size_t max_pages_per_match = 128;  ///< tier pages one `match` loads at most (SGLang HiCache's batch)
    };

    /// A tree of at most `budget` bytes of pages in memory over `tier`, taking pages from
    /// `pool`, in namespace `ns`.
    tiered_prefix_tree(memory_budget budget, Tier& tier, Pool& pool, tier_namespace ns, options opt = {})
        : tier_(tier), pool_(pool), ns_(std::move(ns)), options_(opt), page_bytes_(pool.page_bytes()), tree_(budget) {
        FRUGAL_CHECK(ns_.page_tokens > 0, "tiered_prefix_tree: the namespace's page_tokens must be > 0");
        FRUGAL_CHECK(page_bytes_ > 0, "tiered_prefix_tree: the pool's pages have 0 bytes");
        FRUGAL_CHECK(options_.max_pages_per_match > 0, "tiered_prefix_tree: max_pages_per_match must be > 0");
        tree_.set_eviction_callback([this](const tier_key& key, handle_type& page, std::size_t, eviction_reason) {
            if (const auto dirty = unwritten_.find(key); dirty != unwritten_.end()) {
                write({&key, 1}, {&page, 1});
                unwritten_.erase(dirty);
            }
            pool_.release(page);
        });
    }
    tiered_prefix_tree(const tiered_prefix_tree&) = delete;
    tiered_prefix_tree& operator=(const tiered_prefix_tree&) = delete;
    /// Writes back what the tier lacks (`write_policy::back`) and returns every page to the
    /// pool. Release every lock first.
    ~tiered_prefix_tree() = default;

    /// The chunk keys of `tokens` in this tree's namespace (one per whole page).
    template <std::integral Token>
    [[nodiscard]] std::vector<tier_key> keys(std::span<const Token> tokens) const {
        return chunk_keys(ns_, tokens);
    }

    /// Locks the longest prefix of `keys` in memory, then loads from the tier the run of pages
    /// that follows it (as far as the pool has free pages and the budget has room beside the
    /// locked pages) and adds them to the lock.
    [[nodiscard]] match_result match(std::span<const tier_key> keys) {
        match_result r{tree_.match(keys), 0};
        stats_.pages_from_memory += r.lock.length();
        const auto rest = keys.subspan(r.lock.length(), std::min(keys.size() - r.lock.length(), options_.max_pages_per_match));
        if (rest.empty()) return r;
        const std::size_t in_tier = tier_.exists_prefix(rest);
        if (in_tier == 0) return r;
        const std::vector<handle_type> pages = take_pages(in_tier);
        r.from_tier = adopt(r.lock, keys, pages, load_or_none(tier_, rest.first(pages.size()), buffers_of(pages)));
        return r;
    }

    /// A load from the tier started ahead of a request's `match` (`prefetch`), run by
    /// `load(reader)` on any thread while the engine goes on (HiCache's prefetch); the tree's
    /// `match(std::move(ticket))` takes its pages. Move-only. Consume it with `match` or drop
    /// it on the tree's thread, before the tree goes: a ticket dropped unconsumed waits for a
    /// load in flight, then returns its pages to the pool.
    class prefetch_ticket {
    public:
        prefetch_ticket(prefetch_ticket&&) noexcept = default;
        prefetch_ticket& operator=(prefetch_ticket&& o) noexcept {
            if (this != &o) {
                abandon();
                tree_ = o.tree_;
                s_ = std::move(o.s_);
            }
            return *this;
        }
        ~prefetch_ticket() { abandon(); }

        /// Loads the ticket's pages from `reader`, a tier object on the same storage that no
        /// other thread uses meanwhile (a tier serves one thread at a time: give the loading
        /// thread its own). Any thread, at most once; a call after the load started (here or
        /// by `match`) returns at once.
        void load(Tier& reader) {
            if (!s_ || !claim()) return;
            s_->loaded = load_or_none(reader, s_->keys, s_->buffers);
            finish();
        }
        /// Pages the ticket will load at most (0: memory held everything, or no page was free).
        [[nodiscard]] std::size_t pages() const noexcept { return s_ ? s_->pages.size() : 0; }
        /// Drops the ticket now, as its destructor would (after a load in flight, its pages go
        /// back to the pool and its lock is released); empty after. On the tree's thread.
        /// @code
        /// auto ticket = cache.prefetch(keys);
        /// if (request_cancelled) ticket.release();
        /// @endcode
        void release() noexcept { abandon(); }

    private:
        friend class tiered_prefix_tree;
        enum : int { waiting, loading, done };
        struct state {
            prefix_match lock;              // the memory part, pinned until consumed
            std::vector<tier_key> all;      // every key of the request
            std::vector<tier_key> keys;     // the keys after the lock, as many as pages
            std::vector<handle_type> pages;
            std::vector<std::span<std::byte>> buffers;  // the pages' bytes: all the loading thread touches
            std::size_t loaded = 0;
            bool consumed = false;  // by match (the tree's thread only)
            std::atomic<int> phase{waiting};
        };
        prefetch_ticket(tiered_prefix_tree* tree, std::unique_ptr<state> s) : tree_(tree), s_(std::move(s)) {}
        bool claim() noexcept {
            int expected = waiting;
            return s_->phase.compare_exchange_strong(expected, loading, std::memory_order_acquire);
        }
        void finish() noexcept {
            s_->phase.store(done, std::memory_order_release);
            s_->phase.notify_all();
        }
        // Waits for a load in flight (or claims the load so none starts).
        void settle() noexcept {
            if (claim()) return finish();
            for (int p = s_->phase.load(std::memory_order_acquire); p != done; p = s_->phase.load(std::memory_order_acquire))
                s_->phase.wait(p, std::memory_order_acquire);
        }
        void abandon() noexcept {
            if (!s_) return;
            settle();
            for (const handle_type& page : s_->pages) tree_->pool_.release(page);
            s_.reset();
        }
        tiered_prefix_tree* tree_ = nullptr;
        std::unique_ptr<state> s_;
    };

    /// Prepares a load of `keys`' pages that memory lacks (at most `max_pages_per_match`):
    /// locks the prefix memory holds (it stays until the ticket is consumed), makes room in
    /// the budget and takes the pages from the pool now; the ticket's `load` runs the I/O on
    /// the caller's thread of choice.
    /// @code
    /// auto ticket = cache.prefetch(keys);              // when the request is queued
    /// io_pool.submit([&] { ticket.load(io_tier); });   // the engine's I/O thread, its own tier object
    /// ...
    /// auto hit = cache.match(std::move(ticket));      // when it is scheduled: waits for the load
    /// @endcode
    [[nodiscard]] prefetch_ticket prefetch(std::span<const tier_key> keys) {
        auto s = std::make_unique<typename prefetch_ticket::state>();
        s->lock = tree_.match(keys);
        s->all.assign(keys.begin(), keys.end());
        const auto rest = keys.subspan(s->lock.length(), std::min(keys.size() - s->lock.length(), options_.max_pages_per_match));
        s->pages = take_pages(rest.size());
        s->buffers = buffers_of(s->pages);
        s->keys.assign(rest.begin(), rest.begin() + static_cast<std::ptrdiff_t>(s->pages.size()));
        return prefetch_ticket(this, std::move(s));
    }

    /// The request of `ticket` (from this tree's `prefetch`): waits for its load (or runs it
    /// here, on the tree's tier, if no thread started it) and adds the loaded pages to the
    /// lock it holds (a page another request added meanwhile is kept, the loaded copy goes
    /// back to the pool). The ticket is consumed: `pages()` is 0 after.
    [[nodiscard]] match_result match(prefetch_ticket&& ticket) {
        FRUGAL_CHECK(ticket.s_ && ticket.tree_ == this, "tiered_prefix_tree::match: the ticket is empty or from another tree");
        FRUGAL_CHECK(!ticket.s_->consumed, "tiered_prefix_tree::match: the ticket was consumed by an earlier match");
        if (ticket.claim()) {
            ticket.s_->loaded = load_or_none(tier_, ticket.s_->keys, ticket.s_->buffers);
            ticket.finish();
        } else {
            ticket.settle();
        }
        // The state stays in the ticket (a thread that lost the race to load it may still read
        // the ticket); only its contents are taken.
        auto& s = *ticket.s_;
        s.consumed = true;
        match_result r{std::move(s.lock), 0};
        stats_.pages_from_memory += r.lock.length();
        const std::vector<handle_type> pages = std::move(s.pages);
        s.pages.clear();
        r.from_tier = adopt(r.lock, s.all, pages, s.loaded);
        return r;
    }

    /// Adds `pages[i]`, computed by the engine for chunk `keys[lock.length() + i]`, under the
    /// request lock `lock` (from `match`), as `prefix_tree::insert`: positions of `keys`
    /// [existing, cached) were added (those pages now belong to the tree); the pages of
    /// chunks cached meanwhile ([lock's length, existing)) and of chunks refused for the
    /// budget ([cached, n)) stay the caller's.
    insert_result insert(prefix_match& lock, std::span<const tier_key> keys, std::span<const handle_type> pages) {
        FRUGAL_CHECK(lock.length() <= keys.size() && pages.size() == keys.size() - lock.length(),
                     "tiered_prefix_tree::insert: ", pages.size(), " pages for ", keys.size(), " keys after a lock of ",
                     lock.length());
        return insert_pages(lock, keys, pages, /*from_tier=*/false);
    }

    /// Writes every page memory holds that the tier lacks (`write_policy::back`); returns
    /// how many were written.
    std::size_t flush() {
        std::vector<tier_key> keys;
        std::vector<handle_type> pages;
        keys.reserve(unwritten_.size());
        pages.reserve(unwritten_.size());
        for (const auto& [key, page] : unwritten_) {
            keys.push_back(key);
            pages.push_back(page);
        }
        write(keys, pages);
        unwritten_.clear();
        return keys.size();
    }

    /// The pages in memory (the prefix tree: budget, eviction, locks).
    [[nodiscard]] const tree_type& memory() const noexcept { return tree_; }
    /// Evicts unlocked pages until `bytes` were freed or none is left (to the tier first
    /// under `write_policy::back`).
    typename tree_type::evict_result evict(std::size_t bytes) { return tree_.evict(bytes); }
    /// The namespace of every key.
    [[nodiscard]] const tier_namespace& name_space() const noexcept { return ns_; }
    /// Pages in memory that the tier does not have yet (`write_policy::back`).
    [[nodiscard]] std::size_t unwritten() const noexcept { return unwritten_.size(); }
    [[nodiscard]] const tiered_stats& stats() const noexcept { return stats_; }

private:
    // Up to `n` pages from the pool, after making room for them in the budget beside the
    // locked pages (evicted pages return to the pool first).
    std::vector<handle_type> take_pages(std::size_t n) {
        n = std::min(n, (tree_.budget() - std::min(tree_.budget(), tree_.locked_bytes())) / page_bytes_);
        const std::size_t room = tree_.budget() - std::min(tree_.budget(), tree_.bytes());
        if (n * page_bytes_ > room) (void)tree_.evict(n * page_bytes_ - room);
        std::vector<handle_type> pages;
        pages.reserve(n);
        while (pages.size() < n) {
            std::optional<handle_type> p = pool_.allocate();
            if (!p) break;
            pages.push_back(std::move(*p));
        }
        return pages;
    }
    std::vector<std::span<std::byte>> buffers_of(std::span<const handle_type> pages) {
        std::vector<std::span<std::byte>> buffers;
        buffers.reserve(pages.size());
        for (const handle_type& p : pages) buffers.push_back(bytes_of(p));
        return buffers;
    }
    // The tier's run of `keys` into `buffers` (only these: safe on a loading thread); a tier
    // that throws loads nothing, so the pages go back to the pool unused.
    static std::size_t load_or_none(Tier& tier, std::span<const tier_key> keys,
                                    std::span<const std::span<std::byte>> buffers) noexcept {
        if (keys.empty()) return 0;
        try {
            return tier.get(keys, buffers);
        } catch (...) {
            return 0;
        }
    }
    // Adds the first `loaded` of `pages` (for the keys after `lock`) to the tree under `lock`
    // and returns the rest to the pool; the number added.
    std::size_t adopt(prefix_match& lock, std::span<const tier_key> keys, std::span<const handle_type> pages, std::size_t loaded) {
        for (std::size_t i = loaded; i < pages.size(); ++i) pool_.release(pages[i]);
        if (loaded == 0) return 0;
        const auto added = insert_pages(lock, keys.first(lock.length() + loaded), pages.first(loaded), /*from_tier=*/true);
        stats_.pages_from_tier += added.cached - added.existing;
        return added.cached - added.existing;
    }
    std::span<std::byte> bytes_of(const handle_type& page) {
        const std::span<std::byte> b = pool_.bytes(page);
        FRUGAL_CHECK(b.size() == page_bytes_, "tiered_prefix_tree: a pool page of ", b.size(), " bytes, not ", page_bytes_);
        return b;
    }

    insert_result insert_pages(prefix_match& lock, std::span<const tier_key> keys, std::span<const handle_type> pages,
                               bool from_tier) {
        const std::size_t held = lock.length();
        std::vector<chunk_value<handle_type>> values;
        values.reserve(keys.size());
        for (std::size_t i = 0; i < held; ++i) values.push_back({lock.handle(i), page_bytes_});
        for (const handle_type& p : pages) values.push_back({p, bytes_of(p).size()});
        const insert_result r = tree_.insert(lock, keys, values);
        const auto added_keys = keys.subspan(r.existing, r.cached - r.existing);
        const auto added_pages = pages.subspan(r.existing - held, r.cached - r.existing);
        if (from_tier) {
            // Loaded but not kept (cached meanwhile or refused): back to the pool.
            for (std::size_t i = held; i < r.existing; ++i) pool_.release(pages[i - held]);
            for (std::size_t i = r.cached; i < keys.size(); ++i) pool_.release(pages[i - held]);
        } else if (options_.write == write_policy::through) {
            write(added_keys, added_pages);
        } else {
            for (std::size_t i = 0; i < added_keys.size(); ++i) unwritten_.emplace(added_keys[i], added_pages[i]);
        }
        return r;
    }

    // Hands pages to the tier; a storage failure leaves them unshared (counted), since the
    // engine's request does not depend on it.
    void write(std::span<const tier_key> keys, std::span<const handle_type> pages) {
        if (keys.empty()) return;
        std::vector<std::span<const std::byte>> values;
        values.reserve(pages.size());
        for (const handle_type& p : pages) values.push_back(bytes_of(p));
        try {
            tier_.put(keys, values);
            stats_.pages_written += keys.size();
        } catch (const frugal::runtime_error&) {
            ++stats_.write_failures;
        }
    }

    Tier& tier_;
    Pool& pool_;
    tier_namespace ns_;
    options options_;
    std::size_t page_bytes_;
    tiered_stats stats_;
    std::unordered_map<tier_key, handle_type, tier_key_hash> unwritten_;
    tree_type tree_;  // last: its destructor hands every page to the callback, which uses the members above
};

}  // namespace frugal::cache
