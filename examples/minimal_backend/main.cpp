// Plugs a hand-written backend into frugal and multiplies two small matrices with it.
#include <cstdio>
#include <vector>

#include "minimal_backend.hpp"

int main() {
    std::vector<float> a = {1, 2, 3, 4, 5, 6};  // 2 x 3
    std::vector<float> b = {1, 0, 0, 1, 1, 1};  // 3 x 2
    std::vector<float> c(4);
    example::minimal_backend backend;
    backend.gemm(frugal::matrix_view<const float>(a.data(), 2, 3), frugal::transpose::no,
                 frugal::matrix_view<const float>(b.data(), 3, 2), frugal::transpose::no,
                 frugal::matrix_view<float>(c.data(), 2, 2), 1.0f, 0.0f);
    std::printf("[[%g, %g], [%g, %g]]\n", c[0], c[1], c[2], c[3]);  // [[4, 5], [10, 11]]
    return 0;
}
