// frugal.rag: HedraRAG's workflow graphs (RAGraph, Listing 1's workflows) and the wall-clock
// runtime (frugal::rag::rag_runtime) driving a generator and a retriever written in Python.
//
// Locks and the GIL. The runtime calls most generator and retriever methods, routers and user
// nodes while it holds its own mutex, from its two threads, from frugal's thread pool and from
// the threads that call submit; each such call takes the GIL. So no thread may wait for the
// runtime while it holds the GIL: every entry point releases the GIL before it calls into the
// runtime, and the order is always runtime mutex, then GIL. The Python objects the runtime's
// threads copy and drop without the GIL (queries, callbacks, errors, results) are held through
// `py_ref`, whose last copy takes the GIL to release its object.

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <future>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <stdexcept>
#include <stop_token>
#include <string>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include <pybind11/stl.h>

#include <frugal/core/executor.hpp>
#include <frugal/core/thread_pool.hpp>
#include <frugal/rag/engine.hpp>
#include <frugal/rag/runtime.hpp>
#include <frugal/rag/scheduler.hpp>
#include <frugal/rag/workflow.hpp>
#include <frugal/retrieve/top_k.hpp>

#include "common.hpp"

namespace frugal::python {
namespace {

using namespace frugal::rag;
using frugal_rag_texts = decltype(rag_state::texts);
using frugal_rag_values = decltype(rag_state::values);

// ---- Python objects on threads without the GIL --------------------------------------

// A Python object that C++ code may copy and drop on any thread, without the GIL: copies
// share one reference, and the last one takes the GIL to release it. Made and read with the
// GIL held.
class py_ref {
public:
    py_ref() = default;
    explicit py_ref(py::object o) : p_(new py::object(std::move(o)), release) {}
    [[nodiscard]] const py::object& get() const noexcept { return *p_; }
    [[nodiscard]] PyObject* ptr() const noexcept { return p_ ? p_->ptr() : nullptr; }
    explicit operator bool() const noexcept { return p_ != nullptr; }

private:
    static void release(py::object* o) {
        if (Py_IsInitialized() == 0) {  // after the interpreter: nothing to release it to
            (void)o->release();
            delete o;
            return;
        }
        py::gil_scoped_acquire gil;
        delete o;
    }
    std::shared_ptr<py::object> p_;
};

// Where the calling thread is: in a callback of a runtime (`runtime`), and whether that
// callback may call the runtime back (step, stopped, search and on_done run outside the
// runtime's lock; routers, user nodes and every other engine method inside it).
struct callback_place {
    const void* runtime = nullptr;
    bool may_call = true;
};
thread_local callback_place current_place;
const char graph_callbacks = 0;  // the runtime of a router or user node (not known to it)

class callback_scope {
public:
    callback_scope(const void* runtime, bool may_call) noexcept : saved_(current_place) {
        current_place = {runtime, may_call};
    }
    ~callback_scope() { current_place = saved_; }
    callback_scope(const callback_scope&) = delete;
    callback_scope& operator=(const callback_scope&) = delete;

private:
    callback_place saved_;
};

// A Python exception raised in a callback the runtime made: the message names the callback and
// the exception; the exception itself comes back as the result's `exception`.
class python_error : public std::runtime_error {
public:
    // Needs the GIL.
    python_error(const std::string& where, const py::error_already_set& e)
        : std::runtime_error(where + " raised " + describe(e)), value_(py::object(e.value())) {}
    [[nodiscard]] const py_ref& value() const noexcept { return value_; }

private:
    static std::string describe(const py::error_already_set& e) {
        try {
            return py::str(e.type().attr("__name__")).cast<std::string>() + ": " + py::str(e.value()).cast<std::string>();
        } catch (...) {
            return e.what();
        }
    }
    py_ref value_;
};

// Runs `fn` (a call into Python, GIL held); a Python exception becomes a python_error naming `who`.
template <class Fn>
decltype(auto) calling(const std::string& who, Fn&& fn) {
    try {
        return std::forward<Fn>(fn)();
    } catch (py::error_already_set& e) {
        throw python_error(who, e);
    }
}

std::string type_name(py::handle v) { return py::str(py::type::handle_of(v).attr("__name__")).cast<std::string>(); }

// A callback's duration or estimate in ms: a finite number >= 0.
double ms_of(py::handle v, const std::string& who) {
    const double d = PyFloat_AsDouble(v.ptr());
    if (d == -1.0 && PyErr_Occurred() != nullptr) {
        PyErr_Clear();
        FRUGAL_FAIL(frugal::invalid_argument, who, " must return a number of ms, got ", type_name(v));
    }
    FRUGAL_CHECK(std::isfinite(d) && d >= 0.0, who, " returned ", d, " ms (it must be finite and >= 0)");
    return d;
}

// An int >= 0 from a callback (a node id, a length, a cluster).
std::uint64_t index_of(py::handle v, const std::string& who) {
    if (PyIndex_Check(v.ptr()) == 0 || PyBool_Check(v.ptr()) != 0)
        FRUGAL_FAIL(frugal::invalid_argument, who, " must be an int >= 0, got ", type_name(v));
    const auto i = py::reinterpret_steal<py::object>(PyNumber_Index(v.ptr()));
    if (!i) throw py::error_already_set();
    const unsigned long long u = PyLong_AsUnsignedLongLong(i.ptr());
    if (u == static_cast<unsigned long long>(-1) && PyErr_Occurred() != nullptr) {
        PyErr_Clear();
        FRUGAL_FAIL(frugal::invalid_argument, who, " must be an int >= 0, got ", py::repr(v).cast<std::string>());
    }
    return u;
}

py::object method(const py::object& obj, const char* role, const char* name, const char* signature) {
    if (!py::hasattr(obj, name))
        throw py::type_error(std::string("rag.Runtime: the ") + role + " has no " + name + signature + " method");
    return obj.attr(name);
}
py::object optional_method(const py::object& obj, const char* name) {
    return py::hasattr(obj, name) ? py::object(obj.attr(name)) : py::object();
}
void check_callable(const py::object& f, const char* what) {
    if (!f.is_none() && PyCallable_Check(f.ptr()) == 0) throw py::type_error(std::string(what) + " must be callable or None");
}

// ---- states and nodes -----------------------------------------------------------------

// A str -> str (texts) or str -> int (values) mapping from Python; anything else raises TypeError.
frugal_rag_texts texts_of(py::handle mapping) {
    frugal_rag_texts out;
    for (py::handle item : mapping.attr("items")()) {
        const auto kv = py::reinterpret_borrow<py::tuple>(item);
        if (!py::isinstance<py::str>(kv[0]) || !py::isinstance<py::str>(kv[1]))
            throw py::type_error("rag.State: texts map str to str, got " + type_name(kv[0]) + " -> " + type_name(kv[1]));
        out.insert_or_assign(kv[0].cast<std::string>(), kv[1].cast<std::string>());
    }
    return out;
}
frugal_rag_values values_of(py::handle mapping) {
    frugal_rag_values out;
    for (py::handle item : mapping.attr("items")()) {
        const auto kv = py::reinterpret_borrow<py::tuple>(item);
        if (!py::isinstance<py::str>(kv[0]) || !PyLong_Check(kv[1].ptr()))
            throw py::type_error("rag.State: values map str to int, got " + type_name(kv[0]) + " -> " + type_name(kv[1]));
        out.insert_or_assign(kv[0].cast<std::string>(), kv[1].cast<std::int64_t>());
    }
    return out;
}

// A copy of `s` as a Python State (callbacks get copies: a state kept after the call is theirs).
py::object state_object(const rag_state& s) { return py::cast(s); }
// What a callback may write into the state it was handed: the input and the named outputs.
void copy_back(rag_state& s, py::handle obj) {
    const auto& from = obj.cast<const rag_state&>();
    s.input = from.input;
    s.texts = from.texts;
    s.values = from.values;
}

// A State from Python: a State (copied) or the input text.
rag_state state_of(py::handle h) {
    if (py::isinstance<py::str>(h)) {
        rag_state s;
        s.input = h.cast<std::string>();
        return s;
    }
    if (!py::isinstance<rag_state>(h))
        throw py::type_error("rag: a request's state must be a frugal.rag.State or its input text, got " + type_name(h));
    return h.cast<rag_state>();
}

// What a callback sees of a node (copied when the node is added).
struct py_node {
    rag_node_id id = 0;
    rag_node_kind kind = rag_node_kind::generation;
    std::string name;
    std::size_t tokens = 0, prompt_tokens = 0, top_k = 0;
};

// The Node object of every node of every live Graph, by the node's address in its graph (the
// runtime hands out `const rag_node&`). Used with the GIL; never destroyed (Graphs erase their
// entries, and a static would outlive the interpreter).
std::unordered_map<const rag_node*, PyObject*>& node_objects() {
    static auto* objects = new std::unordered_map<const rag_node*, PyObject*>();
    return *objects;
}
py::object node_object(const rag_node& n) {
    const auto it = node_objects().find(&n);
    FRUGAL_CHECK_AS(frugal::runtime_error, it != node_objects().end(), "rag: node ", n.name, " belongs to no live Graph");
    return py::reinterpret_borrow<py::object>(it->second);
}

std::string node_name(rag_node_id id) {
    return id == rag_start ? "START" : id == rag_end ? "END" : std::to_string(id);
}

// A workflow graph and the Node objects of its nodes. Frozen by its first submit: the runtime's
// threads read it without the GIL from then on.
struct py_graph {
    py_graph() = default;
    py_graph(const py_graph&) = delete;
    py_graph& operator=(const py_graph&) = delete;
    ~py_graph() {
        for (const auto& n : nodes) node_objects().erase(n.first);
    }

