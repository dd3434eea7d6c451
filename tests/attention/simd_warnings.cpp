// Not a test program: a unit that instantiates every vector path of the attention module
// and of the Eigen attention backend, compiled by tests/attention/check_warnings.cmake with
// -Wall -Wextra -Wpedantic -Werror at -O2, with and without -march=native, by g++ and
// clang++ (warnings such as -Wmaybe-uninitialized appear only in optimised code).
#include <frugal/attention/batch_attention.hpp>
#include <frugal/attention/dtype.hpp>
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

// The serving path: decode items through the backend's decode_tile (and prefill items).
template <fa::storage_type T>
void batch_run(const fa::batch_plan& plan, fa::heads_view<const T> q, const fa::paged_kv<const T>& kv,
               fa::heads_view<T> out) {
    fa::batch::run(plan, frugal::eigen::attention_backend{}, q, kv, out);
}
template void batch_run(const fa::batch_plan&, fa::heads_view<const float>, const fa::paged_kv<const float>&,
                        fa::heads_view<float>);
template void batch_run(const fa::batch_plan&, fa::heads_view<const fa::bfloat16>, const fa::paged_kv<const fa::bfloat16>&,
                        fa::heads_view<fa::bfloat16>);
template void batch_run(const fa::batch_plan&, fa::heads_view<const fa::float16>, const fa::paged_kv<const fa::float16>&,
                        fa::heads_view<fa::float16>);

// The backend's kernels called directly, and tiled attention (GEMMs and the row step).
template <fa::storage_type T>
void decode_tile(frugal::matrix_view<const float> q, std::span<const T* const> rows, frugal::matrix_view<float> s,
                 frugal::matrix_view<float> o, std::span<float> m, std::span<float> l) {
    frugal::eigen::attention_backend{}.decode_tile<T>(q, rows, rows, s, o, m, l);
}
template void decode_tile(frugal::matrix_view<const float>, std::span<const float* const>, frugal::matrix_view<float>,
                          frugal::matrix_view<float>, std::span<float>, std::span<float>);
template void decode_tile(frugal::matrix_view<const float>, std::span<const fa::bfloat16* const>,
                          frugal::matrix_view<float>, frugal::matrix_view<float>, std::span<float>, std::span<float>);
template void decode_tile(frugal::matrix_view<const float>, std::span<const fa::float16* const>,
                          frugal::matrix_view<float>, frugal::matrix_view<float>, std::span<float>, std::span<float>);

void tiled_run(const fa::attention_plan& plan, fa::heads_view<const float> q, fa::heads_view<const float> k,
               fa::heads_view<const float> v, fa::heads_view<float> out) {
    fa::tiled::run(plan, frugal::eigen::attention_backend{}, q, k, v, out);
}

float dot(std::span<const float> x, std::span<const float> y) { return frugal::eigen::dot(x, y); }
