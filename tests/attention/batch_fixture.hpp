#pragma once
// A ragged batch with its K/V laid out in a shuffled page pool (or contiguously, one
// page per sequence), in any storage dtype, plus the float64 oracle per sequence.

#include <frugal/attention/batch_attention.hpp>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <vector>

#include "attention_reference.hpp"

namespace frugal::testing {

struct batch_spec {
    std::vector<std::size_t> q_lens, kv_lens;
    std::size_t q_heads = 4, kv_heads = 2, head_dim = 16, page_size = 16;
    attention::kv_layout layout = attention::kv_layout::nhd;
    bool interleaved = false;
    unsigned seed = 1;
};

/// Values are drawn in fp32 and rounded to T once: the oracle sees exactly what frugal reads.
template <class T>
struct batch_data {
    batch_spec spec;
    std::vector<std::size_t> qo_indptr;
    std::vector<T> q;                        // [tokens][q_heads][d]
    std::vector<std::vector<float>> k, v;    // per sequence [kv_heads][kv_len][d], as rounded values
    std::vector<float> qf;                   // q as rounded values

    explicit batch_data(const batch_spec& s) : spec(s), qo_indptr{0} {
        for (std::size_t n : s.q_lens) qo_indptr.push_back(qo_indptr.back() + n);
        const std::size_t d = s.head_dim;
        const auto round = [](float x) { return attention::to_float(attention::from_float<T>(x)); };
        qf = normal_floats(qo_indptr.back() * s.q_heads * d, s.seed);
        for (auto& x : qf) x = round(x);
        for (float x : qf) q.push_back(attention::from_float<T>(x));
        for (std::size_t i = 0; i < s.kv_lens.size(); ++i) {
            k.push_back(normal_floats(s.kv_heads * s.kv_lens[i] * d, s.seed * 100 + 2 * unsigned(i) + 1));
            v.push_back(normal_floats(s.kv_heads * s.kv_lens[i] * d, s.seed * 100 + 2 * unsigned(i) + 2));
            for (auto* t : {&k.back(), &v.back()})
                for (auto& x : *t) x = round(x);
        }
    }
    [[nodiscard]] std::size_t tokens() const { return qo_indptr.back(); }
    [[nodiscard]] attention::batch_shape shape() const {
        return {.q_heads = spec.q_heads, .kv_heads = spec.kv_heads, .head_dim = spec.head_dim,
                .qo_indptr = qo_indptr, .kv_lens = spec.kv_lens};
    }
    [[nodiscard]] attention::heads_view<const T> q_view() const {
        return attention::heads_view<const T>::token_major(q.data(), tokens(), spec.q_heads, spec.head_dim);
    }

    /// float64 attention of sequence s for every query head: [q_heads][q_len][d] and LSE.
    [[nodiscard]] ref_result reference(std::size_t s, const ref_mask_spec& mask) const {
        const std::size_t d = spec.head_dim, hq = spec.q_heads, q0 = qo_indptr[s], n = spec.kv_lens[s];
        return ref_attention(
            hq, spec.kv_heads, spec.q_lens[s], n, d, 1.0 / std::sqrt(double(d)), mask,
            [&](std::size_t h, std::size_t i, std::size_t c) { return qf[((q0 + i) * hq + h) * d + c]; },
            [&](std::size_t h, std::size_t j, std::size_t c) { return k[s][(h * n + j) * d + c]; },
            [&](std::size_t h, std::size_t j, std::size_t c) { return v[s][(h * n + j) * d + c]; });
    }
};

/// A page pool holding a batch's K/V: shuffled pages of `spec.page_size` tokens, or with
/// `contiguous` one page of the longest length per sequence, in order.
template <class T>
struct kv_pool {
    std::vector<std::int32_t> indptr{0}, indices, last;
    std::vector<T> k, v;  // v unused when interleaved
    std::size_t pages = 0, page_size = 0;
    const batch_data<T>* data;

