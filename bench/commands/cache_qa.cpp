// `frugal-bench cache --qa-bank`: see cache_qa.hpp.
#include "cache_qa.hpp"

#include "stream_read.hpp"

#include <algorithm>
#include <cmath>
#include <optional>
#include <random>
#include <span>
#include <string>

#include <frugal/backend/eigen/similarity_scan.hpp>
#include <frugal/cache/semantic_cache.hpp>

#if FRUGAL_BENCH_HAVE_FAISS
#include <faiss/IndexFlat.h>
#include <omp.h>
#endif

namespace frugal::bench {
namespace {

std::vector<float> unit_rows(std::size_t rows, std::size_t dim, std::mt19937_64& rng) {
    std::normal_distribution<float> z;
    std::vector<float> v(rows * dim);
    for (auto& x : v) x = z(rng);
    for (std::size_t r = 0; r < rows; ++r) {
        const std::span<float> row(v.data() + r * dim, dim);
        retrieve::normalize_into(row, row);
    }
    return v;
}

// Queries: even ones a stored entry plus noise of about a third of its length (cosine about
// 0.95: hits at tau 0.9), odd ones a fresh direction (a miss).
std::vector<float> queries_of(const std::vector<float>& bank, std::size_t entries, const qa_bench_settings& s,
                              std::mt19937_64& rng) {
    std::vector<float> q = unit_rows(s.queries, s.dim, rng);
    std::normal_distribution<float> z(0.0f, 0.33f / std::sqrt(static_cast<float>(s.dim)));
    for (std::size_t i = 0; i < s.queries; i += 2) {
        const std::size_t e = rng() % entries;
        for (std::size_t d = 0; d < s.dim; ++d) q[i * s.dim + d] = bank[e * s.dim + d] + z(rng);
    }
    return q;
}

// Each query's answer: the matched entry, or nullopt for a miss.
using decisions = std::vector<std::optional<std::size_t>>;

template <class Index>
record time_bank(const char* impl, const std::vector<float>& bank, const std::vector<float>& q, std::size_t entries,
                 const qa_bench_settings& s, decisions& got) {
    cache::semantic_cache<std::string, std::uint32_t, Index> qa(entries, s.tau, Index(s.dim));
    std::vector<std::uint64_t> entry_of_id;  // ids are the bank's, entries the rows of `bank`
    for (std::size_t e = 0; e < entries; ++e) {
        const auto id = *qa.insert("stored " + std::to_string(e), std::span<const float>(bank).subspan(e * s.dim, s.dim));
        entry_of_id.resize(std::max<std::size_t>(entry_of_id.size(), id + 1));
        entry_of_id[id] = e;
    }
    std::vector<std::string> texts;
    for (std::size_t i = 0; i < s.queries; ++i) texts.push_back("query " + std::to_string(i));
    got.assign(s.queries, std::nullopt);
    const timing t = measure([&] {
        for (std::size_t i = 0; i < s.queries; ++i) {
            const auto hit = qa.lookup(texts[i], std::span<const float>(q).subspan(i * s.dim, s.dim));
            got[i] = hit ? std::optional<std::size_t>(entry_of_id[hit->id]) : std::nullopt;
        }
    });
    return {{"kind", "qa-bank"}, {"impl", impl}, {"entries", entries}, {"dim", s.dim}, {"queries", s.queries},
            {"lookup_us", t.median_ms * 1e3 / static_cast<double>(s.queries)}};
}

double share_equal(const decisions& a, const decisions& b) {
    std::size_t same = 0;
    for (std::size_t i = 0; i < a.size(); ++i) same += a[i] == b[i] ? 1 : 0;
    return static_cast<double>(same) / static_cast<double>(a.size());
}

}  // namespace

std::vector<record> qa_records(const qa_bench_settings& s) {
    std::vector<record> out;
    for (const std::size_t entries : s.entries) {
        std::mt19937_64 rng(s.seed);
        const std::vector<float> bank = unit_rows(entries, s.dim, rng);
        const std::vector<float> q = queries_of(bank, entries, s, rng);
        std::vector<record> rows;
        std::vector<decisions> got(2);
        rows.push_back(time_bank<retrieve::flat_similarity_index<>>("frugal-reference", bank, q, entries, s, got[0]));
        rows.push_back(time_bank<eigen::flat_similarity_index>("frugal-eigen", bank, q, entries, s, got[1]));
#if FRUGAL_BENCH_HAVE_FAISS
        const int threads = omp_get_max_threads();
        omp_set_num_threads(1);
        ::faiss::IndexFlatIP index(static_cast<::faiss::Index::idx_t>(s.dim));
        index.add(static_cast<::faiss::Index::idx_t>(entries), bank.data());
        decisions want(s.queries);
        float sim = 0;
        ::faiss::Index::idx_t label = 0;
        std::vector<float> unit(s.dim);
        const timing t = measure([&] {  // one query a call, normalized first, as a cache lookup is
            for (std::size_t i = 0; i < s.queries; ++i) {
                retrieve::normalize_into(std::span<const float>(q).subspan(i * s.dim, s.dim), unit);
                index.search(1, unit.data(), 1, &sim, &label);
                want[i] = sim >= s.tau ? std::optional<std::size_t>(static_cast<std::size_t>(label)) : std::nullopt;
            }
        });
        omp_set_num_threads(threads);
        const double faiss_us = t.median_ms * 1e3 / static_cast<double>(s.queries);
        for (std::size_t k = 0; k < rows.size(); ++k) {
            rows[k]["time_ratio"] = rows[k]["lookup_us"].get<double>() / faiss_us;
            rows[k]["agreement"] = share_equal(got[k], want);
        }
        rows.push_back({{"kind", "qa-bank"}, {"impl", "faiss-flat-ip"}, {"entries", entries}, {"dim", s.dim},
                        {"queries", s.queries}, {"lookup_us", faiss_us}, {"time_ratio", 1.0}, {"agreement", 1.0}});
#endif
        // The roofline: one streaming read of the bank's embedding bytes, one thread.
        const stream_read reader({{bank.data(), bank.size() * sizeof(float)}}, 1);
        const double roofline_us = measure([&] { reader(1); }).median_ms * 1e3;
        for (auto& r : rows) {
            r["roofline_ratio"] = roofline_us / r["lookup_us"].get<double>();
            out.push_back(std::move(r));
        }
    }
    return out;
}

}  // namespace frugal::bench