    void open(const char* who) const {
        FRUGAL_CHECK_AS(frugal::runtime_error, !frozen, "rag.Graph.", who,
                        ": the graph was submitted to a Runtime and no longer changes (build a new one)");
    }
    void track(rag_node_id id) {
        const rag_node& n = g.node(id);
        py::object o = py::cast(py_node{id, n.kind, n.name, n.tokens, n.prompt_tokens, n.top_k});
        node_objects()[&n] = o.ptr();
        nodes.emplace_back(&n, std::move(o));
    }

    rag_graph g;
    std::vector<std::pair<const rag_node*, py::object>> nodes;
    bool frozen = false;
};

std::unique_ptr<py_graph> graph_of(rag_graph g) {
    auto p = std::make_unique<py_graph>();
    p->g = std::move(g);
    for (rag_node_id id = 0; id < 8; ++id)  // the built-in workflows number their nodes from 0
        if (p->g.contains(id)) p->track(id);
    return p;
}

// ---- slots ------------------------------------------------------------------------------

// Whether a batch's slots may still be read: until its step or search returns. Read and
// written with the GIL.
struct slot_lease {
    bool alive = true;
};
struct lease_ends {
    slot_lease& lease;
    ~lease_ends() { lease.alive = false; }
};

struct py_generation_slot {
    generation_slot slot;
    std::shared_ptr<slot_lease> lease;
    py::object node;
    [[nodiscard]] const generation_slot& live(const char* who) const {
        FRUGAL_CHECK_AS(frugal::runtime_error, lease->alive, "rag.GenerationSlot.", who,
                        ": the slot was used after its step() returned (copy what you need during the call)");
        return slot;
    }
};

struct py_retrieval_slot {
    std::size_t request = 0;
    py::object query;
    std::vector<std::size_t> clusters;
    retrieve::top_k* results = nullptr;
    std::shared_ptr<slot_lease> lease;
    [[nodiscard]] retrieve::top_k& live(const char* who) const {
        FRUGAL_CHECK_AS(frugal::runtime_error, lease->alive, "rag.RetrievalSlot.", who,
                        ": the slot was used after its search() returned");
        return *results;
    }
};

// ---- the generator and retriever adapters ------------------------------------------------

// A retriever's query: any Python object, compared with Python's ==.
class py_query {
public:
    py_query() = default;
    explicit py_query(py_ref q) : q_(std::move(q)) {}
    [[nodiscard]] const py_ref& ref() const noexcept { return q_; }
    friend bool operator==(const py_query& a, const py_query& b) {
        if (a.q_.ptr() == b.q_.ptr() || !a.q_ || !b.q_) return a.q_.ptr() == b.q_.ptr();
        const callback_scope scope(&graph_callbacks, false);
        py::gil_scoped_acquire gil;
        const int r = PyObject_RichCompareBool(a.q_.ptr(), b.q_.ptr(), Py_EQ);
        if (r < 0) throw python_error("the retriever's query ==", py::error_already_set());
        return r == 1;
    }

private:
    py_ref q_;
};

// A Python generator as the runtime's rag_generator: every call takes the GIL. Its bound
// methods are looked up once; they are used and dropped with the GIL only.
class py_generator {
public:
    py_generator(py::object g, const void* owner)
        : owner_(owner), object_(std::move(g)), step_(method(object_, "generator", "step", "(batch)")),
          step_time_(method(object_, "generator", "step_time", "(count, context)")),
          length_(method(object_, "generator", "length", "(state, node)")),
          commit_(method(object_, "generator", "commit", "(state, node)")),
          discard_(method(object_, "generator", "discard", "(request)")), preview_(optional_method(object_, "preview")),
          stopped_(optional_method(object_, "stopped")) {}

    double step(std::span<const generation_slot> batch) {
        const callback_scope scope(owner_, true);
        py::gil_scoped_acquire gil;
        auto lease = std::make_shared<slot_lease>();
        const lease_ends ends{*lease};
        py::list slots(batch.size());
        for (std::size_t i = 0; i < batch.size(); ++i)
            slots[i] = py::cast(py_generation_slot{batch[i], lease, node_object(*batch[i].node)});
        return calling("generator.step", [&] { return ms_of(step_(slots), "generator.step"); });
    }
    double step_time(std::size_t count, std::size_t context) const {
        const callback_scope scope(owner_, false);
        py::gil_scoped_acquire gil;
        return calling("generator.step_time", [&] { return ms_of(step_time_(count, context), "generator.step_time"); });
    }
    std::size_t length(const rag_state& s, const rag_node& n) const {
        const callback_scope scope(owner_, false);
        py::gil_scoped_acquire gil;
        return calling("generator.length",
                       [&] { return static_cast<std::size_t>(index_of(length_(state_object(s), node_object(n)), "generator.length")); });
    }
    void commit(rag_state& s, const rag_node& n) { on_state("generator.commit", commit_, s, n); }
    void discard(std::size_t request) {
        const callback_scope scope(owner_, false);
        py::gil_scoped_acquire gil;
        calling("generator.discard", [&] { discard_(request); });
    }
    void preview(rag_state& s, const rag_node& n) const { on_state("generator.preview", preview_, s, n); }
    bool stopped(std::size_t request) const {
        if (!has_stopped()) return false;
        const callback_scope scope(owner_, true);
        py::gil_scoped_acquire gil;
        return calling("generator.stopped", [&] { return py::bool_(stopped_(request)).cast<bool>(); });
    }

    [[nodiscard]] bool has_preview() const noexcept { return static_cast<bool>(preview_); }
    [[nodiscard]] bool has_stopped() const noexcept { return static_cast<bool>(stopped_); }
    [[nodiscard]] const py::object& object() const noexcept { return object_; }

private:
    // method(state, node) on the State object of `s`, whose changes are copied back to it.
    void on_state(const char* who, const py::object& method, rag_state& s, const rag_node& n) const {
        const callback_scope scope(owner_, false);
        py::gil_scoped_acquire gil;
        calling(who, [&] {
            const py::object st = state_object(s);
            method(st, node_object(n));
            copy_back(s, st);
        });
    }

    const void* owner_;
    py::object object_, step_, step_time_, length_, commit_, discard_, preview_, stopped_;
};

// A Python retriever as the runtime's rag_retriever. With `threads` > 1 a batch's slots are
// split into up to `threads` parts searched at once on frugal's thread pool (they overlap where
// the retriever's search releases the GIL: numpy, FAISS).
class py_retriever {
public:
    py_retriever(py::object r, const void* owner, std::size_t threads)
        : owner_(owner), threads_(threads), object_(std::move(r)),
          query_of_(method(object_, "retriever", "query_of", "(state, node)")),
          probe_(method(object_, "retriever", "probe", "(query)")),
          cluster_time_(method(object_, "retriever", "cluster_time", "(cluster)")),
          search_(method(object_, "retriever", "search", "(batch)")), list_of_(optional_method(object_, "list_of")) {}

