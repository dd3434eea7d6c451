// A seeded random driver for the fuzz targets when libFuzzer is not used (g++, or clang
// without FRUGAL_FUZZ_LIBFUZZER): feeds LLVMFuzzerTestOneInput random inputs of random
// lengths for --seconds (default 3) or --iterations, from --seed (default 1), and replays
// any files given as arguments (a libFuzzer crash file, say). Prints the seed and the input
// count, so a failing run can be repeated exactly.
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size);

int main(int argc, char** argv) {
    double seconds = 3.0;
    std::uint64_t iterations = 0, seed = 1;
    std::vector<std::string> files;
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        if (a == "--seconds" && i + 1 < argc) seconds = std::atof(argv[++i]);
        else if (a == "--iterations" && i + 1 < argc) iterations = std::strtoull(argv[++i], nullptr, 10);
        else if (a == "--seed" && i + 1 < argc) seed = std::strtoull(argv[++i], nullptr, 10);
        else files.push_back(a);
    }
    for (const auto& f : files) {
        std::ifstream in(f, std::ios::binary);
        const std::vector<char> bytes{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
        LLVMFuzzerTestOneInput(reinterpret_cast<const std::uint8_t*>(bytes.data()), bytes.size());
        std::printf("replayed %s (%zu bytes)\n", f.c_str(), bytes.size());
    }
    if (!files.empty() && iterations == 0) return 0;
    std::mt19937_64 rng(seed);
    const auto start = std::chrono::steady_clock::now();
    std::vector<std::uint8_t> buf;
    std::uint64_t n = 0;
    for (;; ++n) {
        if (iterations > 0 ? n >= iterations
                           : std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() >= seconds)
            break;
        // Mostly short inputs (cheap, deep coverage of small cases), sometimes long ones.
        const std::size_t len = (rng() % 8 == 0) ? rng() % 4096 : rng() % 256;
        buf.resize(len);
        for (auto& b : buf) b = static_cast<std::uint8_t>(rng());
        LLVMFuzzerTestOneInput(buf.data(), buf.size());
    }
    std::printf("seed %llu: %llu inputs, no finding\n", static_cast<unsigned long long>(seed),
                static_cast<unsigned long long>(n));
    return 0;
}
