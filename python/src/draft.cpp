// frugal.draft: frugal::draft's suffix automaton, history, drafter and verification, over
// int32 tokens (numpy int32 arrays in and out).

#include <algorithm>
#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <mutex>
#include <optional>
#include <stop_token>
#include <string>
#include <thread>
#include <utility>

#include <pybind11/stl.h>
#include <pybind11/stl/filesystem.h>

#include <frugal/draft/drafter.hpp>
#include <frugal/core/thread_pool.hpp>
#include <frugal/draft/history.hpp>
#include <frugal/draft/speculator.hpp>
#include <frugal/draft/suffix_automaton.hpp>
#include <frugal/draft/verification_cost.hpp>
#include <frugal/draft/verify.hpp>

#include "common.hpp"

namespace frugal::python {
namespace {

using token = std::int32_t;
using tokens_view = array_view<token>;
using automaton = draft::suffix_automaton<token>;

// The live history is thread-safe in C++ (adds are queued, drafters read immutable
// snapshots), so the binding adds no lock of its own; it is held by pointer because it
// cannot move.
struct py_history {
    explicit py_history(std::unique_ptr<draft::live_history<token>> h) : history(std::move(h)) {}
    std::unique_ptr<draft::live_history<token>> history;
};

// A thread running live_history::publish_loop, owned by the Python object that started it:
// stop() (or the with block's exit, or the object's deallocation) stops and joins it. Safe to
// share: stop() is idempotent, and a second thread stopping meanwhile waits for the first's
// join instead of joining again.
struct py_publisher {
    explicit py_publisher(draft::live_history<token>& h) : thread([&h](std::stop_token stop) { h.publish_loop(stop); }) {}
    void stop() {
        py::gil_scoped_release release;  // before the lock: its holder may be waiting for the GIL
        const std::lock_guard lock(mutex);
        if (!thread.joinable()) return;
        thread.request_stop();
        thread.join();
    }
    bool running() {
        py::gil_scoped_release release;
        const std::lock_guard lock(mutex);
        return thread.joinable();
    }
    std::mutex mutex;  // orders stop() and running() on `thread`
    std::jthread thread;
};

// A single token from Python: an int within int32, named by its value when it is not.
token token_of(py::handle t) {
    int overflow = 0;
    const long long v = PyLong_AsLongLongAndOverflow(t.ptr(), &overflow);
    if (v == -1 && PyErr_Occurred()) throw py::error_already_set();
    if (overflow != 0 || v < std::numeric_limits<token>::min() || v > std::numeric_limits<token>::max())
        throw py::value_error("token " + py::str(t).cast<std::string>() + " is outside int32");
    return static_cast<token>(v);
}

struct py_drafter {
    py_drafter(const draft::drafter_config& config, py_history* h) : d(config, h ? h->history.get() : nullptr) {}

    // Runs fn without the GIL and with the drafter busy, then finish(fn's result) with the
    // GIL back and the drafter still busy: a draft is copied out of the drafter's buffer
    // before another thread may overwrite it.
    template <class Fn, class Finish>
    decltype(auto) run(const char* who, Fn&& fn, Finish&& finish) {
        busy_flag::guard mine(busy, who);
        auto result = [&] {
            py::gil_scoped_release release;
            return std::forward<Fn>(fn)();
        }();
        return std::forward<Finish>(finish)(result);
    }
    template <class Fn>
    void run(const char* who, Fn&& fn) {
        run(who, [&] { std::forward<Fn>(fn)(); return 0; }, [](int) {});
    }

