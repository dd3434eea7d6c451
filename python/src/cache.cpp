// frugal.cache: the eviction policies over int or bytes keys and Python values (one
// template, one line per policy) and the prefix tree of chunk sequences.

#include <algorithm>
#include <array>
#include <bit>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include <pybind11/stl.h>
#include <pybind11/stl/filesystem.h>

#include <frugal/cache/basic_cache.hpp>
#include <frugal/cache/arc_policy.hpp>
#include <frugal/cache/gdsf_policy.hpp>
#include <frugal/cache/lfu_policy.hpp>
#include <frugal/cache/lirs_policy.hpp>
#include <frugal/cache/lru_policy.hpp>
#include <frugal/cache/s3fifo_policy.hpp>
#include <frugal/cache/sieve_policy.hpp>
#include <frugal/cache/two_queue_policy.hpp>
#include <frugal/cache/prefix_tree.hpp>
#include <frugal/cache/wtinylfu_policy.hpp>

#include "cache.hpp"

namespace frugal::python {
namespace {

using cache::eviction_reason;

// ---- key/value caches ---------------------------------------------------------------

/// A cache key from Python: an int (int64 range) or bytes.
using py_key = std::variant<std::int64_t, std::string>;

py_key to_key(py::handle h) {
    if (PyLong_Check(h.ptr())) {
        int overflow = 0;
        const long long v = PyLong_AsLongLongAndOverflow(h.ptr(), &overflow);
        if (overflow != 0) throw py::value_error("cache keys that are ints must fit in int64");
        return static_cast<std::int64_t>(v);
    }
    if (PyBytes_Check(h.ptr())) return std::string(PyBytes_AS_STRING(h.ptr()), static_cast<std::size_t>(PyBytes_GET_SIZE(h.ptr())));
    throw py::type_error("cache keys must be int or bytes, got " + py::str(py::type::handle_of(h).attr("__name__")).cast<std::string>());
}

py::object from_key(const py_key& k) {
    if (const auto* i = std::get_if<std::int64_t>(&k)) return py::int_(*i);
    const auto& s = std::get<std::string>(k);
    return py::bytes(s.data(), s.size());
}

/// A Python value and its weight (entries, bytes: whatever the capacity counts).
struct py_value {
    py::object object;
    std::size_t weight;
};

struct value_weigher {
    std::size_t operator()(const py_key&, const py_value& v) const noexcept { return v.weight; }
};

struct evicted_entry {
    py_key key;
    py::object value;
    eviction_reason reason;
};

/// A Python cache: Python values under int or bytes keys with an optional eviction callback
/// and time to live, whatever the policy. Bound once as `frugal.cache.Cache`, the class every
/// policy's cache derives from; `py_cache<Policy>` implements it over basic_cache. Calls hold
/// the GIL (the values are Python objects), which also serializes them. A value that leaves
/// the cache is moved out and released only after the C++ call returns: releasing it may run
/// Python code (its __del__, the callback) that uses this cache again.
class py_cache_base {
public:
    py_cache_base() = default;
    py_cache_base(const py_cache_base&) = delete;
    py_cache_base& operator=(const py_cache_base&) = delete;
    virtual ~py_cache_base() = default;

    // A lookup may remove an expired entry: its value is delivered after the result is taken.
    py::object get(py::handle key, py::object fallback) {
        py::object r = find(key, true);
        return r ? r : fallback;
    }
    py::object getitem(py::handle key) {
        py::object r = find(key, true);
        if (!r) throw py::key_error(py::repr(key).cast<std::string>());
        return r;
    }
    py::object peek(py::handle key, py::object fallback) {
        py::object r = find(key, false);
        return r ? r : fallback;
    }
    void delitem(py::handle key) {
        if (!erase(key)) throw py::key_error(py::repr(key).cast<std::string>());
    }
    void set_ttl(std::optional<double> seconds, bool after_access) {
        const double s = seconds.value_or(0.0);
        FRUGAL_CHECK(std::isfinite(s) && s >= 0 && s < 9e9, "ttl = ", s, " s must be finite, non-negative and below 9e9");
        const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::duration<double>(s));
        FRUGAL_CHECK(ns.count() > 0 || s == 0, "ttl = ", s, " s rounds to 0 ns (use None to turn expiry off)");
        set_expiry({ns, after_access});
        ttl_ = ns.count() > 0 ? seconds : std::nullopt;
        after_access_ = after_access;
    }
    [[nodiscard]] std::optional<double> ttl() const noexcept { return ttl_; }
    [[nodiscard]] bool ttl_after_access() const noexcept { return after_access_; }
    void set_on_evict(py::object cb) { on_evict_.set(std::move(cb)); }
    [[nodiscard]] const py::object& on_evict() const noexcept { return on_evict_.callable(); }

