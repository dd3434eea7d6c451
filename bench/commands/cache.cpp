// `frugal-bench cache`: replays a cache trace (or a synthetic Zipf stream) through frugal's
// policies and two hand-rolled baselines: naive-lru (std::list + std::unordered_map) and
// naive-lfu (std::unordered_map + a std::map ordered by frequency), in the same run; with
// --threads N, the sharded wrapper's throughput on 1 and on N threads, in the same run.
#include <algorithm>
#include <chrono>
#include <filesystem>
#include <cmath>
#include <iterator>
#include <list>
#include <map>
#include <memory>
#include <random>
#include <span>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include <frugal/cache/arc_policy.hpp>
#include <frugal/cache/gdsf_policy.hpp>
#include <frugal/cache/lfu_policy.hpp>
#include <frugal/cache/lirs_policy.hpp>
#include <frugal/cache/lru_policy.hpp>
#include <frugal/cache/s3fifo_policy.hpp>
#include <frugal/cache/sharded_cache.hpp>
#include <frugal/cache/sieve_policy.hpp>
#include <frugal/cache/two_queue_policy.hpp>
#include <frugal/cache/wtinylfu_policy.hpp>

#include "cache_qa.hpp"
#include "cache_tier.hpp"
#include "cache_trace.hpp"
#include "harness.hpp"