    draft::drafter<token> d;
    busy_flag busy;
};

py::object optional_index(std::uint32_t v, std::uint32_t none) {
    return v == none ? py::object(py::none()) : py::object(py::int_(v));
}

draft::draft_tree<token> make_tree(py::handle tokens, py::handle parents) {
    const tokens_view t(tokens, "tokens");
    const array_view<std::int32_t> p(parents, "parents");
    FRUGAL_CHECK(t.size() == p.size(), "draft tree: ", t.size(), " tokens but ", p.size(), " parents");
    draft::draft_tree<token> tree;
    tree.tokens.assign(t.data(), t.data() + t.size());
    tree.parents.assign(p.data(), p.data() + p.size());
    return tree;
}

// A draft as Python reads it (DraftTree): tokens int32, parents int32 (-1: a child of the last
// accepted token) and probabilities float32 (each node's probability given its parent's path).
struct draft_arrays {
    py::object tokens, parents, probabilities;
};
// A batch of drafts (PackedDrafts): request i's nodes at [offsets[i], offsets[i + 1]) of the
// three arrays, four arrays for the batch instead of three per request, the layout a batched
// verifier takes (FlashInfer's indptr).
struct packed_drafts {
    py::object tokens, parents, probabilities, offsets;
};

draft_arrays tree_arrays(const draft::draft_tree<token>* t) {
    return {copy_out(std::span<const token>(t->tokens)), copy_out(std::span<const std::int32_t>(t->parents)),
            copy_out(std::span<const float>(t->probabilities))};
}

packed_drafts packed_trees(std::span<const draft::draft_tree<token>* const> drafts) {
    py::array_t<std::int64_t> offsets(static_cast<py::ssize_t>(drafts.size() + 1));
    std::int64_t* off = offsets.mutable_data();
    off[0] = 0;
    for (std::size_t i = 0; i < drafts.size(); ++i) off[i + 1] = off[i] + static_cast<std::int64_t>(drafts[i]->tokens.size());
    const auto total = static_cast<py::ssize_t>(off[drafts.size()]);
    py::array_t<token> tokens(total);
    py::array_t<std::int32_t> parents(total);
    py::array_t<float> probabilities(total);
    for (std::size_t i = 0; i < drafts.size(); ++i) {
        const auto& t = *drafts[i];
        std::copy(t.tokens.begin(), t.tokens.end(), tokens.mutable_data() + off[i]);
        std::copy(t.parents.begin(), t.parents.end(), parents.mutable_data() + off[i]);
        std::copy(t.probabilities.begin(), t.probabilities.end(), probabilities.mutable_data() + off[i]);
    }
    return {std::move(tokens), std::move(parents), std::move(probabilities), std::move(offsets)};
}

void bind_draft_results(py::module_& m) {
    const char* tokens = "Drafted tokens (int32).";
    const char* parents = "Each node's parent index (int32; -1: a child of the last accepted token).";
    const char* probabilities = "Each node's probability given its parent's path (float32).";
    bind_result<draft_arrays>(m, "DraftTree", R"doc(
A draft tree (or a chain: parents -1, 0, 1, ...) as three arrays of one node each.

    d = drafter.tree()
    r = verify_tree(d.tokens, d.parents, model_argmax)
)doc",
                              old_form::tuple, result_field{"tokens", &draft_arrays::tokens, tokens},
                              result_field{"parents", &draft_arrays::parents, parents},
                              result_field{"probabilities", &draft_arrays::probabilities, probabilities});
    bind_result<packed_drafts>(m, "PackedDrafts", R"doc(
A batch's drafts in four arrays: request i's nodes are [offsets[i], offsets[i + 1]) of tokens,
parents and probabilities, its parents counted within it.

    p = spec.propose(ids, packed=True)
    first = p.tokens[p.offsets[0]:p.offsets[1]]
)doc",
                               old_form::tuple, result_field{"tokens", &packed_drafts::tokens, tokens},
                               result_field{"parents", &packed_drafts::parents, parents},
                               result_field{"probabilities", &packed_drafts::probabilities, probabilities},
                               result_field{"offsets", &packed_drafts::offsets, "Where each request's nodes begin "
                                                                                 "(int64, one more than the ids)."});
}

// Drafter.chain through vectorcall (fast_method): the call that runs once per request and
// step, whose binding cost matters next to a draft of about a microsecond.
py::object drafter_chain(py_drafter& d, PyObject* const*, Py_ssize_t nargs, PyObject* kwnames) {
    check_arity("chain", nargs, kwnames, 0, 0);
    return d.run("Drafter.chain", [&] { return &d.d.chain(); },
                 [](const draft::draft_tree<token>* t) { return copy_out(std::span<const token>(t->tokens)); });
}
PyMethodDef drafter_chain_def = fast_method_def<py_drafter, &drafter_chain>(
    "chain", "chain($self)\n--\n\nA chain draft of at most max_draft tokens (int32 array; empty when nothing matches).");

struct py_automaton {
    automaton a;
    busy_flag busy;
};

// A const member of the automaton as a method that holds the object's busy flag (appends run
// without the GIL, so reads must not overlap them); `finish` converts its result.
template <class R, class... A, class Finish = std::identity>
auto guarded(R (automaton::*f)(A...) const, const char* who, Finish finish = {}) {
    return busy_method<&py_automaton::a>(f, who, finish);
}
// Its results that may be "none" (no_state, no_position) as None.
constexpr auto state_or_none = [](draft::state_id s) { return optional_index(s, draft::no_state); };
constexpr auto position_or_none = [](std::uint32_t p) { return optional_index(p, draft::no_position); };
constexpr auto copied = [](auto span) { return copy_out(span); };

