// Not a test program: a unit that instantiates kmeans1d's fit (and with it every kernel of
// its row searches and their dispatch), compiled by frugal_add_simd_warnings_check
// (tests/CMakeLists.txt) with -Wall -Wextra -Wpedantic -Werror at -O2, with and without
// -march=native, by g++ and clang++.
#include <frugal/prune/kmeans1d.hpp>

std::size_t fit_floats(frugal::prune::kmeans1d& km, std::span<const float> scores, std::size_t k_max) {
    km.fit(scores, k_max);
    return km.select_k_bic();
}

std::size_t fit_doubles(frugal::prune::kmeans1d& km, std::span<const double> scores, std::size_t k_max) {
    km.fit(scores, k_max);
    return km.select_k_bic();
}

const char* isa() { return frugal::prune::kmeans1d_isa(); }

const frugal::prune::detail::kmeans1d_kernels* kernels(const char* isa) {
    return frugal::prune::detail::kmeans1d_kernels_for(isa);
}
