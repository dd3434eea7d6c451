// frugal.draft: frugal::draft's suffix automaton, history, drafter and verification, over
// int32 tokens (numpy int32 arrays in and out).

#include <cstdint>
#include <optional>
#include <string>
#include <utility>

#include <pybind11/stl.h>
#include <pybind11/stl/filesystem.h>

#include <frugal/draft/drafter.hpp>
#include <frugal/draft/history.hpp>
#include <frugal/draft/suffix_automaton.hpp>
#include <frugal/draft/verify.hpp>

#include "common.hpp"

namespace frugal::python {
namespace {

using token = std::int32_t;
using tokens_view = array_view<token>;
using automaton = draft::suffix_automaton<token>;

// A history and the count of its changes: a drafter remembers the count at begin() and
// refuses to draft after the history changed (History.add may rebuild the automaton the
// drafter is matching, which C++ leaves to the caller to avoid).
struct py_history {
    explicit py_history(draft::history_store<token> s) : store(std::move(s)) {}
    draft::history_store<token> store;
    std::uint64_t generation = 0;
    shared_flag use;
};

struct py_drafter {
    py_drafter(const draft::drafter_config& config, py_history* h)
        : history(h), generation(h ? h->generation : 0), d(config, h ? &h->store.automaton() : nullptr) {}

    // Runs fn without the GIL, with the drafter busy and the history read-locked, then
    // finish(fn's result) with the GIL back and the locks still held: a draft is copied out
    // of the drafter's buffer before another thread may overwrite it.
    template <class Fn, class Finish>
    decltype(auto) run(const char* who, bool needs_current_history, Fn&& fn, Finish&& finish) {
        busy_flag::guard mine(busy, who);
        std::optional<shared_flag::read_guard> reading;
        if (history != nullptr) {
            reading.emplace(history->use, who);
            if (needs_current_history && history->generation != generation)
                FRUGAL_FAIL(frugal::runtime_error, who,
                            ": the history changed (History.add) since this request began; call begin() first");
        }
        auto result = [&] {
            py::gil_scoped_release release;
            return std::forward<Fn>(fn)();
        }();
        return std::forward<Finish>(finish)(result);
    }
    template <class Fn>
    void run(const char* who, bool needs_current_history, Fn&& fn) {
        run(who, needs_current_history, [&] { std::forward<Fn>(fn)(); return 0; }, [](int) {});
    }