void bind_automaton(py::module_& m) {
    py::class_<py_automaton>(m, "SuffixAutomaton", R"doc(
The online suffix automaton of a growing token sequence (CoordGen 4.1, SAM-Decoding), with
exact occurrence counts and first/last end positions per state.

    sam = SuffixAutomaton()
    sam.append([5, 7, 5, 7, 9])
    s = sam.find([5, 7])
    assert sam.count(s) == 2 and sam.first_end(s) == 1 and sam.last_end(s) == 3
)doc")
        .def(py::init<>())
        .def_property_readonly_static("root", [](py::handle) { return automaton::root; }, "The root state (the empty string).")
        .def("append",
             [](py_automaton& self, py::handle tokens) {
                 if (py::isinstance<py::int_>(tokens)) {
                     const token t = token_of(tokens);
                     return without_gil(self.busy, "SuffixAutomaton.append", [&] { self.a.append(t); });
                 }
                 const tokens_view t(tokens, "tokens");
                 without_gil(self.busy, "SuffixAutomaton.append", [&] { self.a.append(t.span()); });
             },
             py::arg("tokens"), "Appends a token or a sequence of tokens.")
        .def("begin_document", [](py_automaton& self) { busy_flag::guard g(self.busy, "SuffixAutomaton"); self.a.begin_document(); },
             "Starts a new document: no substring spans the boundary.")
        .def("clear", [](py_automaton& self) { busy_flag::guard g(self.busy, "SuffixAutomaton"); self.a.clear(); },
             "Removes every token and state.")
        .def("find",
             [](py_automaton& self, py::handle pattern) {
                 const tokens_view p(pattern, "pattern");
                 busy_flag::guard g(self.busy, "SuffixAutomaton.find");
                 return optional_index(self.a.find(p.span()), draft::no_state);
             },
             py::arg("pattern"), "The state of `pattern`, or None when it does not occur.")
        .def("next",
             [](py_automaton& self, draft::state_id s, token t) {
                 busy_flag::guard g(self.busy, "SuffixAutomaton.next");
                 (void)self.a.length(s);  // validates s
                 return optional_index(self.a.next(s, t), draft::no_state);
             },
             py::arg("state"), py::arg("token"), "Target of the transition from `state` by `token`, or None.")
        .def("length", guarded(&automaton::length, "SuffixAutomaton.length"), py::arg("state"),
             "Length of the longest string of `state`.")
        .def("count", guarded(&automaton::count, "SuffixAutomaton.count"), py::arg("state"),
             "Occurrences of the strings of `state`.")
        .def("link", guarded(&automaton::link, "SuffixAutomaton.link", state_or_none), py::arg("state"), "Suffix link of `state` (None for the root).")
        .def("first_end", guarded(&automaton::first_end, "SuffixAutomaton.first_end", position_or_none), py::arg("state"), "Index of the last token of the earliest occurrence (None for the root).")
        .def("last_end", guarded(&automaton::last_end, "SuffixAutomaton.last_end", position_or_none), py::arg("state"), "Index of the last token of the most recent occurrence (None for an empty root).")
        .def("transitions",
             [](py_automaton& self, draft::state_id s) {
                 busy_flag::guard g(self.busy, "SuffixAutomaton.transitions");
                 (void)self.a.length(s);
                 py::list out;
                 self.a.for_each_transition(s, [&](token t, draft::state_id target) { out.append(py::make_tuple(t, target)); });
                 return out;
             },
             py::arg("state"), "The outgoing transitions of `state` as (token, target) pairs.")
        .def("continuation", guarded(&automaton::continuation, "SuffixAutomaton.continuation", copied), py::arg("end"), py::arg("max_tokens"),
             "The tokens after an occurrence ending at `end` (at most `max_tokens`, within its document).")
        .def_property_readonly("repeat_state", guarded(&automaton::repeat_state, "SuffixAutomaton.repeat_state"),
                               "State of the longest suffix of the current document that also ends earlier.")
        .def_property_readonly("repeat_length", guarded(&automaton::repeat_length, "SuffixAutomaton.repeat_length"),
                               "Its length (0: none).")
        .def_property_readonly("repeat_end", guarded(&automaton::repeat_end, "SuffixAutomaton.repeat_end", position_or_none),
                               "End of its most recent earlier occurrence (None: none).")
        .def_property_readonly("last", guarded(&automaton::last, "SuffixAutomaton.last"),
                               "The state of the whole current document.")
        .def_property_readonly("state_count", guarded(&automaton::state_count, "SuffixAutomaton.state_count"),
                               "Number of states, root included.")
        .def_property_readonly("text", guarded(&automaton::text, "SuffixAutomaton.text", copied),
                               "Every token appended (a copy), documents concatenated.")
        .def_property_readonly("document_starts", guarded(&automaton::document_starts, "SuffixAutomaton.document_starts", copied),
                               "Start offset of each document in `text`.")
        .def_property_readonly("memory_bytes", guarded(&automaton::memory_bytes, "SuffixAutomaton.memory_bytes"),
                               "Approximate heap bytes held.")
        .def("__len__", guarded(&automaton::size, "SuffixAutomaton.__len__"));
}

