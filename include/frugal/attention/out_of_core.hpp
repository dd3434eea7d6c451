#pragma once
/// @file
/// Attention when K/V do not fit the budget: KV blocks streamed from host storage or a
/// file through the tile loop, and prefix reuse by merging partial results
/// (GRATING 4.3 chunked execution, PerCache 4.2.2 QKV cache reuse).

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <limits>
#include <memory>
#include <span>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "frugal/attention/heads_view.hpp"
#include "frugal/attention/online_softmax.hpp"
#include "frugal/core/thread_pool.hpp"
#include "frugal/attention/tiled_attention.hpp"
#include "frugal/core/concepts.hpp"
#include "frugal/core/error.hpp"
#include "frugal/core/executor.hpp"
#include "frugal/core/memory_budget.hpp"
#include "frugal/attention/attention_plan.hpp"

namespace frugal::attention {

/// Where streamed K/V rows come from: `load(head, begin, k, v)` fills `k` and `v`
/// (`n x head_dim` views) with rows [begin, begin + n) of KV head `head`.
/// @code
/// struct my_source {
///     std::size_t kv_heads() const; std::size_t tokens() const; std::size_t head_dim() const;
///     void load(std::size_t head, std::size_t begin, frugal::matrix_view<float> k, frugal::matrix_view<float> v);
/// };
/// static_assert(frugal::attention::kv_source<my_source>);
/// @endcode
template <class S>
concept kv_source = requires(S& s, const S& cs, std::size_t i, matrix_view<float> dst) {
    { cs.kv_heads() } -> std::convertible_to<std::size_t>;
    { cs.tokens() } -> std::convertible_to<std::size_t>;
    { cs.head_dim() } -> std::convertible_to<std::size_t>;
    s.load(i, i, dst, dst);
};

/// K/V held in host memory (the caller's views), copied block by block as a device
/// would receive them.
/// @code
/// frugal::attention::memory_kv_source src(k_view, v_view);
/// @endcode
class memory_kv_source {
public:
    memory_kv_source(heads_view<const float> k, heads_view<const float> v) : k_(k), v_(v) {
        FRUGAL_CHECK(k.heads() == v.heads() && k.tokens() == v.tokens() && k.dim() == v.dim(), "memory_kv_source: k is ",
                     k.heads(), " x ", k.tokens(), " x ", k.dim(), ", v is ", v.heads(), " x ", v.tokens(), " x ",
                     v.dim());
    }
    [[nodiscard]] std::size_t kv_heads() const noexcept { return k_.heads(); }
    [[nodiscard]] std::size_t tokens() const noexcept { return k_.tokens(); }
    [[nodiscard]] std::size_t head_dim() const noexcept { return k_.dim(); }
    void load(std::size_t head, std::size_t begin, matrix_view<float> k, matrix_view<float> v) const {
        const auto ks = k_.head(head).row_block(begin, k.rows()), vs = v_.head(head).row_block(begin, v.rows());
        for (std::size_t r = 0; r < k.rows(); ++r) {
            std::copy_n(ks.row(r).data(), k.cols(), k.row(r).data());
            std::copy_n(vs.row(r).data(), v.cols(), v.row(r).data());
        }
    }

private:
    heads_view<const float> k_, v_;
};
static_assert(kv_source<memory_kv_source>);

/// K/V in a raw float32 file: all K heads `[kv_heads][tokens][head_dim]`, then all V
/// heads in the same layout (what `write_kv_file` writes). A short file is rejected at
/// open; read errors throw `frugal::runtime_error`.
/// @code
/// frugal::attention::write_kv_file("prefix.kv", k_view, v_view);
/// frugal::attention::file_kv_source src("prefix.kv", kv_heads, tokens, head_dim);
/// @endcode
class file_kv_source {
public:
    file_kv_source(const std::filesystem::path& path, std::size_t kv_heads, std::size_t tokens, std::size_t head_dim)
        : file_(std::fopen(path.string().c_str(), "rb")), path_(path.string()), heads_(kv_heads), tokens_(tokens),
          dim_(head_dim) {
        if (!file_) FRUGAL_FAIL(runtime_error, "file_kv_source: cannot open '", path_, "'");
        std::error_code ec;
        const auto size = std::filesystem::file_size(path, ec);
        constexpr std::uintmax_t max_floats = std::numeric_limits<std::uintmax_t>::max() / (2 * sizeof(float));
        FRUGAL_CHECK(kv_heads > 0 && tokens > 0 && head_dim > 0 && head_dim <= max_floats / kv_heads / tokens,
                     "file_kv_source: ", kv_heads, " KV heads x ", tokens, " tokens x head_dim ", head_dim,
                     " is empty or overflows 64-bit byte sizes");
        const std::uintmax_t want = 2 * sizeof(float) * kv_heads * tokens * head_dim;
        if (ec || size != want) {
            FRUGAL_FAIL(runtime_error, "file_kv_source: '", path_, "' holds ", ec ? 0 : size, " bytes, expected ", want,
                        " for ", kv_heads, " KV heads of ", tokens, " x ", head_dim);
        }
    }
    [[nodiscard]] std::size_t kv_heads() const noexcept { return heads_; }
    [[nodiscard]] std::size_t tokens() const noexcept { return tokens_; }
    [[nodiscard]] std::size_t head_dim() const noexcept { return dim_; }
    void load(std::size_t head, std::size_t begin, matrix_view<float> k, matrix_view<float> v) {
        FRUGAL_CHECK_AS(out_of_range, head < heads_ && begin <= tokens_ && k.rows() <= tokens_ - begin &&
                                          v.rows() == k.rows() && k.cols() == dim_ && v.cols() == dim_,
                        "file_kv_source: rows [", begin,
                        ", ", begin + k.rows(), ") of head ", head, " outside ", heads_, " x ", tokens_);
        read((head * tokens_ + begin) * dim_, k);
        read(((heads_ + head) * tokens_ + begin) * dim_, v);
    }

private:
    void read(std::size_t first_float, matrix_view<float> dst) {
        if (std::fseek(file_.get(), static_cast<long>(first_float * sizeof(float)), SEEK_SET) != 0) {
            FRUGAL_FAIL(runtime_error, "file_kv_source: seek to float ", first_float, " of '", path_, "' failed");
        }
        for (std::size_t r = 0; r < dst.rows(); ++r) {
            if (std::fread(dst.row(r).data(), sizeof(float), dst.cols(), file_.get()) != dst.cols()) {
                FRUGAL_FAIL(runtime_error, "file_kv_source: '", path_, "' is truncated at float ", first_float);
            }
        }
    }
    struct closer {
        void operator()(std::FILE* f) const noexcept { std::fclose(f); }
    };
    std::unique_ptr<std::FILE, closer> file_;
    std::string path_;
    std::size_t heads_, tokens_, dim_;
};
static_assert(kv_source<file_kv_source>);

/// Writes `k` and `v` in `file_kv_source`'s layout.
/// @code
/// frugal::attention::write_kv_file("prefix.kv", k_view, v_view);
/// @endcode
inline void write_kv_file(const std::filesystem::path& path, heads_view<const float> k, heads_view<const float> v) {
    std::unique_ptr<std::FILE, int (*)(std::FILE*)> f(std::fopen(path.string().c_str(), "wb"), &std::fclose);
    if (!f) FRUGAL_FAIL(runtime_error, "write_kv_file: cannot create '", path.string(), "'");
    for (const auto* t : {&k, &v})
        for (std::size_t h = 0; h < t->heads(); ++h)
            for (std::size_t r = 0; r < t->tokens(); ++r) {
                if (std::fwrite(t->head(h).row(r).data(), sizeof(float), t->dim(), f.get()) != t->dim()) {
                    FRUGAL_FAIL(runtime_error, "write_kv_file: writing '", path.string(), "' failed");
                }
            }
}

/// Attention over K/V streamed block by block from a `kv_source`: each block is loaded
/// once and folded into every query tile's online-softmax state, so only one KV block,
/// the tile workspace and two floats per query row are resident.
namespace out_of_core {

/// A streaming plan: the tile plan, the KV rows per streamed block and the exact workspace.
struct streaming_plan {
    attention_plan tiles;
    std::size_t kv_block;
    /// Running max and sum of every query row of one KV head's query group.
    [[nodiscard]] constexpr std::size_t state_floats() const noexcept {
        return 2 * tiles.shape().group() * tiles.shape().q_len;
    }
    [[nodiscard]] constexpr std::size_t block_floats() const noexcept { return 2 * kv_block * tiles.shape().head_dim; }
    [[nodiscard]] constexpr std::size_t workspace_bytes() const noexcept {
        return tiles.workspace_bytes() + (state_floats() + block_floats()) * sizeof(float);
    }
};

/// Splits `budget` between the tile workspace (at most half of what the row states
/// leave) and the largest KV block that fits the rest. Throws naming the minimum.
/// @code
/// auto plan = frugal::attention::out_of_core::plan(shape, {.mask = frugal::attention::attention_mask::causal()},
///                                                 frugal::memory_budget::mib(64));
/// @endcode
[[nodiscard]] inline streaming_plan plan(const attention_shape& shape, const attention_options& options,
                                         memory_budget budget) {
    shape.validate();
    const std::size_t state_bytes = 2 * shape.group() * shape.q_len * sizeof(float);
    const std::size_t row_bytes = 2 * shape.head_dim * sizeof(float);
    const std::size_t minimum = state_bytes + attention_plan::minimum_bytes() + row_bytes;
    FRUGAL_CHECK(budget.bytes() >= minimum, "out_of_core_attention::plan: a budget of ", budget.bytes(),
                 " bytes is below the minimum of ", minimum, " bytes (row states ", state_bytes,
                 ", one 1 x 1 tile, one K/V row)");
    const std::size_t free_bytes = budget.bytes() - state_bytes;
    const auto tiles = plan_attention_tiles(
        shape, options, memory_budget(std::max(attention_plan::minimum_bytes(), (free_bytes - row_bytes) / 2)));
    const std::size_t block = std::min(shape.kv_len, (free_bytes - tiles.workspace_bytes()) / row_bytes);
    return {tiles, block};
}

/// Runs `p` with K/V from `source` on the executor `ex`; `q`, `out`, `lse` as in
/// `tiled::run`. Allocates exactly `p.workspace_bytes()`.
/// @code
/// frugal::attention::file_kv_source src("prefix.kv", 8, 32768, 128);
/// frugal::attention::out_of_core::run(plan, cpu, q, src, out, lse, frugal::default_thread_pool());
/// @endcode
template <class Backend, kv_source Source, executor Executor>
    requires gemm_backend<std::remove_reference_t<Backend>, float>
void run(const streaming_plan& p, Backend&& backend, heads_view<const float> q, Source& source,
         heads_view<float> out, matrix_view<float> lse, Executor& ex) {
    const attention_plan& tp = p.tiles;
    const attention_shape& sh = tp.shape();
    FRUGAL_CHECK(source.kv_heads() == sh.kv_heads && source.tokens() == sh.kv_len && source.head_dim() == sh.head_dim,
                 "out_of_core_attention::run: the source holds ", source.kv_heads(), " x ", source.tokens(), " x ",
                 source.head_dim(), ", the plan expects ", sh.kv_heads, " x ", sh.kv_len, " x ", sh.head_dim);
    detail::check_query_views(sh, q, out, lse, "out_of_core_attention::run");
    std::vector<float> ws(p.workspace_bytes() / sizeof(float));
    float* block = ws.data() + tp.workspace_bytes() / sizeof(float);
    float* state = block + p.block_floats();
    const attention_mask mask = tp.options().mask;
    const auto q_len = static_cast<std::int64_t>(sh.q_len), kv_len = static_cast<std::int64_t>(sh.kv_len);
    const std::size_t qt = tp.q_tile(), kt = tp.kv_tile(), n_tiles = tp.q_tiles(), group = sh.group();
    const float scale = tp.score_scale_log2();
    for (std::size_t g = 0; g < sh.kv_heads; ++g) {
        std::fill(state, state + group * sh.q_len, softmax_math::minus_infinity());   // m
        std::fill(state + group * sh.q_len, state + 2 * group * sh.q_len, 0.0f);     // l
        for (std::size_t j = 0; j < group; ++j)
            for (std::size_t r = 0; r < sh.q_len; ++r) {
                const auto row = out.head(g * group + j).row(r);
                std::fill(row.begin(), row.end(), 0.0f);
            }
        for (std::size_t b0 = 0; b0 < sh.kv_len; b0 += p.kv_block) {
            const std::size_t n = std::min(p.kv_block, sh.kv_len - b0);
            const matrix_view<float> kb(block, n, sh.head_dim), vb(block + n * sh.head_dim, n, sh.head_dim);
            source.load(g, b0, kb, vb);
            parallel_for(ex, group * n_tiles, tp.workers(), [&](std::size_t item, std::size_t worker) {
                const std::size_t j = item % group, q0 = item / group * qt, rows = std::min(qt, sh.q_len - q0);
                const auto iq0 = static_cast<std::int64_t>(q0), iq1 = iq0 + static_cast<std::int64_t>(rows);
                const std::size_t lo = std::max<std::size_t>(b0, static_cast<std::size_t>(mask.key_begin(iq0, q_len, kv_len)));
                const std::size_t hi = std::min<std::size_t>(b0 + n, static_cast<std::size_t>(mask.key_end(iq1 - 1, q_len, kv_len)));
                float* w = ws.data() + worker * tp.worker_floats();
                float* m = state + j * sh.q_len + q0;
                float* l = state + (group + j) * sh.q_len + q0;
                bool accumulated = true;  // out starts at zero: always accumulate
                detail::attend_keys(backend,
                                    {q.head(g * group + j).row_block(q0, rows), kb, vb,
                                     out.head(g * group + j).row_block(q0, rows), matrix_view<float>(w, rows, kt)},
                                    {std::span<float>(m, rows), std::span<float>(l, rows),
                                     std::span<float>(w + qt * kt, rows), accumulated},
                                    mask, iq0, q_len, kv_len, b0, lo, std::max(lo, hi), scale);
            });
        }
        for (std::size_t j = 0; j < group; ++j) {
            const std::size_t h = g * group + j;
            detail::finish_rows(out.head(h), std::span<const float>(state + j * sh.q_len, sh.q_len),
                                std::span<const float>(state + (group + j) * sh.q_len, sh.q_len), true,
                                lse.empty() ? std::span<float>{} : lse.row(h), tp.options().lse_base);
        }
    }
}

/// `run` on `default_thread_pool()`.
/// @code
/// frugal::attention::out_of_core::run(plan, cpu, q, src, out, lse);
/// @endcode
template <class Backend, kv_source Source>
    requires gemm_backend<std::remove_reference_t<Backend>, float>
void run(const streaming_plan& p, Backend&& backend, heads_view<const float> q, Source& source,
         heads_view<float> out, matrix_view<float> lse = {}) {
    run(p, std::forward<Backend>(backend), q, source, out, lse, default_thread_pool());
}

/// Merges a partial attention result over other keys (`other`, `other_lse`) into
/// (`out`, `lse`), row by row and exactly: prefix reuse computes the suffix queries
/// against the cached prefix K/V and against their own K/V, then merges.
/// @code
/// frugal::attention::out_of_core::merge_partial<frugal::attention::softmax_base::e>(out, lse, suffix_out, suffix_lse);
/// @endcode
template <softmax_base Base>
void merge_partial(heads_view<float> out, matrix_view<float> lse, heads_view<const float> other,
                   matrix_view<const float> other_lse) {
    FRUGAL_CHECK(out.heads() == other.heads() && out.tokens() == other.tokens() && out.dim() == other.dim() &&
                     lse.rows() == out.heads() && lse.cols() == out.tokens() && other_lse.rows() == out.heads() &&
                     other_lse.cols() == out.tokens(),
                 "out_of_core_attention::merge_partial: outputs ", out.heads(), " x ", out.tokens(), " x ", out.dim(),
                 " and ", other.heads(), " x ", other.tokens(), " x ", other.dim(), " with LSE ", lse.rows(), " x ",
                 lse.cols(), " and ", other_lse.rows(), " x ", other_lse.cols(), " do not match");
    for (std::size_t h = 0; h < out.heads(); ++h)
        for (std::size_t r = 0; r < out.tokens(); ++r) {
            merge_output<Base>(out.head(h).row(r), lse(h, r), other.head(h).row(r), other_lse(h, r));
        }
}

}  // namespace out_of_core
}  // namespace frugal::attention