    /// The value of `key` (counting an access when `access`), or a null object; delivers what
    /// the lookup removed.
    virtual py::object find(py::handle key, bool access) = 0;
    virtual bool contains(py::handle key) = 0;
    virtual cache::put_result put(py::handle key, py::object value, std::size_t weight, double cost) = 0;
    virtual bool erase(py::handle key) = 0;
    virtual void clear() = 0;
    virtual py::object pin(py::handle key) = 0;
    virtual void unpin(py::handle key) = 0;
    virtual std::uint32_t pins(py::handle key) const = 0;
    virtual std::size_t purge_expired() = 0;
    virtual py::list keys() const = 0;
    virtual py::list items() const = 0;
    virtual std::size_t size() const = 0;
    virtual std::size_t capacity() const = 0;
    virtual void set_capacity(std::size_t capacity) = 0;
    virtual std::size_t weight() const = 0;
    virtual cache::cache_stats stats() const = 0;
    virtual void reset_stats() = 0;
    // Cyclic GC (collected_by_gc): the values and the callback.
    virtual int traverse(visitproc visit, void* arg) const = 0;
    virtual void clear_references() = 0;

protected:
    virtual void set_expiry(cache::expiry e) = 0;
    void deliver() {
        on_evict_.deliver([](const py::object& cb, evicted_entry& e) { cb(from_key(e.key), e.value, e.reason); });
    }

    deferred_callback<evicted_entry> on_evict_;  // in the base: it outlives the core's callback calls

private:
    std::optional<double> ttl_;  // as given (the core keeps nanoseconds)
    bool after_access_ = false;
};

/// py_cache_base over basic_cache with `Policy` (an expiring cache: 8 bytes an entry and a
/// branch a lookup, nothing beside a Python call).
template <class Policy>
class py_cache final : public py_cache_base {
public:
    template <class... PolicyArgs>
    explicit py_cache(std::size_t capacity, PolicyArgs... args) : core_(capacity, {}, {}, {}, args...) {
        core_.set_eviction_callback([this](const py_key& k, py_value& v, eviction_reason why) {
            // The values still held at destruction are released with the cache; no Python
            // callback runs from a deallocation.
            if (why != eviction_reason::destroyed) on_evict_.push({k, std::move(v.object), why});
        });
    }

    py::object find(py::handle key, bool access) override {
        const py_key k = to_key(key);
        if (!access) {
            const py_value* v = core_.peek(k);
            return v != nullptr ? v->object : py::object();
        }
        const py_value* v = core_.get(k);
        py::object r = v != nullptr ? v->object : py::object();
        deliver();
        return r;
    }
    bool contains(py::handle key) override { return core_.contains(to_key(key)); }
    cache::put_result put(py::handle key, py::object value, std::size_t weight, double cost) override {
        const auto r = core_.put(to_key(key), py_value{std::move(value), weight}, cost);
        deliver();
        return r;
    }
    bool erase(py::handle key) override {
        const bool found = core_.erase(to_key(key));
        deliver();
        return found;
    }
    void clear() override {
        core_.clear();
        deliver();
    }
    py::object pin(py::handle key) override {
        const py_value* v = core_.pin(to_key(key));
        py::object r = v != nullptr ? v->object : py::object();
        deliver();
        if (!r) throw py::key_error(py::repr(key).cast<std::string>());
        return r;
    }
    void unpin(py::handle key) override {
        core_.unpin(to_key(key));
        deliver();
    }
    std::uint32_t pins(py::handle key) const override { return core_.pins(to_key(key)); }
    std::size_t purge_expired() override {
        const std::size_t n = core_.purge_expired();
        deliver();
        return n;
    }
    // Snapshots: the walk only copies (a reference count is no allocation), the Python objects
    // are made after it. Making them during the walk could run the cyclic collector, whose
    // finalizers may write this cache and invalidate the walk.
    py::list keys() const override {
        std::vector<py_key> keys;
        keys.reserve(core_.size());
        core_.for_each([&](const py_key& k, const py_value&) { keys.push_back(k); });
        py::list out(keys.size());
        for (std::size_t i = 0; i < keys.size(); ++i) out[i] = from_key(keys[i]);
        return out;
    }
    py::list items() const override {
        std::vector<std::pair<py_key, py::object>> entries;
        entries.reserve(core_.size());
        core_.for_each([&](const py_key& k, const py_value& v) { entries.emplace_back(k, v.object); });
        py::list out(entries.size());
        for (std::size_t i = 0; i < entries.size(); ++i)
            out[i] = py::make_tuple(from_key(entries[i].first), entries[i].second);
        return out;
    }
    std::size_t size() const override { return core_.size(); }
    std::size_t capacity() const override { return core_.capacity(); }
    void set_capacity(std::size_t capacity) override {
        core_.set_capacity(capacity);
        deliver();
    }
    std::size_t weight() const override { return core_.weight(); }
    cache::cache_stats stats() const override { return core_.stats(); }
    void reset_stats() override { core_.reset_stats(); }
    int traverse(visitproc visit, void* arg) const override {
        int r = on_evict_.traverse(visit, arg);
        core_.for_each([&](const py_key&, const py_value& v) {
            if (r == 0 && v.object) r = visit(v.object.ptr(), arg);
        });
        return r;
    }
    void clear_references() override {
        set_on_evict(py::none());
        // Every value, pinned ones included, is moved out in place, then released once the
        // walk is over (a __del__ may use the cache).
        std::vector<py::object> dropped;
        core_.for_each([&](const py_key&, const py_value& v) { dropped.push_back(std::move(const_cast<py_value&>(v).object)); });
    }

private:
    void set_expiry(cache::expiry e) override { core_.set_expiry(std::move(e)); }