    py_query query_of(const rag_state& s, const rag_node& n) const {
        const callback_scope scope(owner_, false);
        py::gil_scoped_acquire gil;
        return calling("retriever.query_of", [&] { return py_query(py_ref(query_of_(state_object(s), node_object(n)))); });
    }
    std::vector<std::size_t> probe(const py_query& q) const {
        const callback_scope scope(owner_, false);
        py::gil_scoped_acquire gil;
        return calling("retriever.probe", [&] {
            std::vector<std::size_t> clusters;
            for (py::handle c : probe_(q.ref().get())) clusters.push_back(index_of(c, "a cluster from retriever.probe"));
            return clusters;
        });
    }
    double cluster_time(std::size_t c) const {
        const callback_scope scope(owner_, false);
        py::gil_scoped_acquire gil;
        return calling("retriever.cluster_time", [&] { return ms_of(cluster_time_(c), "retriever.cluster_time"); });
    }
    // Without a Python list_of the runtime is told not to reorder, and only its internal
    // count of clusters searched asks: no cluster is named.
    std::size_t list_of(std::uint64_t id) const {
        if (!has_list_of()) return std::numeric_limits<std::size_t>::max();
        const callback_scope scope(owner_, false);
        py::gil_scoped_acquire gil;
        return calling("retriever.list_of", [&] { return index_of(list_of_(id), "retriever.list_of"); });
    }
    double search(std::span<const retrieval_slot<py_query>> batch) { return search_part(batch); }
    double search(std::span<const retrieval_slot<py_query>> batch, thread_pool& ex) {
        const std::size_t parts = std::min(threads_, batch.size());
        if (parts <= 1) return search_part(batch);
        std::vector<double> ms(parts, 0.0);
        parallel_for(ex, parts, parts, [&](std::size_t p, std::size_t) {
            const std::size_t lo = batch.size() * p / parts, hi = batch.size() * (p + 1) / parts;
            ms[p] = search_part(batch.subspan(lo, hi - lo));
        });
        return *std::max_element(ms.begin(), ms.end());
    }

    [[nodiscard]] bool has_list_of() const noexcept { return static_cast<bool>(list_of_); }
    [[nodiscard]] const py::object& object() const noexcept { return object_; }

private:
    double search_part(std::span<const retrieval_slot<py_query>> batch) {
        const callback_scope scope(owner_, true);
        py::gil_scoped_acquire gil;
        auto lease = std::make_shared<slot_lease>();
        const lease_ends ends{*lease};
        py::list slots(batch.size());
        for (std::size_t i = 0; i < batch.size(); ++i) {
            const retrieval_slot<py_query>& s = batch[i];
            slots[i] = py::cast(py_retrieval_slot{s.request, s.query->ref().get(),
                                                  std::vector<std::size_t>(s.clusters.begin(), s.clusters.end()), s.results, lease});
        }
        return calling("retriever.search", [&] { return ms_of(search_(slots), "retriever.search"); });
    }

    const void* owner_;
    std::size_t threads_;
    py::object object_, query_of_, probe_, cluster_time_, search_, list_of_;
};

static_assert(rag_stopping_generator<py_generator> && rag_previewing_generator<py_generator>);
static_assert(rag_ordered_retriever<py_retriever> && rag_parallel_retriever<py_retriever, thread_pool>);

// ---- results and futures ---------------------------------------------------------------

struct py_result {
    rag_status status = rag_status::finished;
    py::object state;
    std::string error;
    py::object exception;
    rag_request_metrics metrics;
};

// The Python exception of a failed request: what its callback raised, or frugal's error.
py::object exception_object(const std::exception_ptr& e) {
    if (!e) return py::none();
    try {
        std::rethrow_exception(e);
    } catch (const python_error& pe) {
        return pe.value().get();
    } catch (...) {
        (void)raise_current_exception();
        const py::error_already_set err;
        return err.value();
    }
}

py::object result_object(const rag_result& r) {
    // r.error names the side that failed and what it raised ("the generator failed: ...").
    return py::cast(py_result{r.status, state_object(r.state), r.error, exception_object(r.exception), r.metrics});
}

// One submitted request's future: the C++ future, its stop source, and the Python Result,
// made (with the GIL) when the request ends, before the C++ future is ready.
struct future_state {
    std::shared_future<rag_result> future;
    std::stop_source stop;
    py_ref result;
    const void* owner = nullptr;
};
struct py_future {
    std::shared_ptr<future_state> s;
};

// ---- the runtime --------------------------------------------------------------------------

using runtime_type = rag_runtime<py_generator, py_retriever, thread_pool>;

// Everything a Runtime owns; the Python object holds it by shared_ptr so that one dropped
// inside its own callback can be closed on another thread. Calls into the runtime are
// counted: close() waits for the ones in progress and refuses new ones.
struct runtime_core {
    runtime_core(py::object gen, py::object ret, std::size_t threads, const py::object& done, rag_runtime_options opt)
        : generator(std::move(gen), this), retriever(std::move(ret), this, threads), pool(threads), on_done(done) {
        FRUGAL_CHECK(!opt.schedule.speculate_retrieval || (generator.has_preview() && retriever.has_list_of()),
                     "rag.Runtime: speculate_retrieval needs a generator with preview(state, node) and a retriever "
                     "with list_of(id)");
        if (!retriever.has_list_of()) opt.schedule.reorder = false;  // the order needs the results' clusters
        py::gil_scoped_release release;
        runtime = std::make_unique<runtime_type>(generator, retriever, pool, opt);
    }

    // With the GIL released: whether the runtime is open (then the call is counted until `leave`).
    bool enter() {
        const std::lock_guard lock(life_mutex);
        if (phase != phase_kind::open) return false;
        ++calls;
        return true;
    }
    void leave() {
        const std::lock_guard lock(life_mutex);
        if (--calls == 0) life_cv.notify_all();
    }
    void wait_closed() {
        std::unique_lock lock(life_mutex);
        life_cv.wait(lock, [&] { return phase == phase_kind::closed; });
    }
    // With the GIL released: refuses new calls, waits for those in progress, then destroys the
    // C++ runtime (its threads stop; what has not ended is cancelled and delivered).
    void close() {
        std::unique_lock lock(life_mutex);
        if (phase != phase_kind::open) {
            life_cv.wait(lock, [&] { return phase == phase_kind::closed; });
            return;
        }
        phase = phase_kind::closing;
        life_cv.wait(lock, [&] { return calls == 0; });
        lock.unlock();
        rag_runtime_metrics last = runtime->metrics();
        runtime.reset();
        lock.lock();
        final_metrics = last;
        phase = phase_kind::closed;
        life_cv.notify_all();
    }
    [[nodiscard]] bool closed() {
        const std::lock_guard lock(life_mutex);
        return phase != phase_kind::open;
    }
    [[nodiscard]] bool closed_now() {
        const std::lock_guard lock(life_mutex);
        return phase == phase_kind::closed;
    }
    // After close: the figures at close, every request counted by how it ended.
    [[nodiscard]] rag_runtime_metrics closed_metrics() {
        rag_runtime_metrics m = final_metrics;
        m.in_flight = m.queued = 0;
        m.submitted = submitted.load();
        m.finished = ended[0].load();
        m.cancelled = ended[1].load();
        m.timed_out = ended[2].load();
        m.failed = ended[3].load();
        return m;
    }

    // The runtime's on_done for every request (on a runtime thread, or in submit or close):
    // makes the Result, then calls the submit's callback and the runtime's.
    void deliver(future_state& f, const py_ref& callback, const rag_result& r) {
        const callback_scope scope(this, true);
        py::gil_scoped_acquire gil;
        ++ended[static_cast<std::size_t>(r.status)];
        py::object result;
        try {
            result = result_object(r);
        } catch (py::error_already_set& e) {  // the future still gets the C++ result
            e.discard_as_unraisable("frugal.rag.Runtime making a Result");
            return;
        }
        f.result = py_ref(result);
        if (callback) notify(callback.get(), result);
        if (!on_done.is_none()) notify(on_done, result);
    }
    static void notify(const py::object& f, const py::object& result) {
        try {
            f(result);
        } catch (py::error_already_set& e) {  // a callback's error is reported, the request still ends
            e.discard_as_unraisable(f);
        }
    }

    py_generator generator;
    py_retriever retriever;
    thread_pool pool;
    py::object on_done;
    std::atomic<std::size_t> submitted{0};
    std::array<std::atomic<std::size_t>, 4> ended{};

