#pragma once
/// @file
/// Simulation mode for the wavefront scheduler: a generator and a retriever that are cost
/// models (per-step decode time by batch size and context; per-cluster search time by list
/// size) and produce deterministic pseudo-results, and seeded Poisson request streams.

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <random>
#include <span>
#include <utility>
#include <vector>

#include "frugal/core/error.hpp"
#include "frugal/core/hash.hpp"
#include "frugal/rag/engine.hpp"
#include "frugal/sim/rag_event_loop.hpp"

namespace frugal::sim {

/// Decode cost model of a memory-bound LLM step (defaults: Llama-3-8B in bf16 on one H100,
/// HedraRAG's setting): a fixed cost for streaming the weights (16 GB at ~2.7 TB/s ~ 6 ms),
/// a per-sequence cost (sampling, per-token GEMV rows), and a per-context-token cost for
/// reading the KV cache (128 KB per token with GQA ~ 5e-5 ms). A batch of B sequences pays
/// the weights once, so per-request decode cost falls with batch size.
/// What it "generates" is a running hash per request that mixes every step and the
/// documents it was conditioned on (so a generation over other documents differs), kept
/// here as an engine keeps its text: a generation's steps extend a pending hash, `commit`
/// makes it the request's text and writes it into the state as the value "text" (what
/// simulated_retriever::query_of reads), `discard` drops it.
/// @code
/// frugal::sim::simulated_generator gen({.fixed_ms = 6.0});
/// double ms = gen.step_time(32, 32 * 1000);  // ~9.2 ms
/// @endcode
class simulated_generator {
public:
    struct config {
        double fixed_ms = 6.0, per_sequence_ms = 0.05, per_context_token_ms = 5e-5;
        /// Each generation's length is its node's `tokens` times a factor in [1 - jitter, 1 + jitter]
        /// drawn from a hash of the request and its text so far (not of the documents, so a
        /// speculative and a validated run of the same node decode the same number of steps).
        double length_jitter = 0.5;
        /// The chance that a generation ends after any step (an end-of-sequence token),
        /// drawn from a hash of its text so far, so a generation over other documents may
        /// end elsewhere. 0: every generation runs its full length.
        double stop_probability = 0.0;
    };
    simulated_generator() : simulated_generator(config{}) {}
    explicit simulated_generator(const config& c) : c_(c) {
        FRUGAL_CHECK(std::isfinite(c.fixed_ms) && c.fixed_ms > 0.0 && std::isfinite(c.per_sequence_ms) &&
                         c.per_sequence_ms >= 0.0 && std::isfinite(c.per_context_token_ms) && c.per_context_token_ms >= 0.0,
                     "simulated_generator: step costs ", c.fixed_ms, ", ", c.per_sequence_ms, ", ",
                     c.per_context_token_ms, " ms (fixed > 0, the others >= 0)");
        FRUGAL_CHECK(c.length_jitter >= 0.0 && c.length_jitter <= 1.0, "simulated_generator: length_jitter ",
                     c.length_jitter, " is outside [0, 1]");
        FRUGAL_CHECK(c.stop_probability >= 0.0 && c.stop_probability <= 1.0, "simulated_generator: stop_probability ",
                     c.stop_probability, " is outside [0, 1]");
    }
    [[nodiscard]] const config& settings() const noexcept { return c_; }