    cache::basic_cache<py_key, py_value, Policy, value_weigher, std::hash<py_key>, std::equal_to<py_key>,
                       cache::intrusive_index, cache::with_expiry>
        core_;
};

/// PutResult's three Python objects, made once (put() returns one per call).
std::array<PyObject*, 3> put_result_objects{};

/// The calls whose cost is the call itself, through vectorcall (see fast_method): get,
/// peek, put, and the mapping protocol. Positional arguments, as dict's; put's weight and
/// cost are keywords.
struct fast_cache_methods {
    using T = py_cache_base;
    static py::object borrow(PyObject* o) { return py::reinterpret_borrow<py::object>(o); }

    static py::object get(T& c, PyObject* const* a, Py_ssize_t n, PyObject* kw) {
        check_arity("get", n, kw, 1, 2);
        return c.get(a[0], n > 1 ? borrow(a[1]) : py::none());
    }
    static py::object peek(T& c, PyObject* const* a, Py_ssize_t n, PyObject* kw) {
        check_arity("peek", n, kw, 1, 2);
        return c.peek(a[0], n > 1 ? borrow(a[1]) : py::none());
    }
    static py::object getitem(T& c, PyObject* const* a, Py_ssize_t n, PyObject* kw) {
        check_arity("__getitem__", n, kw, 1, 1);
        return c.getitem(a[0]);
    }
    static py::object contains(T& c, PyObject* const* a, Py_ssize_t n, PyObject* kw) {
        check_arity("__contains__", n, kw, 1, 1);
        return py::bool_(c.contains(a[0]));
    }
    static py::object setitem(T& c, PyObject* const* a, Py_ssize_t n, PyObject* kw) {
        check_arity("__setitem__", n, kw, 2, 2);
        c.put(a[0], borrow(a[1]), 1, 1.0);
        return py::none();
    }
    static py::object put(T& c, PyObject* const* a, Py_ssize_t n, PyObject* kw) {
        check_arity("put", n, kw, 2, 2, true);
        std::size_t weight = 1;
        double cost = 1.0;
        for (Py_ssize_t i = 0; kw != nullptr && i < PyTuple_GET_SIZE(kw); ++i) {
            PyObject* name = PyTuple_GET_ITEM(kw, i);
            PyObject* value = a[n + i];
            if (PyUnicode_CompareWithASCIIString(name, "weight") == 0) {
                weight = PyLong_AsSize_t(value);
                if (weight == static_cast<std::size_t>(-1) && PyErr_Occurred()) throw py::error_already_set();
            } else if (PyUnicode_CompareWithASCIIString(name, "cost") == 0) {
                cost = PyFloat_AsDouble(value);
                if (cost == -1.0 && PyErr_Occurred()) throw py::error_already_set();
            } else {
                throw py::type_error("put() got an unexpected keyword argument '" + py::str(name).cast<std::string>() + "'");
            }
        }
        const auto r = c.put(a[0], borrow(a[1]), weight, cost);
        return borrow(put_result_objects[static_cast<std::size_t>(r)]);
    }

