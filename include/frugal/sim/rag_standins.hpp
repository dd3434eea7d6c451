#pragma once
/// @file
/// Stand-ins for a real RAG run on a machine without a GPU or a real corpus: a generator
/// that holds each decode step for its modelled time on the calling thread (a GPU computes
/// while the CPU searches, so a timed wait on the generation thread is its honest model), a
/// clustered vector corpus, and queries that keep to a request's topic and drift from one
/// retrieval to the next (so order, speculation and hot clusters have something to find).

#include <chrono>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <random>
#include <span>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

#include "frugal/core/error.hpp"
#include "frugal/core/hash.hpp"
#include "frugal/rag/engine.hpp"
#include "frugal/rag/workflow.hpp"

namespace frugal::sim {

/// Generator `G` (a cost model such as simulated_generator) whose `step` also holds the
/// calling thread for the modelled time times `scale`, until a steady-clock deadline (the
/// device stand-in of a real run). Everything else is G's.
/// @code
/// frugal::sim::held_generator device(frugal::sim::simulated_generator{});
/// frugal::rag::rag_runtime rt(device, retriever, pool);   // each step takes its modelled time
/// @endcode
template <rag::rag_generator G>
class held_generator {
public:
    explicit held_generator(G model, double scale = 1.0) : model_(std::move(model)), scale_(scale) {
        FRUGAL_CHECK(std::isfinite(scale) && scale >= 0.0, "held_generator: scale ", scale, " (must be >= 0)");
    }
    double step(std::span<const rag::generation_slot> batch) {
        const auto start = std::chrono::steady_clock::now();
        const double ms = static_cast<double>(model_.step(batch)) * scale_;
        std::this_thread::sleep_until(start + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                                                  std::chrono::duration<double, std::milli>(ms)));
        return ms;
    }
    [[nodiscard]] double step_time(std::size_t batch, std::size_t context) const {
        return static_cast<double>(model_.step_time(batch, context)) * scale_;
    }
    [[nodiscard]] std::size_t length(const rag::rag_state& s, const rag::rag_node& n) const { return model_.length(s, n); }
    void commit(rag::rag_state& s, const rag::rag_node& n) { model_.commit(s, n); }
    void discard(std::size_t request) { model_.discard(request); }
    void preview(rag::rag_state& s, const rag::rag_node& n) const
        requires rag::rag_previewing_generator<G>
    {
        model_.preview(s, n);
    }
    [[nodiscard]] bool stopped(std::size_t request) const
        requires rag::rag_stopping_generator<G>
    {
        return model_.stopped(request);
    }
    [[nodiscard]] const G& model() const noexcept { return model_; }

private:
    G model_;
    double scale_;
};

/// `n` vectors of dimension `dim` around `topics` centers: centers N(0, 1) per dimension,
/// each vector its topic's center plus N(0, spread^2) noise; topics get vectors in equal
/// shares, in topic order (row i belongs to topic i * topics / n).
struct clustered_corpus {
    std::size_t dim = 0, topics = 0;
    std::vector<float> centers;  ///< topics x dim
    std::vector<float> vectors;  ///< n x dim

    /// Draws the corpus (seeded).
    /// @code
    /// auto corpus = frugal::sim::clustered_corpus::make(1'000'000, 128, 64, 0.6, 1);
    /// @endcode
    [[nodiscard]] static clustered_corpus make(std::size_t n, std::size_t dim, std::size_t topics, double spread,
                                               std::uint64_t seed) {
        FRUGAL_CHECK(n > 0 && dim > 0 && topics > 0 && topics <= n, "clustered_corpus: ", n, " vectors of dimension ", dim,
                     " in ", topics, " topics");
        FRUGAL_CHECK(std::isfinite(spread) && spread > 0.0, "clustered_corpus: spread ", spread);
        clustered_corpus c;
        c.dim = dim;
        c.topics = topics;
        std::mt19937_64 rng(seed);
        std::normal_distribution<float> unit;
        c.centers.resize(topics * dim);
        for (float& x : c.centers) x = unit(rng);
        c.vectors.resize(n * dim);
        std::normal_distribution<float> noise(0.0f, static_cast<float>(spread));
        for (std::size_t i = 0; i < n; ++i) {
            const std::size_t t = i * topics / n;
            for (std::size_t d = 0; d < dim; ++d) c.vectors[i * dim + d] = c.centers[t * dim + d] + noise(rng);
        }
        return c;
    }
};

/// The embedder of a real run's requests: a request's first query is its topic's center
/// (the state's value "topic") plus N(0, `start`^2) noise, and each later retrieval's query
/// drifts from the one before by N(0, `drift`^2) per dimension, all drawn from a hash of the
/// state's value "seed" and the retrieval's round (so it is a pure function of the state).
/// @code
/// frugal::sim::drifting_queries embed{&corpus, 0.6, 0.3};
/// frugal::rag::ivf_retriever retriever(index, embed, {.nprobe = 256}, pool);
/// @endcode
struct drifting_queries {
    const clustered_corpus* corpus = nullptr;
    double start = 0.6, drift = 0.3;

    [[nodiscard]] std::vector<float> operator()(const rag::rag_state& s, const rag::rag_node&) const {
        FRUGAL_CHECK(corpus != nullptr, "drifting_queries: no corpus");
        const auto topic = static_cast<std::size_t>(s.get("topic"));
        FRUGAL_CHECK(topic < corpus->topics, "drifting_queries: topic ", topic, " of ", corpus->topics);
        const std::size_t dim = corpus->dim;
        std::vector<float> q(corpus->centers.begin() + static_cast<std::ptrdiff_t>(topic * dim),
                             corpus->centers.begin() + static_cast<std::ptrdiff_t>((topic + 1) * dim));
        const auto seed = static_cast<std::uint64_t>(s.get("seed"));
        for (std::size_t round = 0; round <= s.retrieved.size(); ++round) {
            std::mt19937_64 rng(hash_combine(seed, round));
            std::normal_distribution<float> step(0.0f, static_cast<float>(round == 0 ? start : drift));
            for (float& x : q) x += step(rng);
        }
        return q;
    }
};
static_assert(std::is_invocable_r_v<std::vector<float>, const drifting_queries&, const rag::rag_state&, const rag::rag_node&>);

}  // namespace frugal::sim
