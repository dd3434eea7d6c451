// frugal.cache's QA banks over numpy embeddings: SemanticCache in memory and
// TieredSemanticCache, the same bank whose answers a DiskTier or RedisTier shares between
// processes and keeps across restarts. One binding of the methods they share.
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <pybind11/stl.h>
#include <pybind11/stl/filesystem.h>

#include <frugal/backend/eigen/similarity_scan.hpp>
#include <frugal/cache/semantic_cache.hpp>
#include <frugal/cache/tiered_semantic_cache.hpp>

#include "cache.hpp"
#include "tier.hpp"

namespace frugal::python {
namespace {

// The similarity search through Eigen's GEMV: 4-9x faster than the plain-loop reference scan,
// as fast as a streaming read of the bank at 100k entries (`frugal-bench cache --qa-bank`).
using index = eigen::flat_similarity_index;
using semantic = cache::semantic_cache<std::string, std::uint32_t, index>;
using tiered_semantic = cache::tiered_semantic_cache<any_tier, std::string, std::uint32_t, index>;

/// `make(size)` with the bank's size: `capacity` entries or `budget` bytes, exactly one given.
template <class Make>
auto with_bank_size(const char* who, std::optional<std::size_t> capacity, std::optional<std::size_t> budget, Make&& make) {
    FRUGAL_CHECK(capacity.has_value() != budget.has_value(), who,
                 ": give exactly one of capacity (entries) and budget_bytes");
    return capacity ? make(*capacity) : make(memory_budget(*budget));
}

// The two banks as the shared methods see them: `bank` answers lookup, insert and
// set_answer; memory() is the semantic_cache in memory; io(who) guards a call that may reach
// the tier (the bank busy, and the tier too when there is one).
struct py_semantic {
    template <class Size>
    py_semantic(Size size, std::size_t dim, double tau) : bank(size, dim, tau) {}
    semantic bank;
    busy_flag busy;
    semantic& memory() noexcept { return bank; }
    busy_flag::guard io(const char* who) { return {busy, who}; }
};

struct py_tiered_semantic {
    template <class Tier, class Size>
    py_tiered_semantic(py::object tier_object, py_tier<Tier>& t, const cache::tier_namespace& ns, Size size,
                       std::size_t dim, double tau)
        : tier_owner(std::move(tier_object)), tier(t), bank(tier, ns, size, dim, tau) {}
    py::object tier_owner;  // keeps the tier alive while the bank reads and writes it
    any_tier tier;
    tiered_semantic bank;
    busy_flag busy;
    semantic& memory() noexcept { return bank.memory(); }
    tier_call_guard io(const char* who) { return {busy, tier, who}; }
};

/// An entry of the QA bank as Python reads it (SemanticEntry), and a lookup's hit (SemanticHit).
struct semantic_entry {
    semantic_entry(std::uint64_t i, const semantic::entry_type& e)
        : id(i), query(e.query), answer(e.answer), chunks(copy_out(std::span<const std::uint32_t>(e.chunks))),
          refresh_floor(e.refresh_floor) {}
    std::uint64_t id;
    std::string query;
    std::optional<std::string> answer;
    py::object chunks;
    float refresh_floor;
};
struct semantic_hit : semantic_entry {
    semantic_hit(std::uint64_t i, const semantic::entry_type& e, float s, bool x) : semantic_entry(i, e), similarity(s), exact(x) {}
    float similarity;
    bool exact;
};

void bind_semantic_results(py::module_& m) {
    using E = semantic_entry;
    using H = semantic_hit;
    const char* entry_doc = "The query's id.";
    bind_result<E>(m, "SemanticEntry", "An entry of a SemanticCache (from find()).\n\n"
                   "    if (e := bank.find(entry_id)) is not None and e.answer is None: answer_later(e.query)",
                   old_form::dict,
                   result_field{"id", &E::id, entry_doc}, result_field{"query", &E::query},
                   result_field{"answer", &E::answer, "None until set_answer()."},
                   result_field{"chunks", &E::chunks, "The knowledge chunks it used (uint32 array)."},
                   result_field{"refresh_floor", &E::refresh_floor});
    bind_result<H>(m, "SemanticHit",
                   "A SemanticCache lookup's hit: the entry, its similarity and whether the text was equal.\n\n"
                   "    if (hit := bank.lookup(text, embedding)) is not None and hit.answer is not None: "
                   "return hit.answer",
                   old_form::dict, result_field{"id", &H::id, entry_doc}, result_field{"query", &H::query},
                   result_field{"answer", &H::answer, "None until set_answer()."},
                   result_field{"chunks", &H::chunks, "The knowledge chunks it used (uint32 array)."},
                   result_field{"refresh_floor", &H::refresh_floor},
                   result_field{"similarity", &H::similarity, "Cosine similarity of the embeddings."},
                   result_field{"exact", &H::exact, "Whether the query text was equal."});
}

/// The methods SemanticCache and TieredSemanticCache share (`name` is the class's): lookup,
/// insert and set_answer through the bank (the GIL released), the rest on memory (a tiered
/// bank's save and load too: its tier keeps its own records).
template <class S>
void bind_bank_methods(py::class_<S>& cls, const std::string& name) {
    const std::string n = name + ".";  // each method's busy-flag name below is built once, at binding
    cls.def("lookup",
            [who = n + "lookup"](S& s, const std::string& query, py::handle embedding) -> py::object {
                const array_view<float> e(embedding, "embedding");
                const auto g = s.io(who.c_str());
                const auto hit = [&] {
                    py::gil_scoped_release release;
                    return s.bank.lookup(query, e.span());
                }();
                if (!hit) return py::none();
                return py::cast(semantic_hit(hit->id, *hit->entry, hit->similarity, hit->exact));
            },
            py::arg("query"), py::arg("embedding"),
            "The hit, a SemanticHit (id, query, answer, chunks, refresh_floor, similarity, exact), or None.")
        .def("insert",
             [who = n + "insert"](S& s, std::string query, py::handle embedding, std::optional<std::string> answer,
                                  py::object chunks, float refresh_floor) -> std::optional<std::uint64_t> {
                 const array_view<float> e(embedding, "embedding");
                 std::vector<std::uint32_t> ids;
                 if (!chunks.is_none()) {
                     const array_view<std::uint32_t> c(chunks, "chunks");
                     ids.assign(c.data(), c.data() + c.size());
                 }
                 const auto g = s.io(who.c_str());
                 py::gil_scoped_release release;
                 return s.bank.insert(std::move(query), e.span(), std::move(answer), std::move(ids), refresh_floor);
             },
             py::arg("query"), py::arg("embedding"), py::arg("answer") = py::none(), py::kw_only(),
             py::arg("chunks") = py::none(), py::arg("refresh_floor") = std::numeric_limits<float>::infinity(),
             "Adds a query (or replaces the entry with the same text); returns its id, or None when refused.")
        .def("set_answer",
             [who = n + "set_answer"](S& s, std::uint64_t id, std::string answer) {
                 const auto g = s.io(who.c_str());
                 py::gil_scoped_release release;
                 return s.bank.set_answer(id, std::move(answer));
             },
             py::arg("id"), py::arg("answer"), "Records the answer of entry `id`; False when it was evicted or no longer fits.")
        .def("find",
             [who = n + "find"](S& s, std::uint64_t id) -> py::object {
                 busy_flag::guard g(s.busy, who.c_str());
                 const auto* e = s.memory().find(id);
                 return e == nullptr ? py::object(py::none()) : py::cast(semantic_entry(id, *e));
             },
             py::arg("id"), "Entry `id` (a SemanticEntry) without counting an access, or None.")
        .def("erase", [who = n + "erase"](S& s, std::uint64_t id) { return with_busy(s.busy, who.c_str(), [&] { return s.memory().erase(id); }); },
             py::arg("id"))
        .def("__contains__",
             [who = n + "__contains__"](S& s, std::uint64_t id) {
                 return with_busy(s.busy, who.c_str(), [&] { return s.memory().find(id) != nullptr; });
             },
             py::arg("id"))
        .def("__len__", [who = n + "__len__"](S& s) { return with_busy(s.busy, who.c_str(), [&] { return s.memory().size(); }); })
        .def_property(
            "tau", [who = n + "tau"](S& s) { return with_busy(s.busy, who.c_str(), [&] { return s.memory().tau(); }); },
            [who = n + "tau"](S& s, double tau) { with_busy(s.busy, who.c_str(), [&] { s.memory().set_tau(tau); }); },
            "The similarity threshold in [-1, 1].")
        .def_property_readonly("dim", [](S& s) { return s.memory().dim(); })  // fixed at construction
        .def_property_readonly("weight", [who = n + "weight"](S& s) {
            return with_busy(s.busy, who.c_str(), [&] { return s.memory().weight(); });
        })
        .def_property_readonly("capacity", [who = n + "capacity"](S& s) {
            return with_busy(s.busy, who.c_str(), [&] { return s.memory().capacity(); });
        })
        .def_property_readonly("misses", [who = n + "misses"](S& s) {
            return with_busy(s.busy, who.c_str(), [&] { return s.memory().misses(); });
        })
        .def_property_readonly("stats", [who = n + "stats"](S& s) {
            return with_busy(s.busy, who.c_str(), [&] { return s.memory().stats(); });
        })
        .def("save",
             [who = n + "save"](S& s, const std::filesystem::path& p) { without_gil(s.busy, who.c_str(), [&] { s.memory().save(p); }); },
             py::arg("path"),
             "Writes memory's entries (query, answer, chunks, refresh floor, unit embedding) crash-safely "
             "(temporary file, fsync, rename); recency is not kept.")
        .def("load",
             [who = n + "load"](S& s, const std::filesystem::path& p) { without_gil(s.busy, who.c_str(), [&] { s.memory().load(p); }); },
             py::arg("path"),
             "Replaces memory's entries with a saved bank's, after validating the whole file (a damaged file or "
             "another dimension raises and leaves the bank unchanged).");
}

void bind_semantic_cache(py::module_& m) {
    py::class_<py_semantic> cls(m, "SemanticCache", R"doc(
PerCache's QA bank: a lookup returns the stored query with the same text, else the most
similar one when its cosine similarity is at least tau. Capacity in entries (capacity=) or
bytes (budget_bytes=: embeddings, queries, answers, chunk ids); LRU eviction.

    bank = SemanticCache(dim=384, tau=0.9, budget_bytes=64 << 20)
    hit = bank.lookup(text, embedding)          # embedding: float32 array of dim values
    if hit is None or hit.answer is None:
        entry_id = bank.insert(text, embedding)  # answered later: bank.set_answer(entry_id, reply)
)doc");
    cls.def(py::init([](std::optional<std::size_t> capacity, std::optional<std::size_t> budget, std::size_t dim, double tau) {
                return with_bank_size("SemanticCache", capacity, budget,
                                      [&](auto size) { return std::make_unique<py_semantic>(size, dim, tau); });
            }),
            py::kw_only(), py::arg("capacity") = py::none(), py::arg("budget_bytes") = py::none(), py::arg("dim"),
            py::arg("tau"));
    bind_bank_methods(cls, "SemanticCache");
}

void bind_tiered_semantic_cache(py::module_& m) {
    using stats = cache::tiered_answer_stats;
    bind_result<stats>(m, "TieredAnswerStats", "A TieredSemanticCache's counters since it was made.", old_form::none,
                       result_field{"tier_hits", &stats::tier_hits, "lookups memory missed and the tier answered"},
                       result_field{"writes", &stats::writes, "answered entries handed to the tier"},
                       result_field{"write_failures", &stats::write_failures, "writes the storage failed"},
                       result_field{"refused", &stats::refused, "records not readable as this bank's entries (misses)"});

    py::class_<py_tiered_semantic> cls(m, "TieredSemanticCache", R"doc(
The QA bank (SemanticCache) with its answers in a DiskTier or RedisTier, as GPTCache keeps
answers in Redis beside an in-process vector index. Every answered entry (insert with an
answer, or set_answer) is written to the tier under its exact text (the first answer stored
for a text stays); a lookup memory misses asks the tier for the exact text, and an answer
found there joins memory. restore() indexes every answer the tier's namespace holds: after a
restart, or to take in what other processes answered. erase() forgets an entry in memory
only. Give the answers a namespace of their own (not the KV pages'); records of another
dimension, or damaged, are misses (tiered_stats.refused). One thread at a time.

    answers = TierNamespace("e5-small", "f32", "answers", page_tokens=1)
    bank = TieredSemanticCache(RedisTier(answers, port=6379), answers, dim=384, tau=0.9, budget_bytes=64 << 20)
    bank.restore()                                   # what other processes answered
    hit = bank.lookup(text, embedding)
    if hit is None or hit.answer is None:
        bank.insert(text, embedding, reply)          # shared with every process on the tier
)doc");
    cls.def(py::init([](py::object tier, const cache::tier_namespace& ns, std::optional<std::size_t> capacity,
                        std::optional<std::size_t> budget, std::size_t dim, double tau) {
                return visit_tier(tier, "TieredSemanticCache", "tier", [&](auto& t) {
                    return with_bank_size("TieredSemanticCache", capacity, budget, [&](auto size) {
                        return std::make_unique<py_tiered_semantic>(tier, t, ns, size, dim, tau);
                    });
                });
            }),
            py::arg("tier"), py::arg("namespace"), py::kw_only(), py::arg("capacity") = py::none(), py::arg("budget_bytes") = py::none(),
            py::arg("dim"), py::arg("tau"));
    bind_bank_methods(cls, "TieredSemanticCache");
    cls.def("restore",
            [](py_tiered_semantic& s) {
                const auto g = s.io("TieredSemanticCache.restore");
                py::gil_scoped_release release;
                return s.bank.restore();
            },
            "Inserts every answer the tier's namespace holds into memory (replacing entries of the same text; memory "
            "evicts beyond its size); returns how many records were read.")
        .def_property_readonly("tiered_stats", [](py_tiered_semantic& s) {
            return with_busy(s.busy, "TieredSemanticCache.tiered_stats", [&] { return s.bank.stats(); });
        });
}

}  // namespace

void bind_semantic(py::module_& m) {
    bind_semantic_results(m);
    bind_semantic_cache(m);
    bind_tiered_semantic_cache(m);
}

}  // namespace frugal::python