    enum class phase_kind : std::uint8_t { open, closing, closed };
    std::mutex life_mutex;
    std::condition_variable life_cv;
    std::size_t calls = 0;
    phase_kind phase = phase_kind::open;
    rag_runtime_metrics final_metrics;
    std::unique_ptr<runtime_type> runtime;  // last: destroyed (by close) before what it uses
};

// Every runtime not yet destroyed, closed at interpreter exit before its threads could call a
// finalizing interpreter. Used with the GIL.
std::unordered_map<runtime_core*, std::weak_ptr<runtime_core>>& live_runtimes() {
    static auto* live = new std::unordered_map<runtime_core*, std::weak_ptr<runtime_core>>();
    return *live;
}
// The threads closing runtimes dropped inside their own callbacks (used with the GIL): joined
// at exit, since each needs the GIL once more to drop what its runtime held.
std::vector<std::thread>& closing_threads() {
    static auto* threads = new std::vector<std::thread>();
    return *threads;
}
void close_all_runtimes() {
    while (true) {  // a result delivered meanwhile may drop another runtime
        std::vector<std::shared_ptr<runtime_core>> open;
        for (auto& [p, w] : live_runtimes())
            if (auto c = w.lock(); c && !c->closed_now()) open.push_back(std::move(c));
        std::vector<std::thread> closing;
        closing.swap(closing_threads());
        if (open.empty() && closing.empty()) return;
        py::gil_scoped_release release;
        for (auto& c : open) c->close();
        for (auto& t : closing) t.join();
    }
}

struct py_runtime {
    explicit py_runtime(std::shared_ptr<runtime_core> c) : core(std::move(c)) { live_runtimes()[core.get()] = core; }
    py_runtime(const py_runtime&) = delete;
    py_runtime& operator=(const py_runtime&) = delete;
    ~py_runtime() {  // with the GIL
        if (!core) return;
        live_runtimes().erase(core.get());
        if (current_place.runtime != nullptr) {
            // Dropped inside a callback (maybe its own, which its threads would wait for, or one
            // that holds its lock): closed on a thread of its own.
            closing_threads().emplace_back([c = std::move(core)]() mutable {
                c->close();
                const py::gil_scoped_acquire gil;
                c.reset();
            });
            return;
        }
        {
            py::gil_scoped_release release;
            core->close();
        }
        core.reset();
    }
    std::shared_ptr<runtime_core> core;
};

// Calls the runtime back from where it would deadlock.
void check_may_call(const char* who) {
    FRUGAL_CHECK_AS(frugal::runtime_error, current_place.runtime == nullptr || current_place.may_call, "rag.Runtime.", who,
                    ": called from a router, user node or engine method that the runtime calls under its lock (every "
                    "generator and retriever method but step, stopped and search); call it from those, from on_done, or "
                    "from another thread");
}
void check_not_inside(const runtime_core& c, const char* who) {
    check_may_call(who);
    FRUGAL_CHECK_AS(frugal::runtime_error, current_place.runtime != &c, "rag.Runtime.", who,
                    ": called from one of this runtime's own callbacks, which it would wait for");
}

py::object submit(runtime_core& c, const py::object& graph, py::handle state, std::optional<double> deadline_ms,
                  const py::object& on_done) {
    check_may_call("submit");
    if (!py::isinstance<py_graph>(graph))
        throw py::type_error("rag.Runtime.submit: graph must be a frugal.rag.Graph, got " + type_name(graph));
    auto& g = graph.cast<py_graph&>();
    check_callable(on_done, "on_done");
    rag_state st = state_of(state);
    rag_submit_options o;
    if (deadline_ms) {
        FRUGAL_CHECK(!std::isnan(*deadline_ms) && *deadline_ms > 0.0, "rag.Runtime.submit: deadline_ms = ", *deadline_ms,
                     " (must be > 0, or None)");
        if (std::isfinite(*deadline_ms))
            o.deadline = std::chrono::steady_clock::now() + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                                                                 std::chrono::duration<double, std::milli>(*deadline_ms));
    }
    g.g.validate();
    g.frozen = true;
    auto f = std::make_shared<future_state>();
    f->owner = &c;
    o.stop = f->stop.get_token();
    // The callback holds the request's graph until the request has ended (the C++ runtime's
    // contract), and is dropped after it ran.
    o.on_done = [core = &c, fs = f, cb = on_done.is_none() ? py_ref() : py_ref(on_done),
                 keep = py_ref(graph)](const rag_result& r) { core->deliver(*fs, cb, r); };
    {
        py::gil_scoped_release release;
        FRUGAL_CHECK_AS(frugal::runtime_error, c.enter(), "rag.Runtime.submit: the runtime is closed");
        try {
            f->future = c.runtime->submit(g.g, std::move(st), std::move(o)).share();
        } catch (...) {
            c.leave();
            throw;
        }
        c.leave();
    }
    ++c.submitted;
    return py::cast(py_future{std::move(f)});
}

rag_runtime_metrics runtime_metrics(runtime_core& c) {
    check_may_call("metrics");
    const bool own = current_place.runtime == &c;
    py::gil_scoped_release release;
    if (!c.enter()) {
        // Its own callback cannot wait for a close that waits for it.
        FRUGAL_CHECK_AS(frugal::runtime_error, !own || c.closed_now(), "rag.Runtime.metrics: the runtime is closing");
        c.wait_closed();
        return c.closed_metrics();
    }
    rag_runtime_metrics m = c.runtime->metrics();
    c.leave();
    return m;
}

void drain(runtime_core& c) {
    check_not_inside(c, "drain");
    py::gil_scoped_release release;
    if (!c.enter()) {  // closing: every request ends at close
        c.wait_closed();
        return;
    }
    try {
        c.runtime->drain();
    } catch (...) {
        c.leave();
        throw;
    }
    c.leave();
}

void close(runtime_core& c) {
    check_not_inside(c, "close");
    py::gil_scoped_release release;
    c.close();
}

py::object future_result(const py_future& f, std::optional<double> timeout) {
    if (f.s->result) return f.s->result.get();
    FRUGAL_CHECK_AS(frugal::runtime_error,
                    current_place.runtime == nullptr || (current_place.may_call && current_place.runtime != f.s->owner),
                    "rag.Future.result: called from a callback of the runtime that runs the request, which would wait "
                    "for itself (pass on_done instead)");
    FRUGAL_CHECK(!timeout || !std::isnan(*timeout), "rag.Future.result: timeout is NaN");
    const std::shared_future<rag_result> fut = f.s->future;  // a copy per waiting thread
    using clock = std::chrono::steady_clock;
    const auto start = clock::now();
    const auto slice = std::chrono::milliseconds(50);  // how often a wait looks at signals (Ctrl-C)
    while (true) {
        auto wait = std::chrono::duration_cast<clock::duration>(slice);
        if (timeout) {
            const auto left = std::chrono::duration_cast<clock::duration>(std::chrono::duration<double>(std::max(0.0, *timeout))) -
                              (clock::now() - start);
            wait = std::max(clock::duration::zero(), std::min(wait, left));
        }
        std::future_status status{};
        {
            py::gil_scoped_release release;
            status = fut.wait_for(wait);
        }
        if (status == std::future_status::ready) break;
        if (PyErr_CheckSignals() != 0) throw py::error_already_set();
        if (timeout && clock::now() - start >= std::chrono::duration<double>(*timeout)) {
            PyErr_SetString(PyExc_TimeoutError, "rag.Future.result: the request has not ended yet");
            throw py::error_already_set();
        }
    }
    if (f.s->result) return f.s->result.get();
    return result_object(fut.get());  // its Result could not be made when it ended
}

bool future_done(const py_future& f) {
    return f.s->result || f.s->future.wait_for(std::chrono::seconds(0)) == std::future_status::ready;
}

// ---- metrics --------------------------------------------------------------------------------

py::dict json_dict(const std::string& json) { return py::module_::import("json").attr("loads")(json); }

void bind_metrics(py::module_& m) {
    using request = rag_request_metrics;
    bind_result<request>(m, "RequestMetrics", R"doc(
What the runtime measured of one request, in ms (Result.metrics).

    r = runtime.submit(graph, "What is RAG?").result()
    r.metrics.end_to_end_ms, r.metrics.first_token_ms   # -1: no token was decoded
    r.metrics.to_json()                                 # '{"queued_ms": 0.01, ...}'
)doc",
                         old_form::none,
                         result_field{"queued_ms", &request::queued_ms, "Submitted until admitted (the admission limit)."},
                         result_field{"generation_ms", &request::generation_ms, "In generation batches."},
                         result_field{"retrieval_ms", &request::retrieval_ms, "In retrieval batches."},
                         result_field{"first_token_ms", &request::first_token_ms,
                                      "Submitted until its last generation's first decode step ended (-1: none)."},
                         result_field{"end_to_end_ms", &request::end_to_end_ms, "Submitted until it ended."},
                         result_field{"decode_steps", &request::decode_steps},
                         result_field{"retrieval_substages", &request::retrieval_substages})
        .def("to_json", [](const request& r) { return to_json(r); },
             "One JSON object (the C++ to_json).\n\n    log.write(result.metrics.to_json())")
        .def("to_dict", [](const request& r) { return json_dict(to_json(r)); },
             "The fields as a dict.\n\n    rows.append(result.metrics.to_dict())");

