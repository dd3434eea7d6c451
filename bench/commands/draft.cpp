// `frugal-bench draft`: the offline speculative-decoding simulator of
// ../shared/data/drafting/README.md. Each record's response is the model's greedy output;
// every step drafts from the prompt plus the accepted tokens, accepts the longest matching
// prefix (or tree path) plus one bonus token, and costs one verification pass. PLD (the
// original find_candidate_pred_tokens) is the baseline measured in the same run.
// `--scaling` times one draft step at growing context lengths (sam vs pld).
#include <algorithm>
#include <chrono>
#include <ctime>
#include <cstdint>
#include <map>
#include <random>
#include <tuple>
#include <stop_token>
#include <string>
#include <thread>
#include <vector>

#include <time.h>

#include <frugal/core/stats.hpp>
#include <frugal/draft/drafter.hpp>
#include <frugal/draft/history.hpp>
#include <frugal/draft/reuse.hpp>
#include <frugal/draft/speculator.hpp>
#include <frugal/draft/suffix_automaton.hpp>
#include <frugal/sim/prompt_lookup.hpp>

#include "../../tests/draft/replay.hpp"  // the .tok reader and replay loop the tests also use
#include "draft_replicas.hpp"
#include "draft_serving.hpp"
#include "harness.hpp"

