// `frugal-bench-cuda attention`: `frugal-bench attention --backend cuda` for a GPU machine
// that has the CUDA toolkit but not the CPU bench's packages (Eigen, xsimd, Boost). It takes
// the serving options of the CPU command (the CPU command maps its own onto the same
// workload), and its report is the CUDA targets of docs/attention.md.
#include <string>

#include "cuda/attention_gpu.hpp"
#include "harness.hpp"

namespace frugal::bench {
namespace {

class attention_gpu_command final : public subcommand {
public:
    std::string name() const override { return "attention"; }
    std::string summary() const override {
        return "the CUDA adapter's batch (decode, mixed) and tiled (prefill) attention against a device-to-device "
               "copy of the same bytes and cuBLAS's GEMM of the same FLOPs";
    }
    void configure(CLI::App& app) override {
        app.add_option("--backend", backend_, "where attention runs (this build: cuda only)")
            ->check(CLI::IsMember({"cuda"}))->capture_default_str();
        app.add_option("--mode", w_.mode, "a batch of prefills, decodes, or both")
            ->check(CLI::IsMember({"prefill", "decode", "mixed"}))->capture_default_str();
        app.add_option("--batch", w_.batch, "sequences")->check(CLI::PositiveNumber)->capture_default_str();
        app.add_option("--kv-len", w_.kv_len, "mean KV length")->check(CLI::PositiveNumber)->capture_default_str();
        app.add_option("--kv-len-spread", w_.spread, "KV lengths uniform in kv_len * [1 - F, 1 + F]")
            ->check(CLI::Range(0.0, 1.0))->capture_default_str();
        app.add_option("--heads", w_.heads, "query heads")->check(CLI::PositiveNumber)->capture_default_str();
        app.add_option("--kv-heads", w_.kv_heads, "key/value heads")->check(CLI::PositiveNumber)->capture_default_str();
        app.add_option("--d", w_.d, "head dimension")->check(CLI::PositiveNumber)->capture_default_str();
        app.add_option("--page-size", w_.page_size, "tokens per KV page")->check(CLI::PositiveNumber)->capture_default_str();
        app.add_option("--dtype", w_.dtype, "storage of Q, K, V and the output")
            ->check(CLI::IsMember({"f32", "bf16", "f16"}))->capture_default_str();
        app.add_option("--layout", w_.layout, "page layout")->check(CLI::IsMember({"nhd", "hnd"}))->capture_default_str();
        app.add_flag("--causal", w_.causal, "prefill: bottom-right causal mask");
        app.add_option("--chunk", w_.chunk, "mixed: query tokens of each prefill chunk")
            ->check(CLI::PositiveNumber)->capture_default_str();
        app.add_option("--reps", w_.reps, "timed runs per implementation (median reported)")
            ->check(CLI::PositiveNumber)->capture_default_str();
    }
    int run(result_sink& sink) override {
        for (auto r : gpu::run_attention(w_)) sink.add(std::move(r));
        return 0;
    }
    report_section report(const report_context& ctx) override {
        report_section s;
        s.title = "Attention on the GPU: the CUDA adapter against its rooflines";
        s.data_source = "generated (unit-variance uniform Q, K, V from a hash of the index)";
        s.notes = "`bandwidth_ratio` is the unique K/V bytes per second over a device-to-device copy's bytes read "
                  "plus written per second, in the same run; `ratio_to_gemm` is useful FLOP/s over cuBLAS's GEMM of "
                  "the same FLOP count. Device time from CUDA events, the L2 flushed before each run, median of "
                  "`--reps`.";
        const int reps = ctx.quick ? 3 : 30;
        gpu::workload batch8{.mode = "decode", .batch = 8, .kv_len = 4096, .spread = 0.5, .dtype = "bf16", .reps = reps};
        gpu::workload long_seq{.mode = "decode", .batch = 1, .kv_len = 32768, .dtype = "bf16", .reps = reps};
        gpu::workload prefill{.mode = "prefill", .batch = 1, .kv_len = 4096, .dtype = "bf16", .causal = true,
                              .reps = reps};
        for (gpu::workload* w : {&batch8, &long_seq, &prefill})
            for (auto& r : gpu::run_attention(*w)) s.records.push_back(std::move(r));
        const record decode8{{"impl", "paged"}, {"batch", 8}}, decode32k{{"impl", "paged"}, {"kv_len", 32768}};
        if (auto v = find_number(s.records, decode8, "bandwidth_ratio"))
            s.headlines.push_back(at_least("decode, batch 8 x 4096, 32/8 heads, bf16", *v, "device copy", 0.70));
        if (auto v = find_number(s.records, decode32k, "bandwidth_ratio"))
            s.headlines.push_back(at_least("decode, one sequence of 32768, bf16", *v, "device copy", 0.70));
        if (auto v = find_number(s.records, {{"impl", "tiled"}}, "ratio_to_gemm"))
            s.headlines.push_back(at_least("prefill 4096, causal, 32 heads, bf16", *v, "cuBLAS GEMM", 0.25));
        return s;
    }

private:
    gpu::workload w_;
    std::string backend_ = "cuda";
};

FRUGAL_BENCH_COMMAND(attention_gpu_command);

}  // namespace
}  // namespace frugal::bench
