// frugal.prune: dispersion, exact 1-D k-means, the cluster pruner, trajectory replay and
// threshold calibration, and the progressive ranker driving a Python model object.

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <optional>

#include <pybind11/stl.h>
#include <pybind11/stl/filesystem.h>

#include <frugal/prune/calibrate.hpp>
#include <frugal/prune/cluster_pruner.hpp>
#include <frugal/prune/dispersion.hpp>
#include <frugal/prune/kmeans1d.hpp>
#include <frugal/prune/progressive_ranker.hpp>
#include <frugal/prune/trajectory.hpp>

#include "common.hpp"

namespace frugal::python {
namespace {

using namespace frugal::prune;

// Calls fn(span) over `scores` in place when it is a float32 or float64 array; anything
// else array-like is read as float64.
template <class Fn>
decltype(auto) with_scores(py::handle scores, const char* name, Fn&& fn) {
    if (py::isinstance<py::array>(scores) && py::reinterpret_borrow<py::array>(scores).dtype().equal(py::dtype::of<float>())) {
        const array_view<float> v(scores, name);
        return fn(v.span());
    }
    const array_view<double> v(scores, name);
    return fn(v.span());
}

struct py_kmeans {
    kmeans1d km;
    busy_flag busy;
};

// ClusterPruner.decide's result (PruneDecision).
struct decision {
    prune_step step;
    py::object routes;
};

struct py_pruner {
    explicit py_pruner(const cluster_pruner_options& o) : pruner(o) {}
    cluster_pruner pruner;
    busy_flag busy;
};

std::vector<std::int64_t> to_int64(std::span<const std::size_t> ids) { return {ids.begin(), ids.end()}; }

/// A Python reranker as a frugal::prune::progressive_model: `layers` (an int), and methods
/// embed(ids), forward(layer, ids), score(ids) -> scores; optional begin_layer(layer) and
/// end_layer(layer). ids are new int64 arrays the model may keep.
class python_model {
public:
    explicit python_model(py::object model)
        : model_(std::move(model)), has_begin_(py::hasattr(model_, "begin_layer")), has_end_(py::hasattr(model_, "end_layer")) {}
    [[nodiscard]] std::size_t layers() const {
        const py::object layers = model_.attr("layers");
        if (!PyLong_Check(layers.ptr()))
            throw py::type_error("model.layers must be an int, got " +
                                 py::str(py::type::handle_of(layers).attr("__name__")).cast<std::string>());
        const std::size_t n = PyLong_AsSize_t(layers.ptr());
        if (n == static_cast<std::size_t>(-1) && PyErr_Occurred()) {
            PyErr_Clear();
            throw py::value_error("model.layers = " + py::str(layers).cast<std::string>() + " is not a layer count");
        }
        return n;
    }
    void embed(std::span<const std::size_t> ids) { model_.attr("embed")(adopt(to_int64(ids))); }
    void forward(std::size_t layer, std::span<const std::size_t> ids) { model_.attr("forward")(layer, adopt(to_int64(ids))); }
    void score(std::span<const std::size_t> ids, std::span<float> out) {
        const py::object r = model_.attr("score")(adopt(to_int64(ids)));
        const py::array a = py::module_::import("numpy").attr("asarray")(r, py::dtype::of<float>());
        const array_view<float> v(a, "model.score(ids)");
        FRUGAL_CHECK(v.size() == out.size(), "progressive_rank: model.score returned ", v.size(), " scores for ",
                     out.size(), " candidates");
        std::copy(v.data(), v.data() + v.size(), out.begin());
    }
    void begin_layer(std::size_t layer) {
        if (has_begin_) model_.attr("begin_layer")(layer);
    }
    void end_layer(std::size_t layer) {
        if (has_end_) model_.attr("end_layer")(layer);
    }

private:
    py::object model_;
    bool has_begin_, has_end_;
};
static_assert(progressive_model<python_model>);

// One keyword constructor for both ClusterPrunerOptions and ClusterPruner, defaults from C++.
template <class Class>
void def_options_init(Class& cls) {
    using T = typename Class::type;
    const cluster_pruner_options d;
    cls.def(py::init([](double threshold, dispersion_measure measure, ranking_mode mode, std::size_t clusters,
                        std::size_t max_clusters, std::size_t patience, double lead_over_change, std::size_t confirmations) {
                return std::make_unique<T>(cluster_pruner_options{threshold, measure, mode, clusters, max_clusters,
                                                                  patience, lead_over_change, confirmations});
            }),
            py::kw_only(), py::arg("threshold") = d.threshold, py::arg("measure") = d.measure, py::arg("mode") = d.mode,
            py::arg("clusters") = d.clusters, py::arg("max_clusters") = d.max_clusters, py::arg("patience") = d.patience,
            py::arg("lead_over_change") = d.lead_over_change, py::arg("confirmations") = d.confirmations);
}

void bind_enums_and_results(py::module_& m) {
    py::enum_<dispersion_measure>(m, "DispersionMeasure")
        .value("cv", dispersion_measure::cv, "Coefficient of variation: stddev / |mean| (GRATING 4.1).")
        .value("robust_cv", dispersion_measure::robust_cv, "1.4826 MAD / |median|.");
    py::enum_<ranking_mode>(m, "RankingMode")
        .value("top_k", ranking_mode::top_k, "Only the top-K set matters: winners and hopeless candidates both stop.")
        .value("exact", ranking_mode::exact, "Exact ranks and final scores of the top-K: only hopeless candidates stop.");
    py::enum_<route>(m, "Route", "Where a decision sends one candidate (the uint8 values of decide()'s routes).")
        .value("deferred", route::deferred)
        .value("selected", route::selected)
        .value("dropped", route::dropped);
    bind_result<prune_step>(m, "PruneStep", "The outcome of one pruning decision.", old_form::none,
                            result_field{"triggered", &prune_step::triggered}, result_field{"done", &prune_step::done},
                            result_field{"dispersion", &prune_step::dispersion},
                            result_field{"clusters", &prune_step::clusters},
                            result_field{"selected", &prune_step::selected},
                            result_field{"deferred", &prune_step::deferred},
                            result_field{"dropped", &prune_step::dropped});
    bind_result<decision>(m, "PruneDecision", R"doc(
ClusterPruner.decide's outcome: the step and each candidate's route (a uint8 array of Route values).

    d = pruner.decide(scores, open_slots=10)
    keep = scores[d.routes != int(Route.dropped)]
)doc",
                          old_form::tuple, result_field{"step", &decision::step},
                          result_field{"routes", &decision::routes, "uint8 Route values, one per score."});
    bind_result<layer_stats>(m, "LayerStats", "What happened at one layer of progressive_rank.", old_form::none,
                             result_field{"layer", &layer_stats::layer}, result_field{"active", &layer_stats::active},
                             result_field{"selected", &layer_stats::selected},
                             result_field{"dropped", &layer_stats::dropped}, result_field{"chunks", &layer_stats::chunks},
                             result_field{"chunk_size", &layer_stats::chunk_size},
                             result_field{"triggered", &layer_stats::triggered},
                             result_field{"dispersion", &layer_stats::dispersion});
    bind_result<threshold_point>(m, "ThresholdPoint", "One point of a threshold sweep.", old_form::none,
                                 result_field{"threshold", &threshold_point::threshold},
                                 result_field{"precision_at_k", &threshold_point::precision_at_k},
                                 result_field{"layer_compute_saved", &threshold_point::layer_compute_saved});
    bind_result<calibration_result>(m, "CalibrationResult", "The outcome of calibrate_threshold.", old_form::none,
                                    result_field{"threshold", &calibration_result::threshold},
                                    result_field{"met", &calibration_result::met},
                                    result_field{"chosen", &calibration_result::chosen},
                                    result_field{"curve", &calibration_result::curve});
    bind_result<pruning_evaluation>(
        m, "PruningEvaluation", "Precision and compute of a policy replayed over trajectories.", old_form::none,
        result_field{"queries", &pruning_evaluation::queries}, result_field{"k", &pruning_evaluation::k},
        result_field{"precision_at_k", &pruning_evaluation::precision_at_k},
        result_field{"layer_compute_saved", &pruning_evaluation::layer_compute_saved},
        result_field{"mean_active_per_layer",
                     [](const pruning_evaluation& e) { return copy_out(std::span<const double>(e.mean_active_per_layer)); }},
        result_field{"query_loss", [](const pruning_evaluation& e) { return copy_out(std::span<const double>(e.query_loss)); }});
}

// A read-only numpy view of a vector inside a bound object, keeping the object alive.
template <class T>
py::array_t<T> view_of(const std::vector<T>& v, py::handle owner) {
    py::array_t<T> a({static_cast<py::ssize_t>(v.size())}, {static_cast<py::ssize_t>(sizeof(T))}, v.data(), owner);
    py::detail::array_proxy(a.ptr())->flags &= ~py::detail::npy_api::NPY_ARRAY_WRITEABLE_;
    return a;
}

void bind_kmeans(py::module_& m) {
    using km = kmeans1d_result;
    bind_result<km>(m, "KMeansResult", "An optimal 1-D clustering; clusters in ascending order of their means.", old_form::none,
                    result_field{"labels", [](py::object r) { return view_of(r.cast<const km&>().labels, r); },
                                 "Cluster of each input."},
                    result_field{"centroids", [](py::object r) { return view_of(r.cast<const km&>().centroids, r); }},
                    result_field{"sizes", [](py::object r) { return view_of(r.cast<const km&>().sizes, r); }},
                    result_field{"withinss", [](py::object r) { return view_of(r.cast<const km&>().withinss, r); },
                                 "Within-cluster sums of squared deviations."},
                    result_field{"sse", &km::sse, "Total within-cluster sum of squares."});
    m.def("dispersion",
          [](py::handle scores, dispersion_measure measure, double mean_floor) {
              return with_scores(scores, "scores", [&](auto s) {
                  py::gil_scoped_release release;
                  return dispersion(s, measure, mean_floor);
              });
          },
          py::arg("scores"), py::arg("measure") = dispersion_measure::cv, py::arg("mean_floor") = dispersion_mean_floor,
          R"doc(The dispersion of `scores` (float32 or float64) under `measure`: GRATING's pruning trigger.

    cv = dispersion(np.array([1.0, 2.0, 3.0]))   # population stddev / |mean|)doc");
    m.def("kmeans1d_optimal",
          [](py::handle scores, std::size_t k) {
              auto r = with_scores(scores, "scores", [&](auto s) {
                  py::gil_scoped_release release;
                  return kmeans1d_optimal(s, k);
              });
              return r;
          },
          py::arg("scores"), py::arg("k"),
          R"doc(The optimal k-cluster 1-D k-means (exact dynamic program): a namespace with labels (uint32),
centroids, sizes, withinss (arrays, clusters ascending) and sse.

    r = kmeans1d_optimal(np.array([1.0, 1.1, 5.0, 5.2], dtype=np.float32), 2)   # r.labels == [0, 0, 1, 1])doc");

    py::class_<py_kmeans>(m, "KMeans1D", R"doc(
Exact 1-D k-means for every k up to k_max in one dynamic program; reuses its buffers.

    km = KMeans1D()
    km.fit(scores, 8)
    k = km.select_k_bic()          # as Ckmeans.1d.dp's estimate.k = "BIC"
    r = km.clustering(k)
)doc")
        .def(py::init<>())
        .def("fit",
             [](py_kmeans& self, py::handle scores, std::size_t k_max) {
                 with_scores(scores, "scores", [&](auto s) {
                     without_gil(self.busy, "KMeans1D.fit", [&] { self.km.fit(s, k_max); });
                 });
             },
             py::arg("scores"), py::arg("k_max"), "Solves the DP for k = 1..min(k_max, n).")
        .def("sse", busy_method<&py_kmeans::km>(&kmeans1d::sse, "KMeans1D.sse"), py::arg("k"), "Minimal total within-cluster sum of squares with k clusters.")
        .def("bic", busy_method<&py_kmeans::km>(&kmeans1d::bic, "KMeans1D.bic"), py::arg("k"), "BIC of the k-cluster solution (Ckmeans.1d.dp's; larger is better).")
        .def("select_k_bic", busy_method<&py_kmeans::km>(&kmeans1d::select_k_bic, "KMeans1D.select_k_bic"), "The k with the largest BIC.")
        .def("clustering", busy_method<&py_kmeans::km>(&kmeans1d::clustering, "KMeans1D.clustering"), py::arg("k"), "The optimal clustering with k clusters (as kmeans1d_optimal).")
        .def_property_readonly("order", busy_method<&py_kmeans::km>(&kmeans1d::order, "KMeans1D.order",
                                                                    [](auto span) { return copy_out(span); }),
                               "Input positions in ascending score order.")
        .def_property_readonly("k_max", busy_method<&py_kmeans::km>(&kmeans1d::k_max, "KMeans1D.k_max"))
        .def("__len__", busy_method<&py_kmeans::km>(&kmeans1d::size, "KMeans1D.__len__"));
}

void bind_pruner(py::module_& m) {
    py::class_<cluster_pruner_options> options(m, "ClusterPrunerOptions",
                                               "Settings of ClusterPruner (the C++ cluster_pruner_options; see docs/pruning.md).");
    def_options_init(options);
    options.def_readwrite("threshold", &cluster_pruner_options::threshold)
        .def_readwrite("measure", &cluster_pruner_options::measure)
        .def_readwrite("mode", &cluster_pruner_options::mode)
        .def_readwrite("clusters", &cluster_pruner_options::clusters)
        .def_readwrite("max_clusters", &cluster_pruner_options::max_clusters)
        .def_readwrite("patience", &cluster_pruner_options::patience)
        .def_readwrite("lead_over_change", &cluster_pruner_options::lead_over_change)
        .def_readwrite("confirmations", &cluster_pruner_options::confirmations);

    py::class_<py_pruner> pruner(m, "ClusterPruner", R"doc(
GRATING's progressive cluster pruning policy (section 4.1): when the dispersion of the active
scores exceeds the threshold, they are clustered by exact 1-D k-means and routed by whole
clusters around the one holding the K-th candidate.

    pruner = ClusterPruner(threshold=0.3)
    d = pruner.decide(scores, open_slots=10)   # d.step: PruneStep; d.routes: uint8 values of Route
)doc");
    pruner.def(py::init<const cluster_pruner_options&>(), py::arg("options"));
    def_options_init(pruner);
    pruner
        .def("decide",
             [](py_pruner& self, py::handle scores, std::size_t open_slots, py::object out) {
                 const array_view<float> s(scores, "scores");
                 py::array_t<std::uint8_t> routes =
                     out.is_none() ? py::array_t<std::uint8_t>(static_cast<py::ssize_t>(s.size())) : py::array_t<std::uint8_t>();
                 const array_view<std::uint8_t, true> r(out.is_none() ? py::handle(routes) : py::handle(out), "out");
                 static_assert(sizeof(route) == 1);
                 const auto step = without_gil(self.busy, "ClusterPruner.decide", [&] {
                     return self.pruner.decide(s.span(), open_slots,
                                               std::span<route>(reinterpret_cast<route*>(r.data()), r.size()));
                 });
                 return decision{step, r.array()};
             },
             py::arg("scores"), py::arg("open_slots"), py::arg("out") = py::none(),
             "One decision over the active candidates' float32 scores: PruneDecision(step, routes), routes a uint8 "
             "array of Route values (written into `out` when given).")
        .def("reset", [](py_pruner& self) {
                 busy_flag::guard g(self.busy, "ClusterPruner.reset");
                 self.pruner.reset();
             }, "Forgets the per-query state before a new query.")
        .def_property_readonly("options", [](const py_pruner& self) { return self.pruner.options(); });
}

void bind_trajectories(py::module_& m) {
    py::class_<trajectory_set>(m, "TrajectorySet", R"doc(
Recorded per-layer reranker scores of many queries (the calibration input of GRATING's
automatic threshold mode): each query is a float32 array of candidates x layers.

    trajectories = TrajectorySet([np.random.rand(20, 28).astype(np.float32) for _ in range(100)])
    trajectories.save("cal.txt"); same = TrajectorySet.load("cal.txt")
)doc")
        .def(py::init([](py::iterable queries) {
                 trajectory_set set;
                 for (py::handle q : queries) {
                     const array_view<float> a(q, "query", 2);
                     score_trajectory t(a.shape(0), a.shape(1));
                     for (std::size_t c = 0; c < a.shape(0); ++c)
                         for (std::size_t l = 0; l < a.shape(1); ++l) t.at(c, l) = a.data()[c * a.shape(1) + l];
                     FRUGAL_CHECK(set.queries.empty() || t.layers() == set.layers, "TrajectorySet: query ",
                                  set.queries.size(), " has ", t.layers(), " layers, the first ", set.layers);
                     set.layers = t.layers();
                     set.queries.push_back(std::move(t));
                 }
                 FRUGAL_CHECK(!set.queries.empty(), "TrajectorySet: no query");
                 return set;
             }),
             py::arg("queries"))
        .def_static("load", [](const std::filesystem::path& p) {
                        py::gil_scoped_release release;
                        return load_trajectories(p);
                    },
                    py::arg("path"), "Reads the text format of save(); a bad file raises RuntimeFailureError.")
        .def("save",
             [](const trajectory_set& s, const std::filesystem::path& p) {
                 std::ofstream out(p);
                 FRUGAL_CHECK_AS(frugal::runtime_error, out.is_open(), "TrajectorySet.save: cannot open ", p);
                 write_trajectories(out, s);
             },
             py::arg("path"))
        .def_readonly("layers", &trajectory_set::layers)
        .def("__len__", [](const trajectory_set& s) { return s.queries.size(); })
        .def("__getitem__",
             [](const trajectory_set& s, std::size_t i) {
                 FRUGAL_CHECK_AS(frugal::out_of_range, i < s.queries.size(), "TrajectorySet: query ", i, " >= ",
                                 s.queries.size());
                 const auto& q = s.queries[i];
                 py::array_t<float> a({q.candidates(), q.layers()});
                 for (std::size_t c = 0; c < q.candidates(); ++c)
                     std::copy_n(q.candidate(c).data(), q.layers(), a.mutable_data() + c * q.layers());
                 return a;
             },
             py::arg("i"), "Query i's scores (a candidates x layers copy).");

    m.def("evaluate_pruning",
          [](const trajectory_set& set, std::size_t k, cluster_pruner_options options) {
              py::gil_scoped_release release;  // `options` is a copy: Python may change its own meanwhile
              return evaluate_pruning(set, k, [&] { return cluster_pruner(options); });
          },
          py::arg("trajectories"), py::arg("k"), py::arg("options") = cluster_pruner_options{},
          R"doc(Replays the trajectories as pruned forward passes under a fresh ClusterPruner(options) per query.

    ev = evaluate_pruning(trajectories, 10, ClusterPrunerOptions(threshold=0.4))   # ev.precision_at_k)doc");
    m.def("threshold_grid",
          [](const trajectory_set& set, cluster_pruner_options options, std::size_t points) {
              py::gil_scoped_release release;
              return threshold_grid(set, options, points);
          },
          py::arg("trajectories"), py::arg("options") = cluster_pruner_options{}, py::arg("points") = calibration_options{}.grid_points,
          "The candidate thresholds calibration searches (quantiles of the observed dispersion, plus 0 and inf).");
    const calibration_options d;
    m.def("calibrate_threshold",
          [](const trajectory_set& set, std::size_t k, double target, cluster_pruner_options policy,
             std::size_t grid_points, std::optional<double> delta, double margin, std::size_t padding) {
              py::gil_scoped_release release;
              return calibrate_threshold(set, k, target, calibration_options{policy, grid_points, delta, margin, padding});
          },
          py::arg("trajectories"), py::arg("k"), py::arg("target"), py::kw_only(), py::arg("policy") = d.policy,
          py::arg("grid_points") = d.grid_points, py::arg("delta") = d.delta,
          py::arg("margin_standard_errors") = d.margin_standard_errors, py::arg("padding_queries") = d.padding_queries,
          R"doc(Chooses ClusterPruner's dispersion threshold so precision@K meets `target` (GRATING 4.1's automatic
mode; with delta, Learn-then-Test's guarded mode).

    cal = calibrate_threshold(trajectories, 10, 0.99)
    pruner = ClusterPruner(threshold=cal.threshold))doc");
}

void bind_ranker(py::module_& m) {
    py::class_<chunk_planning>(m, "ChunkPlanning",
                               "Chunk sizing of progressive_rank (GRATING 4.3): the cost of one candidate through one layer.")
        .def(py::init([](double per_token_seconds, double min_chunk_seconds, double intermediate_bytes_per_token,
                         double next_layer_load_seconds, double memory_limit_bytes) {
                 return chunk_planning{{per_token_seconds, min_chunk_seconds, intermediate_bytes_per_token},
                                       next_layer_load_seconds, memory_limit_bytes};
             }),
             py::kw_only(), py::arg("per_token_seconds"), py::arg("min_chunk_seconds"),
             py::arg("intermediate_bytes_per_token"), py::arg("next_layer_load_seconds"), py::arg("memory_limit_bytes"));

    using ranking = progressive_ranking;
    bind_result<ranking>(m, "ProgressiveRanking", "The outcome of progressive_rank.", old_form::none,
                         result_field{"top", [](const ranking& r) { return copy_out(std::span<const std::size_t>(r.top)); },
                                      "The K ids: early-selected first, then by final score."},
                         result_field{"scores", [](const ranking& r) { return copy_out(std::span<const float>(r.scores)); },
                                      "Final-layer score of each id in top (NaN for ids selected early)."},
                         result_field{"layers", &ranking::layers},
                         result_field{"candidate_layers_computed", &ranking::candidate_layers_computed},
                         result_field{"candidate_layers_skipped", &ranking::candidate_layers_skipped});

    m.def("progressive_rank",
          [](py::object model, std::size_t pool, std::size_t k, py_pruner& policy, std::size_t chunk_size,
             std::optional<chunk_planning> planning) {
              python_model adapter(std::move(model));
              busy_flag::guard g(policy.busy, "progressive_rank");
              return progressive_rank(adapter, pool, k, policy.pruner, progressive_ranker_options{planning, chunk_size});
          },
          py::arg("model"), py::arg("pool"), py::arg("k"), py::arg("policy"), py::kw_only(), py::arg("chunk_size") = 0,
          py::arg("planning") = py::none(),
          R"doc(Runs a Python reranker over `pool` candidates with monolithic forwarding and progressive pruning
(GRATING 4.1-4.3). `model` has `layers` (int) and embed(ids), forward(layer, ids), score(ids) -> scores
(ids: int64 arrays), and optionally begin_layer(layer) / end_layer(layer). The model runs with the GIL held.

    r = progressive_rank(model, pool=100, k=10, policy=ClusterPruner(threshold=0.35))
    r.top, r.candidate_layers_skipped)doc");
}

}  // namespace

void bind_prune(py::module_ m) {
    bind_enums_and_results(m);
    bind_kmeans(m);
    bind_pruner(m);
    bind_trajectories(m);
    bind_ranker(m);
}

}  // namespace frugal::python
