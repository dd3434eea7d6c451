// Not a test program: a unit that instantiates every vector path of the attention module
// and of the Eigen attention backend, compiled by tests/check_warnings.cmake with
// -Wall -Wextra -Wpedantic -Werror at -O2, with and without -march=native, by g++ and
// clang++ (warnings such as -Wmaybe-uninitialized appear only in optimised code).
#include <frugal/attention/batch_attention.hpp>
#include <frugal/attention/dtype.hpp>
#include <frugal/attention/kv_quantization.hpp>
#include <frugal/attention/tiled_attention.hpp>
#include <frugal/backend/eigen/attention_backend.hpp>
#include <frugal/backend/eigen/simd.hpp>

namespace fa = frugal::attention;

template <fa::storage_type T>
const char* convert(const T* src, float* wide, T* narrow, std::size_t n) {
    fa::to_floats(src, wide, n);
    fa::from_floats(wide, narrow, n);
    return fa::conversion_isa();
}
template const char* convert(const fa::bfloat16*, float*, fa::bfloat16*, std::size_t);
template const char* convert(const fa::float16*, float*, fa::float16*, std::size_t);
template const char* convert(const float*, float*, float*, std::size_t);

// 8-bit K/V: read (block conversions) and written (quantize_into).
template <fa::quantized_kv_type T>
void widen(const T* src, float* wide, std::size_t n) {
    fa::to_floats(src, wide, n);
}
template void widen(const fa::float8_e4m3*, float*, std::size_t);
template void widen(const fa::float8_e5m2*, float*, std::size_t);
template void widen(const std::int8_t*, float*, std::size_t);
template <fa::quantized_kv_type KV>
void append(const fa::paged_kv<KV>& kv, std::span<const fa::bfloat16> k, std::span<const fa::bfloat16> v) {
    fa::quantize_into(kv, 0, 0, k, v);
}
template void append(const fa::paged_kv<fa::float8_e4m3>&, std::span<const fa::bfloat16>, std::span<const fa::bfloat16>);
template void append(const fa::paged_kv<fa::float8_e5m2>&, std::span<const fa::bfloat16>, std::span<const fa::bfloat16>);
template void append(const fa::paged_kv<std::int8_t>&, std::span<const fa::bfloat16>, std::span<const fa::bfloat16>);

// The serving path: decode items through the backend's decode_tile (and prefill items),
// with K/V in Q's type or an 8-bit one.
template <fa::storage_type T, fa::kv_storage_type KV>
void batch_run(const fa::batch_plan& plan, fa::heads_view<const T> q, const fa::paged_kv<const KV>& kv,
               fa::heads_view<T> out) {
    fa::batch::run(plan, frugal::eigen::attention_backend{}, q, kv, out);
}
template void batch_run(const fa::batch_plan&, fa::heads_view<const float>, const fa::paged_kv<const float>&,
                        fa::heads_view<float>);
template void batch_run(const fa::batch_plan&, fa::heads_view<const fa::bfloat16>, const fa::paged_kv<const fa::bfloat16>&,
                        fa::heads_view<fa::bfloat16>);
template void batch_run(const fa::batch_plan&, fa::heads_view<const fa::float16>, const fa::paged_kv<const fa::float16>&,
                        fa::heads_view<fa::float16>);
template void batch_run(const fa::batch_plan&, fa::heads_view<const fa::bfloat16>,
                        const fa::paged_kv<const fa::float8_e4m3>&, fa::heads_view<fa::bfloat16>);
template void batch_run(const fa::batch_plan&, fa::heads_view<const fa::bfloat16>,
                        const fa::paged_kv<const fa::float8_e5m2>&, fa::heads_view<fa::bfloat16>);
template void batch_run(const fa::batch_plan&, fa::heads_view<const fa::bfloat16>, const fa::paged_kv<const std::int8_t>&,
                        fa::heads_view<fa::bfloat16>);

// The backend's kernels called directly, and tiled attention (GEMMs and the row step).
template <fa::kv_storage_type T>
void decode_tile(frugal::matrix_view<const float> q, const fa::decode_block<T>& block, frugal::matrix_view<float> s,
                 frugal::matrix_view<float> o, std::span<float> m, std::span<float> l) {
    frugal::eigen::attention_backend{}.decode_tile<T>(q, block, s, o, m, l);
}
template void decode_tile(frugal::matrix_view<const float>, const fa::decode_block<float>&, frugal::matrix_view<float>,
                          frugal::matrix_view<float>, std::span<float>, std::span<float>);
template void decode_tile(frugal::matrix_view<const float>, const fa::decode_block<fa::bfloat16>&,
                          frugal::matrix_view<float>, frugal::matrix_view<float>, std::span<float>, std::span<float>);
template void decode_tile(frugal::matrix_view<const float>, const fa::decode_block<fa::float16>&,
                          frugal::matrix_view<float>, frugal::matrix_view<float>, std::span<float>, std::span<float>);
template void decode_tile(frugal::matrix_view<const float>, const fa::decode_block<fa::float8_e4m3>&,
                          frugal::matrix_view<float>, frugal::matrix_view<float>, std::span<float>, std::span<float>);
template void decode_tile(frugal::matrix_view<const float>, const fa::decode_block<fa::float8_e5m2>&,
                          frugal::matrix_view<float>, frugal::matrix_view<float>, std::span<float>, std::span<float>);
template void decode_tile(frugal::matrix_view<const float>, const fa::decode_block<std::int8_t>&,
                          frugal::matrix_view<float>, frugal::matrix_view<float>, std::span<float>, std::span<float>);

void tiled_run(const fa::attention_plan& plan, fa::heads_view<const float> q, fa::heads_view<const float> k,
               fa::heads_view<const float> v, fa::heads_view<float> out) {
    fa::tiled::run(plan, frugal::eigen::attention_backend{}, q, k, v, out);
}

float dot(std::span<const float> x, std::span<const float> y) { return frugal::eigen::dot(x, y); }
