// frugal.schedule: the two-resource timeline, the graph-switch planners (CoordGen Eq. 1-2)
// and size-aware parameter placement (HyperGen 3.1).

#include <cstdint>
#include <memory>
#include <vector>

#include <pybind11/stl.h>

#include <frugal/schedule/graph_switch.hpp>
#include <frugal/schedule/placement.hpp>
#include <frugal/schedule/timeline.hpp>

#include "common.hpp"

namespace frugal::python {

using namespace frugal::schedule;

namespace {

// A timeline and the busy flag its simulate() holds while it runs without the GIL.
struct py_timeline {
    timeline t;
    busy_flag busy;
};

// graph_switch_timeline's result (GraphSwitchTimeline): the timeline and its task ids.
struct switch_timeline {
    py::object timeline;
    std::vector<std::size_t> compute_task, load_task;
};

}  // namespace

void bind_schedule(py::module_ m) {
    py::enum_<resource>(m, "Resource").value("compute", resource::compute).value("io", resource::io);
    bind_result<timeline_result>(
        m, "TimelineResult", "Makespan, busy and idle time per resource, peak bytes, task times.", old_form::none,
        result_field{"makespan", &timeline_result::makespan},
        result_field{"peak_resident_bytes", &timeline_result::peak_resident_bytes},
        result_field{"start", [](const timeline_result& r) { return copy_out(std::span<const double>(r.start)); }},
        result_field{"finish", [](const timeline_result& r) { return copy_out(std::span<const double>(r.finish)); }})
        .def("busy_time", &timeline_result::busy_time, py::arg("resource"))
        .def("idle_time", &timeline_result::idle_time, py::arg("resource"));
    py::class_<py_timeline>(m, "Timeline", R"doc(
A two-resource schedule (one compute engine, one I/O channel): tasks with a duration,
dependencies and the bytes they hold, replayed by simulate().

    t = Timeline()
    load = t.add(Resource.io, 2.0, acquire_bytes=100)
    t.add(Resource.compute, 1.0, after=[load], release_bytes=100)
    r = t.simulate()   # r.makespan == 3, r.peak_resident_bytes == 100
)doc")
        .def(py::init([](std::uint64_t initial) { return std::make_unique<py_timeline>(timeline(initial)); }),
             py::arg("initial_resident_bytes") = 0)
        .def("add",
             [](py_timeline& t, resource on, double duration, const std::vector<std::size_t>& after,
                std::uint64_t acquire_bytes, std::uint64_t release_bytes) {
                 return with_busy(t.busy, "Timeline.add",
                                  [&] { return t.t.add(on, duration, after, acquire_bytes, release_bytes); });
             },
             py::arg("resource"), py::arg("duration"), py::kw_only(), py::arg("after") = std::vector<std::size_t>{},
             py::arg("acquire_bytes") = 0, py::arg("release_bytes") = 0, "Adds a task and returns its id.")
        .def("simulate",
             [](py_timeline& t) { return without_gil(t.busy, "Timeline.simulate", [&] { return t.t.simulate(); }); })
        .def("__len__", [](py_timeline& t) { return with_busy(t.busy, "Timeline.__len__", [&] { return t.t.size(); }); });

    py::class_<graph_switch_problem>(m, "GraphSwitchProblem", R"doc(
Per-block cost estimates of one prefill (CoordGen 3.2): a chunk of block i takes
prefill_compute[i] under G1 and decode_compute[i] under G2; switching block i costs load[i] of I/O.

    p = GraphSwitchProblem(prefill_compute=[1, 1], decode_compute=[1.2, 1.2], load=[2, 2], chunks=2)
    plan = greedy_graph_switch(p); graph_switch_makespan(p, plan)
)doc")
        .def(py::init([](std::vector<double> prefill, std::vector<double> decode, std::vector<double> load, std::size_t chunks) {
                 graph_switch_problem p{std::move(prefill), std::move(decode), std::move(load), chunks};
                 p.validate();
                 return p;
             }),
             py::kw_only(), py::arg("prefill_compute"), py::arg("decode_compute"), py::arg("load"), py::arg("chunks") = 1)
        .def_readonly("prefill_compute", &graph_switch_problem::prefill_compute)
        .def_readonly("decode_compute", &graph_switch_problem::decode_compute)
        .def_readonly("load", &graph_switch_problem::load)
        .def_readonly("chunks", &graph_switch_problem::chunks)
        .def_property_readonly("blocks", &graph_switch_problem::blocks);

    // Plans cross as lists of switch chunks (block i's first chunk under G2; `chunks`: after prefill).
    auto plan_of = [](std::vector<std::size_t> v) { return graph_switch_plan{std::move(v)}; };
    m.def("greedy_graph_switch", [](const graph_switch_problem& p) { return greedy_graph_switch(p).switch_chunk; },
          py::arg("problem"), py::call_guard<py::gil_scoped_release>(),
          "frugal's greedy: the paper's Eq. 2 greedy plus local improvement; a list of switch chunks per block.");
    m.def("exact_graph_switch", [](const graph_switch_problem& p) { return exact_graph_switch(p).switch_chunk; },
          py::arg("problem"), py::call_guard<py::gil_scoped_release>(),
          "The optimal plan by branch and bound (at most 24 blocks).");
    m.def("graph_switch_makespan",
          [plan_of](const graph_switch_problem& p, std::vector<std::size_t> plan) { return graph_switch_makespan(p, plan_of(std::move(plan))); },
          py::arg("problem"), py::arg("plan"), py::call_guard<py::gil_scoped_release>(),
          "The makespan of `plan` replayed on the timeline simulator.");
    bind_result<switch_timeline>(m, "GraphSwitchTimeline", R"doc(
A graph-switch plan on the two-resource timeline, and the task ids of its steps.

    t = graph_switch_timeline(problem, plan)
    t.timeline.simulate().makespan
)doc",
                                 old_form::tuple, result_field{"timeline", &switch_timeline::timeline},
                                 result_field{"compute_task", &switch_timeline::compute_task,
                                              "Compute of chunk c of block i: task compute_task[c * blocks + i]."},
                                 result_field{"load_task", &switch_timeline::load_task,
                                              "The load of block i's decode weights: task load_task[i]."});
    m.def("graph_switch_timeline",
          [plan_of](const graph_switch_problem& p, std::vector<std::size_t> plan) {
              auto s = graph_switch_timeline(p, plan_of(std::move(plan)));
              return switch_timeline{py::cast(std::make_unique<py_timeline>(std::move(s.schedule))), std::move(s.compute_task),
                                     std::move(s.load_task)};
          },
          py::arg("problem"), py::arg("plan"),
          "GraphSwitchTimeline(timeline, compute_task, load_task): compute (c, i) is compute_task[c * blocks + i].");