    kv_pool(const batch_data<T>& b, bool contiguous) : data(&b) {
        const batch_spec& s = b.spec;
        page_size = contiguous ? *std::max_element(s.kv_lens.begin(), s.kv_lens.end()) : s.page_size;
        for (std::size_t n : s.kv_lens) {
            const std::size_t p = (n + page_size - 1) / page_size;
            indptr.push_back(indptr.back() + std::int32_t(p));
            last.push_back(std::int32_t(n - (p - 1) * page_size));
        }
        pages = std::size_t(indptr.back()) + (contiguous ? 0 : 3);  // a few unused pages
        indices.resize(std::size_t(indptr.back()));
        std::iota(indices.begin(), indices.end(), 0);
        if (!contiguous) std::shuffle(indices.begin(), indices.end(), std::mt19937(s.seed + 7));
        const std::size_t page = page_size * s.kv_heads * s.head_dim;
        const float poison = std::numeric_limits<float>::quiet_NaN();  // never read: unused slots
        k.assign(pages * page * (s.interleaved ? 2 : 1), attention::from_float<T>(poison));
        v.assign(s.interleaved ? 0 : pages * page, attention::from_float<T>(poison));
        const auto kv = make_view<T>(k.data(), v.data());
        const auto& g = kv.geometry();
        for (std::size_t q = 0; q < s.kv_lens.size(); ++q)
            for (std::size_t h = 0; h < s.kv_heads; ++h)
                for (std::size_t t = 0; t < s.kv_lens[q]; ++t)
                    for (std::size_t c = 0; c < s.head_dim; ++c) {
                        const std::size_t at = g.row_offset(kv.table().page_of(q, t), h, t % page_size) + c;
                        const std::size_t src = (h * s.kv_lens[q] + t) * s.head_dim + c;
                        kv.k_pool()[at] = attention::from_float<T>(b.k[q][src]);
                        kv.v_pool()[at] = attention::from_float<T>(b.v[q][src]);
                    }
    }
    [[nodiscard]] attention::page_table table() const { return {indptr, indices, last, page_size}; }
    [[nodiscard]] attention::paged_kv<const T> view() const { return make_view<const T>(k.data(), v.data()); }

private:
    template <class U>
    [[nodiscard]] attention::paged_kv<U> make_view(U* kp, U* vp) const {
        const batch_spec& s = data->spec;
        if (s.interleaved) return attention::paged_kv<U>::interleaved(kp, pages, s.kv_heads, s.head_dim, s.layout, table());
        return attention::paged_kv<U>::separate(kp, vp, pages, s.kv_heads, s.head_dim, s.layout, table());
    }
};

/// The output of a batch run, as floats [tokens][q_heads][d], and its LSE [q_heads][tokens].
struct batch_result {
    std::vector<float> out, lse;
};

template <class T, class Backend>
batch_result run_batch(const attention::batch_plan& plan, const batch_data<T>& b, const kv_pool<T>& pool,
                       Backend&& backend, std::size_t pool_workers = 0) {
    const std::size_t tokens = b.tokens(), hq = b.spec.q_heads, d = b.spec.head_dim;
    std::vector<T> out(tokens * hq * d, attention::from_float<T>(std::numeric_limits<float>::quiet_NaN()));
    batch_result r{{}, std::vector<float>(hq * tokens, std::numeric_limits<float>::quiet_NaN())};
    std::vector<float> ws(plan.workspace_bytes() / sizeof(float), std::numeric_limits<float>::quiet_NaN());
    const auto ov = attention::heads_view<T>::token_major(out.data(), tokens, hq, d);
    const matrix_view<float> lv(r.lse.data(), hq, tokens);
    if (pool_workers == 0) {
        inline_executor serial;
        attention::batch::run(plan, backend, b.q_view(), pool.view(), ov, lv, std::span<float>(ws), serial);
    } else {
        thread_pool threads(pool_workers);
        attention::batch::run(plan, backend, b.q_view(), pool.view(), ov, lv, std::span<float>(ws), threads);
    }
    for (const T& x : out) r.out.push_back(attention::to_float(x));
    return r;
}

/// max |got - float64| over every output element and (separately) every LSE, per the
/// whole batch; `rel_out` is the error divided by the largest |output| of its row (at
/// least 1e-3: a row that cancels to nearly zero is held to an absolute bound instead,
/// since fp16 stores values below 6e-5 as subnormals with a fixed 6e-8 spacing).
struct batch_error {
    double out = 0, lse = 0, rel_out = 0;
};

template <class T>
batch_error compare(const batch_data<T>& b, const batch_result& r, const ref_mask_spec& mask) {
    batch_error e;
    const std::size_t hq = b.spec.q_heads, d = b.spec.head_dim, tokens = b.tokens();
    for (std::size_t s = 0; s < b.spec.kv_lens.size(); ++s) {
        const auto want = b.reference(s, mask);
        const std::size_t ql = b.spec.q_lens[s];
        for (std::size_t h = 0; h < hq; ++h)
            for (std::size_t i = 0; i < ql; ++i) {
                const std::size_t row = b.qo_indptr[s] + i;
                double mag = 0, worst = 0;
                for (std::size_t c = 0; c < d; ++c) {
                    const double w = want.out[(h * ql + i) * d + c];
                    const double diff = std::abs(double(r.out[(row * hq + h) * d + c]) - w);
                    worst = std::isnan(diff) ? INFINITY : std::max(worst, diff);
                    mag = std::max(mag, std::abs(w));
                }
                e.out = std::max(e.out, worst);
                e.rel_out = std::max(e.rel_out, worst / std::max(mag, 1e-3));
                const double wl = want.lse[h * ql + i], gl = r.lse[h * tokens + row];
                e.lse = std::max(e.lse, std::isinf(wl) ? (gl == wl ? 0.0 : INFINITY)
                                                       : (std::isnan(gl) ? INFINITY : std::abs(gl - wl)));
            }
    }
    return e;
}

}  // namespace frugal::testing