    using runtime = rag_runtime_metrics;
    const char* per_batch = "Requests per batch.";
    const char* busy = "Fraction of elapsed with a batch in flight.";
    bind_result<runtime>(m, "RuntimeMetrics", R"doc(
What a Runtime measured of its two sides and its requests so far (Runtime.metrics()).

    m = runtime.metrics()
    m.generation_busy, m.generation_batch_mean, m.finished + m.failed
    json.loads(m.to_json())
)doc",
                         old_form::none, result_field{"elapsed_ms", &runtime::elapsed_ms, "Since the runtime started."},
                         result_field{"generation_busy", &runtime::generation_busy, busy},
                         result_field{"retrieval_busy", &runtime::retrieval_busy, busy},
                         result_field{"generation_batches", &runtime::generation_batches},
                         result_field{"retrieval_batches", &runtime::retrieval_batches},
                         result_field{"generation_batch_mean", &runtime::generation_batch_mean, per_batch},
                         result_field{"retrieval_batch_mean", &runtime::retrieval_batch_mean, per_batch},
                         result_field{"generation_batch_max", &runtime::generation_batch_max},
                         result_field{"retrieval_batch_max", &runtime::retrieval_batch_max},
                         result_field{"submitted", &runtime::submitted}, result_field{"in_flight", &runtime::in_flight},
                         result_field{"queued", &runtime::queued}, result_field{"finished", &runtime::finished},
                         result_field{"cancelled", &runtime::cancelled}, result_field{"timed_out", &runtime::timed_out},
                         result_field{"failed", &runtime::failed})
        .def("to_json", [](const runtime& r) { return to_json(r); },
             "One JSON object (the C++ to_json).\n\n    print(runtime.metrics().to_json())")
        .def("to_dict", [](const runtime& r) { return json_dict(to_json(r)); },
             "The fields as a dict.\n\n    busy = runtime.metrics().to_dict()[\"generation_busy\"]");
}

// ---- states, nodes, graphs ---------------------------------------------------------------

// A State's texts or values as a live mapping: writes go to the state (state.texts["answer"] =
// ... writes the state); iteration, keys(), values() and items() are snapshots, so a loop that
// deletes keys never walks a changed map. Keeps its State alive; used with the GIL.
template <class Map>
struct map_view {
    py::object owner;
    Map* map = nullptr;
};

template <class Map>
void bind_map_view(py::module_& m, const char* name, const char* doc) {
    using view = map_view<Map>;
    using value = typename Map::mapped_type;
    const auto find = [](const view& v, const std::string& key) {
        const auto it = v.map->find(key);
        if (it == v.map->end()) throw py::key_error(key);
        return it;
    };
    const auto as_dict = [](const view& v) {
        py::dict d;
        for (const auto& [k, x] : *v.map) d[py::str(k)] = py::cast(x);
        return d;
    };
    py::class_<view>(m, name, doc)
        .def("__getitem__", [find](const view& v, const std::string& key) { return find(v, key)->second; }, py::arg("key"))
        .def("__setitem__", [](const view& v, const std::string& key, const value& x) { v.map->insert_or_assign(key, x); },
             py::arg("key"), py::arg("value"))
        .def("__delitem__", [find](const view& v, const std::string& key) { v.map->erase(find(v, key)); }, py::arg("key"))
        .def("__contains__",
             [](const view& v, py::handle key) { return py::isinstance<py::str>(key) && v.map->contains(key.cast<std::string>()); },
             py::arg("key"))
        .def("__len__", [](const view& v) { return v.map->size(); })
        .def("__iter__", [](const view& v) {
            py::list keys;
            for (const auto& [k, x] : *v.map) keys.append(py::str(k));
            return py::iter(keys);
        })
        .def("keys", [](const view& v) {
            py::list keys;
            for (const auto& [k, x] : *v.map) keys.append(py::str(k));
            return keys;
        }, "The keys, in order (a list: a snapshot).")
        .def("values", [](const view& v) {
            py::list values;
            for (const auto& [k, x] : *v.map) values.append(py::cast(x));
            return values;
        }, "The values, in key order (a snapshot).")
        .def("items", [](const view& v) {
            py::list items;
            for (const auto& [k, x] : *v.map) items.append(py::make_tuple(py::str(k), x));
            return items;
        }, "(key, value) pairs in key order (a snapshot).")
        .def("get",
             [](const view& v, const std::string& key, const py::object& fallback) -> py::object {
                 const auto it = v.map->find(key);
                 return it == v.map->end() ? fallback : py::cast(it->second);
             },
             py::arg("key"), py::arg("default") = py::none())
        .def("update",
             [](const view& v, const py::object& other) {
                 for (py::handle item : other.attr("items")()) {
                     const auto kv = py::reinterpret_borrow<py::tuple>(item);
                     v.map->insert_or_assign(kv[0].cast<std::string>(), kv[1].cast<value>());
                 }
             },
             py::arg("other"), "Sets every key of the mapping `other`.")
        .def("clear", [](const view& v) { v.map->clear(); })
        .def("__eq__", [as_dict](const view& v, const py::object& other) { return as_dict(v).equal(other); })
        .def("__repr__", [as_dict](const view& v) { return py::repr(as_dict(v)); });
}

void bind_state(py::module_& m) {
    bind_map_view<frugal_rag_texts>(m, "TextMap", R"doc(
A State's named text outputs: a live str -> str mapping (writes reach the state; iteration and
keys(), values(), items() are snapshots).

    state.texts["answer"] = text; "answer" in state.texts; dict(state.texts.items())
)doc");
    bind_map_view<frugal_rag_values>(m, "ValueMap", R"doc(
A State's named integer outputs (int64): a live str -> int mapping.

    state.values["subquestions"] = 3; state.values.get("rounds", 0)
)doc");

    py::class_<rag_state>(m, "State", R"doc(
The state of one request as it walks its workflow: the question (`input`), the named outputs
of its generations (`texts`, `values`: live mappings, written by the generator's commit and by
user nodes, read by routers and the retriever), how often each node finished (`visits`) and
the documents of every retrieval (`retrieved`). Callbacks get a copy: what commit, preview and
user nodes write into `input`, `texts` and `values` is copied back.

    s = State("Compare RAG with long-context models.", values={"subquestions": 3})
    s.texts["hypothesis"] = "..."; s.get("subquestions"), s.text("answer"), s.visited(2)
)doc")
        .def(py::init([](std::string input, const py::object& texts, const py::object& values) {
                 rag_state s;
                 s.input = std::move(input);
                 if (!texts.is_none()) s.texts = texts_of(texts);
                 if (!values.is_none()) s.values = values_of(values);
                 return s;
             }),
             py::arg("input") = "", py::kw_only(), py::arg("texts") = py::none(), py::arg("values") = py::none())
        .def_readonly("request", &rag_state::request, "The request's id in its runtime (0 before it is admitted).")
        .def_readwrite("input", &rag_state::input, "The question.")
        .def_property(
            "texts", [](const py::object& self) { return map_view<frugal_rag_texts>{self, &self.cast<rag_state&>().texts}; },
            [](rag_state& s, const py::object& d) { s.texts = texts_of(d); }, "Named text outputs (a live mapping; assign a dict to replace).")
        .def_property(
            "values", [](const py::object& self) { return map_view<frugal_rag_values>{self, &self.cast<rag_state&>().values}; },
            [](rag_state& s, const py::object& d) { s.values = values_of(d); }, "Named integer outputs (a live mapping).")
        .def_property_readonly("visits", [](const rag_state& s) { return s.visits; }, "{node id: times finished} (a copy).")
        .def_property_readonly("retrieved", [](const rag_state& s) { return s.retrieved; },
                               "The document ids of every retrieval so far, nearest first (a copy).")
        .def("text", [](const rag_state& s, const std::string& key) { return std::string(s.text(key)); }, py::arg("key"),
             "The text output named `key`, '' when unset.\n\n    query = state.text(\"hypothesis\") or state.input")
        .def("get", [](const rag_state& s, const std::string& key) { return s.get(key); }, py::arg("key"),
             "The value named `key`, 0 when unset.\n\n    rounds = state.get(\"subquestions\")")
        .def("visited", &rag_state::visited, py::arg("node"),
             "How many times `node` has finished for this request.\n\n    again = state.visited(2) < 3")
        .def("copy", [](const rag_state& s) { return s; }, "An independent copy.\n\n    mine = state.copy()")
        .def("__copy__", [](const rag_state& s) { return s; })
        .def("__deepcopy__", [](const rag_state& s, const py::object&) { return s; }, py::arg("memo"))
        .def("__repr__", [](const rag_state& s) {
            return "State(input=" + py::repr(py::str(s.input)).cast<std::string>() +
                   ", texts=" + py::repr(py::cast(std::map<std::string, std::string>(s.texts.begin(), s.texts.end()))).cast<std::string>() +
                   ", values=" + py::repr(py::cast(std::map<std::string, std::int64_t>(s.values.begin(), s.values.end()))).cast<std::string>() +
                   ", visits=" + py::repr(py::cast(s.visits)).cast<std::string>() +
                   ", retrieved=" + py::repr(py::cast(s.retrieved)).cast<std::string>() + ")";
        });
}