    static inline PyMethodDef defs[] = {
        fast_method_def<T, &get>("get", "get($self, key, default=None, /)\n--\n\nThe value of `key` (a hit: the policy "
                                        "records the access), or `default`."),
        fast_method_def<T, &peek>("peek", "peek($self, key, default=None, /)\n--\n\nThe value of `key` without counting an "
                                          "access, or `default`."),
        fast_method_def<T, &put>("put", "put($self, key, value, /, *, weight=1, cost=1.0)\n--\n\nInserts or replaces `key`; "
                                        "`weight` counts against the capacity (1: entries; bytes for a byte budget), "
                                        "`cost` is the miss cost (GDSF). Returns PutResult."),
        fast_method_def<T, &getitem>("__getitem__", "__getitem__($self, key, /)\n--\n\nThe value of `key`; KeyError on a miss."),
        fast_method_def<T, &setitem>("__setitem__", "__setitem__($self, key, value, /)\n--\n\nput(key, value) with weight 1."),
        fast_method_def<T, &contains>("__contains__", "__contains__($self, key, /)\n--\n\nWhether `key` is cached (no access "
                                                      "counted)."),
    };
};

/// Binds `frugal.cache.Cache`, the base of every policy's cache: the whole interface, once.
void bind_cache_base(py::module_& m) {
    using T = py_cache_base;
    py::class_<T> cls(m, "Cache", R"doc(
The interface every key/value cache shares (LRUCache, LFUCache, ... derive from it; make one of
those). Keys are int (int64) or bytes, values any Python object (released when evicted). The
capacity counts weight units: entries by default, bytes when each put() gives weight=bytes.
Pinned entries are never evicted; a new entry that cannot fit beside them is refused. ttl=
gives entries a time to live in seconds (see set_ttl).

    def serve(c: Cache, key: bytes) -> object:
        if (v := c.get(key)) is None:
            c.put(key, v := compute(key), weight=4096)
        return v
)doc");
    cls.def("erase", &T::erase, py::arg("key"), "Removes `key`; False when absent. A pinned key raises.")
        .def("__delitem__", &T::delitem, py::arg("key"))
        .def("clear", &T::clear, "Removes every unpinned entry.")
        .def("pin", &T::pin, py::arg("key"),
             "Pins `key` (reference counted; never evicted until as many unpin calls) and returns its value; "
             "KeyError when absent.")
        .def("unpin", &T::unpin, py::arg("key"), "Releases one pin of `key`.")
        .def("pins", &T::pins, py::arg("key"), "Pin count of `key` (0 when absent).")
        .def("keys", &T::keys, "The keys (a snapshot list, in no particular order).")
        .def("items", &T::items, "The (key, value) pairs (a snapshot list, in no particular order).")
        .def("__iter__", [](const T& c) { return py::iter(c.keys()); })
        .def("__len__", &T::size)
        .def_property("capacity", &T::capacity, &T::set_capacity, "Capacity in weight units; setting it evicts down to it.")
        .def_property_readonly("weight", &T::weight, "Total weight held.")
        .def_property_readonly("stats", &T::stats)
        .def("reset_stats", &T::reset_stats)
        .def("set_ttl", &T::set_ttl, py::arg("ttl"), py::kw_only(), py::arg("after_access") = false,
             "Gives the entries written from now on a time to live of `ttl` seconds after their put "
             "(after_access: renewed by each get); None turns expiry off. An expired entry leaves "
             "(EvictionReason.expired) when a get or pin next looks it up, or by purge_expired(); `in` and peek() "
             "do not check it. Pinned entries do not expire while pinned.")
        .def_property_readonly("ttl", &T::ttl, "The time to live in seconds (None: entries never expire).")
        .def_property_readonly("ttl_after_access", &T::ttl_after_access)
        .def("purge_expired", &T::purge_expired, "Removes every unpinned expired entry; returns how many. O(n).")
        .def_property("on_evict", &T::on_evict, &T::set_on_evict,
                      "Called as on_evict(key, value, reason) after each call for every entry that left or was "
                      "refused; None: off.");
    for (PyMethodDef& def : fast_cache_methods::defs) add_fast_method(cls, def);
}

/// Binds `py_cache<Policy>` as `name`, a Cache whose constructor is its own. `Extra` are the
/// policy's own constructor arguments (keywords `extra_args`, each defaulting to None: the
/// C++ default).
template <class Policy, class... Extra, class... ExtraArgs>
void bind_policy(py::module_& m, const char* name, const char* doc, ExtraArgs... extra_args) {
    using T = py_cache<Policy>;
    py::class_<T, py_cache_base>(m, name, doc, collected_by_gc<py_cache_base>())
        .def(py::init([](std::size_t capacity, py::object on_evict, std::optional<double> ttl, bool ttl_after_access,
                         std::optional<Extra>... extra) {
                 std::unique_ptr<T> c;
                 if ((extra.has_value() && ...)) c = std::make_unique<T>(capacity, *extra...);
                 else c = std::make_unique<T>(capacity);
                 c->set_on_evict(std::move(on_evict));
                 c->set_ttl(ttl, ttl_after_access);
                 return c;
             }),
             py::arg("capacity"), py::kw_only(), py::arg("on_evict") = py::none(), py::arg("ttl") = py::none(),
             py::arg("ttl_after_access") = false, extra_args...);
}

void bind_policies(py::module_& m) {
    py::enum_<eviction_reason>(m, "EvictionReason", "Why an entry left the cache (or never entered it).")
        .value("capacity", eviction_reason::capacity)
        .value("rejected", eviction_reason::rejected)
        .value("replaced", eviction_reason::replaced)
        .value("erased", eviction_reason::erased)
        .value("cleared", eviction_reason::cleared)
        .value("expired", eviction_reason::expired);
    py::enum_<cache::put_result>(m, "PutResult", "Result of put().")
        .value("inserted", cache::put_result::inserted)
        .value("replaced", cache::put_result::replaced)
        .value("rejected", cache::put_result::rejected);
    for (auto r : {cache::put_result::inserted, cache::put_result::replaced, cache::put_result::rejected})
        put_result_objects[static_cast<std::size_t>(r)] = py::cast(r).release().ptr();  // kept for the process
    using stats = cache::cache_stats;
    bind_result<stats>(m, "CacheStats", "Counters since construction or reset_stats().", old_form::none,
                       result_field{"hits", &stats::hits}, result_field{"misses", &stats::misses},
                       result_field{"bytes_hit", &stats::bytes_hit}, result_field{"insertions", &stats::insertions},
                       result_field{"hit_ratio", &stats::hit_ratio})
        .def("evicted", &stats::evicted, py::arg("reason"), "Entries that left for `reason`.");
    bind_cache_base(m);

    const char* shared = R"doc( A Cache (see its methods).

    c = {name}(1000, on_evict=lambda key, value, reason: print(key, reason))
    c.put(b"prompt-hash", kv_block, weight=4096)
    if (v := c.get(b"prompt-hash")) is not None: use(v)
)doc";
    // pybind11 copies class docstrings, so a temporary serves.
    auto doc = [&](const char* head, const char* name) {
        std::string d = std::string(head) + shared;
        d.replace(d.find("{name}"), 6, name);
        return d;
    };
    bind_policy<cache::lru_policy>(m, "LRUCache", doc("Least recently used eviction.", "LRUCache").c_str());
    bind_policy<cache::lfu_policy>(m, "LFUCache", doc("Least frequently used eviction (O(1) LFU, oldest among equals).", "LFUCache").c_str());
    bind_policy<cache::lfuda_policy>(m, "LFUDACache", doc("LFU with dynamic aging (LFUDA).", "LFUDACache").c_str());
    bind_policy<cache::gdsf_policy>(m, "GDSFCache",
                                    doc("GreedyDual-Size-Frequency: evicts low frequency x cost / weight first.", "GDSFCache").c_str());
    bind_policy<cache::wtinylfu_policy<>, double>(
        m, "WTinyLFUCache",
        doc("W-TinyLFU: an LRU window, then a segmented LRU main region behind a counting-Bloom-filter admission "
            "filter (window_fraction of the capacity is the window; None: the C++ default).", "WTinyLFUCache").c_str(),
        py::arg("window_fraction") = py::none());
    bind_policy<cache::s3fifo_policy>(
        m, "S3FIFOCache",
        doc("S3-FIFO (SOSP 2023): a small FIFO that filters one-hit wonders, a main FIFO with reinsertion, "
            "and a ghost queue of recently evicted keys.", "S3FIFOCache").c_str());
    bind_policy<cache::sieve_policy>(
        m, "SIEVECache",
        doc("SIEVE (NSDI 2024): one FIFO queue, a hit sets a visited bit, a hand evicts the first unvisited entry.",
            "SIEVECache").c_str());
    bind_policy<cache::arc_policy>(
        m, "ARCCache", doc("ARC (FAST 2003): recency and frequency lists with ghosts and an adaptive target.", "ARCCache").c_str());
    bind_policy<cache::lirs_policy>(
        m, "LIRSCache", doc("LIRS (SIGMETRICS 2002): evicts by inter-reference recency; resists scans.", "LIRSCache").c_str());
    bind_policy<cache::two_queue_policy>(
        m, "TwoQueueCache", doc("2Q (VLDB 1994): a FIFO for first references, an LRU for re-references, a ghost FIFO.",
                                "TwoQueueCache").c_str());
}

