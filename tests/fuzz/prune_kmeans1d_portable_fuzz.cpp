// prune_kmeans1d_fuzz.cpp on kmeans1d's portable lane path (the one compilers without GCC/Clang
// vector types take), forced here.
#define FRUGAL_KMEANS1D_PORTABLE 1
#include "prune_kmeans1d_fuzz.cpp"