void bind_publisher(py::module_& m) {
    py::class_<py_publisher>(m, "HistoryPublisher", "The writer thread of a History (from History.start_publisher()).")
        .def("stop", &py_publisher::stop, "Stops the thread after it publishes what is queued, and joins it.")
        .def_property_readonly("running", &py_publisher::running)
        .def("__enter__", [](py_publisher& p) -> py_publisher& { return p; }, py::return_value_policy::reference_internal)
        .def("__exit__", [](py_publisher& p, py::args) { p.stop(); });
}

void bind_history(py::module_& m) {
    py::class_<py_history>(m, "History", R"doc(
The live history of past outputs, shared by every drafter and Speculator that is given it
(CoordGen's history similarity, SuffixDecoding's global tree): at most `max_tokens` tokens,
oldest documents evicted first. add() is thread-safe and never waits for a rebuild; drafters
keep drafting from the snapshot they hold and move to the newest one at their next draft.

    history = History(1 << 20)
    history.add(response_tokens)           # visible to the next draft
    with history.start_publisher():        # a writer thread publishes
        history.add(output, publish=False) # what request threads queue
    history.save("history.bin")
    restored = History.load("history.bin")
    drafter = Drafter(history=restored)
)doc")
        .def(py::init([](std::size_t max_tokens, std::size_t young_tokens) {
                 return std::make_unique<py_history>(std::make_unique<draft::live_history<token>>(max_tokens, young_tokens));
             }),
             py::arg("max_tokens"), py::kw_only(), py::arg("young_tokens") = 0,
             "young_tokens: the most tokens of the young generation, which takes adds without a rebuild (0: "
             "max_tokens / 8).")
        .def("add",
             [](py_history& h, py::handle tokens, bool publish) {
                 const tokens_view t(tokens, "tokens");
                 py::gil_scoped_release release;
                 h.history->add(t.span());
                 if (publish) h.history->publish();
             },
             py::arg("tokens"), py::kw_only(), py::arg("publish") = true,
             "Adds one finished output as a document. publish=False only queues it (cheap; call publish() "
             "once after several adds).")
        .def("publish",
             [](py_history& h) {
                 py::gil_scoped_release release;
                 return h.history->publish();
             },
             "Applies the queued documents and publishes a new snapshot; False when nothing was queued.")
        .def("start_publisher", [](py_history& h) { return std::make_unique<py_publisher>(*h.history); },
             py::keep_alive<0, 1>(),
             "Starts a thread that publishes queued documents as they arrive (publish_loop), so add(publish=False) "
             "from the request threads is all they pay; returns its HistoryPublisher (stop() or a with block ends it, "
             "publishing what is left).")
        .def("save",
             [](py_history& h, const std::filesystem::path& path) {
                 py::gil_scoped_release release;
                 h.history->save(path);
             },
             py::arg("path"), "Writes the published history to `path` crash-safely (a flat, versioned, checksummed file).")
        .def_static("load",
                    [](const std::filesystem::path& path, std::size_t young_tokens) {
                        auto h = [&] {
                            py::gil_scoped_release release;
                            return std::make_unique<draft::live_history<token>>(path, young_tokens);
                        }();
                        return std::make_unique<py_history>(std::move(h));
                    },
                    py::arg("path"), py::kw_only(), py::arg("young_tokens") = 0,
                    "Reads a history written by save(); a bad file raises RuntimeFailureError.")
        .def_property_readonly("max_tokens", [](const py_history& h) { return h.history->max_tokens(); })
        .def_property_readonly("young_tokens", [](const py_history& h) { return h.history->young_tokens(); })
        .def_property_readonly("version", [](const py_history& h) { return h.history->version(); },
                               "Number of snapshots published so far.")
        .def_property_readonly("pending", [](const py_history& h) { return h.history->pending(); },
                               "Documents queued and not yet published.")
        .def_property_readonly("documents", [](const py_history& h) { return h.history->snapshot()->documents(); })
        .def_property_readonly("memory_bytes", [](const py_history& h) {
            const auto snap = h.history->snapshot();
            return snap->old_generation().automaton.memory_bytes() + snap->young_generation().automaton.memory_bytes();
        })
        .def("__len__", [](const py_history& h) { return h.history->snapshot()->size(); });
}