// ---- prefix tree ----------------------------------------------------------------------

using chunk_id = std::int64_t;
using handle_type = std::int64_t;

struct evicted_chunk {
    chunk_id id;
    handle_type handle;
    std::size_t bytes;
    eviction_reason reason;
};

/// The eviction policies a Python PrefixTree may take (PrefixTreePolicy), in the order of
/// `prefix_trees`' alternatives.
enum class tree_policy : std::uint8_t { lfu, lru, gdsf, s3fifo };

template <class Policy>
using tree_of = cache::prefix_tree<chunk_id, handle_type, Policy>;
using prefix_trees = std::variant<tree_of<cache::lfu_policy>, tree_of<cache::lru_policy>, tree_of<cache::gdsf_policy>,
                                  tree_of<cache::s3fifo_policy>>;

/// A request lock of whichever tree made it (the alternative of its tree's policy).
class any_prefix_match {
public:
    using locks = std::variant<tree_of<cache::lfu_policy>::prefix_match, tree_of<cache::lru_policy>::prefix_match,
                               tree_of<cache::gdsf_policy>::prefix_match, tree_of<cache::s3fifo_policy>::prefix_match>;
    any_prefix_match() = default;
    template <class Match>
    explicit any_prefix_match(Match&& m) : lock_(std::forward<Match>(m)) {}

    [[nodiscard]] std::size_t length() const noexcept {
        return std::visit([](const auto& l) { return l.length(); }, lock_);
    }
    [[nodiscard]] handle_type handle(std::size_t i) const {
        return std::visit([i](const auto& l) { return l.handle(i); }, lock_);
    }
    [[nodiscard]] std::uint64_t namespace_key() const noexcept {
        return std::visit([](const auto& l) { return l.namespace_key(); }, lock_);
    }
    void release() noexcept {
        std::visit([](auto& l) { l.release(); }, lock_);
    }
    /// The lock as `Tree`'s match type; null when another policy's tree made it.
    template <class Tree>
    [[nodiscard]] typename Tree::prefix_match* as() noexcept {
        return std::get_if<typename Tree::prefix_match>(&lock_);
    }

private:
    locks lock_;
};

