#include "cuda/attention_gpu.hpp"
#include "serve_batch.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <numeric>
#include <optional>
#include <random>
#include <vector>

#include <cublas_v2.h>

#include <frugal/backend/cuda/batch_attention.cuh>
#include <frugal/backend/cuda/batch_plan.cuh>
#include <frugal/backend/cuda/device.cuh>
#include <frugal/backend/cuda/device_buffer.cuh>
#include <frugal/backend/cuda/tiled_attention.cuh>

namespace frugal::bench::gpu {
namespace {

// Element i of input tensor `seed`: uniform on [-sqrt(3), sqrt(3)) (unit variance) from a hash
// of the index, computed with one correctly rounded multiply so the host reproduces the
// device's values exactly for its float64 check without copying the tensors back.
__host__ __device__ inline float input_value(std::uint64_t i, std::uint32_t seed) {
    std::uint64_t x = (i + 1) * 0x9E3779B97F4A7C15ull ^ (std::uint64_t(seed) << 32);
    x ^= x >> 31;
    x *= 0xBF58476D1CE4E5B9ull;
    x ^= x >> 29;
    return float(int(x & 0xffffu) - 32768) * 5.28596e-5f;
}

template <class T>
float stored_value(std::uint64_t i, std::uint32_t seed) {
    return attention::to_float(attention::from_float<T>(input_value(i, seed)));
}

template <class T>
__global__ void fill_kernel(T* p, std::size_t n, std::uint32_t seed) {
    for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < n; i += std::size_t(gridDim.x) * blockDim.x)
        p[i] = attention::from_float<T>(input_value(i, seed));
}

template <class T>
void fill(cuda::device_buffer<T>& b, std::uint32_t seed) {
    if (b.size() == 0) return;
    fill_kernel<T><<<1024, 256>>>(b.data(), b.size(), seed);
    FRUGAL_CUDA_CHECK(cudaGetLastError());
}

// Device time of `launch` over `reps` runs, each after a write of twice the L2 (so no run
// reads what the last one left in the cache); the flush also covers the host's launch
// overhead, so the events time the device alone. Three untimed runs first.
class device_timer {
public:
    explicit device_timer(std::size_t l2_bytes) : flush_(std::max<std::size_t>(2 * l2_bytes, std::size_t(64) << 20)) {
        FRUGAL_CUDA_CHECK(cudaEventCreate(&start_));
        FRUGAL_CUDA_CHECK(cudaEventCreate(&stop_));
    }
    ~device_timer() {
        (void)cudaEventDestroy(start_);
        (void)cudaEventDestroy(stop_);
    }
    device_timer(const device_timer&) = delete;
    device_timer& operator=(const device_timer&) = delete;

    std::vector<double> operator()(const std::function<void()>& launch, int reps) {
        for (int i = 0; i < 3; ++i) launch();
        std::vector<double> ms;
        for (int i = 0; i < reps; ++i) {
            FRUGAL_CUDA_CHECK(cudaMemsetAsync(flush_.data(), i & 0xff, flush_.bytes()));
            FRUGAL_CUDA_CHECK(cudaEventRecord(start_));
            launch();
            FRUGAL_CUDA_CHECK(cudaEventRecord(stop_));
            FRUGAL_CUDA_CHECK(cudaEventSynchronize(stop_));
            float t = 0;
            FRUGAL_CUDA_CHECK(cudaEventElapsedTime(&t, start_, stop_));
            ms.push_back(double(t));
        }
        std::sort(ms.begin(), ms.end());
        return ms;
    }

private:
    cuda::device_buffer<unsigned char> flush_;
    cudaEvent_t start_{}, stop_{};
};

#define FRUGAL_CUBLAS_CHECK(call)                                                                  \
    do {                                                                                           \
        const cublasStatus_t frugal_cublas_status_ = (call);                                       \
        FRUGAL_CHECK(frugal_cublas_status_ == CUBLAS_STATUS_SUCCESS, "cuBLAS call '", #call,      \
                     "' failed with status ", int(frugal_cublas_status_));                         \
    } while (false)

// cuBLAS's GEMM in the storage type (fp32 accumulation; no TF32 for fp32) of about `flops`
// FLOPs: 8192 x 8192 times 8192 x K.
template <class T>
struct gemm_roofline {
    static constexpr std::size_t side = 8192;
    std::size_t k;
    double flops;
    cuda::device_buffer<T> a, b, c;
    cublasHandle_t handle{};