// The drafting policy's keywords, shared by Drafter and Speculator.
draft::drafter_config make_config(std::size_t max_draft, std::size_t tree_depth, std::size_t tree_budget,
                                  std::uint32_t min_match, double context_escape, double history_escape,
                                  double min_path_score, std::size_t max_fanout, bool backoff, std::uint64_t vocab_size) {
    return {max_draft, tree_depth, tree_budget, min_match, context_escape, history_escape, min_path_score, max_fanout,
            backoff, vocab_size};
}

template <class Class, class Factory>
void def_config_init(Class& cls, Factory factory) {
    const draft::drafter_config defaults;
    cls.def(py::init(factory), py::arg("history") = py::none(), py::kw_only(), py::arg("max_draft") = defaults.max_draft,
            py::arg("tree_depth") = defaults.tree_depth, py::arg("tree_budget") = defaults.tree_budget,
            py::arg("min_match") = defaults.min_match, py::arg("context_escape") = defaults.context_escape,
            py::arg("history_escape") = defaults.history_escape, py::arg("min_path_score") = defaults.min_path_score,
            py::arg("max_fanout") = defaults.max_fanout, py::arg("backoff") = defaults.backoff,
            py::arg("vocab_size") = defaults.vocab_size, py::keep_alive<1, 2>());
}

void bind_drafter(py::module_& m) {
    using config = draft::drafter_config;
    bind_result<config>(m, "DrafterConfig", "The drafting policy of a Drafter (read-only; set it through Drafter's keywords).",
                        old_form::none, result_field{"max_draft", &config::max_draft},
                        result_field{"tree_depth", &config::tree_depth}, result_field{"tree_budget", &config::tree_budget},
                        result_field{"min_match", &config::min_match},
                        result_field{"context_escape", &config::context_escape},
                        result_field{"history_escape", &config::history_escape},
                        result_field{"min_path_score", &config::min_path_score},
                        result_field{"max_fanout", &config::max_fanout}, result_field{"backoff", &config::backoff},
                        result_field{"vocab_size", &config::vocab_size});

    py::class_<py_drafter> drafter_class(m, "Drafter", R"doc(
A retrieval drafter over the request's context (prompt plus accepted tokens) and an optional
History of past outputs (CoordGen 2.2/4.1, SAM-Decoding). Feed it the prompt with begin() and
every accepted token (bonus included) with accept(); chain() and tree() draft.

    d = Drafter(max_draft=8)
    d.begin(prompt)
    draft = d.chain()                       # int32 array
    r = verify_chain(draft, model_argmax)   # len(draft) + 1 predictions
    d.accept(draft[:r.accepted]); d.accept(r.bonus)
)doc");
    def_config_init(drafter_class, [](py_history* history, std::size_t max_draft, std::size_t tree_depth,
                                      std::size_t tree_budget, std::uint32_t min_match, double context_escape,
                                      double history_escape, double min_path_score, std::size_t max_fanout, bool backoff,
                                      std::uint64_t vocab_size) {
        return std::make_unique<py_drafter>(make_config(max_draft, tree_depth, tree_budget, min_match, context_escape,
                                                        history_escape, min_path_score, max_fanout, backoff, vocab_size),
                                            history);
    });
    drafter_class
        .def("begin",
             [](py_drafter& d, py::handle prompt) {
                 const tokens_view p(prompt, "prompt");
                 d.run("Drafter.begin", [&] { d.d.begin(p.span()); });
             },
             py::arg("prompt"), "Starts a request: the context becomes `prompt`.")
        .def("accept",
             [](py_drafter& d, py::handle tokens) {
                 if (py::isinstance<py::int_>(tokens)) {
                     const token t = token_of(tokens);
                     return d.run("Drafter.accept", [&] { d.d.accept(t); });
                 }
                 const tokens_view t(tokens, "tokens");
                 d.run("Drafter.accept", [&] { d.d.accept(t.span()); });
             },
             py::arg("tokens"), "Appends accepted tokens (a token or a sequence; never rejected draft tokens).")
        .def("chain_with_probabilities",
             [](py_drafter& d) { return d.run("Drafter.chain_with_probabilities", [&] { return &d.d.chain(); }, tree_arrays); },
             "A chain draft as a DraftTree (tokens, parents, probabilities): parents are -1, 0, 1, ...; "
             "probabilities[i] is the drafter's probability of tokens[i] given the tokens before it.")
        .def("tree",
             [](py_drafter& d, py::object extra_tokens, py::object extra_parents) {
                 FRUGAL_CHECK(extra_tokens.is_none() == extra_parents.is_none(),
                              "Drafter.tree: give both extra_tokens and extra_parents, or neither");
                 if (extra_tokens.is_none()) return d.run("Drafter.tree", [&] { return &d.d.tree(); }, tree_arrays);
                 const auto extra = make_tree(extra_tokens, extra_parents);
                 return d.run("Drafter.tree", [&] { return &d.d.tree(extra); }, tree_arrays);
             },
             py::arg("extra_tokens") = py::none(), py::arg("extra_parents") = py::none(),
             "A tree draft, a DraftTree (tokens int32, parents int32, probabilities float32), of at most tree_budget nodes and "
             "tree_depth levels; parents[i] is -1 for a child of the last accepted token; probabilities[i] is the "
             "probability of tokens[i] given its parent's path (a node's children sum to at most 1). An extra tree "
             "(another source's, e.g. calibration) is merged in first.")
        .def_property_readonly("context_match", [](py_drafter& d) {
                                   busy_flag::guard g(d.busy, "Drafter.context_match");
                                   return d.d.context_match();
                               },
                               "Length of the current suffix match in the context (0: none).")
        .def_property_readonly("history_match", [](py_drafter& d) {
                                   busy_flag::guard g(d.busy, "Drafter.history_match");
                                   return d.d.history_match();
                               },
                               "Length of the current suffix match in the history (0: none or no history).")
        .def_property_readonly("context_size", [](py_drafter& d) {
                                   busy_flag::guard g(d.busy, "Drafter.context_size");
                                   return d.d.context().size();
                               },
                               "Tokens in the context (prompt plus accepted).")
        .def_property_readonly("config", [](const py_drafter& d) { return d.d.config(); });
    add_fast_method(drafter_class, drafter_chain_def);
}

