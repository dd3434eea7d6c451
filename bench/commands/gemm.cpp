// `frugal-bench gemm`: the reference Eigen backend's GEMM on frugal views against a
// naive triple loop, the floor any backend must clear. Later sections use the same
// GEMM as their roofline.
#include <random>
#include <vector>

#include <frugal/backend/eigen/eigen_backend.hpp>

#include "harness.hpp"

namespace frugal::bench {
namespace {

// The baseline: i-k-j loop order (contiguous inner loop), what a hand-written kernel does.
void naive_gemm(const std::vector<float>& a, const std::vector<float>& b, std::vector<float>& c,
                std::size_t m, std::size_t k, std::size_t n) {
    std::fill(c.begin(), c.end(), 0.0f);
    for (std::size_t i = 0; i < m; ++i)
        for (std::size_t p = 0; p < k; ++p) {
            const float aip = a[i * k + p];
            for (std::size_t j = 0; j < n; ++j) c[i * n + j] += aip * b[p * n + j];
        }
}

std::vector<record> compare(std::size_t m, std::size_t k, std::size_t n, double min_seconds) {
    std::mt19937 rng(42);
    std::normal_distribution<float> dist;
    std::vector<float> a(m * k), b(k * n), c(m * n);
    for (auto& x : a) x = dist(rng);
    for (auto& x : b) x = dist(rng);
    const double flops = 2.0 * double(m) * double(k) * double(n);
    const timing eigen = measure([&] {
        frugal::eigen::backend{}.gemm<float>(matrix_view<const float>(a.data(), m, k), transpose::no,
                                             matrix_view<const float>(b.data(), k, n), transpose::no,
                                             matrix_view<float>(c.data(), m, n), 1.0f, 0.0f);
    }, min_seconds);
    const timing naive = measure([&] { naive_gemm(a, b, c, m, k, n); }, min_seconds);
    std::vector<record> out;
    for (const auto& [impl, t] : {std::pair{"eigen", eigen}, std::pair{"naive", naive}}) {
        out.push_back({{"impl", impl}, {"m", m}, {"k", k}, {"n", n}, {"ms", t.median_ms},
                       {"gflops", flops / (t.median_ms * 1e6)},
                       {"ratio_to_naive", naive.median_ms / t.median_ms}});
    }
    return out;
}

class gemm_command final : public subcommand {
public:
    std::string name() const override { return "gemm"; }
    std::string summary() const override {
        return "reference backend GEMM (Eigen on frugal views) vs a naive loop";
    }
    int report_order() const override { return 90; }
    void configure(CLI::App& app) override {
        app.add_option("--m", m_, "rows of a and c")->check(CLI::PositiveNumber)->capture_default_str();
        app.add_option("--k", k_, "inner dimension")->check(CLI::PositiveNumber)->capture_default_str();
        app.add_option("--n", n_, "columns of b and c")->check(CLI::PositiveNumber)->capture_default_str();
    }
    int run(result_sink& sink) override {
        for (auto& r : compare(m_, k_, n_, 0.5)) sink.add(std::move(r));
        return 0;
    }
    report_section report(const report_context& ctx) override {
        report_section s;
        s.title = "Reference backend: GEMM";
        s.data_source = "generated (normal random matrices, seed 42)";
        s.notes = "frugal::eigen::backend::gemm on row-major views against a naive i-k-j loop, "
                  "single thread. `frugal-bench gemm --m N --k N --n N`.";
        const std::vector<std::size_t> sizes = ctx.quick ? std::vector<std::size_t>{32, 64}
                                                         : std::vector<std::size_t>{64, 128, 256, 512};
        for (std::size_t size : sizes)
            for (auto& r : compare(size, size, size, ctx.quick ? 0.01 : 0.3)) s.records.push_back(std::move(r));
        if (auto v = find_number(s.records, {{"impl", "eigen"}, {"m", sizes.back()}}, "ratio_to_naive"))
            s.headlines.push_back(untargeted("GEMM " + std::to_string(sizes.back()) + "^3, Eigen backend: speed", *v,
                                             "naive i-k-j loop"));
        s.plots.push_back({.file = "gemm_gflops.png", .title = "GEMM GFLOP/s, square sizes",
                           .x = "m", .y = "gflops", .series = "impl", .xlabel = "size (m = k = n)",
                           .ylabel = "GFLOP/s", .logx = true});
        return s;
    }

private:
    std::size_t m_ = 256, k_ = 256, n_ = 256;
};

FRUGAL_BENCH_COMMAND(gemm_command);

}  // namespace
}  // namespace frugal::bench