    [[nodiscard]] double step_time(std::size_t batch, std::size_t total_context) const {
        return c_.fixed_ms + c_.per_sequence_ms * static_cast<double>(batch) +
               c_.per_context_token_ms * static_cast<double>(total_context);
    }
    [[nodiscard]] std::size_t length(const rag::rag_state& s, const rag::rag_node& n) const {
        const std::uint64_t text = std::bit_cast<std::uint64_t>(s.get("text"));  // the text kept so far
        const std::uint64_t h = hash_combine(hash_combine(s.request, text), n.tokens);
        const double u = static_cast<double>(h >> 11) * 0x1.0p-53;  // [0, 1)
        const double f = 1.0 - c_.length_jitter + 2.0 * c_.length_jitter * u;
        return std::max<std::size_t>(1, static_cast<std::size_t>(std::lround(static_cast<double>(n.tokens) * f)));
    }
    double step(std::span<const rag::generation_slot> batch) {
        std::size_t ctx = 0;
        for (const auto& s : batch) {
            text& t = text_for(s.request);
            std::uint64_t h = hash_combine(s.step == 0 ? t.kept : t.pending, s.step);
            for (std::uint64_t d : s.docs) h = hash_combine(h, d);
            t.pending = h;
            ctx += s.context;
        }
        return step_time(batch.size(), ctx);
    }
    void commit(rag::rag_state& s, const rag::rag_node&) {
        text& t = text_for(s.request);
        t.kept = t.pending;
        s.values["text"] = std::bit_cast<std::int64_t>(t.kept);
    }
    void discard(std::size_t request) { text_for(request).pending = text_for(request).kept; }
    /// Writes the unfinished generation's hash as "text", as commit would (speculative retrieval).
    void preview(rag::rag_state& s, const rag::rag_node&) const {
        s.values["text"] = std::bit_cast<std::int64_t>(s.request < texts_.size() ? texts_[s.request].pending : 0);
    }
    /// Whether the request's running generation has just decoded an end-of-sequence token.
    [[nodiscard]] bool stopped(std::size_t request) const noexcept {
        if (c_.stop_probability == 0.0 || request >= texts_.size()) return false;
        const std::uint64_t h = hash_combine(texts_[request].pending, 0x5eedULL);
        return static_cast<double>(h >> 11) * 0x1.0p-53 < c_.stop_probability;
    }
    /// The request's text: the hash of every generation kept so far (0 before the first).
    [[nodiscard]] std::uint64_t text_of(std::size_t request) const noexcept {
        return request < texts_.size() ? texts_[request].kept : 0;
    }

private:
    struct text {
        std::uint64_t kept = 0, pending = 0;
    };
    text& text_for(std::size_t request) {
        if (request >= texts_.size()) texts_.resize(request + 1);
        return texts_[request];
    }
    config c_;
    std::vector<text> texts_;  // by request id
};
static_assert(rag::rag_previewing_generator<simulated_generator> && rag::rag_stopping_generator<simulated_generator>);

/// Search cost model of a CPU IVF-Flat index (defaults: HedraRAG's IVF4096 over 38 M
/// Wikipedia passages of 1024-d e5 embeddings, nprobe 256): list sizes log-normal around
/// 38 M / 4096; scanning a list costs `per_cluster_ms + per_vector_ms * size` on one core
/// (4 KB per vector at ~16 GB/s of per-core bandwidth), and a batch of (query, cluster)
/// scans spreads over `threads` cores (memory bandwidth limits useful threads to ~32), so
/// a call costs overhead + work / min(threads, scans). With `parallel_scans` off a call is
/// split by query only, as FAISS's IVF search is by default (the paper's baseline): a query's
/// scans stay on one thread, so a call costs overhead + the longest of the threads' loads
/// when its queries go, longest first, to the least loaded thread. The probe list of a query is the
/// nprobe clusters with the smallest hashed "centroid distance"; candidates in a cluster lie
/// a little beyond that distance, so nearer clusters tend to hold the final top-k, as in IVF.
/// `request_similarity` (0 by default) weighs a per-request topic into every distance, so a
/// request's successive queries probe overlapping clusters and find nearby documents in the
/// same ones (HedraRAG 3.3's intra-request similarity); `query_buckets` (0: off) makes the query depend on the generated text only
/// through text mod buckets, so a query from a partial generation equals the final one with
/// probability 1/buckets (a stand-in for the embedding drift of 4.3's speculative retrieval).
/// @code
/// frugal::sim::simulated_retriever ret{};
/// auto clusters = ret.probe(42);  // 256 cluster ids, nearest first
/// @endcode
class simulated_retriever {
public:
    struct config {
        std::size_t lists = 4096, nprobe = 256, mean_list_size = 9300;
        double list_size_sigma = 0.6, per_cluster_ms = 0.02, per_vector_ms = 2.5e-4, call_overhead_ms = 0.5;
        std::size_t threads = 32, candidates_per_cluster = 4;
        std::uint64_t seed = 7;
        double request_similarity = 0.0;
        std::uint64_t query_buckets = 0;
        bool parallel_scans = true;
        /// The lists' sizes (`lists` of them), instead of the log-normal draw: a real index's.
        std::vector<std::size_t> list_sizes = {};
    };
    simulated_retriever() : simulated_retriever(config{}) {}
    explicit simulated_retriever(const config& c) : c_(c) {
        FRUGAL_CHECK(c.lists > 0 && c.nprobe > 0 && c.nprobe <= c.lists, "simulated_retriever: nprobe ", c.nprobe,
                     " with ", c.lists, " lists");
        FRUGAL_CHECK(c.threads > 0 && c.candidates_per_cluster > 0, "simulated_retriever: threads ", c.threads,
                     ", candidates ", c.candidates_per_cluster);
        FRUGAL_CHECK(c.request_similarity >= 0.0 && c.request_similarity <= 1.0, "simulated_retriever: request_similarity ",
                     c.request_similarity, " is outside [0, 1]");
        if (!c.list_sizes.empty()) {
            FRUGAL_CHECK(c.list_sizes.size() == c.lists, "simulated_retriever: ", c.list_sizes.size(), " list sizes for ",
                         c.lists, " lists");
            sizes_ = c.list_sizes;
            return;
        }
        std::mt19937_64 rng(c.seed);
        const double mu = std::log(static_cast<double>(c.mean_list_size)) - c.list_size_sigma * c.list_size_sigma / 2;
        std::lognormal_distribution<double> size(mu, c.list_size_sigma);
        for (std::size_t i = 0; i < c.lists; ++i) sizes_.push_back(static_cast<std::size_t>(size(rng)) + 1);
    }