// A Python object's step_ms(tokens) as a verification_cost: called with the GIL, from the
// thread that sizes the batch (propose releases the GIL around it).
struct python_cost {
    py::object cost;
    double step_ms(std::size_t tokens) const {
        py::gil_scoped_acquire gil;
        return cost.attr("step_ms")(tokens).cast<double>();
    }
};

void bind_costs(py::module_& m) {
    py::class_<draft::roofline_cost>(m, "RooflineCost", R"doc(
A verification step's cost as a roofline: max(weights_ms, ms_per_token x tokens verified
across the batch). Immutable (safe to share between threads).

    cost = RooflineCost.h100_7b()                 # 7B, 16-bit weights, on an H100
    cost = RooflineCost(weights_ms=4.18, ms_per_token=0.028)
    cost.step_ms(32 * 4)                          # 32 requests verifying 3 drafted tokens each
)doc")
        .def(py::init<double, double>(), py::arg("weights_ms"), py::arg("ms_per_token"))
        .def_static("from_hardware", &draft::roofline_cost::from_hardware, py::arg("weight_bytes"),
                    py::arg("bytes_per_s"), py::arg("flops_per_token"), py::arg("flops_per_s"),
                    "Weights read once per step at bytes_per_s; flops_per_token (about 2 x parameters) at flops_per_s.")
        .def_static("h100_7b", &draft::roofline_cost::h100_7b,
                    "14 GB at 3.35 TB/s (4.18 ms a step), 14 GFLOP a token at 500 TFLOP/s (0.028 ms).")
        .def_static("cpu_1b", &draft::roofline_cost::cpu_1b,
                    "2.5 GB at 50 GB/s (50 ms a step), 2.5 GFLOP a token at 1 TFLOP/s (2.5 ms): knee at 20 tokens.")
        .def("step_ms", &draft::roofline_cost::step_ms, py::arg("tokens"), "The step time for `tokens` verified tokens.")
        .def_property_readonly("weights_ms", &draft::roofline_cost::weights_ms)
        .def_property_readonly("ms_per_token", &draft::roofline_cost::ms_per_token)
        .def("__repr__", [](const draft::roofline_cost& c) {
            return "RooflineCost(weights_ms=" + std::to_string(c.weights_ms()) +
                   ", ms_per_token=" + std::to_string(c.ms_per_token()) + ")";
        });
    py::class_<draft::measured_cost>(m, "MeasuredCost", R"doc(
An engine's measured verification step times: (tokens, ms) points, linear between them, the
first point's time below it and the last segment's slope beyond. Immutable (safe to share).

    cost = MeasuredCost([(1, 21.0), (64, 22.5), (256, 41.0), (1024, 160.0)])
)doc")
        .def(py::init([](const std::vector<std::pair<std::size_t, double>>& points) {
                 std::vector<draft::measured_cost::point> p;
                 for (const auto& [tokens, ms] : points) p.push_back({tokens, ms});
                 return draft::measured_cost(std::move(p));
             }),
             py::arg("points"))
        .def("step_ms", &draft::measured_cost::step_ms, py::arg("tokens"), "The step time for `tokens` verified tokens.")
        .def_property_readonly("points", [](const draft::measured_cost& c) {
            std::vector<std::pair<std::size_t, double>> out;
            for (const auto& p : c.points()) out.emplace_back(p.tokens, p.ms);
            return out;
        });
}

