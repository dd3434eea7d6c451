// `frugal-bench draft --cost-model`: see draft_serving.hpp.
#include "draft_serving.hpp"

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <span>

#include <frugal/core/stats.hpp>
#include <frugal/draft/history.hpp>
#include <frugal/draft/speculator.hpp>
#include <frugal/sim/prompt_lookup.hpp>

#include <CLI/CLI.hpp>

namespace frugal::bench {

using token = std::int32_t;
using testing::token_record;

draft::roofline_cost named_cost_model(const std::string& name) {
    if (name == "h100-7b") return draft::roofline_cost::h100_7b();
    if (name == "cpu-1b") return draft::roofline_cost::cpu_1b();
    throw CLI::ValidationError("--cost-model", "unknown cost model " + name + " (h100-7b, cpu-1b)");
}

namespace {

// A history bound the bundled files never reach (the replay never evicts).
constexpr std::size_t unbounded_history = std::size_t{1} << 22;

// Reliability of path probabilities: 10 equal bins of the predicted probability, and the
// same per depth. ECE = sum over bins of (nodes in bin / nodes) x |mean predicted - accepted rate|.
struct reliability {
    struct bin {
        double nodes = 0, predicted = 0, accepted = 0;
    };
    std::array<bin, 10> bins{};
    void add(double p, bool accepted) {
        bin& b = bins[std::min<std::size_t>(9, static_cast<std::size_t>(p * 10))];
        b.nodes += 1, b.predicted += p, b.accepted += accepted;
    }
    [[nodiscard]] double nodes() const {
        double n = 0;
        for (const bin& b : bins) n += b.nodes;
        return n;
    }
    [[nodiscard]] double ece() const {
        const double n = nodes();
        double e = 0;
        for (const bin& b : bins)
            if (b.nodes > 0) e += std::abs(b.predicted - b.accepted) / n;
        return n > 0 ? e : 0.0;
    }
};

std::string depth_bucket(std::size_t d) {
    if (d <= 2) return std::to_string(d);
    std::size_t lo = 3, hi = 4;
    while (d > hi) lo = hi + 1, hi *= 2;
    return std::to_string(lo) + "-" + std::to_string(hi);
}

struct run_totals {
    double ms = 0, propose_us = 0;  // modelled step time; wall time in the drafter
    std::size_t tokens = 0, request_steps = 0, drafted = 0, steps = 0;
    reliability calibrated, raw;
    std::map<std::string, reliability> by_depth;
};

// The replay without speculation: every live request emits one token a step.
double plain_ms(const std::vector<token_record>& data, std::size_t batch, const draft::roofline_cost& cost) {
    std::vector<std::size_t> left;
    std::size_t next = 0;
    double ms = 0;
    while (next < data.size() || !left.empty()) {
        while (left.size() < batch && next < data.size())
            if (const std::size_t n = data[next++].response.size(); n > 0) left.push_back(n);
        if (left.empty()) break;
        ms += cost.step_ms(left.size());
        for (std::size_t& n : left) --n;
        std::erase(left, std::size_t{0});
    }
    return ms;
}

// Labels every candidate node of `tree` against the record (accepted: its path is the
// response's next tokens) and adds it to the reliability tables.
void score_candidates(const draft::draft_tree<token>& tree, std::span<const double> calibrated,
                      const token_record& rec, std::size_t pos, run_totals& t) {
    std::vector<std::uint32_t> depth(tree.size());
    std::vector<char> on_path(tree.size());
    for (std::size_t i = 0; i < tree.size(); ++i) {
        const std::int32_t parent = tree.parents[i];
        depth[i] = parent < 0 ? 1 : depth[std::size_t(parent)] + 1;
        if (pos + depth[i] > rec.response.size()) continue;  // past the response: no verdict
        on_path[i] = (parent < 0 || on_path[std::size_t(parent)]) && tree.tokens[i] == rec.response[pos + depth[i] - 1];
        t.calibrated.add(calibrated[i], on_path[i]);
        t.raw.add(tree.path_probabilities[i], on_path[i]);
        t.by_depth[depth_bucket(depth[i])].add(calibrated[i], on_path[i]);
    }
}

run_totals replay(const std::vector<token_record>& data, const std::string& kind, std::size_t batch,
                  std::size_t max_draft, const serving_settings& s) {
    const draft::drafter_config config{.max_draft = max_draft,
                                       .tree_depth = s.tree_depth != 0 ? s.tree_depth : max_draft,
                                       .tree_budget = s.tree_budget};
    draft::live_history<token> history(unbounded_history);
    draft::speculator<token> spec(config, s.history ? &history : nullptr);
    struct slot {
        std::size_t record = 0, pos = 0;
        std::vector<token> context;  // pld
    };
    std::vector<slot> slots;
    std::vector<draft::request_id> ids;
    std::vector<const draft::draft_tree<token>*> drafts;
    std::vector<draft::draft_tree<token>> pld_trees;
    std::vector<double> conditional, path;
    std::size_t next = 0;
    run_totals t;
    auto admit = [&](slot& sl) {
        while (next < data.size() && data[next].response.empty()) ++next;
        if (next == data.size()) return false;
        sl = {next, 0, {}};
        if (kind == "pld") sl.context = data[next].prompt;
        else spec.start(next, data[next].prompt);
        ++next;
        return true;
    };
    for (slot sl; slots.size() < batch && admit(sl);) slots.push_back(std::move(sl));
    while (!slots.empty()) {
        ids.clear();
        for (const slot& sl : slots) ids.push_back(sl.record);
        drafts.assign(slots.size(), nullptr);
        if (kind == "pld") {
            pld_trees.resize(slots.size());
            for (std::size_t i = 0; i < slots.size(); ++i) {
                pld_trees[i].clear();
                const auto chain = sim::prompt_lookup_draft<token>(slots[i].context, 3, max_draft);
                for (std::size_t k = 0; k < chain.size(); ++k) pld_trees[i].push(std::int32_t(k) - 1, chain[k]);
                drafts[i] = &pld_trees[i];
            }
        } else {
            const auto shape = kind == "sam" ? draft::draft_shape::chain : draft::draft_shape::tree;
            const auto t0 = std::chrono::steady_clock::now();
            const auto got = kind == "auto" ? spec.propose(ids, s.cost, shape) : spec.propose(ids, shape);
            t.propose_us += std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
            std::copy(got.begin(), got.end(), drafts.begin());
        }
        std::size_t verified = 0;
        for (const auto* d : drafts) verified += 1 + d->size();
        t.ms += s.cost.step_ms(verified);
        ++t.steps;
        std::vector<slot> kept;
        for (std::size_t i = 0; i < slots.size(); ++i) {
            slot& sl = slots[i];
            const token_record& rec = data[sl.record];
            if (kind == "auto") {
                const auto& d = spec.request(sl.record);
                d.calibrated(conditional, path);
                score_candidates(d.last_draft(), path, rec, sl.pos, t);
            }
            testing::replay_stats step;
            const std::size_t emitted = testing::replay_step(rec, sl.pos, *drafts[i], step);
            t.request_steps += 1, t.drafted += step.drafted;
            const std::span<const token> out = std::span<const token>(rec.response).subspan(sl.pos, emitted);
            if (kind == "pld") sl.context.insert(sl.context.end(), out.begin(), out.end());
            else spec.append(sl.record, out);
            sl.pos += emitted;
            if (sl.pos < rec.response.size()) {
                kept.push_back(std::move(sl));
                continue;
            }
            t.tokens += rec.response.size();
            if (kind != "pld") {
                const auto output = spec.stop(sl.record);
                if (s.history) {  // published at once, as the plain replay does
                    history.add(output);
                    history.publish();
                }
            }
            if (admit(sl)) kept.push_back(std::move(sl));
        }
        slots = std::move(kept);
    }
    return t;
}

// The cost of choosing: 64 requests (the file's first records from a quarter of their
// responses on, over a history of the others' responses) drafted as trees by plain
// drafters, as propose did before sizing, and by the speculator's cost-aware propose
// (calibration, watching, the batch-wide choice), interleaved on the same states: each
// round verifies the sized drafts and appends what they emit to both. Medians per call.
record choosing_cost_record(const std::vector<token_record>& data, const serving_settings& s) {
    constexpr std::size_t batch = 64, rounds = 101;
    const draft::drafter_config config{.max_draft = s.max_draft,
                                       .tree_depth = s.tree_depth != 0 ? s.tree_depth : s.max_draft,
                                       .tree_budget = s.tree_budget};
    draft::live_history<token> history(unbounded_history);
    for (std::size_t r = batch; r < data.size(); ++r) history.add(data[r].response);
    history.publish();
    draft::speculator<token> spec(config, s.history ? &history : nullptr);
    std::vector<draft::drafter<token>> plain;
    std::vector<draft::request_id> ids;
    std::vector<std::size_t> pos;
    for (std::size_t r = 0; r < std::min(batch, data.size()); ++r) {
        const auto start = std::span<const token>(data[r].response).first(data[r].response.size() / 4);
        plain.emplace_back(config, s.history ? &history : nullptr).begin(data[r].prompt);
        plain.back().accept(start);
        spec.start(r, data[r].prompt);
        spec.append(r, start);
        ids.push_back(r);
        pos.push_back(start.size());
    }
    using clock = std::chrono::steady_clock;
    std::vector<double> before, sized;
    std::size_t nodes = 0;
    for (std::size_t round = 0; round < rounds; ++round) {
        auto t0 = clock::now();
        for (auto& d : plain) nodes += d.tree().size();
        before.push_back(std::chrono::duration<double, std::micro>(clock::now() - t0).count());
        t0 = clock::now();
        const auto drafts = spec.propose(ids, s.cost);
        sized.push_back(std::chrono::duration<double, std::micro>(clock::now() - t0).count());
        for (std::size_t i = 0; i < ids.size(); ++i) {
            const token_record& rec = data[ids[i]];
            if (pos[i] == rec.response.size()) continue;  // done: drafted as it stands
            testing::replay_stats unused;
            const std::size_t emitted = testing::replay_step(rec, pos[i], *drafts[i], unused);
            const auto out = std::span<const token>(rec.response).subspan(pos[i], emitted);
            plain[i].accept(out);
            spec.append(ids[i], out);
            pos[i] += emitted;
        }
    }
    const double b = quantile(before, 0.5), a = quantile(sized, 0.5);
    return record{{"kind", "choosing_cost"},
                  {"batch", ids.size()},
                  {"max_draft", s.max_draft},
                  {"nodes_per_request", double(nodes) / double(rounds * ids.size())},
                  {"propose_us", b},
                  {"sized_propose_us", a},
                  {"sized_over_propose", a / b}};
}

}  // namespace

std::vector<record> serving_records(const std::vector<token_record>& data, const serving_settings& s) {
    std::vector<record> out;
    if (std::find(s.drafters.begin(), s.drafters.end(), "auto") != s.drafters.end())
        out.push_back(choosing_cost_record(data, s));
    for (const std::size_t batch : s.batches) {
        const double plain = plain_ms(data, batch, s.cost);
        for (const std::string& kind : s.drafters) {
            std::set<std::size_t> ks{s.max_draft};
            if (kind == "pld") ks.insert({std::size_t{10}, std::size_t{64}});  // the baselines, whatever K is
            for (const std::size_t k : ks) {
                const run_totals t = replay(data, kind, batch, k, s);
                out.push_back(record{{"drafter", kind},
                                     {"category", "all"},
                                     {"batch", batch},
                                     {"cost_model", s.cost_name},
                                     {"max_draft", k},
                                     {"speedup", plain / t.ms},
                                     {"mat", double(t.tokens) / double(t.request_steps)},
                                     {"drafted_per_step", double(t.drafted) / double(t.request_steps)},
                                     {"step_ms", t.ms / double(t.steps)},
                                     {"propose_us_per_step", t.propose_us / double(t.steps)}});
                if (kind != "auto") continue;
                out.push_back(record{{"kind", "calibration"},
                                     {"drafter", kind},
                                     {"batch", batch},
                                     {"max_draft", k},
                                     {"nodes", t.calibrated.nodes()},
                                     {"ece", t.calibrated.ece()},
                                     {"ece_uncalibrated", t.raw.ece()}});
                for (std::size_t b = 0; b < t.calibrated.bins.size(); ++b) {
                    const auto& c = t.calibrated.bins[b];
                    const auto& r = t.raw.bins[b];
                    out.push_back(record{{"kind", "reliability"},
                                         {"batch", batch},
                                         {"max_draft", k},
                                         {"bin", (double(b) + 0.5) / 10},
                                         {"nodes", c.nodes},
                                         {"predicted", c.nodes ? c.predicted / c.nodes : 0.0},
                                         {"accepted", c.nodes ? c.accepted / c.nodes : 0.0},
                                         {"nodes_uncalibrated", r.nodes},
                                         {"accepted_uncalibrated", r.nodes ? r.accepted / r.nodes : 0.0}});
                }
                for (const auto& [depth, rel] : t.by_depth)
                    out.push_back(record{{"kind", "reliability_by_depth"},
                                         {"batch", batch},
                                         {"max_draft", k},
                                         {"depth", depth},
                                         {"nodes", rel.nodes()},
                                         {"depth_ece", rel.ece()}});
            }
        }
    }
    return out;
}

}  // namespace frugal::bench
