// A consumer of frugal: the umbrella header plus the Eigen backend.
#include <frugal/backend/eigen/eigen_backend.hpp>
#include <frugal/frugal.hpp>

#include <cstdio>

int main() {
    const float a[] = {1, 2, 3, 4};
    float c[4] = {};
    frugal::eigen::backend{}.gemm<float>(frugal::matrix_view<const float>(a, 2, 2), frugal::transpose::no,
                                         frugal::matrix_view<const float>(a, 2, 2), frugal::transpose::yes,
                                         frugal::matrix_view<float>(c, 2, 2), 1.0f, 0.0f);
    // [[1,2],[3,4]] * [[1,3],[2,4]] = [[5,11],[11,25]]
    const bool ok = c[0] == 5 && c[1] == 11 && c[2] == 11 && c[3] == 25;
    std::printf("frugal %s %s\n", frugal::version, ok ? "ok" : "WRONG");
    return ok ? 0 : 1;
}