// Binds the workflow builder `name`: make(own..., lengths) with its own arguments first (`own`,
// positional or keyword), then the lengths every workflow takes as keywords (hypothesis, answer,
// prompt; the C++ defaults).
template <class... Own, class Make, class... OwnArgs>
void bind_workflow(py::module_& m, const char* name, const char* doc, Make make, OwnArgs... own) {
    const rag_workflow_lengths d;
    m.def(name,
          [make](Own... args, std::size_t hypothesis, std::size_t answer, std::size_t prompt) {
              return graph_of(make(args..., rag_workflow_lengths{hypothesis, answer, prompt}));
          },
          own..., py::kw_only(), py::arg("hypothesis") = d.hypothesis, py::arg("answer") = d.answer,
          py::arg("prompt") = d.prompt, doc);
}

void bind_graph(py::module_& m) {
    m.attr("START") = py::int_(rag_start);
    m.attr("END") = py::int_(rag_end);
    py::enum_<rag_node_kind>(m, "NodeKind", "What a node does: LLM generation, vector retrieval, or a user callback.")
        .value("generation", rag_node_kind::generation)
        .value("retrieval", rag_node_kind::retrieval)
        .value("user", rag_node_kind::user);

    bind_result<py_node>(m, "Node", R"doc(
One node of a Graph as callbacks see it (generator.length(state, node), commit, query_of):
its id, kind, name, decode steps (`tokens`) and `prompt_tokens` for generation, `top_k` for
retrieval.

    node = graph.node(1); node.kind == NodeKind.retrieval, node.top_k
)doc", old_form::none,
                         result_field{"id", &py_node::id}, result_field{"kind", &py_node::kind},
                         result_field{"name", &py_node::name}, result_field{"tokens", &py_node::tokens},
                         result_field{"prompt_tokens", &py_node::prompt_tokens}, result_field{"top_k", &py_node::top_k});

    py::class_<py_graph>(m, "Graph", R"doc(
A RAG workflow (HedraRAG's RAGraph, Listing 1): generation, retrieval and user nodes added by
id, plain edges, and conditional edges whose router (a callable over the request's State)
returns the next node among declared targets. Every loop needs a node with a visit bound.
validate() (and every submit) raises frugal.InvalidArgumentError naming the offending nodes;
a router that returns an undeclared node fails its request. Frozen by its first submit.

    g = Graph()                                      # Listing 1's Multistep
    g.add_generation(0, "decompose", 48)
    g.add_retrieval(1, "retrieve", top_k=2)
    g.add_generation(2, "answer", 96)
    g.add_edge(START, 0); g.add_edge(0, 1); g.add_edge(1, 2)
    g.add_edge(2, lambda s: 1 if s.visited(2) < s.get("subquestions") else END, targets=[1, END])
    g.bound_visits(1, 8)
    g.validate()
)doc")
        .def(py::init<>())
        .def("add_generation",
             [](py_graph& g, rag_node_id id, std::string name, std::size_t tokens, std::size_t prompt_tokens) {
                 g.open("add_generation");
                 g.g.add_generation(id, std::move(name), tokens, prompt_tokens);
                 g.track(id);
             },
             py::arg("id"), py::arg("name"), py::arg("tokens"), py::arg("prompt_tokens") = 256,
             "Adds a generation node of `tokens` decode steps over a prompt of `prompt_tokens`.\n\n"
             "    g.add_generation(0, \"hypothesis\", 64)")
        .def("add_retrieval",
             [](py_graph& g, rag_node_id id, std::string name, std::size_t top_k) {
                 g.open("add_retrieval");
                 g.g.add_retrieval(id, std::move(name), top_k);
                 g.track(id);
             },
             py::arg("id"), py::arg("name"), py::arg("top_k"),
             "Adds a retrieval node returning `top_k` documents.\n\n    g.add_retrieval(1, \"search\", top_k=5)")
        .def("add_user",
             [](py_graph& g, rag_node_id id, std::string name, const py::object& action) {
                 g.open("add_user");
                 if (PyCallable_Check(action.ptr()) == 0) throw py::type_error("rag.Graph.add_user: the action must be callable");
                 const std::string who = "user node " + std::to_string(id);
                 g.g.add_user(id, std::move(name), [f = py_ref(action), who](rag_state& s) {
                     const callback_scope scope(&graph_callbacks, false);
                     py::gil_scoped_acquire gil;
                     calling(who, [&] {
                         const py::object st = state_object(s);
                         f.get()(st);
                         copy_back(s, st);
                     });
                 });
                 g.track(id);
             },
             py::arg("id"), py::arg("name"), py::arg("action"),
             "Adds a user node: `action(state)` runs when a request reaches it, taking no time; what it\n"
             "writes into the state's input, texts and values stays.\n\n"
             "    g.add_user(3, \"count\", lambda s: s.values.__setitem__(\"rounds\", s.get(\"rounds\") + 1))")
        .def("add_edge",
             [](py_graph& g, rag_node_id source, const py::object& target, const py::object& targets) {
                 g.open("add_edge");
                 if (PyCallable_Check(target.ptr()) == 0) {
                     FRUGAL_CHECK(targets.is_none(), "rag.Graph.add_edge: targets are for a conditional edge (a router)");
                     g.g.add_edge(source, static_cast<rag_node_id>(index_of(target, "rag.Graph.add_edge: target")));
                     return;
                 }
                 FRUGAL_CHECK(!targets.is_none(), "rag.Graph.add_edge: a router from ", node_name(source),
                              " needs its declared targets (targets=[...])");
                 const std::string who = "the router of node " + node_name(source);
                 g.g.add_edge(
                     source,
                     [f = py_ref(target), who](const rag_state& s) -> rag_node_id {
                         const callback_scope scope(&graph_callbacks, false);
                         py::gil_scoped_acquire gil;
                         return calling(who, [&] { return static_cast<rag_node_id>(index_of(f.get()(state_object(s)), who)); });
                     },
                     [&] {
                         std::vector<rag_node_id> ids;
                         for (py::handle t : targets) ids.push_back(index_of(t, "rag.Graph.add_edge: a target"));
                         return ids;
                     }());
             },
             py::arg("source"), py::arg("target"), py::arg("targets") = py::none(),
             "Adds the edge source -> target; with a router as `target`, a conditional edge whose\n"
             "router(state) returns the next node, one of `targets` (START and END are ids too).\n\n"
             "    g.add_edge(START, 0)\n    g.add_edge(2, lambda s: 1 if s.visited(2) < 3 else END, targets=[1, END])")
        .def("bound_visits",
             [](py_graph& g, rag_node_id id, std::size_t max_visits) {
                 g.open("bound_visits");
                 g.g.bound_visits(id, max_visits);
             },
             py::arg("id"), py::arg("max_visits"),
             "Bounds how many times node `id` may run for one request (a loop's bound); a request that\n"
             "would run it once more fails.\n\n    g.bound_visits(1, 8)")
        .def("validate", [](const py_graph& g) { g.g.validate(); },
             "Raises frugal.InvalidArgumentError naming the nodes of a dangling edge, an unknown node, a\n"
             "dead end, a cycle nothing leaves or a loop without a bound.\n\n    g.validate()")
        .def("next", [](const py_graph& g, rag_node_id source, const rag_state& s) { return g.g.next(source, s); },
             py::arg("source"), py::arg("state"),
             "The successor of `source` for `state` (runs its router); a router's undeclared choice raises\n"
             "frugal.InvalidArgumentError.\n\n    g.next(START, State(\"q\"))   # 0")
        .def("node", [](const py_graph& g, rag_node_id id) { return node_object(g.g.node(id)); }, py::arg("id"),
             "The Node `id` (frugal.OutOfRangeError when there is none).\n\n    g.node(0).name")
        .def("conditional", [](const py_graph& g, rag_node_id source) { return g.g.conditional(source); }, py::arg("source"),
             "Whether the edge leaving `source` is conditional.\n\n    g.conditional(2)")
        .def("__contains__", [](const py_graph& g, rag_node_id id) { return g.g.contains(id); }, py::arg("id"),
             "Whether node `id` exists.\n\n    2 in g")
        .def_property_readonly(
            "nodes",
            [](const py_graph& g) {
                std::vector<std::pair<rag_node_id, py::object>> v;
                for (const auto& [p, o] : g.nodes) v.emplace_back(o.cast<const py_node&>().id, o);
                std::sort(v.begin(), v.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
                py::list out;
                for (auto& [id, o] : v) out.append(o);
                return out;
            },
            "The nodes, by id.")
        .def_property_readonly("frozen", [](const py_graph& g) { return g.frozen; },
                               "Whether the graph was submitted (it no longer changes).");

    bind_workflow<std::size_t>(m, "one_shot_workflow",
                               "One-shot: retrieve (node 0, top_k) with the question, then answer (node 1).\n\n"
                               "    g = one_shot_workflow(5)",
                               [](std::size_t top_k, rag_workflow_lengths l) { return one_shot_workflow(top_k, l); },
                               py::arg("top_k") = 5);
    bind_workflow<std::size_t>(m, "hyde_workflow",
                               "Listing 1's HyDE: generate a hypothesis (node 0), retrieve with it (node 1), answer "
                               "(node 2).\n\n    g = hyde_workflow(5)",
                               [](std::size_t top_k, rag_workflow_lengths l) { return hyde_workflow(top_k, l); },
                               py::arg("top_k") = 5);
    bind_workflow<std::size_t, std::size_t>(
        m, "multistep_workflow",
        "Listing 1's Multistep: decompose (node 0), then retrieve (node 1) and answer (node 2) once per\n"
        "sub-question: the router loops while the state's value \"subquestions\" exceeds the answers so\n"
        "far, at most `max_rounds` times.\n\n"
        "    g = multistep_workflow(2); runtime.submit(g, State(\"q\", values={\"subquestions\": 3}))",
        [](std::size_t top_k, std::size_t max_rounds, rag_workflow_lengths l) { return multistep_workflow(top_k, l, max_rounds); },
        py::arg("top_k") = 2, py::arg("max_rounds") = 16);
    bind_workflow<std::size_t, std::size_t>(
        m, "irg_workflow",
        "IRG: retrieve (node 0), generate (node 1), and again with what was generated, `rounds` times.\n\n"
        "    g = irg_workflow(5, rounds=3)",
        [](std::size_t top_k, std::size_t rounds, rag_workflow_lengths l) { return irg_workflow(top_k, rounds, l); },
        py::arg("top_k") = 5, py::arg("rounds") = 3);
}

// ---- slots, results, the runtime --------------------------------------------------------------

void bind_slots(py::module_& m) {
    py::class_<py_generation_slot>(m, "GenerationSlot", R"doc(
One request's decode step in the batch handed to generator.step(batch). Step 0 starts a new
generation of `node` (prefill from `state` and `docs`); `speculative` marks one conditioned on
a partial top-k, which may be discarded. `state` and `docs` are readable during the call only.

    def step(self, batch):
        for slot in batch:
            if slot.step == 0: self.start(slot.request, slot.node, slot.state, slot.docs)
        return self.engine.decode([slot.request for slot in batch])   # ms
)doc")
        .def_property_readonly("request", [](const py_generation_slot& s) { return s.slot.request; })
        .def_property_readonly("step", [](const py_generation_slot& s) { return s.slot.step; })
        .def_property_readonly("context", [](const py_generation_slot& s) { return s.slot.context; },
                               "Prompt, documents and steps so far in tokens, as the scheduler estimates them.")
        .def_property_readonly("speculative", [](const py_generation_slot& s) { return s.slot.speculative; })
        .def_property_readonly("node", [](const py_generation_slot& s) { return s.node; })
        .def_property_readonly("state", [](const py_generation_slot& s) { return *s.live("state").state; },
                               "A copy of the request's state.")
        .def_property_readonly(
            "docs",
            [](const py_generation_slot& s) {
                const auto d = s.live("docs").docs;
                return std::vector<std::uint64_t>(d.begin(), d.end());
            },
            "The document ids the generation is conditioned on.");

    py::class_<py_retrieval_slot>(m, "RetrievalSlot", R"doc(
One request's share of the batch handed to retriever.search(batch): its query (what
query_of returned), the clusters to search now, in order, and the top-k kept across the
request's sub-stages: offer(distance, id) each candidate (smaller is nearer; pass -score for a
similarity). Usable during the call only.

    def search(self, batch):
        for slot in batch:
            for c in slot.clusters:
                for doc in self.lists[c]:
                    slot.offer(self.distance(slot.query, doc), doc)
        return elapsed_ms
)doc")
        .def_property_readonly("request", [](const py_retrieval_slot& s) { return s.request; })
        .def_property_readonly("query", [](const py_retrieval_slot& s) { return s.query; })
        .def_property_readonly("clusters", [](const py_retrieval_slot& s) { return s.clusters; })
        .def("offer",
             [](const py_retrieval_slot& s, double distance, std::uint64_t id) {
                 return s.live("offer").offer(static_cast<float>(distance), id);
             },
             py::arg("distance"), py::arg("id"),
             "Offers a candidate; returns whether it is among the k nearest so far (ties: smaller id).\n\n"
             "    slot.offer(0.25, 17)")
        .def_property_readonly("k", [](const py_retrieval_slot& s) { return s.live("k").k(); })
        .def_property_readonly("worst", [](const py_retrieval_slot& s) { return s.live("worst").worst(); },
                               "The k-th distance so far (inf while fewer than k): a bound to skip candidates by.")
        .def_property_readonly("results", [](const py_retrieval_slot& s) { return s.live("results").sorted(); },
                               "[(distance, id)] kept so far, nearest first.");
}

