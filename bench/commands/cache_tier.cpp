// `frugal-bench cache --tier`: see cache_tier.hpp.
#include "cache_tier.hpp"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <optional>
#include <random>
#include <span>
#include <string>
#include <vector>

#include <pthread.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <CLI/CLI.hpp>

#include <frugal/cache/disk_tier.hpp>
#include <frugal/cache/lru_policy.hpp>
#include <frugal/cache/tiered_prefix_tree.hpp>

#ifdef FRUGAL_BENCH_HAVE_REDIS
#include <frugal/backend/redis/redis_tier.hpp>

#include "../../tests/support/frugal_test_redis.hpp"  // starts a redis-server on a free port
#endif
#include "../../tests/cache/host_pages.hpp"  // the engine's page pool

namespace frugal::bench {

namespace {

using token = std::int32_t;
using testing::token_record;
using cache_model::host_pages;

struct request {
    std::size_t conversation = 0, turn = 0, process = 0;
    std::vector<token> tokens;
};

// Conversations of prompt + response, each turn adding a 1/turns share of the response.
std::vector<std::vector<request>> rounds_of(const std::vector<token_record>& data, const tier_bench_settings& s,
                                            std::size_t processes) {
    std::mt19937 rng(s.seed);
    std::vector<std::vector<request>> rounds(s.turns);
    for (std::size_t c = 0; c < std::min(s.conversations, data.size()); ++c) {
        const auto& r = data[c];
        for (std::size_t t = 0; t < s.turns; ++t) {
            request q{c, t, rng() % processes, r.prompt};
            const std::size_t n = r.response.size() * (t + 1) / s.turns;
            q.tokens.insert(q.tokens.end(), r.response.begin(), r.response.begin() + std::ptrdiff_t(n));
            rounds[t].push_back(std::move(q));
        }
    }
    return rounds;
}

// What each process reports back (in shared memory).
struct process_result {
    std::uint64_t served_tokens = 0, total_tokens = 0, wrong_pages = 0, tier_pages = 0;
};

// A process alone: a tier that holds nothing.
struct no_tier {
    std::size_t exists_prefix(std::span<const cache::tier_key>) const { return 0; }
    std::size_t get(std::span<const cache::tier_key>, std::span<const std::span<std::byte>>) const { return 0; }
    void put(std::span<const cache::tier_key>, std::span<const std::span<const std::byte>>) const {}
    [[nodiscard]] cache::tier_stats stats() const { return {}; }
};
static_assert(cache::kv_tier<no_tier>);

// One engine process: a tiered prefix tree (LRU, write-through) over `tier`, serving its
// requests of each round, the rounds kept in step by a process-shared barrier.
template <cache::kv_tier Tier>
process_result serve(const std::vector<std::vector<request>>& rounds, std::size_t me, const cache::tier_namespace& ns,
                     std::size_t page_bytes, std::size_t memory_bytes, pthread_barrier_t* barrier, Tier& tier) {
    std::size_t longest = 0;  // pages of the longest request: computed pages wait in the pool before insert
    for (const auto& round : rounds)
        for (const request& q : round) longest = std::max(longest, q.tokens.size() / ns.page_tokens);
    host_pages pages(memory_bytes / page_bytes + longest, page_bytes);
    cache::tiered_prefix_tree<Tier, host_pages> tree(memory_budget(memory_bytes), tier, pages, ns);
    process_result r;
    for (const auto& round : rounds) {
        pthread_barrier_wait(barrier);
        for (const request& q : round) {
            if (q.process != me) continue;
            const auto keys = tree.template keys<token>(q.tokens);
            auto hit = tree.match(keys);
            const std::size_t have = hit.lock.length();
            for (std::size_t i = have - hit.from_tier; i < have; ++i)  // pages are functions of their keys
                r.wrong_pages += !pages.holds(hit.lock.handle(i), keys[i]);
            r.tier_pages += hit.from_tier;
            r.served_tokens += have * ns.page_tokens;
            r.total_tokens += keys.size() * ns.page_tokens;
            std::vector<host_pages::handle_type> fresh;  // the prefill computes the rest
            for (std::size_t i = have; i < keys.size(); ++i) {
                const auto p = pages.allocate();
                FRUGAL_CHECK_AS(frugal::runtime_error, p.has_value(), "cache --tier: the page pool ran dry");
                host_pages::fill(keys[i], pages.bytes(*p));
                fresh.push_back(*p);
            }
            const auto added = tree.insert(hit.lock, keys, fresh);
            for (std::size_t i = have; i < keys.size(); ++i)
                if (i < added.existing || i >= added.cached) pages.release(fresh[i - have]);
            hit.lock.release();
        }
    }
    return r;
}

// Runs `processes` engine processes over the rounds; per-process results.
template <class MakeTier>
std::vector<process_result> run_processes(const std::vector<std::vector<request>>& rounds, std::size_t processes,
                                          const cache::tier_namespace& ns, std::size_t page_bytes,
                                          std::size_t memory_bytes, MakeTier&& make_tier) {
    struct shared_block {
        pthread_barrier_t barrier;
        process_result results[64];
    };
    FRUGAL_CHECK(processes >= 1 && processes <= 64, "cache --tier: processes must be in [1, 64], got ", processes);
    void* mem = mmap(nullptr, sizeof(shared_block), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    FRUGAL_CHECK_AS(frugal::runtime_error, mem != MAP_FAILED, "cache --tier: mmap failed");
    auto* block = new (mem) shared_block{};
    pthread_barrierattr_t attr;
    pthread_barrierattr_init(&attr);
    pthread_barrierattr_setpshared(&attr, PTHREAD_PROCESS_SHARED);
    pthread_barrier_init(&block->barrier, &attr, static_cast<unsigned>(processes));
    std::vector<pid_t> children;
    for (std::size_t p = 0; p < processes; ++p) {
        const pid_t pid = fork();
        FRUGAL_CHECK_AS(frugal::runtime_error, pid >= 0, "cache --tier: fork failed");
        if (pid == 0) {
            int code = 0;
            try {
                auto tier = make_tier();
                block->results[p] = serve(rounds, p, ns, page_bytes, memory_bytes, &block->barrier, *tier);
            } catch (const std::exception& e) {
                std::fprintf(stderr, "cache --tier: process %zu: %s\n", p, e.what());
                code = 1;
            }
            _exit(code);
        }
        children.push_back(pid);
    }
    bool ok = true;
    for (const pid_t pid : children) {
        int status = 0;
        waitpid(pid, &status, 0);
        ok = ok && WIFEXITED(status) && WEXITSTATUS(status) == 0;
    }
    std::vector<process_result> out(block->results, block->results + processes);
    pthread_barrier_destroy(&block->barrier);
    munmap(mem, sizeof(shared_block));
    FRUGAL_CHECK_AS(frugal::runtime_error, ok, "cache --tier: an engine process failed");
    return out;
}

#ifdef FRUGAL_BENCH_HAVE_REDIS
// GET throughput in bytes/s: redis-benchmark's (one client, `depth` pipelined, values of
// `bytes`) and the tier's (the same keys read back in calls of `depth` keys).
double redis_benchmark_get_bytes_per_s(int port, std::size_t bytes, std::size_t depth, std::size_t requests) {
    const std::string cmd = "redis-benchmark -h 127.0.0.1 -p " + std::to_string(port) + " -t set,get -c 1 -P " +
                            std::to_string(depth) + " -d " + std::to_string(bytes) + " -n " + std::to_string(requests) +
                            " --csv 2>/dev/null";
    std::unique_ptr<FILE, int (*)(FILE*)> pipe(popen(cmd.c_str(), "r"), &pclose);
    FRUGAL_CHECK_AS(frugal::runtime_error, pipe != nullptr, "cannot run redis-benchmark");
    char line[512];
    while (std::fgets(line, sizeof line, pipe.get()) != nullptr) {
        const std::string l(line);
        if (l.rfind("\"GET\"", 0) != 0) continue;
        const auto a = l.find(",\"") + 2, b = l.find('"', a);
        return std::stod(l.substr(a, b - a)) * double(bytes);
    }
    FRUGAL_FAIL(frugal::runtime_error, "redis-benchmark printed no GET line (is Debian's redis-tools installed?)");
}

double tier_get_bytes_per_s(cache::redis_tier& tier, const std::vector<cache::tier_key>& keys, std::size_t page_bytes,
                            std::size_t depth) {
    std::vector<std::vector<std::byte>> pages(depth, std::vector<std::byte>(page_bytes));
    std::vector<std::span<std::byte>> out(pages.begin(), pages.end());
    std::size_t loaded = 0;
    const auto t0 = std::chrono::steady_clock::now();
    for (std::size_t first = 0; first + depth <= keys.size(); first += depth)
        loaded += tier.get(std::span(keys).subspan(first, depth), out);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return double(loaded * page_bytes) / s;
}
#endif

}  // namespace

std::vector<record> tier_records(const std::vector<token_record>& data, const std::string& workload,
                                 const tier_bench_settings& s) {
    const cache::tier_namespace ns{.model = "bench-1b", .dtype = "bf16", .layout = "nhd",
                                   .page_tokens = static_cast<std::uint32_t>(s.page_tokens)};
    const std::size_t page_bytes = s.kv_bytes_per_token * s.page_tokens;
    std::size_t working_pages = 0;
    for (std::size_t c = 0; c < std::min(s.conversations, data.size()); ++c)
        working_pages += (data[c].prompt.size() + data[c].response.size()) / s.page_tokens;
    const std::size_t memory_bytes = std::max(page_bytes, working_pages * page_bytes / 8);
    std::vector<record> out;
#ifdef FRUGAL_BENCH_HAVE_REDIS
    std::optional<frugal::testing::redis_server> own;
    std::string host = "127.0.0.1";
    int port = 0;
    if (s.tier == "redis") {
        if (s.redis.empty()) {
            own.emplace(std::vector<std::string>{"--maxmemory", "0"});
            FRUGAL_CHECK_AS(frugal::runtime_error, own->running(), "cache --tier redis: could not start redis-server");
            port = own->port();
        } else {
            const auto colon = s.redis.rfind(':');
            host = s.redis.substr(0, colon);
            port = std::stoi(s.redis.substr(colon + 1));
        }
    }
    const cache::redis_options redis_opt{.host = host, .port = port, .timeout = std::chrono::milliseconds(5000)};
#else
    if (s.tier == "redis") throw CLI::ValidationError("--tier", "redis: frugal-bench was built without hiredis");
#endif
    const std::filesystem::path dir = s.dir.empty() ? std::filesystem::temp_directory_path() /
                                                          ("frugal-tier-bench-" + std::to_string(getpid()))
                                                    : s.dir;
    for (const std::size_t processes : s.processes) {
        const auto rounds = rounds_of(data, s, processes);
        const auto alone = run_processes(rounds, processes, ns, page_bytes, memory_bytes,
                                         [] { return std::make_unique<no_tier>(); });
        std::vector<process_result> shared;
        double get_ratio = -1;
        if (s.tier == "disk") {
            std::filesystem::remove_all(dir);
            shared = run_processes(rounds, processes, ns, page_bytes, memory_bytes, [&] {
                return std::make_unique<cache::disk_tier<>>(dir, ns, std::size_t{1} << 40);
            });
            std::filesystem::remove_all(dir);
        } else {
#ifdef FRUGAL_BENCH_HAVE_REDIS
            if (own) own->start();  // restarted empty, its memory freed
            // A keyspace of this run's own, on a server of the bench's or the user's.
            cache::redis_options opt = redis_opt;
            opt.prefix = "frugal-bench-" + std::to_string(getpid()) + "-" + std::to_string(processes);
            shared = run_processes(rounds, processes, ns, page_bytes, memory_bytes,
                                   [&] { return std::make_unique<cache::redis_tier>(ns, opt); });
            cache::redis_tier reader(ns, opt);
            std::vector<cache::tier_key> keys;
            for (std::size_t c = 0; c < std::min(s.conversations, data.size()); ++c) {
                std::vector<token> all = data[c].prompt;
                all.insert(all.end(), data[c].response.begin(), data[c].response.end());
                for (const auto& k : cache::chunk_keys<token>(ns, all)) keys.push_back(k);
            }
            // Best of three each, interleaved: the machine is shared.
            constexpr std::size_t depth = 16;
            double tier_rate = 0, bench_rate = 0;
            for (int rep = 0; rep < 3; ++rep) {
                tier_rate = std::max(tier_rate, tier_get_bytes_per_s(reader, keys, page_bytes, depth));
                bench_rate = std::max(bench_rate, redis_benchmark_get_bytes_per_s(port, page_bytes, depth, 1000));
            }
            get_ratio = tier_rate / bench_rate;
            out.push_back(record{{"kind", "tier_get"}, {"tier", "redis"}, {"page_bytes", page_bytes},
                                 {"pipeline", depth}, {"tier_get_gb_per_s", tier_rate / 1e9},
                                 {"redis_benchmark_get_gb_per_s", bench_rate / 1e9}});
#endif
        }
        double worst = 1e300;
        std::uint64_t wrong = 0, served_alone = 0, served_shared = 0, total = 0, tier_pages = 0;
        for (std::size_t p = 0; p < processes; ++p) {
            const double a = double(std::max<std::uint64_t>(alone[p].served_tokens, s.page_tokens));
            worst = std::min(worst, double(shared[p].served_tokens) / a);
            wrong += shared[p].wrong_pages;
            served_alone += alone[p].served_tokens;
            served_shared += shared[p].served_tokens;
            total += shared[p].total_tokens;
            tier_pages += shared[p].tier_pages;
        }
        record r{{"kind", "tier"},
                 {"tier", s.tier},
                 {"processes", processes},
                 {"workload", workload},
                 {"shared_over_alone", worst},
                 {"served_fraction_alone", double(served_alone) / double(total)},
                 {"served_fraction_shared", double(served_shared) / double(total)},
                 {"pages_from_tier", tier_pages},
                 {"wrong_pages", wrong},
                 {"page_bytes", page_bytes},
                 {"memory_bytes_per_process", memory_bytes},
                 {"working_set_bytes", working_pages * page_bytes}};
        if (get_ratio >= 0) r["get_ratio_to_redis_benchmark"] = get_ratio;
        out.push_back(std::move(r));
    }
    return out;
}

}  // namespace frugal::bench
