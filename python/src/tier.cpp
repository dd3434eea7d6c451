// frugal.cache's tiers below memory: TierNamespace, chunk_keys, DiskTier and (when built with
// hiredis) RedisTier, over numpy arrays of keys (n x 2 uint64) and pages (n x bytes uint8), and
// TieredPrefixTree, a prefix tree of pages (rows of the caller's array) over either tier, and
// SharedDocuments, the token sequences replicas share through one.
#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <pybind11/stl.h>
#include <pybind11/stl/filesystem.h>

#include <frugal/cache/shared_documents.hpp>
#include <frugal/cache/tiered_prefix_tree.hpp>

#include "cache.hpp"
#include "tier.hpp"

namespace frugal::python {
namespace {

// Keys as an (n, 2) uint64 array.
py::array_t<std::uint64_t> keys_array(const std::vector<cache::tier_key>& keys) {
    py::array_t<std::uint64_t> out({static_cast<py::ssize_t>(keys.size()), py::ssize_t{2}});
    auto* p = out.mutable_data();
    for (std::size_t i = 0; i < keys.size(); ++i) p[2 * i] = keys[i].high, p[2 * i + 1] = keys[i].low;
    return out;
}

// Keys as an (n, 2) uint64 array: [high, low] per chunk.
std::vector<cache::tier_key> keys_of(py::handle keys) {
    const array_view<std::uint64_t> k(keys, "keys", 2);
    FRUGAL_CHECK(k.shape(1) == 2, "keys must have shape (n, 2), got (", k.shape(0), ", ", k.shape(1), ")");
    std::vector<cache::tier_key> out(static_cast<std::size_t>(k.shape(0)));
    for (std::size_t i = 0; i < out.size(); ++i) out[i] = {k.span()[2 * i], k.span()[2 * i + 1]};
    return out;
}

template <class Tier>
void bind_tier_methods(py::class_<py_tier<Tier>>& cls, const char* name) {
    const std::string n(name);
    cls.def(
           "exists_prefix",
           [n](py_tier<Tier>& t, py::handle keys) {
               const auto k = keys_of(keys);
               return without_gil(t.busy, (n + ".exists_prefix").c_str(), [&] { return t.tier.exists_prefix(k); });
           },
           py::arg("keys"), "How many of `keys` (an (n, 2) uint64 array), from the first, the tier holds in a row.")
        .def(
            "get",
            [n](py_tier<Tier>& t, py::handle keys, py::handle pages) {
                const auto k = keys_of(keys);
                const array_view<std::uint8_t, true> p(pages, "pages", 2);
                FRUGAL_CHECK(p.shape(0) == k.size(), n, ".get: ", k.size(), " keys but ",
                             p.shape(0), " page rows");
                const std::size_t bytes = p.shape(1);
                std::vector<std::span<std::byte>> out;
                for (std::size_t i = 0; i < k.size(); ++i)
                    out.push_back(std::as_writable_bytes(p.span().subspan(i * bytes, bytes)));
                return without_gil(t.busy, (n + ".get").c_str(), [&] { return t.tier.get(k, out); });
            },
            py::arg("keys"), py::arg("pages"),
            "Loads the longest run of `keys` from the first into the rows of `pages` (a writable (n, bytes) uint8 "
            "array, each row one value) and returns its length; a missing, resized or damaged value ends it.")
        .def(
            "put",
            [n](py_tier<Tier>& t, py::handle keys, py::handle pages) {
                const auto k = keys_of(keys);
                const array_view<std::uint8_t> p(pages, "pages", 2);
                FRUGAL_CHECK(p.shape(0) == k.size(), n, ".put: ", k.size(), " keys but ",
                             p.shape(0), " page rows");
                const std::size_t bytes = p.shape(1);
                std::vector<std::span<const std::byte>> in;
                for (std::size_t i = 0; i < k.size(); ++i) in.push_back(std::as_bytes(p.span().subspan(i * bytes, bytes)));
                without_gil(t.busy, (n + ".put").c_str(), [&] { t.tier.put(k, in); });
            },
            py::arg("keys"), py::arg("pages"),
            "Stores row i of `pages` (an (n, bytes) uint8 array) under key i, unless the key is held already.")
        .def_property_readonly("stats", [n](py_tier<Tier>& t) {
            return with_busy(t.busy, (n + ".stats").c_str(), [&] { return t.tier.stats(); });
        });
}

// The rows of the caller's (n, page_bytes) uint8 array as a page_pool (row numbers as
// handles). Rows lent to Python (allocate) are marked until inserted or given back, so that
// a row the tree holds, a free row or a row given twice is refused instead of corrupting the
// pool.
class row_pool {
public:
    using handle_type = std::int64_t;
    explicit row_pool(const array_view<std::uint8_t, true>& pages)
        : base_(pages.data()), rows_(pages.shape(0)), row_bytes_(pages.shape(1)), lent_(rows_, false) {
        FRUGAL_CHECK(rows_ > 0 && row_bytes_ > 0, "TieredPrefixTree: pages must have shape (n, page_bytes) with n > 0 "
                                                 "and page_bytes > 0, got (", rows_, ", ", row_bytes_, ")");
        for (std::size_t r = rows_; r-- > 0;) free_.push_back(static_cast<handle_type>(r));
    }
    std::optional<handle_type> allocate() {
        if (free_.empty()) return std::nullopt;
        const handle_type r = free_.back();
        free_.pop_back();
        return r;
    }
    void release(const handle_type& r) { free_.push_back(r); }
    [[nodiscard]] std::size_t page_bytes() const noexcept { return row_bytes_; }
    [[nodiscard]] std::span<std::byte> bytes(const handle_type& r) const {
        return std::as_writable_bytes(std::span(base_ + static_cast<std::size_t>(r) * row_bytes_, row_bytes_));
    }