    py_history* history;
    std::uint64_t generation;
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

py::tuple tree_arrays(const draft::draft_tree<token>* t) {
    return py::make_tuple(copy_out(std::span<const token>(t->tokens)), copy_out(std::span<const std::int32_t>(t->parents)));
}

// Drafter.chain through vectorcall (fast_method): the call that runs once per request and
// step, whose binding cost matters next to a draft of about a microsecond.
py::object drafter_chain(py_drafter& d, PyObject* const*, Py_ssize_t nargs, PyObject* kwnames) {
    check_arity("chain", nargs, kwnames, 0, 0);
    return d.run("Drafter.chain", true, [&] { return d.d.chain(); }, [](std::span<const token> s) { return copy_out(s); });
}
PyMethodDef drafter_chain_def = fast_method_def<py_drafter, &drafter_chain>(
    "chain", "chain()\n--\n\nA chain draft of at most max_draft tokens (int32 array; empty when nothing matches).");

struct py_automaton {
    automaton a;
    busy_flag busy;
};

// A const member of the automaton as a method that holds the object's busy flag (appends
// run without the GIL, so reads must not overlap them).
template <class R, class... A>
auto guarded(R (automaton::*f)(A...) const, const char* who) {
    return [f, who](py_automaton& self, A... args) -> R {
        busy_flag::guard g(self.busy, who);
        return (self.a.*f)(args...);
    };
}

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
                     const token t = tokens.cast<token>();
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
        .def("link", [](py_automaton& self, draft::state_id s) {
                 busy_flag::guard g(self.busy, "SuffixAutomaton.link");
                 return optional_index(self.a.link(s), draft::no_state);
             },
             py::arg("state"), "Suffix link of `state` (None for the root).")
        .def("first_end", [](py_automaton& self, draft::state_id s) {
                 busy_flag::guard g(self.busy, "SuffixAutomaton.first_end");
                 return optional_index(self.a.first_end(s), draft::no_position);
             },
             py::arg("state"), "Index of the last token of the earliest occurrence (None for the root).")
        .def("last_end", [](py_automaton& self, draft::state_id s) {
                 busy_flag::guard g(self.busy, "SuffixAutomaton.last_end");
                 return optional_index(self.a.last_end(s), draft::no_position);
             },
             py::arg("state"), "Index of the last token of the most recent occurrence (None for an empty root).")
        .def("transitions",
             [](py_automaton& self, draft::state_id s) {
                 busy_flag::guard g(self.busy, "SuffixAutomaton.transitions");
                 (void)self.a.length(s);
                 py::list out;
                 self.a.for_each_transition(s, [&](token t, draft::state_id target) { out.append(py::make_tuple(t, target)); });
                 return out;
             },
             py::arg("state"), "The outgoing transitions of `state` as (token, target) pairs.")
        .def("continuation",
             [](py_automaton& self, std::uint32_t end, std::size_t max_tokens) {
                 busy_flag::guard g(self.busy, "SuffixAutomaton.continuation");
                 return copy_out(self.a.continuation(end, max_tokens));
             },
             py::arg("end"), py::arg("max_tokens"),
             "The tokens after an occurrence ending at `end` (at most `max_tokens`, within its document).")
        .def_property_readonly("repeat_state", guarded(&automaton::repeat_state, "SuffixAutomaton.repeat_state"),
                               "State of the longest suffix of the current document that also ends earlier.")
        .def_property_readonly("repeat_length", guarded(&automaton::repeat_length, "SuffixAutomaton.repeat_length"),
                               "Its length (0: none).")
        .def_property_readonly("repeat_end", [](py_automaton& self) {
                                   busy_flag::guard g(self.busy, "SuffixAutomaton.repeat_end");
                                   return optional_index(self.a.repeat_end(), draft::no_position);
                               },
                               "End of its most recent earlier occurrence (None: none).")
        .def_property_readonly("last", guarded(&automaton::last, "SuffixAutomaton.last"),
                               "The state of the whole current document.")
        .def_property_readonly("state_count", guarded(&automaton::state_count, "SuffixAutomaton.state_count"),
                               "Number of states, root included.")
        .def_property_readonly("text", [](py_automaton& self) {
                                   busy_flag::guard g(self.busy, "SuffixAutomaton.text");
                                   return copy_out(self.a.text());
                               },
                               "Every token appended (a copy), documents concatenated.")
        .def_property_readonly("document_starts", [](py_automaton& self) {
                                   busy_flag::guard g(self.busy, "SuffixAutomaton.document_starts");
                                   return copy_out(self.a.document_starts());
                               },
                               "Start offset of each document in `text`.")
        .def_property_readonly("memory_bytes", guarded(&automaton::memory_bytes, "SuffixAutomaton.memory_bytes"),
                               "Approximate heap bytes held.")
        .def("__len__", guarded(&automaton::size, "SuffixAutomaton.__len__"));
}

void bind_history(py::module_& m) {
    py::class_<py_history>(m, "History", R"doc(
Past outputs as documents of a suffix automaton, bounded to `max_tokens` tokens, oldest
documents evicted first (CoordGen's history similarity). Add outputs between requests: a
drafter refuses to draft after its history changed until its next begin().

    history = History(1 << 20)
    history.add(response_tokens)
    history.save("history.bin")
    restored = History.load("history.bin")
    drafter = Drafter(history=restored)
)doc")
        .def(py::init([](std::size_t max_tokens) { return std::make_unique<py_history>(draft::history_store<token>(max_tokens)); }),
             py::arg("max_tokens"))
        .def("add",
             [](py_history& h, py::handle tokens) {
                 const tokens_view t(tokens, "tokens");
                 shared_flag::write_guard writing(h.use, "History.add");
                 py::gil_scoped_release release;
                 h.store.add(t.span());
                 ++h.generation;
             },
             py::arg("tokens"), "Adds one finished output as a document, evicting the oldest when needed.")
        .def("save",
             [](py_history& h, const std::filesystem::path& path) {
                 shared_flag::read_guard reading(h.use, "History.save");
                 py::gil_scoped_release release;
                 h.store.save(path);
             },
             py::arg("path"), "Writes the history to `path` (a flat, versioned, checksummed file).")
        .def_static("load",
                    [](const std::filesystem::path& path) {
                        auto store = [&] {
                            py::gil_scoped_release release;
                            return draft::history_store<token>::load(path);
                        }();
                        return std::make_unique<py_history>(std::move(store));
                    },
                    py::arg("path"), "Reads a history written by save(); a bad file raises RuntimeFailureError.")
        .def_property_readonly("max_tokens", [](const py_history& h) { return h.store.max_tokens(); })
        .def_property_readonly("documents", [](py_history& h) {
            shared_flag::read_guard reading(h.use, "History.documents");
            return h.store.documents();
        })
        .def_property_readonly("memory_bytes", [](py_history& h) {
            shared_flag::read_guard reading(h.use, "History.memory_bytes");
            return h.store.automaton().memory_bytes();
        })
        .def("__len__", [](py_history& h) {
            shared_flag::read_guard reading(h.use, "History.__len__");
            return h.store.size();
        });
}

void bind_drafter(py::module_& m) {
    using config = draft::drafter_config;
    py::class_<config>(m, "DrafterConfig", "The drafting policy of a Drafter (read-only; set it through Drafter's keywords).")
        .def_readonly("max_draft", &config::max_draft)
        .def_readonly("tree_budget", &config::tree_budget)
        .def_readonly("min_match", &config::min_match)
        .def_readonly("match_margin", &config::match_margin)
        .def_readonly("context_weight", &config::context_weight)
        .def_readonly("escape", &config::escape)
        .def_readonly("min_path_score", &config::min_path_score)
        .def_readonly("max_fanout", &config::max_fanout)
        .def_readonly("backoff", &config::backoff)
        .def_readonly("vocab_size", &config::vocab_size);

    const config defaults;
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
    drafter_class
        .def(py::init([](py_history* history, std::size_t max_draft, std::size_t tree_budget, std::uint32_t min_match,
                         std::uint32_t match_margin, double context_weight, double escape, double min_path_score,
                         std::size_t max_fanout, bool backoff, std::uint64_t vocab_size) {
                 return std::make_unique<py_drafter>(config{max_draft, tree_budget, min_match, match_margin, context_weight,
                                                            escape, min_path_score, max_fanout, backoff, vocab_size},
                                                     history);
             }),
             py::arg("history") = py::none(), py::kw_only(), py::arg("max_draft") = defaults.max_draft,
             py::arg("tree_budget") = defaults.tree_budget, py::arg("min_match") = defaults.min_match,
             py::arg("match_margin") = defaults.match_margin, py::arg("context_weight") = defaults.context_weight,
             py::arg("escape") = defaults.escape, py::arg("min_path_score") = defaults.min_path_score,
             py::arg("max_fanout") = defaults.max_fanout, py::arg("backoff") = defaults.backoff,
             py::arg("vocab_size") = defaults.vocab_size,
             py::keep_alive<1, 2>())
        .def("begin",
             [](py_drafter& d, py::handle prompt) {
                 const tokens_view p(prompt, "prompt");
                 d.run("Drafter.begin", false, [&] {
                     d.d.begin(p.span());
                     if (d.history != nullptr) d.generation = d.history->generation;
                 });
             },
             py::arg("prompt"), "Starts a request: the context becomes `prompt`.")
        .def("accept",
             [](py_drafter& d, py::handle tokens) {
                 if (py::isinstance<py::int_>(tokens)) {
                     const token t = tokens.cast<token>();
                     return d.run("Drafter.accept", true, [&] { d.d.accept(t); });
                 }
                 const tokens_view t(tokens, "tokens");
                 d.run("Drafter.accept", true, [&] { d.d.accept(t.span()); });
             },
             py::arg("tokens"), "Appends accepted tokens (a token or a sequence; never rejected draft tokens).")
        .def("tree",
             [](py_drafter& d, py::object extra_tokens, py::object extra_parents) {
                 FRUGAL_CHECK(extra_tokens.is_none() == extra_parents.is_none(),
                              "Drafter.tree: give both extra_tokens and extra_parents, or neither");
                 if (extra_tokens.is_none())
                     return d.run("Drafter.tree", true, [&] { return &d.d.tree(); }, tree_arrays);
                 const auto extra = make_tree(extra_tokens, extra_parents);
                 return d.run("Drafter.tree", true, [&] { return &d.d.tree(extra); }, tree_arrays);
             },
             py::arg("extra_tokens") = py::none(), py::arg("extra_parents") = py::none(),
             "A tree draft (tokens, parents) of at most tree_budget nodes; parents[i] is -1 for a child of the "
             "last accepted token. An extra tree (another source's, e.g. calibration) is merged in first.")
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

void bind_verify(py::module_& m) {
    using result = draft::verify_result<token>;
    py::class_<result>(m, "VerifyResult", "Outcome of verifying one draft.")
        .def_readonly("accepted", &result::accepted, "Draft tokens accepted.")
        .def_readonly("bonus", &result::bonus, "The model's own next token after them.")
        .def_property_readonly("path", [](const result& r) { return copy_out(std::span<const std::int32_t>(r.path)); },
                               "Tree only: accepted node indices, root first.")
        .def("__repr__", [](const result& r) {
            return "VerifyResult(accepted=" + std::to_string(r.accepted) + ", bonus=" + std::to_string(r.bonus) + ")";
        });
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
    bind_history(m);
    bind_drafter(m);
    bind_verify(m);
}

}  // namespace frugal::python