namespace frugal::bench {
namespace {

// The value stored is the request size; the weigher counts it with --bytes, else 1.
struct trace_weigher {
    bool bytes = false;
    std::size_t operator()(std::uint64_t, std::uint32_t size) const noexcept { return bytes ? size : 1; }
};

// The usual hand-rolled LRU: std::list of entries, std::unordered_map of list iterators.
class naive_lru {
public:
    naive_lru(std::size_t capacity, trace_weigher w) : capacity_(capacity), weigher_(w) {}
    std::uint32_t* get(std::uint64_t key) {
        auto it = map_.find(key);
        if (it == map_.end()) return nullptr;
        list_.splice(list_.end(), list_, it->second);
        return &it->second->second;
    }
    void put(std::uint64_t key, std::uint32_t value) {
        const std::size_t w = weigher_(key, value);
        if (w > capacity_) return;
        list_.emplace_back(key, value);
        map_.emplace(key, std::prev(list_.end()));
        weight_ += w;
        while (weight_ > capacity_) {
            auto& [k, v] = list_.front();
            weight_ -= weigher_(k, v);
            map_.erase(k);
            list_.pop_front();
        }
    }

private:
    std::size_t capacity_, weight_ = 0;
    trace_weigher weigher_;
    std::list<std::pair<std::uint64_t, std::uint32_t>> list_;
    std::unordered_map<std::uint64_t, std::list<std::pair<std::uint64_t, std::uint32_t>>::iterator> map_;
};

// The usual hand-rolled LFU: a std::map from (frequency, tick) to key, O(log n) per access;
// same victim as frugal's lfu_policy (fewest accesses, least recently promoted).
class naive_lfu {
public:
    naive_lfu(std::size_t capacity, trace_weigher w) : capacity_(capacity), weigher_(w) {}
    std::uint32_t* get(std::uint64_t key) {
        auto it = map_.find(key);
        if (it == map_.end()) return nullptr;
        auto& e = it->second;
        order_.erase(e.where);
        e.where = order_.emplace(std::pair{++e.freq, ++tick_}, key).first;
        return &e.value;
    }
    void put(std::uint64_t key, std::uint32_t value) {
        const std::size_t w = weigher_(key, value);
        if (w > capacity_) return;
        while (weight_ + w > capacity_) {
            auto victim = order_.begin();
            auto it = map_.find(victim->second);
            weight_ -= weigher_(it->first, it->second.value);
            map_.erase(it);
            order_.erase(victim);
        }
        auto where = order_.emplace(std::pair{std::uint64_t{1}, ++tick_}, key).first;
        map_.emplace(key, entry{value, 1, where});
        weight_ += w;
    }

private:
    using order_map = std::map<std::pair<std::uint64_t, std::uint64_t>, std::uint64_t>;
    struct entry {
        std::uint32_t value;
        std::uint64_t freq;
        order_map::iterator where;
    };
    std::size_t capacity_, weight_ = 0;
    std::uint64_t tick_ = 0;
    trace_weigher weigher_;
    order_map order_;
    std::unordered_map<std::uint64_t, entry> map_;
};

template <class Policy>
using frugal_cache = cache::basic_cache<std::uint64_t, std::uint32_t, Policy, trace_weigher>;

// One policy's replay: its cache and counters, fed the trace a slice at a time.
class replay_run {
public:
    explicit replay_run(std::string name, std::size_t capacity) : name_(std::move(name)), capacity_(capacity) {}
    virtual ~replay_run() = default;
    virtual void feed(std::span<const trace_request> slice) = 0;
    [[nodiscard]] record result(std::size_t requests, std::uint64_t bytes_total) const {
        const auto n = static_cast<double>(requests);
        return {{"policy", name_}, {"capacity", capacity_}, {"requests", requests}, {"hits", hits_},
                {"misses", requests - hits_}, {"hit_ratio", n == 0 ? 0.0 : static_cast<double>(hits_) / n},
                {"byte_hit_ratio", bytes_total == 0 ? 0.0 : static_cast<double>(bytes_hit_) / static_cast<double>(bytes_total)},
                {"mops_per_s", seconds_ > 0 ? n / seconds_ / 1e6 : 0.0}};
    }

protected:
    std::string name_;
    std::size_t capacity_;
    std::uint64_t hits_ = 0, bytes_hit_ = 0;
    double seconds_ = 0;
};

template <class Cache>
class cache_replay final : public replay_run {
public:
    cache_replay(std::string name, std::size_t capacity, bool bytes)
        : replay_run(std::move(name), capacity), cache_(capacity, trace_weigher{bytes}) {}
    void feed(std::span<const trace_request> slice) override {
        const auto start = std::chrono::steady_clock::now();
        for (const auto& r : slice) {  // a request is a get; a miss is followed by a put
            if (cache_.get(r.key) != nullptr) {
                ++hits_;
                bytes_hit_ += r.size;
            } else {
                cache_.put(r.key, r.size);
            }
        }
        seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    }

private:
    Cache cache_;
};

const std::vector<std::string> all_policies = {"lru",   "lfu", "lfuda", "gdsf", "wtinylfu", "wtinylfu-adaptive", "s3fifo",
                                               "s3fifo-warm", "sieve", "arc", "lirs", "2q", "naive-lru", "naive-lfu"};

std::unique_ptr<replay_run> start_replay(const std::string& p, std::size_t capacity, bool bytes) {
    if (p == "lru") return std::make_unique<cache_replay<frugal_cache<cache::lru_policy>>>(p, capacity, bytes);
    if (p == "lfu") return std::make_unique<cache_replay<frugal_cache<cache::lfu_policy>>>(p, capacity, bytes);
    if (p == "lfuda") return std::make_unique<cache_replay<frugal_cache<cache::lfuda_policy>>>(p, capacity, bytes);
    if (p == "gdsf") return std::make_unique<cache_replay<frugal_cache<cache::gdsf_policy>>>(p, capacity, bytes);
    if (p == "wtinylfu") return std::make_unique<cache_replay<frugal_cache<cache::wtinylfu_policy<>>>>(p, capacity, bytes);
    if (p == "wtinylfu-adaptive") return std::make_unique<cache_replay<frugal_cache<cache::adaptive_wtinylfu_policy>>>(p, capacity, bytes);
    if (p == "s3fifo") return std::make_unique<cache_replay<frugal_cache<cache::s3fifo_policy>>>(p, capacity, bytes);
    if (p == "s3fifo-warm") return std::make_unique<cache_replay<frugal_cache<cache::s3fifo_warm_main_policy>>>(p, capacity, bytes);
    if (p == "sieve") return std::make_unique<cache_replay<frugal_cache<cache::sieve_policy>>>(p, capacity, bytes);
    if (p == "arc") return std::make_unique<cache_replay<frugal_cache<cache::arc_policy>>>(p, capacity, bytes);
    if (p == "lirs") return std::make_unique<cache_replay<frugal_cache<cache::lirs_policy>>>(p, capacity, bytes);
    if (p == "2q") return std::make_unique<cache_replay<frugal_cache<cache::two_queue_policy>>>(p, capacity, bytes);
    if (p == "naive-lru") return std::make_unique<cache_replay<naive_lru>>(p, capacity, bytes);
    if (p == "naive-lfu") return std::make_unique<cache_replay<naive_lfu>>(p, capacity, bytes);
    FRUGAL_FAIL(frugal::invalid_argument, "cache: unknown policy '", p, "'");
}

// Replays `trace` through every policy side by side: the policies take turns, a slice of
// 2^22 requests each, so that all of them see the machine in the same states (one after
// the other, a shared machine's swings fell on whichever policy ran at the time; much
// shorter turns start every cache cold too often). Each cache sees the whole trace in
// order, so hit ratios are those of separate replays.
std::vector<record> replay_side_by_side(const std::vector<std::string>& policies, std::size_t capacity, bool bytes,
                                        const std::vector<trace_request>& trace) {
    std::vector<std::unique_ptr<replay_run>> runs;
    for (const auto& p : policies) runs.push_back(start_replay(p, capacity, bytes));
    constexpr std::size_t slice = std::size_t{1} << 22;
    for (std::size_t from = 0; from < trace.size(); from += slice) {
        const std::span<const trace_request> part(trace.data() + from, std::min(slice, trace.size() - from));
        for (auto& run : runs) run->feed(part);
    }
    std::uint64_t bytes_total = 0;
    for (const auto& r : trace) bytes_total += r.size;
    std::vector<record> records;
    for (const auto& run : runs) records.push_back(run->result(trace.size(), bytes_total));
    return records;
}

// The sharded cache's throughput on `threads` threads: each replays its own contiguous share
// of the trace (a request is a get; a miss is followed by a put), all against one cache.
template <class Policy>
record sharded_run(const std::string& name, const std::vector<trace_request>& trace, std::size_t capacity,
                   std::size_t threads, bool bytes) {
    using shard_cache = cache::basic_cache<std::uint64_t, std::uint32_t, Policy, trace_weigher>;
    struct by_key {
        std::size_t operator()(std::uint64_t k) const noexcept { return static_cast<std::size_t>(k); }
    };
    cache::sharded_cache<shard_cache, by_key> c(capacity, 64, by_key{}, trace_weigher{bytes});
    std::vector<std::uint64_t> hits(threads, 0);
    const auto start = std::chrono::steady_clock::now();
    std::vector<std::thread> pool;
    for (std::size_t t = 0; t < threads; ++t)
        pool.emplace_back([&, t] {
            const std::size_t from = trace.size() * t / threads, to = trace.size() * (t + 1) / threads;
            std::uint64_t h = 0;
            for (std::size_t i = from; i < to; ++i) {
                if (c.get(trace[i].key)) {
                    ++h;
                } else {
                    c.put(trace[i].key, trace[i].size);
                }
            }
            hits[t] = h;
        });
    for (auto& th : pool) th.join();
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::uint64_t total = 0;
    for (auto h : hits) total += h;
    const auto n = static_cast<double>(trace.size());
    return {{"policy", name}, {"threads", threads}, {"capacity", capacity}, {"requests", trace.size()},
            {"hits", total}, {"hit_ratio", n == 0 ? 0.0 : static_cast<double>(total) / n},
            {"mops_per_s", seconds > 0 ? n / seconds / 1e6 : 0.0}};
}

// Seconds `threads` threads take to share a fixed amount of pure arithmetic: the speedup the
// machine offers right now (a shared machine may give fewer cores than it has), measured
// beside the sharded cache's so the two can be compared.
double arithmetic_seconds(std::size_t threads) {
    std::vector<std::uint64_t> sink(threads * 8, 0);  // a cache line per thread
    const auto start = std::chrono::steady_clock::now();
    std::vector<std::thread> pool;
    for (std::size_t t = 0; t < threads; ++t)
        pool.emplace_back([&, t] {
            std::uint64_t x = t + 1;
            for (std::uint64_t i = 0; i < (std::uint64_t{1} << 27) / threads; ++i) x = x * 6364136223846793005ull + 1442695040888963407ull;
            sink[t * 8] = x;
        });
    for (auto& th : pool) th.join();
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// Zipf(alpha) over `keys` ranks by Gray et al.'s generator (YCSB's ZipfianGenerator),
// ranks scrambled by a bijective 64-bit mix so hot keys are not adjacent.
std::vector<trace_request> zipf_trace(double alpha, std::uint64_t keys, std::uint64_t ops, std::uint64_t seed) {
    FRUGAL_CHECK(alpha > 0 && alpha != 1.0, "cache: --zipf alpha ", alpha, " must be positive and not 1");
    FRUGAL_CHECK(keys > 1, "cache: --keys ", keys, " must be at least 2");
    double zetan = 0;
    for (std::uint64_t i = 1; i <= keys; ++i) zetan += 1.0 / std::pow(static_cast<double>(i), alpha);
    const double zeta2 = 1.0 + std::pow(0.5, alpha);
    const double theta = alpha, a = 1.0 / (1.0 - theta);
    const double eta = (1.0 - std::pow(2.0 / static_cast<double>(keys), 1.0 - theta)) / (1.0 - zeta2 / zetan);
    std::mt19937_64 rng(seed);
    std::uniform_real_distribution<double> u01(0.0, 1.0);
    std::vector<trace_request> out;
    out.reserve(ops);
    for (std::uint64_t i = 0; i < ops; ++i) {
        const double u = u01(rng), uz = u * zetan;
        std::uint64_t rank;
        if (uz < 1.0) rank = 0;
        else if (uz < zeta2) rank = 1;
        else rank = static_cast<std::uint64_t>(static_cast<double>(keys) * std::pow(eta * u - eta + 1.0, a));
        if (rank >= keys) rank = keys - 1;
        std::uint64_t x = rank + 0x9E3779B97F4A7C15ull;  // splitmix64 finalizer: a bijection
        x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
        x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
        out.push_back({x ^ (x >> 31), 1});
    }
    return out;
}

// A trace for the report when the shared data is absent: a Zipf(0.9) working set over 5000
// keys interleaved with a cyclic scan over 1500 other keys (scan-resistance shows).
std::vector<trace_request> generated_trace(std::uint64_t ops) {
    auto z = zipf_trace(0.9, 5000, ops, 7);
    for (std::size_t i = 0; i < z.size(); i += 3) z[i] = {(1ull << 40) + (i / 3) % 1500, 1};
    return z;
}

class cache_command final : public subcommand {
public:
    std::string name() const override { return "cache"; }
    std::string summary() const override {
        return "cache policies on a trace or a Zipf stream vs naive LRU/LFU (hit ratio, throughput)";
    }
    int report_order() const override { return 40; }
    void configure(CLI::App& app) override {
        app.add_option("--trace", trace_, "trace file (plain, gzip or zstd)");
        app.add_option("--format", format_, "trace format")->check(CLI::IsMember({"lines", "arc", "oracle-bin"}))->capture_default_str();
        app.add_option("--policy", policy_, "policy, or all")
            ->check(CLI::IsMember({"lru", "lfu", "lfuda", "gdsf", "wtinylfu", "wtinylfu-adaptive", "s3fifo", "s3fifo-warm", "sieve",
                                   "arc", "lirs", "2q", "naive-lru", "naive-lfu", "all"}))
            ->capture_default_str();
        app.add_option("--threads", threads_,
                       "also replay through the sharded LRU on 1 and on N threads (throughput ratio, same run)")
            ->check(CLI::PositiveNumber);
        app.add_option("--capacity", capacity_, "capacity in entries (bytes with --bytes)")->check(CLI::PositiveNumber)->capture_default_str();
        app.add_flag("--bytes", bytes_, "weigh entries by their trace size (oracle-bin)");
        app.add_option("--zipf", alpha_, "synthetic Zipf stream with this exponent (instead of --trace)");
        app.add_option("--keys", keys_, "distinct keys of the Zipf stream")->capture_default_str();
        app.add_option("--ops", ops_, "requests of the Zipf stream")->capture_default_str();
        app.add_option("--seed", seed_, "seed of the Zipf stream")->capture_default_str();
        app.add_option("--tier", tier_name_,
                       "disk | redis: engine processes sharing a cache tier (prefix tokens served with and without it)")
            ->check(CLI::IsMember({"disk", "redis"}));
        app.add_option("--processes", tier_.processes, "engine processes with --tier (comma-separated)")
            ->delimiter(',')
            ->check(CLI::Range(std::size_t{1}, std::size_t{64}))
            ->capture_default_str();
        app.add_option("--redis", tier_.redis, "HOST:PORT of a Redis server for --tier redis (default: start one)");
        app.add_option("--kv-bytes-per-token", tier_.kv_bytes_per_token, "KV bytes per token with --tier")
            ->check(CLI::PositiveNumber)
            ->capture_default_str();
        app.add_option("--conversations", tier_.conversations, "conversations with --tier")
            ->check(CLI::PositiveNumber)
            ->capture_default_str();
        app.add_option("--workload", tier_workload_,
                       "with --tier: conversations (Spec-Bench prompts and answers in turns), code-edits (requests "
                       "editing the same files: the code-edit set's old file, then its new one in turns) or all")
            ->check(CLI::IsMember({"conversations", "code-edits", "all"}))
            ->capture_default_str();
        app.add_option("--edits", tier_edits_, "files of the code-edits workload with --tier")
            ->check(CLI::PositiveNumber)
            ->capture_default_str();
        app.add_flag("--qa-bank", qa_bank_,
                     "the QA bank's lookup (semantic cache) against FAISS's IndexFlatIP, by bank size");
        app.add_option("--qa-entries", qa_.entries, "bank sizes with --qa-bank (comma-separated)")
            ->delimiter(',')
            ->check(CLI::PositiveNumber)
            ->capture_default_str();
        app.add_option("--qa-dim", qa_.dim, "embedding dimension with --qa-bank")->check(CLI::PositiveNumber)->capture_default_str();
        app.add_option("--data", tier_data_, "token file (.tok) of the --tier workload (default: the bundled file "
                                             "when present, else generated)");
    }
    int run(result_sink& sink) override {
        if (qa_bank_) {
            for (auto& r : qa_records(qa_)) sink.add(std::move(r));
            return 0;
        }
        if (!tier_name_.empty()) {
            tier_.tier = tier_name_;
            for (auto& r : run_tier()) sink.add(std::move(r));
            return 0;
        }
        FRUGAL_CHECK(!trace_.empty() || alpha_ > 0, "cache: give --trace FILE or --zipf ALPHA");
        const auto trace = trace_.empty() ? zipf_trace(alpha_, keys_, ops_, seed_) : read_trace(trace_, format_);
        const auto policies = policy_ == "all" ? all_policies : std::vector<std::string>{policy_};
        const std::string label = trace_.empty() ? "zipf" : std::filesystem::path(trace_).filename().string();
        for (record& r : replay_side_by_side(policies, capacity_, bytes_, trace)) {
            r["trace"] = label;
            sink.add(std::move(r));
        }
        if (threads_ > 0) {
            sink.add(sharded_speedup(&sharded_run<cache::lru_policy>, "sharded-lru", trace, label));
            sink.add(sharded_speedup(&sharded_run<cache::sieve_policy>, "sharded-sieve", trace, label));
        }
        return 0;
    }
    report_section report(const report_context& ctx) override {
        report_section s;
        s.title = "Caches: hit ratio vs capacity, throughput";
        s.notes = "Every frugal policy and two hand-rolled baselines replay the same trace side by side "
                  "(taking turns of 2^22 requests): a request is a get, and a miss is followed by a put. `naive-lru` is std::list + std::unordered_map, "
                  "`naive-lfu` a std::map ordered by frequency (same victims as `lfu`). Capacities in entries. "
                  "Some curves coincide by construction: `naive-lru` with `lru`, and `gdsf` with `lfuda` "
                  "(unit sizes and costs). "
                  "`frugal-bench cache --trace FILE --format lines|arc --policy all --capacity N` and "
                  "`frugal-bench cache --zipf 0.99 --keys 1000000 --ops 20000000 --capacity 100000 --policy all`.";
        struct run_spec {
            std::string label, file, format;
            std::vector<std::size_t> capacities;
        };
        std::vector<run_spec> runs;
        if (ctx.quick) {
            runs = {{"gli", "cache_traces/lirs/gli.trace.gz", "lines", {500, 1000}},
                    {"loop", "cache_traces/lirs/loop.trace.gz", "lines", {512}}};
        } else {
            runs = {{"OLTP", "cache_traces/arc/OLTP.lis.zst", "arc", {1000, 2000, 5000, 10000, 15000}}};
            for (const char* t : {"gli", "loop", "sprite", "multi1"})
                runs.push_back({t, std::string("cache_traces/lirs/") + t + ".trace.gz", "lines", {100, 250, 500, 1000, 2000}});
        }
        std::vector<std::string> used;
        for (const auto& run : runs) {
            const auto file = ctx.data_file(run.file);
            if (!file) continue;
            used.push_back(run.file);
            std::vector<trace_request> trace = read_trace(*file, run.format);
            if (ctx.quick && trace.size() > 20000) trace.resize(20000);
            add_curve(s, run.label, trace, run.capacities);
        }
        if (used.empty()) {
            s.data_source = "generated: Zipf(0.9) over 5000 keys with every third request a cyclic scan over 1500 keys";
            add_curve(s, "generated", generated_trace(ctx.quick ? 20000 : 500000), {100, 250, 500, 1000, 2000});
        } else {
            s.data_source = "bundled cache traces (the ARC paper's OLTP trace; gli, loop, sprite and multi1 from the LIRS "
                            "authors' distribution): ";
            for (const auto& u : used) s.data_source += u + " ";
        }
        const std::uint64_t ops = ctx.quick ? 200000 : 20000000, keys = ctx.quick ? 20000 : 1000000;
        const auto zipf = zipf_trace(0.99, keys, ops, 1);
        for (record& r : replay_side_by_side(all_policies, keys / 10, false, zipf)) {
            r["trace"] = "zipf";
            s.records.push_back(std::move(r));
        }
        s.plots.push_back({.file = "cache_throughput.png", .title = "Zipf 0.99, capacity = keys / 10: throughput",
                           .x = "policy", .y = "mops_per_s", .series = "", .xlabel = "policy", .ylabel = "Mops/s", .kind = "bar",
                           .filter = {{"trace", "zipf"}}});
        add_headlines(s, runs, used);
        add_tier_runs(s, ctx);
        add_qa_runs(s, ctx);
        s.tables.push_back({.title = "Hit ratio by trace and capacity",
                            .columns = {"trace", "policy", "capacity", "requests", "hit_ratio", "byte_hit_ratio"},
                            .filter = {{"kind", "curve"}}});
        s.tables.push_back({.title = "Throughput: Zipf 0.99, capacity = keys / 10, one thread",
                            .columns = {"policy", "capacity", "requests", "hit_ratio", "mops_per_s"},
                            .filter = {{"trace", "zipf"}}});
        return s;
    }

private:
    using sharded_fn = record (*)(const std::string&, const std::vector<trace_request>&, std::size_t, std::size_t, bool);
    // Alternating 1-thread and N-thread runs, three of each; the medians' ratio, and the same
    // for pure arithmetic (what the machine offers), measured in between.
    record sharded_speedup(sharded_fn run, const std::string& name, const std::vector<trace_request>& trace,
                           const std::string& label) const {
        std::vector<double> one, many, ideal;
        record last;
        for (int round = 0; round < 3; ++round) {
            one.push_back(run(name, trace, capacity_, 1, bytes_)["mops_per_s"].get<double>());
            last = run(name, trace, capacity_, threads_, bytes_);
            many.push_back(last["mops_per_s"].get<double>());
            ideal.push_back(arithmetic_seconds(1) / arithmetic_seconds(threads_));
        }
        for (auto* v : {&one, &many, &ideal}) std::sort(v->begin(), v->end());
        last["trace"] = label;
        last["mops_per_s"] = many[1];
        last["mops_per_s_1_thread"] = one[1];
        last["speedup"] = one[1] > 0 ? many[1] / one[1] : 0.0;
        last["arithmetic_speedup"] = ideal[1];
        return last;
    }

    // Throughput against LRU and the hand-rolled LRU, and on each trace the best policy's hit
    // ratio against LRU's at the smallest capacity (where the policies differ most).
    template <class Run>
    static void add_headlines(report_section& s, const std::vector<Run>& runs, const std::vector<std::string>& used) {
        const auto zipf = [&](const char* policy) {
            return find_number(s.records, {{"trace", "zipf"}, {"policy", policy}}, "mops_per_s");
        };
        if (auto lru = zipf("lru"), naive = zipf("naive-lru"); lru && naive)
            s.headlines.push_back(at_least("Zipf 0.99 throughput, lru", *lru / *naive, "naive-lru (std::list + map)", 2.5));
        for (const char* p : {"s3fifo", "sieve"})
            if (auto v = zipf(p), lru = zipf("lru"); v && lru)
                s.headlines.push_back(at_least(std::string("Zipf 0.99 throughput, ") + p, *v / *lru, "lru", 1.0));
        for (const auto& run : runs) {
            if (std::find(used.begin(), used.end(), run.file) == used.end()) continue;
            const std::size_t c = run.capacities.front();
            const auto lru = find_number(s.records, {{"trace", run.label}, {"capacity", c}, {"policy", "lru"}}, "hit_ratio");
            std::string best;
            double best_hit = -1;
            for (const auto& r : s.records)
                if (record_matches(r, {{"trace", run.label}, {"capacity", c}}) && r["hit_ratio"].get<double>() > best_hit) {
                    best_hit = r["hit_ratio"].get<double>();
                    best = r["policy"].get<std::string>();
                }
            if (lru && *lru > 0 && best_hit >= 0)
                s.headlines.push_back(untargeted(run.label + " at " + std::to_string(c) + " entries: best policy (" +
                                                     best + ") hit ratio",
                                                 best_hit / *lru, "lru's hit ratio"));
        }
    }

    static void add_curve(report_section& s, const std::string& label, const std::vector<trace_request>& trace,
                          const std::vector<std::size_t>& capacities) {
        std::vector<std::string> policies;  // naive-lfu has the same hit ratios as lfu by construction
        std::copy_if(all_policies.begin(), all_policies.end(), std::back_inserter(policies),
                     [](const std::string& p) { return p != "naive-lfu"; });
        for (std::size_t c : capacities)
            for (record& r : replay_side_by_side(policies, c, false, trace)) {
                r["trace"] = label;
                r["kind"] = "curve";
                s.records.push_back(std::move(r));
            }
        s.plots.push_back({.file = "cache_hit_ratio_" + label + ".png", .title = "Hit ratio vs capacity: " + label,
                           .x = "capacity", .y = "hit_ratio", .series = "policy", .xlabel = "capacity (entries)",
                           .ylabel = "hit ratio", .logx = true, .filter = {{"trace", label}}});
    }

    // Engine processes sharing a tier (pages of 64 tokens x 4 KiB a token here, to keep the
    // report short; `--tier` defaults to the 1B-class 32 KiB).
    void add_tier_runs(report_section& s, const report_context& ctx) const {
        std::vector<std::string> tiers{"disk"};
#ifdef FRUGAL_BENCH_HAVE_REDIS
        tiers.push_back("redis");
#endif
        struct workload {
            const char* name;
            const char* file;
            std::size_t count;
        };
        const workload workloads[] = {{"conversations", "drafting/specbench_vicuna7b.tok", ctx.quick ? 8u : 64u},
                                      {"code edits", "drafting/code_edit_dev.tok", ctx.quick ? 4u : 16u}};
        for (const workload& w : workloads) {
            tier_bench_settings t;
            t.kv_bytes_per_token = 4096;
            t.conversations = w.count;
            const bool edits = std::string(w.name) == "code edits";
            const auto file = ctx.data_file(w.file);
            for (const auto& name : tiers) {
                t.tier = name;
                std::vector<record> rs;
                try {
                    rs = file ? tier_records(testing::read_tok_file(*file, t.conversations),
                                             std::string(w.name) + " of " + file->filename().string(), t)
                              : tier_records(edits ? generated_edits(t.conversations, t.seed)
                                                   : generated_conversations(t.conversations, t.seed),
                                             std::string("generated ") + w.name, t);
                } catch (const frugal::runtime_error& e) {  // e.g. no redis-server to start
                    s.notes += " The " + name + " tier did not run: " + e.what() + ".";
                    continue;
                }
                for (auto& r : rs) {
                    const bool targeted = file && !ctx.quick;
                    if (record_matches(r, {{"kind", "tier"}, {"processes", 4}})) {
                        const double v = r["shared_over_alone"].get<double>();
                        const std::string what = name + " tier, 4 engine processes, " + w.name + ": prefix tokens served per process";
                        s.headlines.push_back(targeted ? at_least(what, v, "the same without the tier", 2.0)
                                                       : untargeted(what, v, "the same without the tier"));
                        if (r.contains("get_ratio_to_redis_benchmark") && !edits) {
                            const double g = r["get_ratio_to_redis_benchmark"].get<double>();
                            s.headlines.push_back(targeted ? at_least("redis tier get throughput", g, "redis-benchmark GET", 0.7)
                                                           : untargeted("redis tier get throughput", g, "redis-benchmark GET"));
                        }
                    }
                    s.records.push_back(std::move(r));
                }
            }
        }
        s.tables.push_back({.title = "Engine processes sharing a cache tier (`frugal-bench cache --tier disk|redis`)",
                            .columns = {"tier", "workload", "processes", "shared_over_alone", "served_fraction_alone",
                                        "served_fraction_shared", "wrong_pages", "get_ratio_to_redis_benchmark"},
                            .filter = {{"kind", "tier"}}});
        s.notes += " Tiers: conversations (Spec-Bench prompt and answer) and code edits (the old file, then the new "
                   "one) in 4 turns, each extending the previous one, every turn routed to a random process in "
                   "lockstep rounds; each process keeps pages in a frugal tiered_prefix_tree (LRU, write-through) "
                   "under 1/8 of the working set, over the shared tier or, alone, over none; every page read is "
                   "checked byte for byte (`wrong_pages`).";
    }

    // The QA bank's lookup by bank size against FAISS's IndexFlatIP.
    static void add_qa_runs(report_section& s, const report_context& ctx) {
        qa_bench_settings q;
        if (ctx.quick) q.entries = {500, 2000}, q.queries = 20;
        for (auto& r : qa_records(q)) s.records.push_back(std::move(r));
        const std::size_t largest = q.entries.back();
        for (const char* impl : {"frugal-reference", "frugal-eigen"})
            if (auto v = find_number(s.records, {{"kind", "qa-bank"}, {"impl", impl}, {"entries", largest}}, "time_ratio"))
                s.headlines.push_back(untargeted(std::string("QA bank lookup, ") + std::to_string(largest) + " x " +
                                                     std::to_string(q.dim) + ", " + impl + ": time",
                                                 *v, "FAISS IndexFlatIP"));
        s.tables.push_back({.title = "QA bank lookup against FAISS IndexFlatIP (`frugal-bench cache --qa-bank`)",
                            .columns = {"impl", "entries", "dim", "lookup_us", "time_ratio", "agreement", "roofline_ratio"},
                            .filter = {{"kind", "qa-bank"}}});
        s.plots.push_back({.file = "cache_qa_bank.png", .title = "QA bank lookup by bank size (dim 384, one thread)",
                           .x = "entries", .y = "lookup_us", .series = "impl", .xlabel = "entries",
                           .ylabel = "us per lookup", .logx = true, .logy = true, .filter = {{"kind", "qa-bank"}}});
        s.notes += " QA bank: random unit embeddings of 384 values; half the queries are a stored entry with noise "
                   "(cosine about 0.95, hits at tau 0.9), half fresh directions (misses), each by the similarity "
                   "path; `time_ratio` is the lookup's time over FAISS IndexFlatIP's (one query a call, one "
                   "thread; Debian's libfaiss, a build without its AVX2 kernels), `agreement` the share of queries "
                   "whose hit or miss and entry equal FAISS's top-1, `roofline_ratio` a streaming read of the "
                   "bank's embedding bytes over the lookup.";
    }

    static std::vector<testing::token_record> generated_conversations(std::size_t n, std::uint32_t seed) {
        std::mt19937 rng(seed);
        std::vector<testing::token_record> data;
        for (std::size_t c = 0; c < n; ++c) {
            testing::token_record r;
            r.prompt.resize(200 + rng() % 600);
            r.response.resize(100 + rng() % 200);
            for (auto& t : r.prompt) t = static_cast<std::int32_t>(rng() % 32000);
            for (auto& t : r.response) t = static_cast<std::int32_t>(rng() % 32000);
            data.push_back(std::move(r));
        }
        return data;
    }

    // Code edits without the data file: prompts of 1000-2500 random tokens (an old file) and
    // responses that copy them with a few tokens changed (the new file).
    static std::vector<testing::token_record> generated_edits(std::size_t n, std::uint32_t seed) {
        std::mt19937 rng(seed);
        std::vector<testing::token_record> data;
        for (std::size_t c = 0; c < n; ++c) {
            testing::token_record r;
            r.prompt.resize(1000 + rng() % 1500);
            for (auto& t : r.prompt) t = static_cast<std::int32_t>(rng() % 32000);
            r.response = r.prompt;
            for (int e = 0; e < 8; ++e) r.response[rng() % r.response.size()] = static_cast<std::int32_t>(rng() % 32000);
            data.push_back(std::move(r));
        }
        return data;
    }

    // The --tier workloads: each from a .tok file (--data, else the bundled file) or generated.
    std::vector<record> run_tier() const {
        std::vector<record> out;
        for (const std::string workload : {"conversations", "code-edits"}) {
            if (tier_workload_ != "all" && tier_workload_ != workload) continue;
            const bool edits = workload == "code-edits";
            const std::string bundled = edits ? "drafting/code_edit_dev.tok" : "drafting/specbench_vicuna7b.tok";
            std::filesystem::path file = tier_data_;
            if (file.empty())
                for (const auto& dir : {std::filesystem::path(FRUGAL_DEFAULT_DATA_DIR), std::filesystem::path("../shared/data")})
                    if (std::filesystem::exists(dir / bundled)) {
                        file = dir / bundled;
                        break;
                    }
            tier_bench_settings t = tier_;
            if (edits) t.conversations = tier_edits_;
            std::vector<record> rs =
                file.empty() ? tier_records(edits ? generated_edits(t.conversations, t.seed)
                                                  : generated_conversations(t.conversations, t.seed),
                                            edits ? "generated code edits" : "generated conversations", t)
                             : tier_records(testing::read_tok_file(file, t.conversations),
                                            (edits ? "code edits of " : "conversations of ") + file.filename().string(), t);
            for (auto& r : rs) out.push_back(std::move(r));
        }
        return out;
    }

    std::string trace_, format_ = "lines", policy_ = "all";
    std::size_t capacity_ = 1000, threads_ = 0;
    bool bytes_ = false;
    double alpha_ = 0;
    std::uint64_t keys_ = 1000000, ops_ = 20000000, seed_ = 1;
    tier_bench_settings tier_;  // its `tier` is set from --tier when given
    std::string tier_data_, tier_name_, tier_workload_ = "all";
    std::size_t tier_edits_ = 16;
    bool qa_bank_ = false;
    qa_bench_settings qa_;
};

FRUGAL_BENCH_COMMAND(cache_command);

}  // namespace
}  // namespace frugal::bench