struct py_speculator {
    py_speculator(const draft::drafter_config& config, py_history* h) : s(config, h ? h->history.get() : nullptr) {}
    draft::speculator<token> s;
    busy_flag busy;
};

void bind_speculator(py::module_& m) {
    py::class_<py_speculator> cls(m, "Speculator", R"doc(
The request-level drafting API of an engine's step loop: start a request by id, append its
accepted tokens, draft for a whole batch of ids in one call (on frugal's thread pool, without
the GIL), stop it and hand its output to the History.

    history = History(1 << 20)
    spec = Speculator(history, tree_budget=64)
    spec.start(7, prompt)
    draft, = spec.propose([7])                        # one DraftTree (tokens, parents, probabilities) per id
    spec.append(7, accepted)                          # accepted draft tokens and the bonus
    history.add(spec.stop(7))
)doc");
    def_config_init(cls, [](py_history* history, std::size_t max_draft, std::size_t tree_depth, std::size_t tree_budget,
                            std::uint32_t min_match, double context_escape, double history_escape, double min_path_score,
                            std::size_t max_fanout, bool backoff, std::uint64_t vocab_size) {
        return std::make_unique<py_speculator>(make_config(max_draft, tree_depth, tree_budget, min_match, context_escape,
                                                           history_escape, min_path_score, max_fanout, backoff, vocab_size),
                                               history);
    });
    cls.def("start",
            [](py_speculator& sp, draft::request_id id, py::handle prompt) {
                const tokens_view p(prompt, "prompt");
                without_gil(sp.busy, "Speculator.start", [&] { sp.s.start(id, p.span()); });
            },
            py::arg("id"), py::arg("prompt"), "Starts request `id` with its prompt; an id that is live raises.")
        .def("append",
             [](py_speculator& sp, draft::request_id id, py::handle tokens) {
                 if (py::isinstance<py::int_>(tokens)) {
                     const token t = token_of(tokens);
                     return without_gil(sp.busy, "Speculator.append", [&] { sp.s.append(id, std::span<const token>(&t, 1)); });
                 }
                 const tokens_view t(tokens, "tokens");
                 without_gil(sp.busy, "Speculator.append", [&] { sp.s.append(id, t.span()); });
             },
             py::arg("id"), py::arg("tokens"), "Appends the tokens the model accepted for `id` (bonus included).")
        .def("propose",
             [](py_speculator& sp, py::handle ids, bool tree, bool packed, py::object cost, std::size_t rest_tokens,
                double rest_expected) -> py::object {
                 const array_view<draft::request_id> batch(ids, "ids");
                 busy_flag::guard g(sp.busy, "Speculator.propose");
                 std::span<const draft::draft_tree<token>* const> drafts;
                 const auto shape = tree ? draft::draft_shape::tree : draft::draft_shape::chain;
                 const draft::batch_load rest{rest_tokens, rest_expected};
                 auto sized = [&](const auto& c) {
                     py::gil_scoped_release release;
                     drafts = sp.s.propose(batch.span(), default_thread_pool(), c, shape, rest);
                 };
                 if (cost.is_none()) {
                     py::gil_scoped_release release;
                     drafts = sp.s.propose(batch.span(), default_thread_pool(), shape);
                 } else if (py::isinstance<draft::roofline_cost>(cost)) {
                     sized(cost.cast<const draft::roofline_cost&>());
                 } else if (py::isinstance<draft::measured_cost>(cost)) {
                     sized(cost.cast<const draft::measured_cost&>());
                 } else {
                     FRUGAL_CHECK(py::hasattr(cost, "step_ms"), "Speculator.propose: cost must be a RooflineCost, a "
                                  "MeasuredCost or an object with step_ms(tokens), got ",
                                  std::string(py::str(py::type::of(cost).attr("__name__"))));
                     sized(python_cost{cost});
                 }
                 if (packed) return py::cast(packed_trees(drafts));
                 py::list out(drafts.size());
                 for (std::size_t i = 0; i < drafts.size(); ++i) out[i] = py::cast(tree_arrays(drafts[i]));
                 return out;
             },
             py::arg("ids"), py::kw_only(), py::arg("tree") = true, py::arg("packed") = false,
             py::arg("cost") = py::none(), py::arg("rest_tokens") = 0, py::arg("rest_expected") = 0.0,
             "Drafts for every id of `ids` (uint64) in one call; returns one DraftTree (tokens, parents, "
             "probabilities) per id, trees (tree=True) or chains. packed=True returns the batch as PackedDrafts "
             "instead (tokens, parents, probabilities, offsets): request i's draft is [offsets[i], offsets[i + 1]) of each, its parents "
             "counted within it (-1: a child of its last token). With a cost (RooflineCost, MeasuredCost or any "
             "object with step_ms(tokens) -> ms), keeps across the batch only the nodes that maximise its expected "
             "tokens per ms, with calibrated probabilities (a draft may be empty); rest_tokens and rest_expected "
             "are what the rest of the step verifies and emits (e.g. prefills). Unknown, stopped or repeated ids "
             "raise before anything is drafted.\n\n"
             "    drafts = spec.propose(ids, cost=RooflineCost.h100_7b())")
        .def_property_readonly("calibration_observations",
                               [](py_speculator& sp) {
                                   return with_busy(sp.busy, "Speculator.calibration_observations",
                                                    [&] { return sp.s.calibrator().observations(); });
                               },
                               "Drafted nodes whose outcome the appended tokens decided so far (what the "
                               "calibration has learned from).")
        .def("stop",
             [](py_speculator& sp, draft::request_id id) {
                 const auto out = without_gil(sp.busy, "Speculator.stop", [&] { return sp.s.stop(id); });
                 return copy_out(std::span<const token>(out));
             },
             py::arg("id"), "Ends request `id` and returns its output (every token appended since start).")
        .def("__contains__",
             [](py_speculator& sp, draft::request_id id) {
                 return with_busy(sp.busy, "Speculator.__contains__", [&] { return sp.s.contains(id); });
             })
        .def("__len__",
             [](py_speculator& sp) { return with_busy(sp.busy, "Speculator.__len__", [&] { return sp.s.size(); }); });
}