namespace frugal::bench {
namespace {

using token = std::int32_t;
using testing::token_record;
using testing::replay_stats;

// The generated workload (no --data): seeded, documented in docs/drafting.md. A shared
// bank of 3000 phrases (3..12 Zipf-distributed tokens from a 32000 vocabulary) stands in
// for recurring wording across requests; each prompt is phrases and free tokens; each
// response copies prompt spans (category "copy": 50%, "chat": 15%), emits bank phrases
// (30%) or free tokens.
std::vector<token_record> generate_workload(std::size_t records, std::uint32_t seed) {
    std::mt19937 rng(seed);
    std::vector<double> weights(32000);
    for (std::size_t i = 0; i < weights.size(); ++i) weights[i] = 1.0 / double(i + 10);
    std::discrete_distribution<token> zipf(weights.begin(), weights.end());
    std::uniform_real_distribution<double> u(0, 1);
    std::vector<std::vector<token>> bank(3000);
    for (auto& phrase : bank) {
        phrase.resize(3 + rng() % 10);
        for (auto& t : phrase) t = zipf(rng);
    }
    std::vector<token_record> out(records);
    for (std::size_t r = 0; r < records; ++r) {
        auto& rec = out[r];
        rec.id = std::to_string(r);
        const bool copy = r % 2 == 0;
        rec.category = copy ? "copy" : "chat";
        rec.prompt.push_back(1);
        const std::size_t prompt_len = copy ? 400 + rng() % 400 : 40 + rng() % 80;
        while (rec.prompt.size() < prompt_len) {
            if (u(rng) < 0.5) {
                const auto& p = bank[rng() % bank.size()];
                rec.prompt.insert(rec.prompt.end(), p.begin(), p.end());
            } else {
                rec.prompt.push_back(zipf(rng));
            }
        }
        const std::size_t response_len = 60 + rng() % 200;
        const double p_copy = copy ? 0.5 : 0.15;
        while (rec.response.size() < response_len) {
            const double x = u(rng);
            if (x < p_copy) {
                const std::size_t len = 4 + rng() % 20, start = rng() % (rec.prompt.size() - 1);
                const std::size_t stop = std::min(rec.prompt.size(), start + len);
                rec.response.insert(rec.response.end(), rec.prompt.begin() + std::ptrdiff_t(start),
                                    rec.prompt.begin() + std::ptrdiff_t(stop));
            } else if (x < p_copy + 0.3) {
                const auto& p = bank[std::min<std::size_t>(bank.size() - 1, std::size_t(zipf(rng)))];
                rec.response.insert(rec.response.end(), p.begin(), p.end());
            } else {
                rec.response.push_back(zipf(rng));
            }
        }
    }
    return out;
}

struct options {
    std::string drafter = "all";
    std::size_t max_draft = 10, tree_budget = 64, tree_depth = 0;  // tree_depth 0: max_draft
    bool history = true, backoff = true, reuse = false;
    [[nodiscard]] draft::drafter_config config() const {
        return {.max_draft = max_draft,
                .tree_depth = tree_depth != 0 ? tree_depth : max_draft,
                .tree_budget = tree_budget,
                .backoff = backoff};
    }
};

// A history bound the bundled files never reach (the plain replay never evicts).
constexpr std::size_t unbounded_history = std::size_t{1} << 22;

double thread_cpu_us() {
    timespec t{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return 1e6 * double(t.tv_sec) + 1e-3 * double(t.tv_nsec);
}

// Replays every record with one drafter; returns the totals per category ("all" first).
std::map<std::string, replay_stats> simulate(const std::vector<token_record>& data, const std::string& kind,
                                             const options& opt, std::size_t& history_bytes) {
    draft::live_history<token> history(unbounded_history);
    draft::drafter<token> sam(opt.config(), opt.history ? &history : nullptr);
    std::vector<token> context;
    draft::draft_tree<token> tree;
    auto chain_tree = [&](std::span<const token> chain) -> const draft::draft_tree<token>& {
        tree.clear();
        for (std::size_t i = 0; i < chain.size(); ++i) tree.push(std::int32_t(i) - 1, chain[i]);
        return tree;
    };
    // Draft reuse (CoordGen 3.4, Eq. 3) for the chain drafters: the segments kept from
    // earlier rejected drafts are verified as extra branches next to the fresh chain, and
    // each fresh chain's reusable segment is kept. The model's prediction at offset i of a
    // rejected draft is taken as response[pos + i] (the greedy output at that position; the
    // true prediction after a wrong token is unknown offline).
    draft::draft_reuse<token> reuse(2 * opt.max_draft);
    std::vector<token> fresh, predictions;
    std::size_t pos = 0;
    auto with_reuse = [&](const token_record& rec, std::span<const token> chain) -> const draft::draft_tree<token>& {
        fresh.assign(chain.begin(), chain.end());
        chain_tree(fresh);
        if (!opt.reuse) return tree;
        for (std::span<const token> seg : reuse.offer(fresh.size())) {
            std::int32_t at = -1;  // insert as a path from the root, sharing existing prefixes
            for (token t : seg) {
                std::int32_t found = -1;
                for (std::size_t n = 0; n < tree.size() && found < 0; ++n)
                    if (tree.parents[n] == at && tree.tokens[n] == t) found = std::int32_t(n);
                at = found >= 0 ? found : tree.push(at, t);
            }
        }
        predictions.resize(fresh.size() + 1);
        for (std::size_t i = 0; i <= fresh.size(); ++i)
            predictions[i] = pos + i < rec.response.size() ? rec.response[pos + i] : -1;
        reuse.observe(fresh, predictions);
        return tree;
    };
    std::map<std::string, replay_stats> by_category;
    for (const auto& rec : data) {
        replay_stats s;
        reuse.clear();
        pos = 0;
        if (kind == "pld") {
            s = testing::replay_record(
                rec, [&](std::span<const token> p) { context.assign(p.begin(), p.end()); },
                [&]() -> const draft::draft_tree<token>& {
                    return with_reuse(rec, sim::prompt_lookup_draft<token>(context, 3, opt.max_draft));
                },
                [&](std::span<const token> a) {
                    context.insert(context.end(), a.begin(), a.end());
                    pos += a.size();
                });
        } else {
            const bool as_tree = kind == "sam-tree";
            s = testing::replay_record(
                rec, [&](std::span<const token> p) { sam.begin(p); },
                [&]() -> const draft::draft_tree<token>& {
                    return as_tree ? sam.tree() : with_reuse(rec, sam.chain().tokens);
                },
                [&](std::span<const token> a) {
                    sam.accept(a);
                    pos += a.size();
                });
            if (opt.history) {  // published at once: the next record sees it (deterministic MAT)
                history.add(rec.response);
                history.publish();
            }
        }
        by_category["all"].merge(s);
        by_category[rec.category].merge(s);
    }
    const auto snap = history.snapshot();
    history_bytes = kind != "pld" && opt.history ? snap->old_generation().automaton.memory_bytes() +
                                                       snap->young_generation().automaton.memory_bytes()
                                                 : 0;
    return by_category;
}

// Amortized cost of feeding tokens to a drafter: every record's prompt and response (and,
// with history, the response into the history), in process CPU time so that other
// processes on a shared machine do not inflate it. PLD's update is a vector append.
double update_us_per_token(const std::vector<token_record>& data, const std::string& kind, const options& opt) {
    draft::live_history<token> history(unbounded_history);
    draft::drafter<token> sam(opt.config(), opt.history ? &history : nullptr);
    std::vector<token> context;
    std::size_t tokens = 0;
    const std::clock_t start = std::clock();
    for (const auto& rec : data) {
        if (kind == "pld") {
            context.assign(rec.prompt.begin(), rec.prompt.end());
            context.insert(context.end(), rec.response.begin(), rec.response.end());
        } else {
            sam.begin(rec.prompt);
            sam.accept(rec.response);
            if (opt.history) {
                history.add(rec.response);
                history.publish();
            }
        }
        tokens += rec.prompt.size() + rec.response.size() * (opt.history && kind != "pld" ? 2 : 1);
    }
    return 1e6 * double(std::clock() - start) / CLOCKS_PER_SEC / double(tokens);
}

// The fields every replay reports: MAT, acceptance, draft size and draft latency.
record replay_fields(const replay_stats& s) {
    return record{{"records", s.records},
                  {"mat", s.mat()},
                  {"accept_rate", s.drafted ? double(s.accepted) / double(s.drafted) : 0.0},
                  {"drafted_per_step", double(s.drafted) / double(s.steps)},
                  {"draft_us_p50", quantile(s.draft_us, 0.5)},
                  {"draft_us_p99", quantile(s.draft_us, 0.99)}};
}

std::vector<record> draft_records(const std::vector<token_record>& data, const options& opt) {
    const std::vector<std::string> kinds =
        opt.drafter == "all" ? std::vector<std::string>{"pld", "sam", "sam-tree"} : std::vector<std::string>{opt.drafter};
    std::vector<record> all, per_category;
    for (const auto& kind : kinds) {
        std::size_t history_bytes = 0;
        const auto stats = simulate(data, kind, opt, history_bytes);
        const double update_us = update_us_per_token(data, kind, opt);
        auto make = [&](const std::string& category, const replay_stats& s) {
            record r{{"drafter", kind}, {"category", category}};
            r.update(replay_fields(s));
            r["update_us_per_token"] = update_us;
            r["history_bytes"] = history_bytes;
            r["reuse"] = opt.reuse && kind != "sam-tree" ? "on" : "off";
            return r;
        };
        all.push_back(make("all", stats.at("all")));
        for (const auto& [category, s] : stats)
            if (category != "all") per_category.push_back(make(category, s));
    }
    all.insert(all.end(), per_category.begin(), per_category.end());
    return all;
}

// Per-step draft latency at a context of `n` tokens, in a decode loop's steady state. The
// context is the first `n` tokens of one long stream (the generated workload's prompts and
// responses concatenated, so it repeats itself as a long conversation does). The response
// then copies spans of 16..64 tokens from random places of the text so far, each followed by
// one new token: every size sees the same kind of steps (a match that has to be found again
// after each new token, then long drafts), so the draft length is about the same at every
// size and only the memory the drafter walks grows. Each drafter replays the response as
// the simulator does (draft, accept the matching prefix plus the bonus token); only the
// draft calls are timed, with the drafter warm from the previous steps. `sam-nobackoff` is
// the chain drafter without the back-off sources (drafter_config::backoff).
std::vector<record> scaling_records(const std::vector<std::size_t>& lengths, std::size_t response_tokens,
                                    std::size_t max_draft) {
    std::vector<token> stream;
    const std::size_t need = lengths.back() + response_tokens;
    for (std::uint32_t seed = 1; stream.size() < need; ++seed)
        for (const auto& rec : generate_workload(64, seed)) {
            stream.insert(stream.end(), rec.prompt.begin(), rec.prompt.end());
            stream.insert(stream.end(), rec.response.begin(), rec.response.end());
        }
    std::vector<record> out;
    std::map<std::string, double> first_p50;
    for (std::size_t n : lengths) {
        token_record rec;
        rec.prompt.assign(stream.begin(), stream.begin() + std::ptrdiff_t(n));
        std::mt19937 rng(7);
        std::vector<token> text = rec.prompt;
        for (std::size_t fresh = lengths.back(); rec.response.size() < response_tokens; ++fresh) {
            const std::size_t len = 16 + rng() % 49, from = rng() % (text.size() - len);
            for (std::size_t i = 0; i < len; ++i) rec.response.push_back(text[from + i]);
            rec.response.push_back(stream[fresh]);  // a token the text has not seen here
            text.assign(rec.prompt.begin(), rec.prompt.end());
            text.insert(text.end(), rec.response.begin(), rec.response.end());
        }
        for (const std::string kind : {"sam", "sam-tree", "sam-nobackoff", "pld"}) {
            draft::drafter<token> sam(
                {.max_draft = max_draft, .tree_depth = max_draft, .backoff = kind != "sam-nobackoff"});
            std::vector<token> context;
            draft::draft_tree<token> tree;
            replay_stats s;
            double build_us = 0;
            if (kind == "pld") {
                s = testing::replay_record(
                    rec, [&](std::span<const token> p) { context.assign(p.begin(), p.end()); },
                    [&]() -> const draft::draft_tree<token>& {
                        tree.clear();
                        const auto chain = sim::prompt_lookup_draft<token>(context, 3, max_draft);
                        for (std::size_t i = 0; i < chain.size(); ++i) tree.push(std::int32_t(i) - 1, chain[i]);
                        return tree;
                    },
                    [&](std::span<const token> a) { context.insert(context.end(), a.begin(), a.end()); });
            } else {
                s = testing::replay_record(
                    rec,
                    [&](std::span<const token> p) {
                        const std::clock_t start = std::clock();  // CPU time, as update_us_per_token above
                        sam.begin(p);
                        build_us = 1e6 * double(std::clock() - start) / CLOCKS_PER_SEC;
                    },
                    [&]() -> const draft::draft_tree<token>& { return kind == "sam-tree" ? sam.tree() : sam.chain(); },
                    [&](std::span<const token> a) { sam.accept(a); });
            }
            const double p50 = quantile(s.draft_us, 0.5);
            if (!first_p50.contains(kind)) first_p50[kind] = p50;
            record r{{"drafter", kind},
                     {"context", n},
                     {"mat", s.mat()},
                     {"drafted_per_step", double(s.drafted) / double(s.steps)},
                     {"draft_us_p50", p50},
                     {"draft_us_p99", quantile(s.draft_us, 0.99)},
                     {"p50_over_smallest", p50 / first_p50[kind]}};
            if (kind != "pld") r["update_us_per_token"] = build_us / double(n);
            out.push_back(std::move(r));
        }
    }
    return out;
}

// `--acceptance`: what predicts that a drafted token is accepted. Every step drafts a chain
// from the single longest match (the context's, or the history's if longer; the history
// holds the earlier records' responses), following the most frequent continuation up to
// --max-draft tokens, and each drafted token up to the first rejection is one observation:
// its source, the match length l at that point (the match plus the tokens drafted before
// it), the continuations seen n = sum of counts, and the chosen one's share c / n. Records
// give the acceptance rate per bucket of each feature, and the mean of the model's
// probability c / (n + escape / l) for the same tokens, so the two can be compared.
std::vector<record> acceptance_records(const std::vector<token_record>& data, const options& opt) {
    const draft::drafter_config config = opt.config();
    draft::suffix_automaton<token> hist;  // the earlier records' responses, one document each
    struct cell {
        double drafted = 0, accepted = 0, predicted = 0;
    };
    std::map<std::tuple<std::string, std::string, std::string>, cell> cells;  // source, feature, bucket
    auto log2_bucket = [](double x) {
        std::size_t lo = 1;
        while (lo * 2 <= x) lo *= 2;
        return lo == 1 ? std::string("1") : std::to_string(lo) + "-" + std::to_string(2 * lo - 1);
    };
    for (const auto& rec : data) {
        draft::suffix_automaton<token> ctx;
        ctx.append(std::span<const token>(rec.prompt));
        draft::suffix_matcher<token> hm(hist);
        hm.advance(std::span<const token>(rec.prompt));
        for (std::size_t pos = 0; pos < rec.response.size();) {
            const bool from_context = ctx.repeat_length() >= hm.length();
            const auto& sam = from_context ? ctx : hist;
            draft::state_id s = from_context ? ctx.repeat_state() : hm.state();
            const std::uint32_t length = from_context ? ctx.repeat_length() : hm.length();
            const double escape = from_context ? config.context_escape : config.history_escape;
            std::size_t accepted = 0;
            for (std::size_t d = 0; length > 0 && d < opt.max_draft && pos + d < rec.response.size(); ++d) {
                double total = 0, top = 0;
                token best = 0;
                draft::state_id next = draft::no_state;
                sam.for_each_transition(s, [&](token t, draft::state_id child) {
                    const double c = sam.count(child);
                    total += c;
                    if (c > top) top = c, best = t, next = child;
                });
                if (total == 0) break;
                const bool ok = rec.response[pos + d] == best;
                const double l = double(length + d), share = top / total;
                const double predicted = top / (total + escape / l);
                const std::string source = from_context ? "context" : "history";
                for (const auto& [feature, bucket] :
                     {std::pair<std::string, std::string>{"match_length", log2_bucket(l)},
                      {"continuations", log2_bucket(total)},
                      {"share", share == 1 ? "1" : share >= 0.5 ? "0.5-1" : "<0.5"},
                      {"match_length_unique", total == 1 ? log2_bucket(l) : "not unique"}}) {
                    for (const auto& src : {source, std::string("all")}) {
                        cell& c = cells[{src, feature, bucket}];
                        c.drafted += 1;
                        c.accepted += ok;
                        c.predicted += predicted;
                    }
                }
                if (!ok) break;
                s = next;
                ++accepted;
            }
            const std::size_t emitted = std::min(accepted + 1, rec.response.size() - pos);
            for (std::size_t i = 0; i < emitted; ++i) {
                hm.advance(rec.response[pos + i]);  // before the append: as the drafter does
                ctx.append(rec.response[pos + i]);
            }
            pos += emitted;
        }
        hist.begin_document();
        hist.append(std::span<const token>(rec.response));
    }
    std::vector<record> out;
    for (const auto& [key, c] : cells) {
        const auto& [source, feature, bucket] = key;
        out.push_back(record{{"source", source},
                             {"feature", feature},
                             {"bucket", bucket},
                             {"drafted", c.drafted},
                             {"accept_rate", c.accepted / c.drafted},
                             {"model_p", c.predicted / c.drafted}});
    }
    return out;
}

// Nanoseconds of one load that depends on the previous one, over `bytes` of memory (a random
// cycle through its cache lines): what each state read of a draft costs when the history's
// automata are out of the caches. Measured in the same run as the drafts it explains.
double dependent_load_ns(std::size_t bytes) {
    struct alignas(64) line {
        std::uint32_t next = 0;
    };
    const std::size_t lines = std::max<std::size_t>(2, bytes / sizeof(line));
    std::vector<std::uint32_t> order(lines);
    for (std::size_t i = 0; i < lines; ++i) order[i] = static_cast<std::uint32_t>(i);
    std::shuffle(order.begin(), order.end(), std::mt19937_64(42));
    std::vector<line> chain(lines);
    for (std::size_t i = 0; i < lines; ++i) chain[order[i]].next = order[(i + 1) % lines];
    constexpr std::size_t steps = std::size_t{1} << 22;
    std::uint32_t at = order[0];
    const auto t0 = std::chrono::steady_clock::now();
    for (std::size_t i = 0; i < steps; ++i) at = chain[at].next;
    const double ns = std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count();
    volatile std::uint32_t sink = at;  // keeps the chase
    (void)sink;
    return ns / static_cast<double>(steps);
}

// `--concurrency C --history-tokens N`: C requests replayed interleaved, step by step,
// through the request-level API (`speculator`) over one live history bounded to N tokens.
// The history starts full: the file's prompts, cycled, stand in for the outputs of earlier
// requests (real text of the same kind; no response is in it), and each finished output is
// added (`history.add`: the only history work on a request's path) while the other
// requests keep drafting; a writer thread publishes the queued outputs (timed apart: it
// copies the young generation or rebuilds the old one, evicting the oldest documents).
// `history_add_us_*` is the CPU time of the request's thread in `add` (which takes no lock,
// so it never waits on the writer): on a shared machine the wall time also counts
// preemption by other processes, reported as `history_add_wall_us_*`. Every draft call is
// timed (wall), one request per call, then made again at once (`draft_warm_us_*`: the same
// work with the states it reads in cache); `load_latency_ns` is a dependent load over as
// much memory as the history holds, and `draft_us_p99_in_loads` the cold p99 in such loads.
// Records: the replay's totals ("all").
std::vector<record> concurrent_records(const std::vector<token_record>& data, const std::string& kind,
                                       const options& opt, std::size_t concurrency, std::size_t history_tokens) {
    using clock = std::chrono::steady_clock;
    auto since_us = [](clock::time_point t0) {
        return std::chrono::duration<double, std::micro>(clock::now() - t0).count();
    };
    draft::live_history<token> history(history_tokens);
    std::size_t filled = 0;
    for (std::size_t i = 0, added = 1; filled < history_tokens - history.young_tokens(); i = (i + 1) % data.size()) {
        if (i == 0 && added == 0) break;  // no prompt has any token
        if (i == 0) added = 0;
        history.add(data[i].prompt);
        filled += data[i].prompt.size();
        added += data[i].prompt.size();
    }
    history.publish();
    std::vector<double> publish_us;
    std::size_t rebuilds = 0;
    std::jthread writer([&](std::stop_token stop) {
        // Polls rather than publish_loop(): it times each publication. On stop, it publishes
        // what is left.
        while (true) {
            const bool stopping = stop.stop_requested();
            if (history.pending() == 0) {
                if (stopping) break;
                std::this_thread::sleep_for(std::chrono::microseconds(200));
                continue;
            }
            const std::uint64_t lineage = history.snapshot()->old_generation().lineage;
            const auto t0 = clock::now();
            history.publish();
            publish_us.push_back(since_us(t0));
            rebuilds += history.snapshot()->old_generation().lineage != lineage;
        }
    });
    draft::speculator<token> spec(opt.config(), &history);
    const auto shape = kind == "sam-tree" ? draft::draft_shape::tree : draft::draft_shape::chain;
    struct live {
        std::size_t record = 0, pos = 0;
        draft::request_id id = 0;
    };
    std::vector<live> slots;
    std::size_t next = 0;
    std::vector<double> start_us, add_us, add_wall_us, warm_us;
    replay_stats s;
    auto admit = [&](live& l) {
        l = {next, 0, next};
        const auto t0 = clock::now();
        spec.start(l.id, data[next].prompt);
        start_us.push_back(since_us(t0));
        ++next;
    };
    while (slots.size() < concurrency && next < data.size()) admit(slots.emplace_back());
    while (!slots.empty()) {
        for (std::size_t i = 0; i < slots.size();) {
            live& l = slots[i];
            const token_record& rec = data[l.record];
            if (l.pos < rec.response.size()) {
                const auto t0 = clock::now();
                auto drafts = spec.propose(std::span<const draft::request_id>(&l.id, 1), shape);
                s.draft_us.push_back(since_us(t0));
                const auto t1 = clock::now();
                drafts = spec.propose(std::span<const draft::request_id>(&l.id, 1), shape);
                warm_us.push_back(since_us(t1));
                const std::size_t emitted = testing::replay_step(rec, l.pos, *drafts[0], s);
                spec.append(l.id, std::span<const token>(rec.response).subspan(l.pos, emitted));
                l.pos += emitted;
            }
            if (l.pos < rec.response.size()) {
                ++i;
                continue;
            }
            ++s.records;
            s.tokens += rec.response.size();
            const auto output = spec.stop(l.id);
            const double cpu0 = thread_cpu_us();
            const auto t0 = clock::now();
            history.add(output);
            add_wall_us.push_back(since_us(t0));
            add_us.push_back(thread_cpu_us() - cpu0);
            if (next < data.size()) {
                admit(l);
                ++i;
            } else {
                slots.erase(slots.begin() + std::ptrdiff_t(i));
            }
        }
    }
    writer.request_stop();
    writer.join();
    const auto snap = history.snapshot();
    const std::size_t history_bytes =
        snap->old_generation().automaton.memory_bytes() + snap->young_generation().automaton.memory_bytes();
    const double load_ns = dependent_load_ns(history_bytes);
    auto max_of = [](const std::vector<double>& v) { return v.empty() ? 0.0 : *std::max_element(v.begin(), v.end()); };
    auto q = [](const std::vector<double>& v, double p) { return v.empty() ? 0.0 : quantile(v, p); };
    record r{{"drafter", kind}, {"category", "all"}, {"concurrency", concurrency}, {"history_tokens", history_tokens}};
    r.update(replay_fields(s));
    r.update(record{{"draft_us_max", max_of(s.draft_us)},
                   {"history_add_us_p99", q(add_us, 0.99)},
                   {"history_add_us_max", max_of(add_us)},
                   {"history_add_wall_us_p99", q(add_wall_us, 0.99)},
                   {"history_add_wall_us_max", max_of(add_wall_us)},
                   {"start_us_p50", q(start_us, 0.5)},
                   {"start_us_max", max_of(start_us)},
                   {"publish_us_p50", q(publish_us, 0.5)},
                   {"publish_us_max", max_of(publish_us)},
                   {"publishes", publish_us.size()},
                   {"rebuilds", rebuilds},
                   {"history_held_tokens", snap->size()},
                   {"history_bytes", history_bytes},
                   {"draft_warm_us_p50", q(warm_us, 0.5)},
                   {"draft_warm_us_p99", q(warm_us, 0.99)},
                   {"load_latency_ns", load_ns},
                   {"draft_us_p99_in_loads", q(s.draft_us, 0.99) * 1000.0 / load_ns}});
    return {r};
}

class draft_command final : public subcommand {
public:
    std::string name() const override { return "draft"; }
    std::string summary() const override {
        return "speculative drafting: suffix-automaton drafter vs Prompt Lookup Decoding (offline simulator)";
    }
    int report_order() const override { return 20; }
    void configure(CLI::App& app) override {
        app.add_option("--data", data_, "token file (.tok); default: a generated, seeded workload");
        app.add_option("--drafter", opt_.drafter, "sam | sam-tree | pld | auto (with --cost-model) | all")
            ->check(CLI::IsMember({"sam", "sam-tree", "pld", "auto", "all"}))
            ->capture_default_str();
        app.add_option("--max-draft", opt_.max_draft, "K: longest draft")->check(CLI::PositiveNumber)->capture_default_str();
        app.add_option("--tree-budget", opt_.tree_budget, "most tokens in a sam-tree draft")
            ->check(CLI::PositiveNumber)
            ->capture_default_str();
        app.add_option("--tree-depth", opt_.tree_depth, "deepest path of a sam-tree draft (default: --max-draft)")
            ->check(CLI::PositiveNumber);
        app.add_option("--concurrency", concurrency_,
                       "replay this many requests interleaved over one live history (sam, sam-tree)")
            ->check(CLI::PositiveNumber);
        app.add_option("--history-tokens", history_tokens_, "bound of the live history with --concurrency")
            ->check(CLI::Range(std::size_t{2}, std::size_t{1} << 31))
            ->capture_default_str();
        app.add_option("--history", history_, "on | off: draft also from earlier records' responses")
            ->check(CLI::IsMember({"on", "off"}))
            ->capture_default_str();
        app.add_option("--backoff", backoff_, "on | off: sam drafters also draft from each match's back-off")
            ->check(CLI::IsMember({"on", "off"}))
            ->capture_default_str();
        app.add_option("--reuse", reuse_, "on | off: draft reuse (CoordGen Eq. 3) for the chain drafters pld and sam")
            ->check(CLI::IsMember({"on", "off"}))
            ->capture_default_str();
        app.add_option("--records", records_, "generated workload size")->check(CLI::PositiveNumber)->capture_default_str();
        app.add_option("--seed", seed_, "generated workload seed")->capture_default_str();
        app.add_flag("--acceptance", acceptance_,
                     "acceptance rate of drafted tokens by match length, continuation count and share");
        app.add_option("--cost-model", cost_model_,
                       "replay as serving batches under this verification cost (h100-7b, cpu-1b): speedup over no "
                       "speculation per drafter and batch, auto = the cost-aware draft size, and the calibration")
            ->check(CLI::IsMember({"h100-7b", "cpu-1b"}));
        app.add_option("--batch", batches_, "batch sizes with --cost-model (comma-separated)")
            ->delimiter(',')
            ->check(CLI::Range(std::size_t{1}, std::size_t{4096}))
            ->capture_default_str();
        app.add_flag("--scaling", scaling_, "per-step draft latency at contexts of 1k..1M tokens, sam vs pld");
        app.add_option("--replicas", replica_counts_,
                       "engine replicas behind a load balancer (comma-separated counts): MAT with a history of each "
                       "replica's own outputs, and with the replicas' outputs shared through a disk tier")
            ->delimiter(',')
            ->check(CLI::Range(std::size_t{1}, std::size_t{64}));
        app.add_option("--sync-every", replicas_.sync_every, "requests between two pulls of the shared outputs")
            ->check(CLI::PositiveNumber)
            ->capture_default_str();
    }
    int run(result_sink& sink) override {
        if (scaling_) {
            for (auto& r : scaling_records({1000, 4000, 16000, 32000, 128000, 512000, 1000000}, 3000, opt_.max_draft))
                sink.add(std::move(r));
            return 0;
        }
        opt_.history = history_ == "on";
        opt_.backoff = backoff_ == "on";
        opt_.reuse = reuse_ == "on";
        const auto data = data_.empty() ? generate_workload(records_, seed_) : testing::read_tok_file(data_);
        if (acceptance_) {
            for (auto& r : acceptance_records(data, opt_)) sink.add(std::move(r));
            return 0;
        }
        if (!cost_model_.empty()) {
            serving_settings s{.cost_name = cost_model_,
                               .cost = named_cost_model(cost_model_),
                               .batches = batches_,
                               .max_draft = opt_.max_draft,
                               .tree_budget = opt_.tree_budget,
                               .tree_depth = opt_.tree_depth,
                               .history = opt_.history};
            if (opt_.drafter != "all") s.drafters = {opt_.drafter};
            for (auto& r : serving_records(data, s)) sink.add(std::move(r));
            return 0;
        }
        if (!replica_counts_.empty()) {
            replicas_.replicas = replica_counts_;
            replicas_.config = opt_.config();
            for (auto& r : replica_records(data, replicas_)) sink.add(std::move(r));
            return 0;
        }
        if (opt_.drafter == "auto") throw CLI::ValidationError("--drafter", "auto needs --cost-model");
        if (concurrency_ != 0) {
            if (data.empty()) throw CLI::ValidationError("--concurrency", "the data has no records");
            const std::vector<std::string> kinds = opt_.drafter == "all" || opt_.drafter == "pld"
                                                       ? std::vector<std::string>{"sam", "sam-tree"}
                                                       : std::vector<std::string>{opt_.drafter};
            for (const auto& kind : kinds)
                for (auto& r : concurrent_records(data, kind, opt_, concurrency_, history_tokens_)) sink.add(std::move(r));
            return 0;
        }
        for (auto& r : draft_records(data, opt_)) sink.add(std::move(r));
        return 0;
    }
    report_section report(const report_context& ctx) override {
        report_section s;
        s.title = "Drafting: suffix automaton vs Prompt Lookup Decoding";
        const auto file = ctx.data_file("drafting/specbench_vicuna7b.tok");
        std::vector<token_record> data;
        if (file) {
            data = testing::read_tok_file(*file, ctx.quick ? 40 : std::numeric_limits<std::size_t>::max());
            s.data_source = "drafting/specbench_vicuna7b.tok (Spec-Bench prompts, greedy Vicuna-7B answers)" +
                            std::string(ctx.quick ? ", first 40 records" : "");
        } else {
            data = generate_workload(ctx.quick ? 20 : 400, 1);
            s.data_source = "generated workload (seed 1; see docs/drafting.md)";
        }
        s.notes =
            "Offline simulator: greedy responses replayed; each step drafts from prompt + accepted tokens, "
            "accepts the longest matching prefix (tree path) + 1 bonus token. MAT = response tokens / steps. "
            "K = 10, tree budget 64, history on (earlier records' responses). "
            "`frugal-bench draft --data FILE.tok --drafter all --max-draft 10 --tree-budget 64 --history on`; "
            "Serving (`... --cost-model h100-7b --batch 1,8,32,64`): the file replayed as lockstep batches "
            "(continuous batching), each step costing max(4.18 ms, 0.028 ms x tokens verified); speedup = "
            "modelled throughput over the same replay without speculation; auto = the speculator's sized propose "
            "(calibrated probabilities, expected tokens per ms maximised over the batch); ECE over every drafted "
            "candidate node, 10 bins. "
            "Scaling (`frugal-bench draft --scaling`): a decode loop copying spans of a context of 1k..1M tokens; "
            "p50 of the draft calls, p50_over_smallest = p50 / p50 at 1k; sam-nobackoff = sam without back-off sources. "
            "Replicas: the records routed at random to 4 or 8 engine replicas, each drafting from a history of its "
            "own outputs (alone) or also of the others', pulled from a disk tier every 16 requests (shared); "
            "mat_one is one replica serving every record.";
        s.records = draft_records(data, {});
        for (auto& r : s.records) r["kind"] = "replay";
        // Serving: the same file as lockstep batches under the 7B/H100 cost model.
        serving_settings serving;
        if (ctx.quick) serving.batches = {1, 8};
        for (auto& r : serving_records(data, serving)) {
            if (!r.contains("kind")) r["kind"] = "serving";
            r["category"] = "serving";
            s.records.push_back(std::move(r));
        }
        const std::vector<std::size_t> lengths = ctx.quick ? std::vector<std::size_t>{1000, 4000}
                                                           : std::vector<std::size_t>{1000, 4000, 16000, 32000, 128000,
                                                                                      512000, 1000000};
        for (auto& r : scaling_records(lengths, ctx.quick ? 300 : 3000, 10)) {
            r["category"] = "scaling";
            r.erase("mat");  // the MAT plot is per category of the simulator; scaling has its own
            s.records.push_back(std::move(r));
        }
        // Replicas behind a load balancer, alone and sharing their outputs through a disk tier.
        replica_settings replicas;
        replicas.replicas = {4, 8};
        for (auto& r : replica_records(data, replicas)) {
            r["category"] = "replicas";
            s.records.push_back(std::move(r));
        }
        for (const char* drafter : {"sam", "sam-tree"})
            if (auto v = find_number(s.records, {{"kind", "replicas"}, {"drafter", drafter}, {"replicas", 8}}, "shared_over_alone"))
                s.headlines.push_back(untargeted(std::string("8 replicas sharing outputs through a disk tier, ") + drafter + ": MAT",
                                                 *v, "each replica's own outputs"));
        const auto mat = [&](const char* drafter) {
            return find_number(s.records, {{"drafter", drafter}, {"category", "all"}}, "mat");
        };
        // The targets are for the Spec-Bench file; generated workloads get no target.
        for (const auto& [drafter, min] : {std::pair{"sam", 1.10}, std::pair{"sam-tree", 1.30}})
            if (auto v = mat(drafter), pld = mat("pld"); v && pld) {
                const std::string what = std::string("MAT, K = 10, ") + drafter;
                s.headlines.push_back(file && !ctx.quick ? at_least(what, *v / *pld, "PLD", min)
                                                         : untargeted(what, *v / *pld, "PLD"));
            }
        for (const std::size_t batch : serving.batches) {
            const auto speedup = [&](const char* drafter, std::size_t k) {
                return find_number(s.records, {{"kind", "serving"}, {"drafter", drafter}, {"batch", batch}, {"max_draft", k}},
                                   "speedup");
            };
            const auto a = speedup("auto", 10), p10 = speedup("pld", 10), p64 = speedup("pld", 64);
            if (!a || !p10 || !p64) continue;
            const std::string what = "serving, batch " + std::to_string(batch) + ", 7B/H100 cost: sized drafts";
            const bool targeted = file && !ctx.quick;
            s.headlines.push_back(batch <= 32 ? (targeted ? at_least(what, *a / std::max(*p10, *p64), "best of PLD K = 10, 64", 1.10)
                                                          : untargeted(what, *a / std::max(*p10, *p64), "best of PLD K = 10, 64"))
                                              : (targeted ? at_least(what, *a, "no speculation", 1.0)
                                                          : untargeted(what, *a, "no speculation")));
        }
        double worst_ece = 0;
        for (const auto& r : s.records)
            if (record_matches(r, {{"kind", "calibration"}})) worst_ece = std::max(worst_ece, r["ece"].get<double>());
        s.headlines.push_back(file && !ctx.quick ? at_most("calibration: expected calibration error (worst batch)", worst_ece, "", 0.05)
                                                 : untargeted("calibration: expected calibration error (worst batch)", worst_ece, ""));
        if (auto v = find_number(s.records, {{"kind", "choosing_cost"}}, "sized_over_propose"))
            s.headlines.push_back(file && !ctx.quick ? at_most("sized propose, 64 requests", *v, "plain tree propose", 1.5)
                                                     : untargeted("sized propose, 64 requests", *v, "plain tree propose"));
        if (auto v = find_number(s.records, {{"drafter", "sam"}, {"category", "scaling"}, {"context", lengths.back()}},
                                 "p50_over_smallest"))
            s.headlines.push_back(untargeted("chain draft p50 at a " + std::to_string(lengths.back()) + "-token context",
                                             *v, "the same at 1000 tokens"));
        s.tables.push_back({.title = "Mean accepted tokens per step",
                            .columns = {"drafter", "category", "records", "mat", "accept_rate", "drafted_per_step",
                                        "draft_us_p50", "draft_us_p99"},
                            .filter = {{"kind", "replay"}}});
        s.tables.push_back({.title = "Serving: modelled throughput over no speculation (7B on an H100)",
                            .columns = {"drafter", "max_draft", "batch", "speedup", "mat", "drafted_per_step", "step_ms"},
                            .filter = {{"kind", "serving"}}});
        s.tables.push_back({.title = "Calibration of the sized drafts' path probabilities",
                            .columns = {"batch", "nodes", "ece", "ece_uncalibrated"},
                            .filter = {{"kind", "calibration"}}});
        s.tables.push_back({.title = "Replicas with a history each: alone and sharing outputs (`frugal-bench draft --replicas 4,8`)",
                            .columns = {"drafter", "replicas", "sync_every", "mat_one", "mat_alone", "mat_shared",
                                        "shared_over_alone", "one_over_alone", "pulled"},
                            .filter = {{"kind", "replicas"}}});
        s.tables.push_back({.title = "Draft latency against context length",
                            .columns = {"drafter", "context", "draft_us_p50", "draft_us_p99", "p50_over_smallest",
                                        "update_us_per_token", "history_bytes"},
                            .filter = {{"category", "scaling"}}});
        s.plots.push_back({.file = "draft_mat.png", .title = "Mean accepted tokens per step (K = 10)",
                           .x = "category", .y = "mat", .series = "drafter", .xlabel = "category",
                           .ylabel = "MAT (tokens / verification)", .kind = "bar", .filter = {{"kind", "replay"}}});
        s.plots.push_back({.file = "draft_serving.png", .title = "Serving: throughput over no speculation (7B/H100 model, K = 10)",
                           .x = "batch", .y = "speedup", .series = "drafter", .xlabel = "batch size",
                           .ylabel = "modelled speedup", .logx = true,
                           .filter = {{"kind", "serving"}, {"max_draft", 10}}});
        s.plots.push_back({.file = "draft_calibration.png", .title = "Reliability of path probabilities (batch 1)",
                           .x = "predicted", .y = "accepted", .series = "", .xlabel = "predicted acceptance",
                           .ylabel = "observed acceptance", .filter = {{"kind", "reliability"}, {"batch", 1}}});
        s.plots.push_back({.file = "draft_scaling.png", .title = "Per-step draft latency vs context length",
                           .x = "context", .y = "draft_us_p50", .series = "drafter", .xlabel = "context tokens",
                           .ylabel = "draft us (p50)", .logx = true, .logy = true,
                           .filter = {{"category", "scaling"}}});
        return s;
    }

private:
    std::string data_, history_ = "on", backoff_ = "on", reuse_ = "off", cost_model_;
    std::vector<std::size_t> batches_{1, 8, 32, 64};
    options opt_;
    std::size_t records_ = 400, concurrency_ = 0, history_tokens_ = std::size_t{1} << 20;
    std::vector<std::size_t> replica_counts_;
    replica_settings replicas_;
    std::uint32_t seed_ = 1;
    bool scaling_ = false, acceptance_ = false;
};

FRUGAL_BENCH_COMMAND(draft_command);

}  // namespace
}  // namespace frugal::bench
