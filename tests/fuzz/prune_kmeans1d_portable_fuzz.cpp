// prune_kmeans1d_fuzz.cpp on kmeans1d's scalar row searches (the path of other architectures
// and compilers, and of CPUs without AVX2), put in place before any input runs.
#include "prune_kmeans1d_fuzz.cpp"

namespace {
[[maybe_unused]] const bool scalar_path = [] {
    namespace detail = frugal::prune::detail;
    detail::kmeans1d_kernels_in_use().store(detail::kmeans1d_kernels_for("scalar"));
    return true;
}();
}  // namespace