    py::enum_<placement_objective>(m, "PlacementObjective")
        .value("smallest_first", placement_objective::smallest_first, "The paper: ascending size until one does not fit.")
        .value("bytes_kept", placement_objective::bytes_kept, "0/1 knapsack: most resident bytes.")
        .value("transfer", placement_objective::transfer, "0/1 knapsack: fewest bytes transferred per forward pass.");
    py::class_<fragment>(m, "Fragment", "One weight fragment: its bytes and the blocks that use it.")
        .def(py::init([](std::uint64_t bytes, std::vector<std::size_t> blocks) { return fragment{bytes, std::move(blocks)}; }),
             py::arg("bytes"), py::arg("blocks"))
        .def_readonly("bytes", &fragment::bytes)
        .def_readonly("blocks", &fragment::blocks);
    bind_result<placement>(m, "Placement", "The resident fragments, their bytes and the bytes moved per pass for the rest.",
                           old_form::none, result_field{"resident", &placement::resident},
                           result_field{"resident_bytes", &placement::resident_bytes},
                           result_field{"transfer_bytes_per_pass", &placement::transfer_bytes_per_pass},
                           result_field{"exact", &placement::exact,
                                        "False: greedy by value per byte (the exact table was too large)."});
    m.def("place_fragments",
          [](const std::vector<fragment>& fragments, std::uint64_t limit, placement_objective objective, std::uint64_t max_cells) {
              return place_fragments(fragments, limit, objective, max_cells);
          },
          py::arg("fragments"), py::arg("limit"), py::arg("objective") = placement_objective::transfer,
          py::arg("max_cells") = std::uint64_t{1} << 28, py::call_guard<py::gil_scoped_release>(),
          R"doc(Chooses the resident fragments under `limit` bytes (HyperGen 3.1).

    p = place_fragments([Fragment(14336, [3]), Fragment(720_000_000, [0, 49])], 10 << 20))doc");
    m.def("placement_timeline",
          [](const std::vector<fragment>& fragments, const placement& p, py::handle block_compute, double bytes_per_second) {
              const array_view<double> b(block_compute, "block_compute");
              return std::make_unique<py_timeline>(placement_timeline(fragments, p, b.span(), bytes_per_second));
          },
          py::arg("fragments"), py::arg("placement"), py::arg("block_compute"), py::arg("bytes_per_second"),
          "One forward pass under a placement on the two-resource timeline (simulate() it).");
}

}  // namespace frugal::python
