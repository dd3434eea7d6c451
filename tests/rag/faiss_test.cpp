// Tests of the FAISS adapter (backend/faiss): its searches against FAISS's own
// IndexIVFFlat::search, chunked (resumable) search against one call, and frugal's list
// order. Built only when libfaiss-dev is installed.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <random>
#include <span>
#include <vector>

#include <faiss/IndexFlat.h>
#include <faiss/IndexIVFFlat.h>
#include <faiss/IndexIVFPQ.h>
#include <gtest/gtest.h>

#include "frugal/backend/faiss/faiss_ivf.hpp"
#include "frugal/rag/cluster_order.hpp"
#include "frugal/rag/tiered_ivf.hpp"
#include "frugal/retrieve/top_k.hpp"

namespace {

using frugal::faiss::idx_t;

constexpr std::size_t dim = 16, n = 4000, lists = 32, queries = 24, k = 10, nprobe = 8;

// A trained and filled IVF-Flat over a Gaussian mixture, and queries drawn like the data.
struct fixture {
    faiss::IndexFlatL2 quantizer{static_cast<idx_t>(dim)};
    faiss::IndexIVFFlat index{&quantizer, dim, lists};
    std::vector<float> data, q;

    fixture() {
        std::mt19937_64 rng(3);
        std::normal_distribution<float> z;
        std::vector<float> centers(20 * dim);
        for (auto& c : centers) c = z(rng);  // overlapping topics: results spread over lists
        auto draw = [&](std::vector<float>& out, std::size_t rows) {
            for (std::size_t i = 0; i < rows; ++i)
                for (std::size_t d = 0; d < dim; ++d) out.push_back(centers[(i % 20) * dim + d] + z(rng));
        };
        draw(data, n);
        draw(q, queries);
        index.train(static_cast<idx_t>(n), data.data());
        index.add(static_cast<idx_t>(n), data.data());
        index.nprobe = nprobe;
    }
    // FAISS's own answer (the oracle): IndexIVF::search with nprobe lists.
    std::pair<std::vector<float>, std::vector<idx_t>> faiss_search() {
        std::vector<float> d(queries * k);
        std::vector<idx_t> l(queries * k);
        index.search(static_cast<idx_t>(queries), q.data(), static_cast<idx_t>(k), d.data(), l.data());
        return {d, l};
    }
    // The lists FAISS's quantizer assigns, nearest first, queries x nprobe.
    std::vector<idx_t> assignment() {
        std::vector<float> d(queries * nprobe);
        std::vector<idx_t> a(queries * nprobe);
        quantizer.search(static_cast<idx_t>(queries), q.data(), static_cast<idx_t>(nprobe), d.data(), a.data());
        return a;
    }
    std::span<const float> query(std::size_t i) const { return std::span<const float>(q).subspan(i * dim, dim); }
};

// The resumable search's current results equal FAISS's, bit for bit.
void expect_faiss_results(const frugal::faiss::ivf_list_search& s, const std::vector<float>& want_d,
                          const std::vector<idx_t>& want_l) {
    const auto [d, l] = s.results();
    EXPECT_EQ(l, want_l);
    EXPECT_EQ(d, want_d);
}

// Columns [from, to) of a queries x nprobe assignment, row-major.
std::vector<idx_t> columns(const std::vector<idx_t>& a, std::size_t from, std::size_t to) {
    std::vector<idx_t> out;
    for (std::size_t i = 0; i < queries; ++i)
        for (std::size_t j = from; j < to; ++j) out.push_back(a[i * nprobe + j]);
    return out;
}

TEST(FaissIvf, OneChunkInFaissOrderEqualsFaissSearch) {
    fixture f;
    const auto [want_d, want_l] = f.faiss_search();
    frugal::faiss::ivf_list_search s(f.index, f.q, queries, k);
    s.search_chunk(f.assignment(), nprobe);
    expect_faiss_results(s, want_d, want_l);  // bitwise: the same scanner on the same heaps
}

TEST(FaissIvf, ResumableChunksEqualOneShot) {
    fixture f;
    const auto [want_d, want_l] = f.faiss_search();
    const auto a = f.assignment();
    frugal::faiss::ivf_list_search s(f.index, f.q, queries, k);
    s.search_chunk(columns(a, 0, 1), 1);
    const auto partial = s.results();  // reading the results keeps the heaps
    EXPECT_NE(partial.second, want_l);  // the later lists still change the top-k
    s.search_chunk(columns(a, 1, 4), 3);
    s.search_chunk(columns(a, 4, nprobe), nprobe - 4);
    expect_faiss_results(s, want_d, want_l);
}

TEST(FaissIvf, ConceptAdapterMatchesFaissInProbeOrderAndInChunks) {
    fixture f;
    const auto [want_d, want_l] = f.faiss_search();
    const auto a = f.assignment();
    const frugal::faiss::ivf_adapter ivf(f.index);
    EXPECT_EQ(ivf.lists(), lists);
    std::size_t total = 0;
    for (std::size_t c = 0; c < lists; ++c) total += ivf.list_size(c);
    EXPECT_EQ(total, n);
    for (std::size_t i = 0; i < queries; ++i) {
        const auto probe = ivf.probe(f.query(i), nprobe);
        ASSERT_EQ(probe.size(), nprobe);
        for (std::size_t j = 0; j < nprobe; ++j) EXPECT_EQ(static_cast<idx_t>(probe[j]), a[i * nprobe + j]);
        const std::vector<std::uint64_t> want(want_l.begin() + static_cast<std::ptrdiff_t>(i * k),
                                              want_l.begin() + static_cast<std::ptrdiff_t>((i + 1) * k));
        EXPECT_EQ(frugal::retrieve::ivf_search(ivf, f.query(i), k, nprobe), want) << "query " << i;
        // Resumed chunk by chunk into a frugal top_k (seeded FAISS heaps).
        frugal::retrieve::top_k heap(k);
        const std::span<const std::size_t> p(probe);
        ivf.search_lists(f.query(i), p.subspan(0, 2), heap);
        ivf.search_lists(f.query(i), p.subspan(2, 5), heap);
        ivf.search_lists(f.query(i), p.subspan(7), heap);
        EXPECT_EQ(heap.ids(), want) << "query " << i;
        for (std::size_t j = 0; j < k; ++j) EXPECT_EQ(heap.sorted()[j].first, want_d[i * k + j]);
    }
}

TEST(FaissIvf, AnyListOrderGivesTheSameTopK) {
    // frugal chooses the scan order (e.g. similarity-aware); the final top-k of the same
    // lists does not depend on it.
    fixture f;
    const auto [want_d, want_l] = f.faiss_search();
    auto a = f.assignment();
    for (std::size_t i = 0; i < queries; ++i)
        std::reverse(a.begin() + static_cast<std::ptrdiff_t>(i * nprobe),
                     a.begin() + static_cast<std::ptrdiff_t>((i + 1) * nprobe));
    frugal::faiss::ivf_list_search s(f.index, f.q, queries, k);
    s.search_chunk(a, nprobe);
    expect_faiss_results(s, want_d, want_l);
}

TEST(FaissIvf, TieredAndReorderedSearchesOverFaissGiveFaissResults) {
    // frugal's retrieval pieces over the adapter: the similarity-aware order from the
    // previous query's results, and a fast tier holding the hot lists, merged.
    fixture f;
    const auto [want_d, want_l] = f.faiss_search();
    const frugal::faiss::ivf_adapter ivf(f.index);
    frugal::rag::tiered_ivf tiers(ivf, 8, 2, 0.5, dim * sizeof(float), {.load_gb_per_s = 1e9, .fast_call_ms = 0.0});
    frugal::rag::retrieval_history history(20);
    std::size_t fast = 0;
    for (std::size_t i = 0; i < queries; ++i) {
        const auto order = history.order(ivf.probe(f.query(i), nprobe));
        frugal::retrieve::top_k heap(k);
        fast += tiers.search_lists(f.query(i), order, heap).fast.size();
        tiers.end_substage(1.0);
        const std::vector<std::uint64_t> want(want_l.begin() + static_cast<std::ptrdiff_t>(i * k),
                                              want_l.begin() + static_cast<std::ptrdiff_t>((i + 1) * k));
        EXPECT_EQ(heap.ids(), want) << "query " << i;
        std::vector<std::pair<std::uint64_t, std::size_t>> found;
        for (std::uint64_t id : heap.ids()) {  // the list FAISS put each result in
            idx_t list = -1;
            f.quantizer.assign(1, f.data.data() + id * dim, &list);
            found.emplace_back(id, static_cast<std::size_t>(list));
        }
        history.remember(found, order);
    }
    EXPECT_GT(fast, 0u);
}

TEST(FaissIvf, ResidualCodecGetsTheCoarseDistances) {
    // IVF-PQ scans with precomputed tables that add each list's query-to-centroid distance;
    // the adapter passes the distances IndexIVF::search would (10 queries: FAISS's quantizer
    // computes them with the same kernel, not BLAS).
    fixture f;
    faiss::IndexFlatL2 quantizer(static_cast<idx_t>(dim));
    faiss::IndexIVFPQ pq(&quantizer, dim, lists, 4, 6);
    pq.train(static_cast<idx_t>(n), f.data.data());
    pq.add(static_cast<idx_t>(n), f.data.data());
    pq.nprobe = nprobe;
    const std::size_t few = 10;
    std::vector<float> want_d(few * k), cd(few * nprobe);
    std::vector<idx_t> want_l(few * k), a(few * nprobe);
    pq.search(static_cast<idx_t>(few), f.q.data(), static_cast<idx_t>(k), want_d.data(), want_l.data());
    quantizer.search(static_cast<idx_t>(few), f.q.data(), static_cast<idx_t>(nprobe), cd.data(), a.data());
    frugal::faiss::ivf_list_search s(pq, std::span<const float>(f.q).first(few * dim), few, k);
    s.search_chunk(a, nprobe);
    expect_faiss_results(s, want_d, want_l);
}

TEST(FaissIvf, RejectsBadInput) {
    fixture f;
    const frugal::faiss::ivf_adapter ivf(f.index);
    frugal::retrieve::top_k heap(k);
    const std::vector<std::size_t> bad{lists};
    EXPECT_THROW(ivf.search_lists(f.query(0), bad, heap), frugal::out_of_range);
    EXPECT_THROW((void)ivf.probe(std::vector<float>(dim + 1), 4), frugal::invalid_argument);
    EXPECT_THROW((void)ivf.probe(f.query(0), lists + 1), frugal::invalid_argument);
    frugal::faiss::ivf_list_search s(f.index, f.q, queries, k);
    EXPECT_THROW(s.search_chunk(std::vector<idx_t>(queries * 2 - 1), 2), frugal::invalid_argument);
    EXPECT_THROW(frugal::faiss::ivf_list_search(f.index, f.q, queries + 1, k), frugal::invalid_argument);
    faiss::IndexFlatL2 q2(static_cast<idx_t>(dim));
    faiss::IndexIVFFlat untrained(&q2, dim, lists);
    EXPECT_THROW(frugal::faiss::ivf_adapter{untrained}, frugal::invalid_argument);
    faiss::IndexFlatIP q3(static_cast<idx_t>(dim));
    faiss::IndexIVFFlat ip(&q3, dim, lists, faiss::METRIC_INNER_PRODUCT);
    ip.train(static_cast<idx_t>(n), f.data.data());
    EXPECT_THROW(frugal::faiss::ivf_adapter{ip}, frugal::invalid_argument);
}

}  // namespace