    explicit gemm_roofline(double want)
        : k(std::max<std::size_t>(64, std::size_t(std::llround(want / (2.0 * side * side) / 64)) * 64)),
          flops(2.0 * double(side) * double(side) * double(k)), a(side * k), b(k * side), c(side * side) {
        fill(a, 21);
        fill(b, 22);
        FRUGAL_CUBLAS_CHECK(cublasCreate(&handle));
    }
    ~gemm_roofline() { (void)cublasDestroy(handle); }
    gemm_roofline(const gemm_roofline&) = delete;
    gemm_roofline& operator=(const gemm_roofline&) = delete;

    void operator()() {
        const cudaDataType_t type = std::is_same_v<T, float>              ? CUDA_R_32F
                                    : std::is_same_v<T, attention::bfloat16> ? CUDA_R_16BF
                                                                             : CUDA_R_16F;
        const float alpha = 1.0f, beta = 0.0f;
        const int n = int(side), kk = int(k);
        FRUGAL_CUBLAS_CHECK(cublasGemmEx(handle, CUBLAS_OP_N, CUBLAS_OP_N, n, n, kk, &alpha, a.data(), type, n,
                                         b.data(), type, kk, &beta, c.data(), type, n, CUBLAS_COMPUTE_32F,
                                         CUBLAS_GEMM_DEFAULT));
    }
};

// float64 attention of one query row against keys/values read through `key(j, c)`, `value(j, c)`.
template <class K, class V>
std::vector<double> reference_row(const std::vector<double>& q, std::size_t keys, const attention::attention_mask& mask,
                                  std::int64_t i, std::int64_t q_len, K key, V value) {
    const std::size_t d = q.size();
    std::vector<double> s(keys, -INFINITY), o(d, 0.0);
    double mx = -INFINITY;
    for (std::size_t j = 0; j < keys; ++j) {
        if (!mask.visible(i, std::int64_t(j), q_len, std::int64_t(keys))) continue;
        double acc = 0;
        for (std::size_t c = 0; c < d; ++c) acc += q[c] * key(j, c);
        s[j] = acc / std::sqrt(double(d));
        mx = std::max(mx, s[j]);
    }
    double sum = 0;
    for (std::size_t j = 0; j < keys && mx > -INFINITY; ++j) {
        if (s[j] == -INFINITY) continue;
        const double p = std::exp(s[j] - mx);
        sum += p;
        for (std::size_t c = 0; c < d; ++c) o[c] += p * value(j, c);
    }
    for (double& x : o) x = sum > 0 ? x / sum : 0.0;
    return o;
}

double median(const std::vector<double>& sorted) { return sorted[sorted.size() / 2]; }

record base_record(const workload& w, const cuda::device_properties& props, const char* impl) {
    return {{"impl", impl},          {"backend", "cuda"},  {"device", props.name}, {"mode", w.mode},
            {"batch", w.batch},      {"kv_len", w.kv_len}, {"kv_len_spread", w.spread},
            {"dtype", w.dtype},      {"heads", w.heads},   {"kv_heads", w.kv_heads}, {"d", w.d},
            {"page_size", w.page_size}, {"layout", w.layout}};
}

// Decode and mixed batches: the batch kernel over shuffled pages, against a copy of the K/V bytes.
template <class T>
std::vector<record> run_batch(const workload& w, const cuda::device_properties& props) {
    const serve_batch b(w.mode, w.batch, w.kv_len, w.spread, w.chunk, w.causal);
    const std::size_t hq = w.heads, hkv = w.kv_heads, d = w.d, tokens = b.qo_indptr.back();
    std::vector<std::int32_t> indptr{0}, indices, last;
    for (std::size_t n : b.kv_lens) {
        const std::size_t p = (n + w.page_size - 1) / w.page_size;
        indptr.push_back(indptr.back() + std::int32_t(p));
        last.push_back(std::int32_t(n - (p - 1) * w.page_size));
    }
    const std::size_t pages = std::size_t(indptr.back());
    indices.resize(pages);
    std::iota(indices.begin(), indices.end(), 0);
    std::shuffle(indices.begin(), indices.end(), std::mt19937(11));
    const auto layout = w.layout == "nhd" ? attention::kv_layout::nhd : attention::kv_layout::hnd;
    const attention::page_table table{indptr, indices, last, w.page_size};

    cuda::device_buffer<T> q(tokens * hq * d), out(tokens * hq * d), k(pages * w.page_size * hkv * d), v(k.size());
    fill(q, 1);
    fill(k, 2);
    fill(v, 3);
    cuda::device_buffer<std::int32_t> d_indptr(indptr.size()), d_indices(indices.size()), d_last(last.size());
    d_indptr.copy_from_host(indptr);
    d_indices.copy_from_host(indices);
    d_last.copy_from_host(last);
    const attention::batch_shape shape{.q_heads = hq, .kv_heads = hkv, .head_dim = d, .qo_indptr = b.qo_indptr,
                                       .kv_lens = b.kv_lens};
    const auto plan = cuda::plan_batch(shape, {.mask = b.mask, .dtype = attention::dtype_of<T>}, props.multiprocessors);
    const cuda::device_batch_plan dplan(plan);
    cuda::device_buffer<float> ws(dplan.workspace_floats());
    const auto kv = attention::paged_kv<const T>::separate(k.data(), v.data(), pages, hkv, d, layout, table);
    const auto qv = attention::heads_view<const T>::token_major(q.data(), tokens, hq, d);
    const auto ov = attention::heads_view<T>::token_major(out.data(), tokens, hq, d);
    const cuda::device_page_table dtable{d_indptr.data(), d_indices.data(), d_last.data(), w.page_size};

    std::size_t kv_bytes = 0;
    for (std::size_t n : b.kv_lens) kv_bytes += 2 * n * hkv * d * sizeof(T);
    cuda::device_buffer<unsigned char> copy_dst(kv_bytes);

    device_timer timer(props.l2_bytes);
    const auto run = [&] { cuda::run_batch_attention<T>(dplan, qv, kv, dtable, ov, {}, ws.data()); };
    const auto frugal_ms = timer(run, w.reps);
    const auto copy_ms = timer([&] {
        FRUGAL_CUDA_CHECK(cudaMemcpyAsync(copy_dst.data(), k.data(), kv_bytes / 2, cudaMemcpyDeviceToDevice));
        FRUGAL_CUDA_CHECK(cudaMemcpyAsync(copy_dst.data() + kv_bytes / 2, v.data(), kv_bytes / 2, cudaMemcpyDeviceToDevice));
    }, w.reps);

    // The first sequence's rows against float64, from the same hashed inputs.
    run();
    FRUGAL_CUDA_CHECK(cudaDeviceSynchronize());
    std::vector<T> got(b.q_lens[0] * hq * d);
    FRUGAL_CUDA_CHECK(cudaMemcpy(got.data(), out.data(), got.size() * sizeof(T), cudaMemcpyDeviceToHost));
    const attention::page_geometry g = kv.geometry();
    const auto at = [&](std::size_t h, std::size_t j) {
        return g.row_offset(std::size_t(indices[std::size_t(indptr[0]) + j / w.page_size]), h, j % w.page_size);
    };
    double err = 0;
    for (std::size_t i = 0; i < b.q_lens[0]; i += std::max<std::size_t>(1, b.q_lens[0] / 4))
        for (std::size_t h = 0; h < hq; ++h) {
            std::vector<double> qrow(d);
            for (std::size_t c = 0; c < d; ++c) qrow[c] = stored_value<T>((i * hq + h) * d + c, 1);
            const std::size_t kh = h / (hq / hkv);
            const auto want = reference_row(
                qrow, b.kv_lens[0], b.mask, std::int64_t(i), std::int64_t(b.q_lens[0]),
                [&](std::size_t j, std::size_t c) { return double(stored_value<T>(at(kh, j) + c, 2)); },
                [&](std::size_t j, std::size_t c) { return double(stored_value<T>(at(kh, j) + c, 3)); });
            for (std::size_t c = 0; c < d; ++c)
                err = std::max(err, std::abs(double(attention::to_float(got[(i * hq + h) * d + c])) - want[c]));
        }

    const double copy_gbs = 2.0 * double(kv_bytes) / (median(copy_ms) * 1e6);
    record fr = base_record(w, props, "paged");
    fr["ms"] = median(frugal_ms);
    fr["min_ms"] = frugal_ms.front();
    fr["kv_bytes"] = kv_bytes;
    fr["gbytes_per_s"] = double(kv_bytes) / (median(frugal_ms) * 1e6);
    fr["bandwidth_ratio"] = median(copy_ms) / (2.0 * median(frugal_ms));
    fr["kv_lens"] = b.kv_lens;
    fr["q_lens"] = b.q_lens;
    fr["items"] = plan.items().size();
    fr["kv_chunk"] = plan.kv_chunk();
    fr["max_abs_err"] = err;
    record cp = base_record(w, props, "copy");
    cp["ms"] = median(copy_ms);
    cp["min_ms"] = copy_ms.front();
    cp["kv_bytes"] = kv_bytes;
    cp["gbytes_per_s"] = copy_gbs;  // bytes read plus bytes written
    return {fr, cp};
}

// Prefill: the tiled kernel per sequence over head-major Q/K/V, against cuBLAS.
template <class T>
std::vector<record> run_prefill(const workload& w, const cuda::device_properties& props) {
    const serve_batch b(w.mode, w.batch, w.kv_len, w.spread, w.chunk, w.causal);
    const std::size_t hq = w.heads, hkv = w.kv_heads, d = w.d;
    struct sequence {
        cuda::device_buffer<T> q, k, v, out;
        attention::attention_plan plan;
    };
    std::vector<sequence> seqs;
    double flops = 0;
    for (std::size_t s = 0; s < w.batch; ++s) {
        const std::size_t n = b.kv_lens[s];
        const attention::attention_shape sh{.q_heads = hq, .kv_heads = hkv, .q_len = n, .kv_len = n, .head_dim = d};
        seqs.push_back({cuda::device_buffer<T>(hq * n * d), cuda::device_buffer<T>(hkv * n * d),
                        cuda::device_buffer<T>(hkv * n * d), cuda::device_buffer<T>(hq * n * d),
                        attention::tiled::plan(sh, {.mask = b.mask}, memory_budget::mib(16))});
        fill(seqs.back().q, std::uint32_t(10 * s + 1));
        fill(seqs.back().k, std::uint32_t(10 * s + 2));
        fill(seqs.back().v, std::uint32_t(10 * s + 3));
        flops += 4.0 * double(d) * double(hq) * double(b.mask.visible_pairs(std::int64_t(n), std::int64_t(n)));
    }
    const auto run = [&] {
        for (sequence& x : seqs) {
            const std::size_t n = x.plan.shape().q_len;
            cuda::run_tiled_attention<T>(x.plan, attention::heads_view<const T>::head_major(x.q.data(), hq, n, d),
                                         attention::heads_view<const T>::head_major(x.k.data(), hkv, n, d),
                                         attention::heads_view<const T>::head_major(x.v.data(), hkv, n, d),
                                         attention::heads_view<T>::head_major(x.out.data(), hq, n, d));
        }
    };
    device_timer timer(props.l2_bytes);
    const auto frugal_ms = timer(run, w.reps);
    std::optional<gemm_roofline<T>> gemm;
    gemm.emplace(flops);
    const auto gemm_ms = timer([&] { (*gemm)(); }, w.reps);

    // Rows of the first and last heads of the first sequence against float64.
    run();
    FRUGAL_CUDA_CHECK(cudaDeviceSynchronize());
    const std::size_t n = b.kv_lens[0];
    std::vector<T> got(hq * n * d);
    seqs[0].out.copy_to_host(got);
    double err = 0;
    for (const std::size_t h : {std::size_t(0), hq - 1})
        for (const std::size_t i : {std::size_t(0), n / 3, n / 2, n - 1}) {
            std::vector<double> qrow(d);
            for (std::size_t c = 0; c < d; ++c) qrow[c] = stored_value<T>((h * n + i) * d + c, 1);
            const std::size_t kh = h / (hq / hkv);
            const auto want = reference_row(
                qrow, n, b.mask, std::int64_t(i), std::int64_t(n),
                [&](std::size_t j, std::size_t c) { return double(stored_value<T>((kh * n + j) * d + c, 2)); },
                [&](std::size_t j, std::size_t c) { return double(stored_value<T>((kh * n + j) * d + c, 3)); });
            for (std::size_t c = 0; c < d; ++c)
                err = std::max(err, std::abs(double(attention::to_float(got[(h * n + i) * d + c])) - want[c]));
        }

    record fr = base_record(w, props, "tiled");
    fr["causal"] = w.causal;
    fr["kv_lens"] = b.kv_lens;
    fr["ms"] = median(frugal_ms);
    fr["min_ms"] = frugal_ms.front();
    fr["tflops"] = flops / (median(frugal_ms) * 1e9);
    fr["ratio_to_gemm"] = (flops / median(frugal_ms)) / (gemm->flops / median(gemm_ms));
    fr["max_abs_err"] = err;
    record gm = base_record(w, props, "gemm");
    gm["causal"] = w.causal;
    gm["ms"] = median(gemm_ms);
    gm["min_ms"] = gemm_ms.front();
    gm["tflops"] = gemm->flops / (median(gemm_ms) * 1e9);
    gm["gemm_shape"] = std::to_string(gemm->side) + "x" + std::to_string(gemm->side) + "x" + std::to_string(gemm->k);
    return {fr, gm};
}

template <class T>
std::vector<record> run_typed(const workload& w) {
    const auto props = cuda::properties();
    return w.mode == "prefill" ? run_prefill<T>(w, props) : run_batch<T>(w, props);
}

}  // namespace

std::vector<record> run_attention(const workload& w) {
    FRUGAL_CHECK(cuda::device_count() > 0, "attention --backend cuda: no GPU (no CUDA device on this machine)");
    FRUGAL_CHECK(w.heads % w.kv_heads == 0, "attention --backend cuda: kv_heads ", w.kv_heads,
                 " does not divide heads ", w.heads);
    FRUGAL_CHECK(w.reps > 0, "attention --backend cuda: reps ", w.reps, " must be positive");
    FRUGAL_CHECK(w.dtype == "f32" || w.dtype == "bf16" || w.dtype == "f16", "attention --backend cuda: dtype ", w.dtype,
                 " is not on the GPU yet (f32, bf16, f16)");
    if (w.dtype == "f32") return run_typed<float>(w);
    if (w.dtype == "bf16") return run_typed<attention::bfloat16>(w);
    return run_typed<attention::float16>(w);
}

}  // namespace frugal::bench::gpu
