// frugal.cache's tiers below memory: TierNamespace, chunk_keys, DiskTier and (when built with
// hiredis) RedisTier, over numpy arrays of keys (n x 2 uint64) and pages (n x bytes uint8).
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include <pybind11/stl.h>
#include <pybind11/stl/filesystem.h>

#include <frugal/cache/disk_tier.hpp>
#include <frugal/cache/tier.hpp>
#ifdef FRUGAL_PYTHON_HAVE_REDIS
#include <frugal/backend/redis/redis_tier.hpp>
#endif

#include "common.hpp"

namespace frugal::python {
namespace {

// Keys as an (n, 2) uint64 array: [high, low] per chunk.
std::vector<cache::tier_key> keys_of(py::handle keys) {
    const array_view<std::uint64_t> k(keys, "keys", 2);
    FRUGAL_CHECK(k.shape(1) == 2, "keys must have shape (n, 2), got (", k.shape(0), ", ", k.shape(1), ")");
    std::vector<cache::tier_key> out(static_cast<std::size_t>(k.shape(0)));
    for (std::size_t i = 0; i < out.size(); ++i) out[i] = {k.span()[2 * i], k.span()[2 * i + 1]};
    return out;
}

// A tier behind a busy flag: one thread at a time, the GIL released around its I/O.
template <class Tier>
struct py_tier {
    template <class... Args>
    explicit py_tier(Args&&... args) : tier(std::forward<Args>(args)...) {}
    Tier tier;
    busy_flag busy;
};

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

}  // namespace

void bind_tiers(py::module_& m) {
    py::class_<cache::tier_namespace>(m, "TierNamespace", R"doc(
What a tier's values are: two engines share an entry only when every field is equal.

    ns = TierNamespace("llama-3.2-1b", "bf16", "nhd", page_tokens=64)
)doc")
        .def(py::init([](std::string model, std::string dtype, std::string layout, std::uint32_t page_tokens) {
                 FRUGAL_CHECK(page_tokens > 0, "TierNamespace: page_tokens must be > 0");
                 return cache::tier_namespace{std::move(model), std::move(dtype), std::move(layout), page_tokens};
             }),
             py::arg("model"), py::arg("dtype"), py::arg("layout"), py::arg("page_tokens"))
        .def_readonly("model", &cache::tier_namespace::model)
        .def_readonly("dtype", &cache::tier_namespace::dtype)
        .def_readonly("layout", &cache::tier_namespace::layout)
        .def_readonly("page_tokens", &cache::tier_namespace::page_tokens)
        .def_property_readonly("id", &cache::tier_namespace::id);

    py::class_<cache::tier_stats>(m, "TierStats", "A tier's counters since it was opened.")
        .def_readonly("hits", &cache::tier_stats::hits)
        .def_readonly("misses", &cache::tier_stats::misses)
        .def_readonly("puts", &cache::tier_stats::puts)
        .def_readonly("evictions", &cache::tier_stats::evictions)
        .def_readonly("refused", &cache::tier_stats::refused, "values found but not whole: read as misses")
        .def_readonly("errors", &cache::tier_stats::errors, "calls cut short by the storage")
        .def_readonly("bytes_read", &cache::tier_stats::bytes_read)
        .def_readonly("bytes_written", &cache::tier_stats::bytes_written)
        .def("__repr__", [](const cache::tier_stats& s) {
            return "TierStats(hits=" + std::to_string(s.hits) + ", misses=" + std::to_string(s.misses) +
                   ", puts=" + std::to_string(s.puts) + ", refused=" + std::to_string(s.refused) +
                   ", errors=" + std::to_string(s.errors) + ")";
        });

    m.def(
        "chunk_keys",
        [](py::handle tokens, const cache::tier_namespace& ns) {
            const array_view<std::int32_t> t(tokens, "tokens");
            const auto keys = cache::chunk_keys(ns, t.span());
            py::array_t<std::uint64_t> out({static_cast<py::ssize_t>(keys.size()), py::ssize_t{2}});
            auto* p = out.mutable_data();
            for (std::size_t i = 0; i < keys.size(); ++i) p[2 * i] = keys[i].high, p[2 * i + 1] = keys[i].low;
            return out;
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
}

}  // namespace frugal::python