/// A prefix tree with the policy chosen at run time: one Python class for every policy.
struct py_prefix_tree {
    using match = any_prefix_match;
    py_prefix_tree(std::size_t budget, tree_policy p) : policy(p), tree(make(memory_budget(budget), p)) {
        std::visit([this](auto& t) {
            t.set_eviction_callback([this](const chunk_id& id, handle_type& h, std::size_t bytes, eviction_reason why) {
                if (why != eviction_reason::destroyed) on_evict.push({id, h, bytes, why});  // no callback from a deallocation
            });
        }, tree);
    }
    static prefix_trees make(memory_budget budget, tree_policy p) {
        switch (p) {
            case tree_policy::lru: return prefix_trees(std::in_place_index<1>, budget);
            case tree_policy::gdsf: return prefix_trees(std::in_place_index<2>, budget);
            case tree_policy::s3fifo: return prefix_trees(std::in_place_index<3>, budget);
            case tree_policy::lfu: break;
        }
        return prefix_trees(std::in_place_index<0>, budget);
    }
    /// fn(tree) with the tree as its own type.
    template <class Fn>
    decltype(auto) visit(Fn&& fn) {
        return std::visit(std::forward<Fn>(fn), tree);
    }
    void set_on_evict(py::object cb) { on_evict.set(std::move(cb)); }
    void deliver() {
        on_evict.deliver([](const py::object& cb, const evicted_chunk& e) { cb(e.id, e.handle, e.bytes, e.reason); });
    }
    int traverse(visitproc visit, void* arg) const { return on_evict.traverse(visit, arg); }
    void clear_references() { set_on_evict(py::none()); }

    tree_policy policy;
    deferred_callback<evicted_chunk> on_evict;  // before tree: it outlives the tree's callback calls
    prefix_trees tree;
    lock_keeping_access<match> access;  // after tree: the locks it still queues are released before the tree goes
};

using py_prefix_match = python_lock<py_prefix_tree>;

/// What PrefixTree.evict freed.
struct evict_outcome {
    std::size_t bytes, chunks;
};

