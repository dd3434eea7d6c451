// `frugal-bench prune`: GRATING's progressive cluster pruning replayed on score trajectories
// (a file, or SYNTHETIC ones from the generator), its threshold calibration, and the
// precision-vs-compute curve against the fixed-margin rule.
#include <chrono>
#include <filesystem>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include <frugal/prune/calibrate.hpp>
#include <frugal/prune/cluster_pruner.hpp>
#include <frugal/prune/kmeans1d.hpp>
#include <frugal/sim/kmeans1d_lloyd.hpp>
#include <frugal/sim/margin_pruner.hpp>
#include <frugal/sim/synthetic_trajectories.hpp>
#include <frugal/prune/trajectory.hpp>

#include "harness.hpp"

namespace frugal::bench {
namespace {

record evaluation_record(const prune::pruning_evaluation& ev, const std::string& policy, double parameter) {
    return {{"policy", policy},
            {"queries", ev.queries},
            {"k", ev.k},
            {"threshold", std::isfinite(parameter) ? record(parameter) : record("inf")},
            {"precision_at_k", ev.precision_at_k},
            {"layer_compute_saved", ev.layer_compute_saved},
            {"mean_active_per_layer", ev.mean_active_per_layer}};
}

// The cluster policy as configured ("cluster"), GRATING's rule alone ("cluster-grating",
// patience and confirmations 0) when the configured one differs, and the fixed-margin rule
// ("margin").
std::vector<record> sweep(const prune::trajectory_set& set, std::size_t k, const prune::cluster_pruner_options& base) {
    std::vector<record> out;
    std::vector<std::pair<std::string, prune::cluster_pruner_options>> variants = {{"cluster", base}};
    if (base.patience != 0 || base.confirmations != 0) {
        variants.emplace_back("cluster-grating", base);
        variants.back().second.patience = 0;
        variants.back().second.confirmations = 0;
    }
    for (const auto& [name, options] : variants) {
        for (double t : prune::threshold_grid(set, options, 24)) {
            prune::cluster_pruner_options o = options;
            o.threshold = t;
            out.push_back(evaluation_record(prune::evaluate_pruning(set, k, [&] { return prune::cluster_pruner(o); }), name, t));
        }
    }
    for (double margin : {0.0, 0.02, 0.05, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.7}) {
        out.push_back(evaluation_record(prune::evaluate_pruning(set, k, [&] { return sim::margin_pruner(margin); }), "margin",
                                        margin));
    }
    return out;
}

// Exact kmeans1d (all k <= 8 from one DP) against Lloyd with 10 k-means++ restarts (k = 8 only).
std::vector<record> kmeans_timing(std::size_t n, double min_seconds) {
    std::mt19937_64 rng(5);
    std::normal_distribution<float> normal;
    std::vector<float> x(n);
    for (std::size_t i = 0; i < n; ++i) x[i] = normal(rng) + 3.0f * float(i % 4);
    prune::kmeans1d km;
    double exact_sse = 0.0, lloyd_sse = 0.0;
    const timing exact = measure([&] {
        km.fit(std::span<const float>(x), 8);
        exact_sse = km.sse(8);
    }, min_seconds);
    const timing lloyd = measure([&] { lloyd_sse = sim::kmeans1d_lloyd(std::span<const float>(x), 8, 10, 1).sse; },
                                 min_seconds);
    return {{{"impl", "kmeans1d-exact"}, {"n", n}, {"k_max", 8}, {"us", exact.median_ms * 1e3}, {"sse", exact_sse},
             {"speedup_vs_lloyd", lloyd.median_ms / exact.median_ms}},
            {{"impl", "lloyd-10-restarts"}, {"n", n}, {"k_max", 8}, {"us", lloyd.median_ms * 1e3}, {"sse", lloyd_sse},
             {"speedup_vs_lloyd", 1.0}}};
}

class prune_command final : public subcommand {
public:
    std::string name() const override { return "prune"; }
    std::string summary() const override {
        return "progressive cluster pruning on score trajectories: sweep, calibrate, generate (GRATING)";
    }
    int report_order() const override { return 40; }
    void configure(CLI::App& app) override {
        app.add_flag("--generate", generate_, "write a SYNTHETIC trajectory file to --out");
        app.add_option("--out", out_, "output file of --generate");
        app.add_option("--queries", gen_.queries, "queries to generate")->check(CLI::PositiveNumber)->capture_default_str();
        app.add_option("--candidates", gen_.candidates, "candidates per query")->check(CLI::PositiveNumber)->capture_default_str();
        app.add_option("--layers", gen_.layers, "layers per trajectory")->check(CLI::PositiveNumber)->capture_default_str();
        app.add_option("--seed", gen_.seed, "generator seed")->capture_default_str();
        // the synthetic model's shape, for sensitivity runs (docs/pruning.md)
        app.add_option("--onset-min", gen_.onset_min, "convergence midpoint range (fraction of depth)")
            ->capture_default_str();
        app.add_option("--onset-max", gen_.onset_max)->capture_default_str();
        app.add_option("--width-min", gen_.width_min, "convergence width range (fraction of depth)")->capture_default_str();
        app.add_option("--width-max", gen_.width_max)->capture_default_str();
        app.add_option("--gap-min", gen_.gap_min, "logit gap between adjacent groups")->capture_default_str();
        app.add_option("--gap-max", gen_.gap_max)->capture_default_str();
        app.add_option("--early-sd", gen_.early_sd, "early-layer noise (logits)")->capture_default_str();
        app.add_option("--trajectories", trajectories_, "trajectory file to replay");
        app.add_option("--k", k_, "top-K")->check(CLI::PositiveNumber)->capture_default_str();
        auto* t = app.add_option("--threshold", threshold_, "dispersion threshold to evaluate");
        auto* s = app.add_flag("--sweep", sweep_, "evaluate a grid of thresholds (and fixed margins)");
        auto* c = app.add_option("--calibrate", target_, "choose the lowest threshold meeting this precision@K");
        t->excludes(s)->excludes(c);
        s->excludes(c);
        app.add_option("--delta", delta_, "with --calibrate: guarded (Learn-then-Test) mode at this risk level");
        app.add_option("--margin-se", margin_se_,
                       "with --calibrate (automatic mode): standard errors of margin over the target (0: the paper's rule)")
            ->check(CLI::NonNegativeNumber)->capture_default_str();
        app.add_option("--padding-queries", padding_queries_,
                       "with --calibrate (automatic mode): extra queries of typical loss added to the calibration set "
                       "(0 with --margin-se 0: the paper's rule)")
            ->capture_default_str();
        app.add_option("--patience", patience_, "rank-stability extension: decisions the top set must hold (0: off)")
            ->capture_default_str();
        app.add_option("--lead-over-change", lead_over_change_,
                       "rank-stability extension: the top set's lead must be this many times the largest score move "
                       "since the previous decision (0: off)")
            ->check(CLI::NonNegativeNumber)->capture_default_str();
        app.add_option("--confirmations", confirmations_,
                       "earlier consecutive decisions whose dispersion must also exceed the threshold (0: GRATING's rule)")
            ->capture_default_str();
        app.add_flag("--robust", robust_, "use the robust (MAD) dispersion instead of the CV");
        app.add_option("--clusters", clusters_, "clusters per decision (0: chosen by BIC up to --max-clusters)")
            ->capture_default_str();
        app.add_option("--max-clusters", max_clusters_, "largest k the BIC considers")
            ->check(CLI::PositiveNumber)->capture_default_str();
        app.add_flag("--exact-ranking", exact_, "exact-ranking mode: only hopeless candidates are pruned");
    }
    int run(result_sink& sink) override {
        if (generate_) {
            FRUGAL_CHECK(!out_.empty(), "prune --generate needs --out FILE");
            prune::save_trajectories(out_, sim::generate_synthetic_trajectories(gen_),
                               "SYNTHETIC trajectories from frugal::sim::generate_synthetic_trajectories, seed " +
                                   std::to_string(gen_.seed) + " (not a real reranker)");
            sink.add({{"generated", out_}, {"queries", gen_.queries}, {"candidates", gen_.candidates},
                      {"layers", gen_.layers}, {"seed", gen_.seed}});
            return 0;
        }
        FRUGAL_CHECK(!trajectories_.empty(), "prune needs --trajectories FILE (or --generate --out FILE)");
        const prune::trajectory_set set = prune::load_trajectories(trajectories_);
        const prune::cluster_pruner_options base = policy_options();
        if (target_) {
            prune::calibration_options co{.policy = base, .delta = delta_, .margin_standard_errors = margin_se_,
                                   .padding_queries = padding_queries_};
            const auto cal = prune::calibrate_threshold(set, k_, *target_, co);
            prune::cluster_pruner_options o = base;
            o.threshold = cal.threshold;
            record r = evaluation_record(prune::evaluate_pruning(set, k_, [&] { return prune::cluster_pruner(o); }), "cluster",
                                         cal.threshold);
            r["target"] = *target_;
            r["mode"] = delta_ ? "guarded" : "automatic";
            if (delta_) r["delta"] = *delta_;
            else {
                r["margin_standard_errors"] = margin_se_;
                r["padding_queries"] = padding_queries_;
            }
            r["met"] = cal.met;
            sink.add(std::move(r));
        } else if (sweep_) {
            for (auto& r : sweep(set, k_, base)) sink.add(std::move(r));
        } else {
            prune::cluster_pruner_options o = base;
            o.threshold = threshold_.value_or(base.threshold);
            sink.add(evaluation_record(prune::evaluate_pruning(set, k_, [&] { return prune::cluster_pruner(o); }), "cluster",
                                       o.threshold));
        }
        return 0;
    }
    report_section report(const report_context& ctx) override {
        report_section s;
        s.title = "Progressive cluster pruning (GRATING)";
        s.data_source = "SYNTHETIC score trajectories (frugal::sim::generate_synthetic_trajectories, seeds 1 and 2): "
                        "no real reranker can be run here";
        sim::synthetic_trajectory_options g;
        if (ctx.quick) g.queries = 20;
        g.seed = 1;
        const auto cal_set = sim::generate_synthetic_trajectories(g);
        g.seed = 2;
        const auto test_set = sim::generate_synthetic_trajectories(g);
        const std::size_t k = 10;
        const auto cal = prune::calibrate_threshold(cal_set, k, 0.99, {.grid_points = ctx.quick ? 16u : 96u});
        prune::cluster_pruner_options o;
        o.threshold = cal.threshold;
        const auto applied = prune::evaluate_pruning(test_set, k, [&] { return prune::cluster_pruner(o); });
        s.notes = "Replays " + std::to_string(g.queries) + " queries x 20 candidates x 28 layers, K = 10. "
                  "Threshold calibrated for precision@10 >= 0.99 on seed 1 (automatic mode, margin of " +
                  std::to_string(prune::calibration_options{}.margin_standard_errors) + " standard errors, " +
                  std::to_string(prune::calibration_options{}.padding_queries) + " padding query): " +
                  std::to_string(cal.threshold) + "; on seed 2 it gives precision@10 " +
                  std::to_string(applied.precision_at_k) + " with " +
                  std::to_string(applied.layer_compute_saved) + " of candidate-layers skipped. "
                  "The curve sweeps the CV threshold on seed 2 for frugal's policy (cluster: GRATING's rule plus "
                  "one confirmation of the trigger and the rank-stability stop, patience 3), GRATING's rule alone "
                  "(cluster-grating, confirmations and patience 0), and "
                  "the fixed-margin rule (margin, swept over the margin). "
                  "`frugal-bench prune --trajectories FILE --k 10 --sweep`.";
        for (auto& r : sweep(test_set, k, prune::cluster_pruner_options{})) {
            r.erase("mean_active_per_layer");
            s.records.push_back(std::move(r));
        }
        for (auto& r : kmeans_timing(1000, ctx.quick ? 0.01 : 0.2)) s.records.push_back(std::move(r));
        s.plots.push_back({.file = "prune_precision_vs_saved.png",
                           .title = "precision@10 vs candidate-layers skipped (synthetic)",
                           .x = "layer_compute_saved", .y = "precision_at_k", .series = "policy",
                           .xlabel = "fraction of candidate-layers skipped", .ylabel = "precision@10"});
        return s;
    }

private:
    prune::cluster_pruner_options policy_options() const {
        prune::cluster_pruner_options o;
        o.measure = robust_ ? prune::dispersion_measure::robust_cv : prune::dispersion_measure::cv;
        o.mode = exact_ ? prune::ranking_mode::exact : prune::ranking_mode::top_k;
        o.clusters = clusters_;
        o.patience = patience_;
        o.lead_over_change = lead_over_change_;
        o.confirmations = confirmations_;
        o.max_clusters = max_clusters_;
        return o;
    }
    bool generate_ = false, sweep_ = false, robust_ = false, exact_ = false;
    std::string out_, trajectories_;
    sim::synthetic_trajectory_options gen_;
    std::size_t k_ = 10;
    std::size_t patience_ = prune::cluster_pruner_options{}.patience, confirmations_ = prune::cluster_pruner_options{}.confirmations;
    std::size_t clusters_ = prune::cluster_pruner_options{}.clusters, max_clusters_ = prune::cluster_pruner_options{}.max_clusters;
    std::optional<double> threshold_, target_, delta_;
    double lead_over_change_ = prune::cluster_pruner_options{}.lead_over_change;
    double margin_se_ = prune::calibration_options{}.margin_standard_errors;
    std::size_t padding_queries_ = prune::calibration_options{}.padding_queries;
};

FRUGAL_BENCH_COMMAND(prune_command);

}  // namespace
}  // namespace frugal::bench
