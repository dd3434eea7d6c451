#pragma once
// The examples' stand-in workload: requests whose greedy answers are built from a shared set
// of phrases (a template reply, recurring explanations) and words of their own prompt, each
// ending with `eos`, so that later requests can draft from the outputs of earlier ones, as a
// server's do.
#include <cstddef>
#include <cstdint>
#include <random>
#include <vector>

struct phrased_request {
    std::vector<int> prompt, answer;  // the answer ends with EOS
};

inline std::vector<phrased_request> phrased_requests(std::size_t n, std::uint32_t seed, int eos) {
    std::mt19937 rng(seed);
    std::vector<std::vector<int>> phrases(12);
    for (auto& p : phrases) {
        p.resize(6 + rng() % 10);
        for (auto& t : p) t = 100 + int(rng() % 900);
    }
    std::vector<phrased_request> out(n);
    for (auto& r : out) {
        for (int i = 0; i < 12; ++i) r.prompt.push_back(1000 + int(rng() % 500));
        for (int k = 0; k < 4; ++k) {
            const auto& p = phrases[rng() % phrases.size()];
            r.answer.insert(r.answer.end(), p.begin(), p.end());
            r.answer.push_back(r.prompt[rng() % r.prompt.size()]);  // a word of this prompt
        }
        r.answer.push_back(eos);
    }
    return out;
}