void bind_prefix_tree(py::module_& m) {
    using T = py_prefix_tree;
    using M = py_prefix_match;
    py::enum_<tree_policy>(m, "PrefixTreePolicy", R"doc(
Which unlocked leaf a PrefixTree evicts first.

    tree = PrefixTree(512 << 20, policy=PrefixTreePolicy.gdsf)   # insert(..., costs=recompute_ms)
)doc")
        .value("lfu", tree_policy::lfu, "The least frequently used (PerCache 4.1.3; the default).")
        .value("lru", tree_policy::lru, "The least recently used (SGLang's radix cache).")
        .value("gdsf", tree_policy::gdsf,
               "PGDSF (RAGCache): low frequency x cost / bytes first; insert(..., costs=) gives the recompute time.")
        .value("s3fifo", tree_policy::s3fifo,
               "S3-FIFO over the leaves: chunks used once (a one-off document's) leave from the small queue before "
               "they can push out prefixes that requests share.");
    bind_result<insert_outcome>(m, "InsertResult", R"doc(
What a prefix tree's insert did (PrefixTree.insert, TieredPrefixTree.insert): chunks
[0, existing) were cached already, [existing, cached) were added, the rest did not fit beside
the locked chunks.

    r = tree.insert(chunks, handles, sizes, lock=lock)
    computed = chunks[r.existing:r.cached]
)doc",
                                old_form::tuple, result_field{"existing", &insert_outcome::existing},
                                result_field{"cached", &insert_outcome::cached});
    bind_result<evict_outcome>(m, "EvictResult", R"doc(
What PrefixTree.evict freed.

    e = tree.evict(1 << 20)      # e.bytes >= 1 MiB unless every leaf is locked; e.chunks evicted
)doc",
                               old_form::tuple,
                               result_field{"bytes", &evict_outcome::bytes, "Bytes freed."},
                               result_field{"chunks", &evict_outcome::chunks, "Chunks evicted."});

    bind_lock<M>(m, "PrefixTreeMatch",
                 "A request's lock on its longest cached prefix (from PrefixTree.match, extended by insert(lock=...)); "
                 "a context manager that releases it on exit. It shares its tree's busy flag.\n\n"
                 "    with tree.match(chunks) as lock:\n        reuse(lock.handles)",
                 "handles", "Handles of the locked chunks (int64 array).")
        .def("handle",
             [](M& mt, std::size_t i) { return mt.tree->access.use("PrefixTreeMatch.handle", [&] { return mt.lock.handle(i); }); },
             py::arg("i"), "Handle of the i-th locked chunk.")
        .def_property_readonly("namespace", [](const M& mt) { return mt.lock.namespace_key(); },
                               "The namespace key the lock was taken in.");

    py::class_<T>(m, "PrefixTree", R"doc(
PerCache's knowledge bank and a serving engine's KV prefix cache: a tree of chunk-id sequences
whose nodes hold the caller's int64 handles to per-chunk tensors, under a byte budget; only
unlocked leaves are evicted, in the order of `policy` (PrefixTreePolicy: lfu, the default,
lru, gdsf or s3fifo).

    tree = PrefixTree(512 << 20, policy=PrefixTreePolicy.lru, on_evict=free_kv)  # free_kv(id, handle, bytes, reason)
    with tree.match(chunks, namespace=model_id) as lock:     # the request's lock on its cached prefix
        handles, sizes = prefill(chunks, reuse=lock.handles)   # one per chunk (cached ones ignored)
        r = tree.insert(chunks, handles, sizes, lock=lock)   # the new chunks join the lock: r.existing, r.cached
        decode(...)                                          # released on exit: evictable again
)doc",
                  collected_by_gc<T>())
        .def(py::init([](std::size_t budget_bytes, tree_policy policy, py::object on_evict) {
                 auto t = std::make_unique<T>(budget_bytes, policy);
                 t->set_on_evict(std::move(on_evict));
                 return t;
             }),
             py::arg("budget_bytes"), py::kw_only(), py::arg("policy") = tree_policy::lfu, py::arg("on_evict") = py::none())
        .def_readonly("policy", &T::policy, "The eviction policy (fixed at construction).")
        .def("match",
             [](T& t, py::handle chunks, std::uint64_t ns) {
                 const array_view<chunk_id> c(chunks, "chunks");
                 auto lock = std::make_unique<M>(t);  // first: a lock is never dropped unguarded
                 lock->lock = t.access.use_without_gil("PrefixTree.match", [&] {
                     return t.visit([&](auto& tree) { return any_prefix_match(tree.match(c.span(), ns)); });
                 });
                 return lock;
             },
             py::arg("chunks"), py::kw_only(), py::arg("namespace") = 0, py::keep_alive<0, 1>(),
             "The longest cached prefix of `chunks` in `namespace` (the model or adapter), locked until released "
             "(use it in a with block); each matched chunk counts one access.")
        .def("cached_length",
             [](T& t, py::handle chunks, std::uint64_t ns) {
                 const array_view<chunk_id> c(chunks, "chunks");
                 return t.access.use_without_gil("PrefixTree.cached_length", [&] {
                     return t.visit([&](auto& tree) { return tree.cached_length(c.span(), ns); });
                 });
             },
             py::arg("chunks"), py::kw_only(), py::arg("namespace") = 0,
             "Length of the longest cached prefix, without locking or counting an access.")
        .def("insert",
             [](T& t, py::handle chunks, py::handle handles, py::handle bytes, py::object costs, std::optional<std::uint64_t> ns,
                M* lock) {
                 const array_view<chunk_id> c(chunks, "chunks");
                 const array_view<handle_type> h(handles, "handles");
                 const array_view<std::uint64_t> b(bytes, "bytes");
                 std::optional<array_view<double>> k;
                 if (!costs.is_none()) k.emplace(costs, "costs");
                 FRUGAL_CHECK(h.size() == c.size() && b.size() == c.size() && (!k || k->size() == c.size()),
                              "PrefixTree.insert: ", c.size(), " chunks, ", h.size(), " handles, ", b.size(),
                              " byte sizes", k ? " and " + std::to_string(k->size()) + " costs" : std::string(),
                              " (must be equal)");
                 // Another tree's lock is written under another flag: refused before it is read.
                 FRUGAL_CHECK(lock == nullptr || lock->tree == &t, "PrefixTree.insert: the lock belongs to another tree");
                 FRUGAL_CHECK(lock == nullptr || !ns || *ns == lock->lock.namespace_key(),
                              "PrefixTree.insert: namespace ", ns.value_or(0), " differs from the lock's ",
                              lock ? lock->lock.namespace_key() : 0);
                 std::vector<cache::chunk_value<handle_type>> values(c.size());
                 for (std::size_t i = 0; i < values.size(); ++i)
                     values[i] = {h.data()[i], static_cast<std::size_t>(b.data()[i]), k ? k->data()[i] : 1.0};
                 const std::span<const cache::chunk_value<handle_type>> v(values);
                 const auto r = t.access.use_without_gil("PrefixTree.insert", [&] {
                     return t.visit([&]<class Tree>(Tree& tree) {
                         auto* held = lock != nullptr ? lock->lock.as<Tree>() : nullptr;  // its tree's: the same policy
                         FRUGAL_ASSERT(lock == nullptr || held != nullptr);
                         const auto done = held != nullptr ? tree.insert(*held, c.span(), v)
                                                           : tree.insert(c.span(), v, ns.value_or(0));
                         return insert_outcome{done.existing, done.cached};
                     });
                 });
                 t.deliver();
                 return r;
             },
             py::arg("chunks"), py::arg("handles"), py::arg("bytes"), py::arg("costs") = py::none(), py::kw_only(),
             py::arg("namespace") = py::none(), py::arg("lock") = py::none(),
             "Adds `chunks` with a handle, a byte size (uint64) and optionally a recompute cost (float64) per "
             "chunk. Returns InsertResult(existing, cached): [0, existing) were cached already, [existing, cached) "
             "were added, the rest did not fit beside the locked chunks (they stay the caller's). With `lock` (a "
             "match on a prefix of `chunks`, in its namespace) every chunk of the result joins the lock and "
             "stays protected until it is released; without one the path is evictable at once.")
        .def("evict",
             [](T& t, std::size_t bytes) {
                 const auto r = t.access.use_without_gil("PrefixTree.evict", [&] {
                     return t.visit([&](auto& tree) {
                         const auto done = tree.evict(bytes);
                         return evict_outcome{done.bytes, done.chunks};
                     });
                 });
                 t.deliver();
                 return r;
             },
             py::arg("bytes"),
             "Evicts unlocked leaves until at least `bytes` were freed or none is left; returns EvictResult(bytes, "
             "chunks).")
        .def("evict_one",
             [](T& t) {
                 const bool r = t.access.use_without_gil("PrefixTree.evict_one", [&] {
                     return t.visit([](auto& tree) { return tree.evict_one(); });
                 });
                 t.deliver();
                 return r;
             },
             "Evicts the policy's first unlocked leaf; False when every leaf is locked (or none).")
        .def("clear",
             [](T& t) {
                 t.access.use_without_gil("PrefixTree.clear", [&] { t.visit([](auto& tree) { tree.clear(); }); });
                 t.deliver();
             },
             "Removes every unlocked chunk (reason EvictionReason.cleared); locked paths stay.")
        .def_property("budget",
                      [](T& t) { return t.access.use("PrefixTree.budget", [&] { return t.visit([](auto& tree) { return tree.budget(); }); }); },
                      [](T& t, std::size_t bytes) {
                          t.access.use_without_gil("PrefixTree.budget", [&] {
                              t.visit([&](auto& tree) { tree.set_budget(memory_budget(bytes)); });
                          });
                          t.deliver();
                      },
                      "The byte budget; setting it evicts down to it.")
        .def_property_readonly("bytes", [](T& t) {
            return t.access.use("PrefixTree.bytes", [&] { return t.visit([](auto& tree) { return tree.bytes(); }); });
        })
        .def_property_readonly("locked_bytes",
                               [](T& t) {
                                   return t.access.use("PrefixTree.locked_bytes", [&] {
                                       return t.visit([](auto& tree) { return tree.locked_bytes(); });
                                   });
                               },
                               "Bytes of the locked chunks (what no eviction can free).")
        .def_property_readonly("evictions", [](T& t) {
            return t.access.use("PrefixTree.evictions", [&] { return t.visit([](auto& tree) { return tree.evictions(); }); });
        })
        .def("__len__",
             [](T& t) { return t.access.use("PrefixTree.__len__", [&] { return t.visit([](auto& tree) { return tree.size(); }); }); })
        .def("save",
             [](T& t, const std::filesystem::path& p) {
                 t.access.use_without_gil("PrefixTree.save", [&] { t.visit([&](auto& tree) { tree.save(p); }); });
             },
             py::arg("path"), "Writes the index crash-safely (temporary file, fsync, rename).")
        .def("load",
             [](T& t, const std::filesystem::path& p) {
                 t.access.use_without_gil("PrefixTree.load", [&] { t.visit([&](auto& tree) { tree.load(p); }); });
                 t.deliver();
             },
             py::arg("path"),
             "Replaces the contents with a saved index (validated; nothing may be locked); the chunks it "
             "replaces leave as EvictionReason.cleared.")
        .def_property("on_evict", [](const T& t) { return t.on_evict.callable(); }, &T::set_on_evict,
                      "Called as on_evict(chunk_id, handle, bytes, reason) after each call for every chunk that left; "
                      "None: off.");
}