void bind_runtime(py::module_& m) {
    py::enum_<rag_status>(m, "Status", "How a request ended.")
        .value("finished", rag_status::finished, "Reached END.")
        .value("cancelled", rag_status::cancelled, "Future.cancel(), or the runtime closed first.")
        .value("timed_out", rag_status::timed_out, "Its deadline or a stage timeout passed.")
        .value("failed", rag_status::failed, "Its generator batch, retriever batch, router or user node raised.");
    py::enum_<rag_policy>(m, "Policy", "Which scheduler runs the requests (HedraRAG Figure 5).")
        .value("sequential", rag_policy::sequential, "One side at a time (LangChain-style chains).")
        .value("naive_async", rag_policy::naive_async, "Both sides at once, whole retrievals.")
        .value("wavefront", rag_policy::wavefront, "HedraRAG: sub-stages, cluster order, speculation.");

    bind_result<py_result>(m, "Result", R"doc(
How a request ended: `status`, its final `state`, and when it did not finish, `error` (the
message) and `exception` (what its callback raised, or frugal's error; None when cancelled or
timed out); `metrics` (RequestMetrics).

    r = future.result()
    if r.status == Status.finished: print(r.state.text("answer"), r.metrics.end_to_end_ms)
    else: print(r.status.name, r.error)
)doc", old_form::none,
                           result_field{"status", &py_result::status}, result_field{"state", &py_result::state},
                           result_field{"error", &py_result::error}, result_field{"exception", &py_result::exception},
                           result_field{"metrics", &py_result::metrics});

    py::class_<py_future>(m, "Future", R"doc(
A submitted request (Runtime.submit). Safe to share between threads.

    f = runtime.submit(graph, "What is RAG?", deadline_ms=5000)
    f.done(); f.cancel()
    r = f.result(timeout=10.0)   # waits with the GIL released; TimeoutError when not ended by then
)doc")
        .def("result", &future_result, py::arg("timeout") = py::none(),
             "Waits (GIL released) until the request ends and returns its Result; raises TimeoutError\n"
             "after `timeout` seconds. Every call returns the same Result.\n\n    r = f.result()")
        .def("done", &future_done, "Whether the request has ended.\n\n    while not f.done(): ...")
        .def("cancel",
             [](const py_future& f) { return !future_done(f) && f.s->stop.request_stop(); },
             "Asks the runtime to cancel the request (status cancelled, within a few ms); returns False\n"
             "when it had ended or was cancelled already. It may still end otherwise.\n\n    f.cancel()")
        .def("__repr__", [](const py_future& f) { return std::string("<frugal.rag.Future ") + (future_done(f) ? "done>" : "pending>"); });

    py::class_<py_runtime>(m, "Runtime", R"doc(
HedraRAG's runtime in wall-clock time (C++ frugal::rag::rag_runtime): a generation thread
runs the generator's steps (the GPU side) while a retrieval thread runs the retriever's
searches (the CPU side), both batched over every request in flight by the wavefront scheduler.

`generator` and `retriever` are plain Python objects. The generator: step(batch) -> ms (one
decode step for every GenerationSlot), step_time(count, context) -> ms (an estimate),
length(state, node) -> decode steps, commit(state, node) (keep the request's generation: write
its outputs into the state), discard(request) (drop it); optionally stopped(request) -> bool
(ended at an end of sequence) and preview(state, node). The retriever: query_of(state, node)
-> any object compared with ==, probe(query) -> cluster ids in search order, cluster_time(c)
-> ms, search(batch) -> ms (offer each RetrievalSlot's candidates); optionally list_of(id) ->
the cluster of a document (similarity-aware order). Each is called from one runtime thread at a
time (with `threads` > 1, search from several at once, each on a part of the batch). A
generator or retriever that raises fails the requests of that batch only; a router or user
node that raises fails its request. `on_done(result)` is called once per request.

submit, metrics, drain and close may be called from any thread; close (or the with block's
end) cancels what has not ended, delivers every result and joins the threads.

    with Runtime(engine, index, max_in_flight=64) as rt:
        futures = [rt.submit(hyde_workflow(5), q) for q in questions]
        answers = [f.result().state.text("answer") for f in futures]
)doc")
        .def(py::init([](py::object generator, py::object retriever, std::size_t threads, std::size_t max_in_flight,
                         std::optional<double> stage_timeout_ms, const py::object& on_done, rag_policy policy,
                         bool speculate, bool reorder, bool speculate_retrieval, double beta_ms, std::size_t doc_tokens,
                         std::size_t history, std::size_t speculate_below, std::size_t speculate_after,
                         double speculate_retrieval_at, std::size_t speculate_retrieval_below) {
                 check_callable(on_done, "on_done");
                 FRUGAL_CHECK(threads >= 1, "rag.Runtime: threads = 0 can run nothing");
                 rag_runtime_options opt;
                 opt.max_in_flight = max_in_flight;
                 if (stage_timeout_ms) opt.stage_timeout_ms = *stage_timeout_ms;
                 opt.schedule.policy = policy;
                 opt.schedule.speculate = speculate;
                 opt.schedule.reorder = reorder;
                 opt.schedule.speculate_retrieval = speculate_retrieval;
                 opt.schedule.beta_ms = beta_ms;
                 opt.schedule.doc_tokens = doc_tokens;
                 opt.schedule.history = history;
                 opt.schedule.speculate_below = speculate_below;
                 opt.schedule.speculate_after = speculate_after;
                 opt.schedule.speculate_retrieval_at = speculate_retrieval_at;
                 opt.schedule.speculate_retrieval_below = speculate_retrieval_below;
                 return std::make_unique<py_runtime>(
                     std::make_shared<runtime_core>(std::move(generator), std::move(retriever), threads, on_done, opt));
             }),
             py::arg("generator"), py::arg("retriever"), py::kw_only(), py::arg("threads") = 1,
             py::arg("max_in_flight") = rag_runtime_options{}.max_in_flight, py::arg("stage_timeout_ms") = py::none(),
             py::arg("on_done") = py::none(), py::arg("policy") = rag_schedule_options{}.policy,
             py::arg("speculate") = rag_schedule_options{}.speculate, py::arg("reorder") = rag_schedule_options{}.reorder,
             py::arg("speculate_retrieval") = rag_schedule_options{}.speculate_retrieval,
             py::arg("beta_ms") = rag_schedule_options{}.beta_ms, py::arg("doc_tokens") = rag_schedule_options{}.doc_tokens,
             py::arg("history") = rag_schedule_options{}.history,
             py::arg("speculate_below") = rag_schedule_options{}.speculate_below,
             py::arg("speculate_after") = rag_schedule_options{}.speculate_after,
             py::arg("speculate_retrieval_at") = rag_schedule_options{}.speculate_retrieval_at,
             py::arg("speculate_retrieval_below") = rag_schedule_options{}.speculate_retrieval_below)
        .def("submit",
             [](py_runtime& r, const py::object& graph, py::handle state, std::optional<double> deadline_ms,
                const py::object& on_done) { return submit(*r.core, graph, state, deadline_ms, on_done); },
             py::arg("graph"), py::arg("state"), py::kw_only(), py::arg("deadline_ms") = py::none(),
             py::arg("on_done") = py::none(),
             "Submits a request on `graph` (which is frozen from now on) from a State or the question\n"
             "text; returns its Future. It times out `deadline_ms` after now; `on_done(result)` is called\n"
             "once when it ends, before the runtime's on_done. Raises frugal.InvalidArgumentError for an\n"
             "invalid graph, RuntimeFailureError once closed. Thread-safe.\n\n"
             "    f = rt.submit(hyde_workflow(5), State(\"What is RAG?\"), deadline_ms=2000)")
        .def("metrics", [](py_runtime& r) { return runtime_metrics(*r.core); },
             "The sides' and requests' figures so far (after close: at close, every request counted).\n\n"
             "    print(rt.metrics().to_json())")
        .def("drain", [](py_runtime& r) { drain(*r.core); },
             "Waits (GIL released) until every request submitted so far has ended.\n\n    rt.drain()")
        .def("close", [](py_runtime& r) { close(*r.core); },
             "Cancels what has not ended, delivers every result and joins the threads (GIL released;\n"
             "the generator's Python code may still be running). Idempotent; a second close waits for\n"
             "the first, and close waits for a drain() in progress.\n\n    rt.close()")
        .def_property_readonly("closed", [](py_runtime& r) { return r.core->closed(); },
                               "Whether close() was called.\n\n    if not rt.closed: rt.submit(graph, q)")
        .def_property_readonly("generator", [](py_runtime& r) { return r.core->generator.object(); },
                               "The generator (held until the runtime is dropped).\n\n    rt.generator.engine")
        .def_property_readonly("retriever", [](py_runtime& r) { return r.core->retriever.object(); },
                               "The retriever (held until the runtime is dropped).\n\n    rt.retriever.index")
        .def("__enter__", [](py::object self) { return self; },
             "The runtime itself; the with block's end closes it.\n\n    with Runtime(g, r) as rt: ...")
        .def("__exit__", [](py_runtime& r, py::args) { close(*r.core); }, "close().");

    py::module_::import("atexit").attr("register")(py::cpp_function(&close_all_runtimes));
}

}  // namespace

void bind_rag(py::module_ m) {
    bind_metrics(m);
    bind_state(m);
    bind_graph(m);
    bind_slots(m);
    bind_runtime(m);
}

}  // namespace frugal::python
