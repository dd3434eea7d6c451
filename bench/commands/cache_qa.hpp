#pragma once
// `frugal-bench cache --qa-bank`: the QA bank's lookup (PerCache's semantic cache) against
// FAISS's IndexFlatIP, the exhaustive inner-product index GPTCache puts beside its answers.
// Banks of random unit embeddings; half the queries are stored entries with noise (hits at
// tau), half fresh directions (misses); every lookup takes the similarity path (no exact
// text). One thread each.

#include <cstddef>
#include <cstdint>
#include <vector>

#include "harness.hpp"

namespace frugal::bench {

struct qa_bench_settings {
    std::vector<std::size_t> entries{1000, 10000, 100000};
    std::size_t dim = 384;       ///< e5-small / MiniLM sentence embeddings
    std::size_t queries = 200;
    double tau = 0.9;
    std::uint32_t seed = 11;
};

/// Per bank size and index: kind "qa-bank", `impl` (frugal-reference: the bank's default
/// plain-loop scan; frugal-eigen: the Eigen GEMV scan; faiss-flat-ip, when built with FAISS),
/// `entries`, `dim`, `lookup_us` (median over repeated passes, per lookup), `time_ratio` (over
/// FAISS's, same run), `agreement` (the share of queries whose hit or miss, and entry,
/// equal FAISS's top-1 at tau) and `roofline_ratio` (a streaming read of the bank's embedding
/// bytes over the lookup: 1 is the memory's speed).
std::vector<record> qa_records(const qa_bench_settings& s);

}  // namespace frugal::bench