    /// A free row lent to Python.
    std::optional<handle_type> lend() {
        const auto r = allocate();
        if (r) lent_[static_cast<std::size_t>(*r)] = true;
        return r;
    }
    /// Checks that `rows` are distinct rows lent to Python, then takes them back (the caller
    /// then gives each to the tree or releases it).
    void take_back(std::span<const handle_type> rows, const char* who) {
        std::vector<handle_type> sorted(rows.begin(), rows.end());
        std::sort(sorted.begin(), sorted.end());
        for (std::size_t i = 0; i < sorted.size(); ++i) {
            const handle_type r = sorted[i];
            FRUGAL_CHECK_AS(frugal::out_of_range, r >= 0 && static_cast<std::size_t>(r) < rows_ && lent_[static_cast<std::size_t>(r)],
                            who, ": row ", r, " is not a row from allocate()");
            FRUGAL_CHECK(i == 0 || sorted[i - 1] != r, who, ": row ", r, " is given twice");
        }
        for (const handle_type r : rows) lent_[static_cast<std::size_t>(r)] = false;
    }
    /// Lends `rows` (taken back) to Python again: a call that failed leaves them Python's.
    void lend_again(std::span<const handle_type> rows) noexcept {
        for (const handle_type r : rows) lent_[static_cast<std::size_t>(r)] = true;
    }
    [[nodiscard]] std::size_t free_rows() const noexcept { return free_.size(); }

private:
    std::uint8_t* base_;
    std::size_t rows_, row_bytes_;
    std::vector<bool> lent_;
    std::vector<handle_type> free_;
};

struct tiered_tree {
    using tree_type = cache::tiered_prefix_tree<any_tier, row_pool>;
    using match = tree_type::prefix_match;
    using ticket = tree_type::prefetch_ticket;
    template <class Tier>
    tiered_tree(py::object tier_object, py_tier<Tier>& t, const array_view<std::uint8_t, true>& pages_view,
                std::size_t budget, const cache::tier_namespace& ns, tree_type::options opt)
        : tier_owner(std::move(tier_object)), pages(pages_view.array()), pool(pages_view), tier(t),
          tree(memory_budget(budget), tier, pool, ns, opt) {}
    /// Runs `fn` with the tree busy and the tier busy, the GIL released.
    template <class Fn>
    decltype(auto) use(const char* who, Fn&& fn) {
        return access.use_without_gil(who, [&]() -> decltype(auto) {
            const busy_flag::guard g(tier.busy(), who);
            return fn();
        });
    }
    py::object tier_owner;  // keeps the tier and the pages alive while the tree may write back
    py::array pages;
    row_pool pool;
    any_tier tier;
    tree_type tree;
    lock_keeping_access<match, ticket> access;  // after tree: queued locks are released before the tree goes
};

struct tiered_match : python_lock<tiered_tree> {
    using python_lock::python_lock;
    std::size_t from_tier = 0;
};

// A prefetch ticket as Python holds it. load() runs on any thread, match() and `pages` go
// through the tree's access (the C++ ticket orders a load and a match); its deallocation hands
// what it still holds (rows, the lock on the prefix memory held) to the tree's access, as a
// dropped lock's. The Python object keeps its tree alive (keep_alive).
struct tiered_prefetch {
    tiered_prefetch(tiered_tree& t, tiered_tree::ticket k) : tree(&t), ticket(std::move(k)) {}
    tiered_prefetch(const tiered_prefetch&) = delete;
    tiered_prefetch& operator=(const tiered_prefetch&) = delete;
    ~tiered_prefetch() { tree->access.release_when_free(std::move(ticket)); }
    tiered_tree* tree;
    tiered_tree::ticket ticket;
};

// Loads `p`'s pages through `reader` (a DiskTier or RedisTier), the GIL released and the
// reader marked busy.
template <class Tier>
void load_through(tiered_prefetch& p, py_tier<Tier>& reader) {
    without_gil(reader.busy, "TieredPrefetch.load", [&] {
        any_tier tier(reader);
        p.ticket.load(tier);
    });
}

void bind_tiered_prefix_tree(py::module_& m) {
    using T = tiered_tree;
    using M = tiered_match;
    using stats = cache::tiered_stats;
    bind_result<stats>(m, "TieredStats", "A TieredPrefixTree's counters since it was made.", old_form::none,
                       result_field{"pages_from_memory", &stats::pages_from_memory},
                       result_field{"pages_from_tier", &stats::pages_from_tier},
                       result_field{"pages_written", &stats::pages_written},
                       result_field{"write_failures", &stats::write_failures});
    bind_lock<M>(m, "TieredMatch",
                 "A request's lock on the pages ready for its prefix (from TieredPrefixTree.match, extended by insert); "
                 "a context manager that releases it on exit.",
                 "pages", "Rows of the pages array holding the locked pages, in order (int64).")
        .def_readonly("from_tier", &M::from_tier, "How many of the pages match() loaded from the tier (the last ones).");

    py::class_<tiered_prefetch>(m, "TieredPrefetch", R"doc(
A load from the tier started before a request is scheduled (TieredPrefixTree.prefetch):
load(reader) runs it on any thread, with its own DiskTier or RedisTier on the same storage,
while the engine goes on; TieredPrefixTree.match(ticket) takes its pages, waiting for a load
in flight or loading them itself if none started. Until then the ticket holds rows of the
pages array and a lock on the prefix memory held; dropping it unmatched gives them back.

    ticket = cache.prefetch(keys)                                     # when the request is queued
    threading.Thread(target=ticket.load, args=(io_tier,)).start()     # io_tier: a second tier object
    with cache.match(ticket) as hit:                                  # when it is scheduled
        decode(pages[hit.pages])
)doc")
        .def(
            "load",
            [](tiered_prefetch& p, py::handle reader) {
                visit_tier(reader, "TieredPrefetch.load", "reader", [&](auto& r) { load_through(p, r); });
            },
            py::arg("reader"),
            "Loads the ticket's pages from `reader` (a tier object no other thread uses meanwhile, on the tree's "
            "storage and namespace), the GIL released. At most once: a call after the load started, here or by "
            "match(), returns at once.")
        .def_property_readonly("pages",
                               [](tiered_prefetch& p) {
                                   // match() empties the ticket: read it as match does, through the tree.
                                   return p.tree->access.use("TieredPrefetch.pages", [&] { return p.ticket.pages(); });
                               },
                               "Pages the ticket loads at most (0 once matched, or when memory held every page or no "
                               "row was free).");

    py::class_<T> cls(m, "TieredPrefixTree", R"doc(
A KV prefix cache in two levels: pages in memory (rows of your `pages` array, at most
`budget_bytes` of them, evicted least recently used first, locked while a request uses them)
over a DiskTier or RedisTier that other engine processes share or a restart keeps. match()
locks the prefix memory holds and loads the run of pages after it from the tier; insert()
adds the pages you computed, written to the tier at once (write="through") or when memory
evicts them, at flush() or when the tree goes (write="back"). One thread at a time.

    pages = numpy.zeros((512, page_bytes), numpy.uint8)
    cache = TieredPrefixTree(tier, pages, ns, budget_bytes=256 * page_bytes)
    keys = cache.keys(prompt)
    with cache.match(keys) as hit:              # len(hit) pages ready: pages[hit.pages]
        rows = cache.allocate(len(keys) - len(hit))
        pages[rows] = prefill(prompt, len(hit))
        cache.insert(hit, keys, rows)
        decode(pages[hit.pages])
)doc");
    cls.def(py::init([](py::object tier, py::handle pages, const cache::tier_namespace& ns, std::optional<std::size_t> budget,
                        std::string_view write, std::size_t max_pages) {
                 FRUGAL_CHECK(write == "through" || write == "back", "TieredPrefixTree: write must be 'through' or 'back', got '",
                              write, "'");
                 const array_view<std::uint8_t, true> view(pages, "pages", 2);
                 const std::size_t bytes = budget.value_or(view.shape(0) * view.shape(1));
                 const T::tree_type::options opt{.write = write == "back" ? cache::write_policy::back : cache::write_policy::through,
                                                 .max_pages_per_match = max_pages};
                 return visit_tier(tier, "TieredPrefixTree", "tier",
                                   [&](auto& t) { return std::make_unique<T>(tier, t, view, bytes, ns, opt); });
             }),
             py::arg("tier"), py::arg("pages"), py::arg("namespace"), py::kw_only(), py::arg("budget_bytes") = py::none(),
             py::arg("write") = "through", py::arg("max_pages_per_match") = 128)
        .def("keys", [](T& t, py::handle tokens) {
                 const array_view<std::int32_t> tok(tokens, "tokens");
                 return keys_array(t.tree.keys(tok.span()));
             },
             py::arg("tokens"), "The chunk keys of `tokens` (int32) in the tree's namespace: an (n, 2) uint64 array.")
        .def("prefetch",
             [](T& t, py::handle keys) {
                 const auto k = keys_of(keys);
                 return t.use("TieredPrefixTree.prefetch",
                              [&] { return std::make_unique<tiered_prefetch>(t, t.tree.prefetch(k)); });
             },
             py::arg("keys"), py::keep_alive<0, 1>(),
             "Prepares a load of the pages after the prefix memory holds (locked until the ticket is matched or "
             "dropped): takes free rows for them now and returns a TieredPrefetch whose load() reads them on any "
             "thread.")
        .def("match",
             [](T& t, tiered_prefetch& ticket) {
                 FRUGAL_CHECK(ticket.tree == &t, "TieredPrefixTree.match: the ticket belongs to another tree");
                 auto lock = std::make_unique<M>(t);
                 t.use("TieredPrefixTree.match", [&] {
                     auto r = t.tree.match(std::move(ticket.ticket));
                     lock->lock = std::move(r.lock);
                     lock->from_tier = r.from_tier;
                 });
                 return lock;
             },
             py::arg("ticket"), py::keep_alive<0, 1>(),
             "The request of `ticket` (from prefetch()): waits for its load (or loads it here, through the tree's "
             "tier, if no thread started it) and locks the prefix with the loaded pages; use the result in a with "
             "block.")
        .def("match",
             [](T& t, py::handle keys) {
                 const auto k = keys_of(keys);
                 auto lock = std::make_unique<M>(t);  // first: a lock is never dropped unguarded
                 t.use("TieredPrefixTree.match", [&] {
                     auto r = t.tree.match(k);
                     lock->lock = std::move(r.lock);
                     lock->from_tier = r.from_tier;
                 });
                 return lock;
             },
             py::arg("keys"), py::keep_alive<0, 1>(),
             "Locks the longest prefix of `keys` in memory, then loads the run of pages after it from the tier into "
             "free rows (as far as free rows and the budget allow); use the result in a with block.")
        .def("allocate",
             [](T& t, std::size_t n) {
                 auto rows = t.use("TieredPrefixTree.allocate", [&] {
                     std::vector<std::int64_t> out;
                     while (out.size() < n)
                         if (const auto r = t.pool.lend()) out.push_back(*r);
                         else if (t.tree.evict(t.pool.page_bytes()).chunks == 0) break;
                     return out;
                 });
                 return adopt(std::move(rows));
             },
             py::arg("n"),
             "Up to `n` free rows for pages you compute (evicting unlocked pages when none is free); fewer when "
             "every other row is locked. Give them to insert() or back with release_rows().")
        .def("release_rows",
             [](T& t, py::handle rows) {
                 const array_view<std::int64_t> r(rows, "rows");
                 t.use("TieredPrefixTree.release_rows", [&] {
                     t.pool.take_back(r.span(), "TieredPrefixTree.release_rows");
                     for (const std::int64_t row : r.span()) t.pool.release(row);
                 });
             },
             py::arg("rows"), "Returns rows from allocate() that you did not insert.")
        .def("insert",
             [](T& t, M& lock, py::handle keys, py::handle rows) {
                 const auto k = keys_of(keys);
                 const array_view<std::int64_t> r(rows, "rows");
                 FRUGAL_CHECK(lock.tree == &t, "TieredPrefixTree.insert: the lock belongs to another tree");
                 return t.use("TieredPrefixTree.insert", [&] {
                     FRUGAL_CHECK(lock.lock.length() <= k.size() && r.size() == k.size() - lock.lock.length(),
                                  "TieredPrefixTree.insert: ", r.size(), " rows for ", k.size(), " keys after a lock of ",
                                  lock.lock.length());
                     t.pool.take_back(r.span(), "TieredPrefixTree.insert");
                     T::tree_type::insert_result res;
                     try {
                         res = t.tree.insert(lock.lock, k, r.span());
                     } catch (...) {
                         t.pool.lend_again(r.span());
                         throw;
                     }
                     // Rows the tree did not take (cached meanwhile, or no room) go back to the pool.
                     const std::size_t first = k.size() - r.size();
                     for (std::size_t i = first; i < k.size(); ++i)
                         if (i < res.existing || i >= res.cached) t.pool.release(r.span()[i - first]);
                     return insert_outcome{res.existing, res.cached};
                 });
             },
             py::arg("lock"), py::arg("keys"), py::arg("rows"),
             "Adds the pages in `rows` (from allocate(), filled by you) for keys[len(lock):] under `lock`, which "
             "then covers them; returns InsertResult(existing, cached).")
        .def("flush", [](T& t) { return t.use("TieredPrefixTree.flush", [&] { return t.tree.flush(); }); },
             "Writes every page memory holds that the tier lacks (write='back'); returns how many.")
        .def("evict", [](T& t, std::size_t bytes) {
                 return t.use("TieredPrefixTree.evict", [&] { return t.tree.evict(bytes).bytes; });
             },
             py::arg("bytes"), "Evicts unlocked pages until `bytes` were freed or none is left; returns the bytes freed.")
        .def_property_readonly("bytes", [](T& t) { return t.access.use("TieredPrefixTree.bytes", [&] { return t.tree.memory().bytes(); }); })
        .def_property_readonly("budget", [](T& t) { return t.access.use("TieredPrefixTree.budget", [&] { return t.tree.memory().budget(); }); })
        .def_property_readonly("locked_bytes", [](T& t) {
            return t.access.use("TieredPrefixTree.locked_bytes", [&] { return t.tree.memory().locked_bytes(); });
        })
        .def_property_readonly("free_rows", [](T& t) { return t.access.use("TieredPrefixTree.free_rows", [&] { return t.pool.free_rows(); }); })
        .def_property_readonly("unwritten", [](T& t) { return t.access.use("TieredPrefixTree.unwritten", [&] { return t.tree.unwritten(); }); },
                               "Pages in memory the tier does not have yet (write='back').")
        .def_property_readonly("stats", [](T& t) { return t.access.use("TieredPrefixTree.stats", [&] { return t.tree.stats(); }); })
        .def("__len__", [](T& t) { return t.access.use("TieredPrefixTree.__len__", [&] { return t.tree.memory().size(); }); });
}

// A replica's outputs shared through a tier. Its calls that reach the tier hold the tier's
// busy flag too (tier_call_guard), the GIL released.
struct py_shared_documents {
    template <class Tier>
    py_shared_documents(py::object tier_object, py_tier<Tier>& t, const cache::tier_namespace& ns)
        : tier_owner(std::move(tier_object)), tier(t), shared(tier, ns) {}
    py::object tier_owner;  // keeps the tier alive
    any_tier tier;
    cache::shared_documents<any_tier, std::int32_t> shared;
    busy_flag busy;
};

void bind_shared_documents(py::module_& m) {
    using S = py_shared_documents;
    using stats = cache::shared_documents_stats;
    bind_result<stats>(m, "SharedDocumentsStats", "A SharedDocuments' counters since it was made.", old_form::none,
                       result_field{"published", &stats::published, "sequences handed to the tier"},
                       result_field{"write_failures", &stats::write_failures, "writes the storage failed"},
                       result_field{"pulled", &stats::pulled, "other replicas' sequences pull() returned"},
                       result_field{"refused", &stats::refused, "records not readable as this namespace's sequences"});
    py::class_<S>(m, "SharedDocuments", R"doc(
Token sequences (finished outputs) that engine replicas share through a DiskTier or RedisTier,
so that each replica's drafting history holds every replica's outputs: publish() stores one
(identical outputs once), pull() returns every sequence the tier holds that this object has
neither published nor pulled (it lists the namespace: call it every few seconds, not per
request). Damaged or foreign records are skipped (stats.refused). Give the outputs a
namespace of their own. One thread at a time.

    outputs = TierNamespace("llama-3.2-1b", "int32", "outputs", page_tokens=1)
    shared = SharedDocuments(RedisTier(outputs, port=6379), outputs)
    shared.publish(output)                      # a request finished (int32 tokens)
    for doc in shared.pull():                   # every few seconds
        history.add(doc)                        # frugal.draft.History
)doc")
        .def(py::init([](py::object tier, const cache::tier_namespace& ns) {
                 return visit_tier(tier, "SharedDocuments", "tier",
                                   [&](auto& t) { return std::make_unique<S>(tier, t, ns); });
             }),
             py::arg("tier"), py::arg("namespace"))
        .def("publish",
             [](S& s, py::handle tokens) {
                 const array_view<std::int32_t> t(tokens, "tokens");
                 const tier_call_guard g(s.busy, s.tier, "SharedDocuments.publish");
                 py::gil_scoped_release release;
                 s.shared.publish(t.span());
             },
             py::arg("tokens"), "Stores `tokens` (int32) in the tier; an empty sequence is not stored.")
        .def("pull",
             [](S& s) {
                 std::vector<std::vector<std::int32_t>> docs;
                 {
                     const tier_call_guard g(s.busy, s.tier, "SharedDocuments.pull");
                     py::gil_scoped_release release;
                     s.shared.pull([&](std::span<const std::int32_t> d) { docs.emplace_back(d.begin(), d.end()); });
                 }
                 py::list out;
                 for (auto& d : docs) out.append(adopt(std::move(d)));
                 return out;
             },
             "The sequences (int32 arrays) the tier holds that this object has neither published nor pulled.")
        .def_property_readonly("stats", [](S& s) {
            return with_busy(s.busy, "SharedDocuments.stats", [&] { return s.shared.stats(); });
        });
}

}  // namespace

void bind_tiers(py::module_& m) {
    py::class_<cache::tier_namespace>(m, "TierNamespace", R"doc(
What a tier's values are: two engines share an entry only when every field is equal. dtype is a
dtype (numpy.float16, frugal.bfloat16, ...: kept as its name) or a label str for a format numpy
does not name; layout is an attention.Layout (kept as its name, "nhd" or "hnd") or a label str.

    ns = TierNamespace("llama-3.2-1b", frugal.bfloat16, attention.Layout.nhd, page_tokens=64)
)doc")
        .def(py::init([](std::string model, py::handle dtype, py::handle layout, std::uint32_t page_tokens) {
                 FRUGAL_CHECK(page_tokens > 0, "TierNamespace: page_tokens must be > 0");
                 std::string dt = py::isinstance<py::str>(dtype) ? dtype.cast<std::string>() : dtype_name_of(dtype);
                 const py::object layouts = py::module_::import("frugal.attention").attr("Layout");
                 if (!py::isinstance<py::str>(layout) && !py::isinstance(layout, layouts))
                     throw py::type_error("TierNamespace: layout must be an attention.Layout or a str, got " +
                                          py::repr(layout).cast<std::string>());
                 std::string l = py::isinstance<py::str>(layout) ? layout.cast<std::string>()
                                                                 : layout.attr("name").cast<std::string>();
                 return cache::tier_namespace{std::move(model), std::move(dt), std::move(l), page_tokens};
             }),
             py::arg("model"), py::arg("dtype"), py::arg("layout"), py::arg("page_tokens"))
        .def_readonly("model", &cache::tier_namespace::model)
        .def_readonly("dtype", &cache::tier_namespace::dtype)
        .def_readonly("layout", &cache::tier_namespace::layout)
        .def_readonly("page_tokens", &cache::tier_namespace::page_tokens)
        .def_property_readonly("id", &cache::tier_namespace::id);

    using tier_stats = cache::tier_stats;
    bind_result<tier_stats>(m, "TierStats", "A tier's counters since it was opened.", old_form::none,
                            result_field{"hits", &tier_stats::hits}, result_field{"misses", &tier_stats::misses},
                            result_field{"puts", &tier_stats::puts}, result_field{"evictions", &tier_stats::evictions},
                            result_field{"refused", &tier_stats::refused, "values found but not whole: read as misses"},
                            result_field{"errors", &tier_stats::errors, "calls cut short by the storage"},
                            result_field{"bytes_read", &tier_stats::bytes_read},
                            result_field{"bytes_written", &tier_stats::bytes_written});

    m.def(
        "chunk_keys",
        [](py::handle tokens, const cache::tier_namespace& ns) {
            const array_view<std::int32_t> t(tokens, "tokens");
            return keys_array(cache::chunk_keys(ns, t.span()));
        },
        py::arg("tokens"), py::arg("namespace"),
        R"doc(The chained keys of the whole chunks of `tokens` (int32) in `namespace`, as an (n, 2) uint64
array: a key names the whole prefix up to its chunk.

    keys = chunk_keys(prompt, ns)            # len(prompt) // 64 rows
    n = tier.get(keys, pages)                # pages[:n] loaded)doc");

    py::class_<py_tier<cache::disk_tier<>>> disk(m, "DiskTier", R"doc(
A cache tier in a directory: one file per value, renamed into place (whole or absent after a
crash), checked when read, under `byte_budget` bytes by LRU; several processes may share the
directory. One thread at a time (a second raises).

    tier = DiskTier("/var/cache/kv", ns, byte_budget=64 << 30)
    tier.put(keys, pages)                     # pages: (n, page_bytes) uint8
    n = tier.get(keys, out)                   # out[:n] loaded
)doc");
    disk.def(py::init<std::filesystem::path, cache::tier_namespace, std::size_t, bool>(), py::arg("directory"),
             py::arg("namespace"), py::arg("byte_budget"), py::arg("durable") = false)
        .def_property_readonly("directory", [](py_tier<cache::disk_tier<>>& t) { return t.tier.directory(); });
    bind_tier_methods(disk, "DiskTier");

#ifdef FRUGAL_PYTHON_HAVE_REDIS
    py::class_<py_tier<cache::redis_tier>> redis(m, "RedisTier", R"doc(
A cache tier on a Redis server shared by engine processes: pipelined, with timeouts and
reconnection; a server that is down costs misses (stats.errors), never an exception. One
thread at a time (a second raises).

    tier = RedisTier(ns, host="127.0.0.1", port=6379)
    n = tier.get(chunk_keys(prompt, ns), out)
)doc");
    redis
        .def(py::init([](const cache::tier_namespace& ns, std::string host, int port, double timeout_ms,
                         double max_backoff_ms, std::size_t pipeline, std::string prefix) {
                 using ms = std::chrono::milliseconds;
                 return std::make_unique<py_tier<cache::redis_tier>>(
                     ns, cache::redis_options{.host = std::move(host), .port = port,
                                              .timeout = ms(static_cast<std::int64_t>(timeout_ms)),
                                              .max_backoff = ms(static_cast<std::int64_t>(max_backoff_ms)),
                                              .pipeline = pipeline, .prefix = std::move(prefix)});
             }),
             py::arg("namespace"), py::kw_only(), py::arg("host") = "127.0.0.1", py::arg("port") = 6379,
             py::arg("timeout_ms") = 500.0, py::arg("max_backoff_ms") = 2000.0, py::arg("pipeline") = 64,
             py::arg("prefix") = "frugal")
        .def("connected",
             [](py_tier<cache::redis_tier>& t) {
                 return without_gil(t.busy, "RedisTier.connected", [&] { return t.tier.connected(); });
             },
             "Whether a connection is up, connecting now if the backoff allows.");
    bind_tier_methods(redis, "RedisTier");
#endif
    bind_tiered_prefix_tree(m);
    bind_shared_documents(m);
}

}  // namespace frugal::python
