// frugal.sim: the paper baselines the bindings' users compare against (frugal::sim, the
// lab target): Prompt Lookup Decoding and the paper's greedy graph switch.

#include <cstdint>

#include <pybind11/stl.h>

#include <frugal/sim/paper_graph_switch.hpp>
#include <frugal/sim/prompt_lookup.hpp>

#include "common.hpp"

namespace frugal::python {

void bind_sim(py::module_ m) {
    m.def("prompt_lookup_draft",
          [](py::handle context, std::size_t max_ngram, std::size_t max_draft) {
              const array_view<std::int32_t> c(context, "context");
              const auto draft = [&] {
                  py::gil_scoped_release release;
                  return sim::prompt_lookup_draft<std::int32_t>(c.span(), max_ngram, max_draft);
              }();
              // As in C++, the draft is a view into the context (a slice of the array).
              const auto at = static_cast<py::ssize_t>(draft.empty() ? 0 : draft.data() - c.data());
              return c.array()[py::slice(at, at + static_cast<py::ssize_t>(draft.size()), 1)];
          },
          py::arg("context"), py::arg("max_ngram") = 3, py::arg("max_draft") = 10,
          R"doc(Prompt Lookup Decoding's draft for `context` (prompt plus accepted tokens), exactly as the original
find_candidate_pred_tokens: for n = max_ngram down to 1, the earliest earlier occurrence of the last n
tokens with max_draft tokens after it. A view into `context` (empty when nothing matches).

    prompt_lookup_draft(np.array([1, 2, 3, 9, 9, 1, 2, 3], np.int32), 3, 2)   # [9, 9])doc");
    m.def("paper_greedy_graph_switch",
          [](const schedule::graph_switch_problem& p) { return sim::paper_greedy_graph_switch(p).switch_chunk; },
          py::arg("problem"), py::call_guard<py::gil_scoped_release>(),
          "The paper's greedy graph switch (CoordGen Eq. 2), the baseline of greedy_graph_switch.");
}

}  // namespace frugal::python