void bind_verify(py::module_& m) {
    using result = draft::verify_result<token>;
    bind_result<result>(m, "VerifyResult", "Outcome of verifying one draft.", old_form::none,
                        result_field{"accepted", &result::accepted, "Draft tokens accepted."},
                        result_field{"bonus", &result::bonus, "The model's own next token after them."},
                        result_field{"path", [](const result& r) { return copy_out(std::span<const std::int32_t>(r.path)); },
                                     "Tree only: accepted node indices, root first."});
    m.def("verify_chain",
          [](py::handle draft_tokens, py::handle predictions) {
              const tokens_view d(draft_tokens, "draft"), p(predictions, "predictions");
              return draft::verify_chain<token>(d.span(), p.span());
          },
          py::arg("draft"), py::arg("predictions"),
          R"doc(Greedy chain verification: predictions[i] is the model's token after the context plus draft[:i]
(len(draft) + 1 of them). Accepts the longest prefix with draft[i] == predictions[i].

    r = verify_chain([5, 6, 7], [5, 6, 9, 1])   # r.accepted == 2, r.bonus == 9)doc");
    m.def("verify_tree",
          [](py::handle tokens, py::handle parents, py::handle predictions) {
              const auto tree = make_tree(tokens, parents);
              const tokens_view p(predictions, "predictions");
              return draft::verify_tree(tree, p.span());
          },
          py::arg("tokens"), py::arg("parents"), py::arg("predictions"),
          R"doc(Greedy tree verification: predictions[0] is the model's token after the context and
predictions[i + 1] its token after node i's path (len(tokens) + 1 of them).

    r = verify_tree([4, 5, 6], [-1, -1, 1], [5, 0, 6, 8])   # r.path == [1, 2], r.bonus == 8)doc");
}

}  // namespace

void bind_draft(py::module_ m) {
    bind_automaton(m);
    bind_publisher(m);  // before History, whose start_publisher returns it
    bind_history(m);
    bind_draft_results(m);
    bind_drafter(m);
    bind_costs(m);
    bind_speculator(m);
    bind_verify(m);
}

}  // namespace frugal::python