void bind_page_keys(py::module_& m) {
    m.def("page_keys",
          [](py::handle tokens, std::size_t page_size, std::uint64_t ns) {
              const array_view<std::int32_t> t(tokens, "tokens");
              // int64, the prefix trees' chunk id type (the same 64 bits as the C++ uint64 keys).
              const std::vector<std::uint64_t> keys = cache::page_keys(t.span(), page_size, ns);
              std::vector<chunk_id> ids(keys.size());
              std::transform(keys.begin(), keys.end(), ids.begin(), [](std::uint64_t k) { return std::bit_cast<chunk_id>(k); });
              return adopt(std::move(ids));
          },
          py::arg("tokens"), py::arg("page_size"), py::arg("namespace") = 0,
          R"doc(Keys of the full pages of `tokens` (int32), vLLM-style: each page's key hashes its tokens chained
on the previous page's key, the first seeded with `namespace`, so equal keys mean equal
prefixes (an int64 array, the prefix trees' chunk ids; a last, partial page gets no key). A
prefix tree keyed by them matches at page granularity.

    keys = page_keys(prompt, 16, namespace=adapter_id)
    with tree.match(keys) as m: ...)doc");
}

}  // namespace

void bind_cache(py::module_ m) {
    bind_policies(m);
    bind_prefix_tree(m);
    bind_page_keys(m);
    bind_tiers(m);
    bind_semantic(m);
}

}  // namespace frugal::python