    [[nodiscard]] const config& settings() const noexcept { return c_; }
    [[nodiscard]] std::span<const std::size_t> list_sizes() const noexcept { return sizes_; }

    /// The query of a request's next retrieval: a hash of the request, the retrieval's round
    /// and the text so far (simulated_generator's value "text", mod `query_buckets` when set);
    /// with `request_similarity` > 0 its top 16 bits are the request's topic.
    [[nodiscard]] std::uint64_t query_of(const rag::rag_state& s, const rag::rag_node&) const {
        const auto full = std::bit_cast<std::uint64_t>(s.get("text"));
        const std::uint64_t text = c_.query_buckets == 0 ? full : full % c_.query_buckets;
        const std::uint64_t q = hash_combine(hash_combine(s.request, s.retrieved.size()), text);
        if (c_.request_similarity == 0.0) return q;
        return (hash_combine(s.request, c_.seed) & 0xffff000000000000ULL) | (q >> 16);
    }
    /// The cluster a result id came from (ids are cluster * 1000003 + candidate).
    [[nodiscard]] std::size_t list_of(std::uint64_t id) const noexcept { return static_cast<std::size_t>(id / 1000003ULL); }

    [[nodiscard]] std::vector<std::size_t> probe(std::uint64_t query) const {
        std::vector<std::pair<double, std::size_t>> d;
        d.reserve(c_.lists);
        for (std::size_t c = 0; c < c_.lists; ++c) d.emplace_back(centroid_distance(query, c), c);
        std::partial_sort(d.begin(), d.begin() + static_cast<std::ptrdiff_t>(c_.nprobe), d.end());
        std::vector<std::size_t> out;
        for (std::size_t i = 0; i < c_.nprobe; ++i) out.push_back(d[i].second);
        return out;
    }
    [[nodiscard]] double cluster_time(std::size_t c) const {
        return scan_ms(c) / static_cast<double>(c_.threads);
    }
    double search(std::span<const rag::retrieval_slot<std::uint64_t>> batch) {
        double work = 0.0;
        std::size_t scans = 0;
        std::vector<double> per_query;
        for (const auto& s : batch) {
            double q = 0.0;
            for (std::size_t c : s.clusters) {
                FRUGAL_CHECK_AS(frugal::out_of_range, c < c_.lists, "simulated_retriever: cluster ", c, " >= ", c_.lists);
                q += scan_ms(c);
                ++scans;
                const double base = centroid_distance(*s.query, c);
                for (std::size_t j = 0; j < c_.candidates_per_cluster; ++j)
                    s.results->offer(static_cast<float>(base + 0.5 * candidate_offset(*s.query, c, j)), c * 1000003ULL + j);
            }
            work += q;
            if (q > 0.0) per_query.push_back(q);
        }
        if (scans == 0) return 0.0;
        if (c_.parallel_scans) return c_.call_overhead_ms + work / static_cast<double>(std::min(c_.threads, scans));
        // Longest query first to the least loaded thread (LPT): the call's makespan.
        std::sort(per_query.begin(), per_query.end(), std::greater<>());
        std::vector<double> load(std::min(c_.threads, per_query.size()), 0.0);
        for (double q : per_query) *std::min_element(load.begin(), load.end()) += q;
        return c_.call_overhead_ms + *std::max_element(load.begin(), load.end());
    }

private:
    [[nodiscard]] double scan_ms(std::size_t c) const {
        return c_.per_cluster_ms + c_.per_vector_ms * static_cast<double>(sizes_[c]);
    }
    [[nodiscard]] static double uniform(std::uint64_t key, std::size_t c) {
        return static_cast<double>(hash_combine(key ^ 0x51ed2701ULL, c) >> 11) * 0x1.0p-53;
    }
    // How far beyond its cluster's distance candidate j lies, in [0, 1): the request's topic
    // weighs in as in centroid_distance, so a request's queries find the same documents near.
    [[nodiscard]] double candidate_offset(std::uint64_t query, std::size_t c, std::size_t j) const {
        auto u = [&](std::uint64_t key) {
            return static_cast<double>(hash_combine(hash_combine(key, c), j) >> 11) * 0x1.0p-53;
        };
        if (c_.request_similarity == 0.0) return u(query);
        return c_.request_similarity * u(query >> 48) + (1.0 - c_.request_similarity) * u(query);
    }
    [[nodiscard]] double centroid_distance(std::uint64_t query, std::size_t c) const {
        const double own = uniform(query, c);
        if (c_.request_similarity == 0.0) return own;
        return c_.request_similarity * uniform(query >> 48, c) + (1.0 - c_.request_similarity) * own;
    }
    config c_;
    std::vector<std::size_t> sizes_;
};
static_assert(rag::rag_retriever<simulated_retriever>);

/// A weighted workflow in a request mix.
struct rag_mix_entry {
    const rag::rag_graph* graph = nullptr;
    double weight = 1.0;
    std::int64_t min_subquestions = 0, max_subquestions = 0;  ///< "subquestions" drawn uniformly (Multistep)
};

/// Seeded Poisson arrivals at `rate_per_s` requests per second; each request draws its
/// workflow from `mix` by weight (and its "subquestions" value from the entry's range).
/// @code
/// auto g = frugal::rag::multistep_workflow();
/// auto reqs = frugal::sim::poisson_requests({{&g, 1.0, 2, 4}}, 5.0, 200, 42);
/// @endcode
[[nodiscard]] inline std::vector<rag_request> poisson_requests(std::span<const rag_mix_entry> mix, double rate_per_s,
                                                               std::size_t count, std::uint64_t seed) {
    FRUGAL_CHECK(!mix.empty(), "poisson_requests: empty workflow mix");
    FRUGAL_CHECK(std::isfinite(rate_per_s) && rate_per_s > 0.0, "poisson_requests: rate ", rate_per_s, " (must be > 0)");
    std::vector<double> weights;
    for (const auto& m : mix) {
        FRUGAL_CHECK(m.graph != nullptr && m.weight > 0.0 && m.min_subquestions <= m.max_subquestions,
                     "poisson_requests: bad mix entry (null graph, weight <= 0 or empty sub-question range)");
        weights.push_back(m.weight);
    }
    std::mt19937_64 rng(seed);
    std::exponential_distribution<double> gap(rate_per_s / 1000.0);  // per ms
    std::discrete_distribution<std::size_t> pick(weights.begin(), weights.end());
    std::vector<rag_request> out;
    double t = 0.0;
    for (std::size_t i = 0; i < count; ++i) {
        t += gap(rng);
        const rag_mix_entry& m = mix[pick(rng)];
        rag_request r{t, m.graph, {}};
        if (m.max_subquestions > 0)
            r.state.values["subquestions"] =
                std::uniform_int_distribution<std::int64_t>(m.min_subquestions, m.max_subquestions)(rng);
        out.push_back(std::move(r));
    }
    return out;
}

}  // namespace frugal::sim
