// ivf_flat and flat_similarity_index against brute-force search. Vectors and queries have
// small integer coordinates, so every distance and inner product is exact in float: ties
// are real and must break on the smaller id, and results must equal the oracle exactly.
#include <frugal/retrieve/ivf_flat.hpp>
#include <frugal/retrieve/similarity_index.hpp>
#include <frugal/retrieve/top_k.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <map>
#include <span>
#include <utility>
#include <vector>

#include "fuzz.hpp"

namespace {

using frugal::fuzz::input;

// One byte per coordinate, in [-4, 4].
float coordinate(input& in) { return static_cast<float>(static_cast<int>(in.take<std::uint8_t>() % 9) - 4); }

std::vector<float> vector_of(input& in, std::size_t dim) {
    std::vector<float> v(dim);
    for (auto& x : v) x = coordinate(in);
    return v;
}

double l2(std::span<const float> a, std::span<const float> b) {
    double s = 0.0;
    for (std::size_t i = 0; i < a.size(); ++i) s += (double(a[i]) - b[i]) * (double(a[i]) - b[i]);
    return s;
}

// The k nearest of `ids` by exact squared distance, then smaller id.
std::vector<std::pair<float, std::uint64_t>> brute_force(const std::vector<float>& data, std::size_t dim,
                                                         std::span<const float> q, std::vector<std::size_t> ids,
                                                         std::size_t k) {
    std::vector<std::pair<float, std::uint64_t>> d;
    for (std::size_t id : ids)
        d.emplace_back(static_cast<float>(l2(std::span<const float>(data).subspan(id * dim, dim), q)), id);
    std::sort(d.begin(), d.end());
    d.resize(std::min(k, d.size()));
    return d;
}

void fuzz_ivf_flat(input& in) {
    const std::size_t dim = 1 + in.below(4), n = 1 + in.below(48);
    const std::size_t lists = 1 + in.below(std::min<std::size_t>(n, 7)), iterations = in.below(4);
    const std::uint64_t seed = in.take<std::uint8_t>();
    std::vector<float> data;
    for (std::size_t i = 0; i < n; ++i) {
        const auto v = vector_of(in, dim);
        data.insert(data.end(), v.begin(), v.end());
    }
    const auto ix = frugal::retrieve::ivf_flat::train(data, dim, lists, iterations, seed);
    FRUGAL_FUZZ_CHECK(ix.size() == n && ix.lists() == lists && ix.dim() == dim, "shape");
    // Every row is in exactly one list, the list of a nearest centroid (k-means' last
    // assignment; centroids are float means, so up to rounding).
    std::vector<int> seen(n, 0);
    for (std::size_t c = 0; c < lists; ++c)
        for (std::size_t id : ix.members(c)) {
            FRUGAL_FUZZ_CHECK(id < n && ++seen[id] == 1 && ix.list_of(id) == c, "row %zu in list %zu", id, c);
            FRUGAL_FUZZ_CHECK(std::equal(ix.vector(id).begin(), ix.vector(id).end(), data.begin() + id * dim),
                              "row %zu stored wrong", id);
            const double own = l2(ix.vector(id), ix.centroid(c));
            for (std::size_t o = 0; o < lists; ++o)
                FRUGAL_FUZZ_CHECK(own <= l2(ix.vector(id), ix.centroid(o)) + 1e-4 * (1.0 + own),
                                  "row %zu is nearer list %zu than its list %zu", id, o, c);
        }
    for (int q = 0; q < 4 && !in.empty(); ++q) {
        const auto query = vector_of(in, dim);
        const std::size_t k = 1 + in.below(n + 2), nprobe = 1 + in.below(lists);
        // The probe: nprobe distinct lists, nearest first, none nearer left out.
        const auto probe = ix.probe(query, nprobe);
        FRUGAL_FUZZ_CHECK(probe.size() == nprobe, "probe of %zu lists for nprobe %zu", probe.size(), nprobe);
        std::vector<bool> probed(lists, false);
        for (std::size_t i = 0; i < probe.size(); ++i) {
            FRUGAL_FUZZ_CHECK(probe[i] < lists && !probed[probe[i]], "probe list %zu", probe[i]);
            probed[probe[i]] = true;
            const double d = l2(query, ix.centroid(probe[i]));
            if (i > 0) FRUGAL_FUZZ_CHECK(l2(query, ix.centroid(probe[i - 1])) <= d + 1e-4 * (1.0 + d), "probe order");
            for (std::size_t o = 0; o < lists; ++o)
                if (!probed[o] && i + 1 == probe.size())
                    FRUGAL_FUZZ_CHECK(d <= l2(query, ix.centroid(o)) + 1e-4 * (1.0 + d), "list %zu left out", o);
        }
        // Full probe: exactly the brute force over all rows.
        std::vector<std::size_t> all(n), members;
        for (std::size_t i = 0; i < n; ++i) all[i] = i;
        std::vector<std::uint64_t> want;
        for (const auto& e : brute_force(data, dim, query, all, k)) want.push_back(e.second);
        FRUGAL_FUZZ_CHECK(ix.search(query, k, lists) == want, "full-probe search differs from brute force");
        // Partial probe, resumed in chunks: the brute force over the probed lists' rows.
        for (std::size_t c : probe) members.insert(members.end(), ix.members(c).begin(), ix.members(c).end());
        frugal::retrieve::top_k heap(k);
        for (std::size_t at = 0, step = 1 + in.below(3); at < probe.size(); at += step)
            ix.search_lists(query, std::span<const std::size_t>(probe).subspan(at, std::min(step, probe.size() - at)), heap);
        FRUGAL_FUZZ_CHECK(heap.sorted() == brute_force(data, dim, query, members, k), "resumed search differs");
    }
    // Bad input is a frugal::error.
    auto rejects = [](auto&& f) {
        try {
            f();
        } catch (const frugal::invalid_argument&) {
            return true;
        } catch (const frugal::out_of_range&) {
            return true;
        }
        return false;
    };
    std::vector<float> q(dim, 0.0f);
    FRUGAL_FUZZ_CHECK(rejects([&] { (void)ix.probe(q, lists + 1); }), "nprobe > lists accepted");
    FRUGAL_FUZZ_CHECK(rejects([&] { (void)ix.probe(std::vector<float>(dim + 1), 1); }), "wrong dimension accepted");
    q[in.below(dim)] = std::numeric_limits<float>::quiet_NaN();
    FRUGAL_FUZZ_CHECK(rejects([&] { (void)ix.search(q, 1, 1); }), "NaN query accepted");
    frugal::retrieve::top_k heap(1);
    const std::vector<std::size_t> missing{lists + in.below(3)};
    FRUGAL_FUZZ_CHECK(rejects([&] { ix.search_lists(std::vector<float>(dim), missing, heap); }), "bad list accepted");
}

void fuzz_flat_index(input& in) {
    const std::size_t dim = 1 + in.below(4);
    frugal::retrieve::flat_similarity_index<> index(dim);
    std::map<std::size_t, std::vector<float>> model;
    while (!in.empty()) {
        switch (in.below(5)) {
            case 0:
            case 1: {
                const std::size_t slot = in.below(12);
                model[slot] = vector_of(in, dim);
                index.store(slot, model[slot]);
                break;
            }
            case 2: {
                const std::size_t slot = in.below(12);
                try {
                    index.erase(slot);
                    FRUGAL_FUZZ_CHECK(model.erase(slot) == 1, "erased empty slot %zu", slot);
                } catch (const frugal::out_of_range&) {
                    FRUGAL_FUZZ_CHECK(!model.contains(slot), "could not erase slot %zu", slot);
                }
                break;
            }
            case 3: {  // a slot too large to hold, or a non-finite vector: an error, no change
                auto v = vector_of(in, dim);
                const bool huge = in.below(2) == 0;
                if (!huge) v[in.below(dim)] = std::numeric_limits<float>::infinity();
                const std::size_t slot = huge ? std::numeric_limits<std::size_t>::max() - in.below(4) : in.below(12);
                bool threw = false;
                try {
                    index.store(slot, v);
                } catch (const frugal::invalid_argument&) {
                    threw = true;
                }
                FRUGAL_FUZZ_CHECK(threw, "store of slot %zu (huge %d) accepted", slot, int(huge));
                break;
            }
            default: {
                const auto q = vector_of(in, dim);
                const auto got = index.nearest(q);
                FRUGAL_FUZZ_CHECK(got.has_value() == !model.empty(), "nearest on %zu slots", model.size());
                if (!got) break;
                double best = -std::numeric_limits<double>::infinity();
                std::size_t best_slot = 0;
                for (const auto& [s, v] : model) {
                    double ip = 0.0;
                    for (std::size_t d = 0; d < dim; ++d) ip += double(v[d]) * q[d];
                    if (ip > best) best = ip, best_slot = s;  // map order: ties keep the smaller slot
                }
                FRUGAL_FUZZ_CHECK(got->slot == best_slot && got->similarity == static_cast<float>(best),
                                  "nearest slot %zu (%g), brute force %zu (%g)", got->slot, double(got->similarity),
                                  best_slot, best);
                const auto stored = index.vector(best_slot);
                FRUGAL_FUZZ_CHECK(std::equal(stored.begin(), stored.end(), model[best_slot].begin()), "vector()");
            }
        }
    }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    input in(data, size);
    if (in.below(2) == 0) fuzz_ivf_flat(in);
    else fuzz_flat_index(in);
    return 0;
}
