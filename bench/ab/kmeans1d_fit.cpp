// One kmeans1d fit + BIC selection, compiled once per frugal version by scripts/ab-kmeans1d.sh
// with -Dfrugal=<namespace> -DFIT=<function>, so that two versions link into one binary.
#include <frugal/prune/kmeans1d.hpp>

std::size_t FIT(const float* scores, std::size_t n, std::size_t k_max) {
    static frugal::prune::kmeans1d km;  // its own workspace, as in pruning: refits allocate nothing
    km.fit(std::span<const float>(scores, n), k_max);
    return km.select_k_bic();
}
