#pragma once
// The serving attention bench's batch, shared by the CPU bench and the CUDA one so both time
// the same lengths: KV lengths uniform in kv_len * [1 - spread, 1 + spread] (seed 7);
// prefill sequences are new (q_len = kv_len), decodes have one query, mixed alternates
// decodes and prefill chunks (the last `chunk` tokens of a sequence are new).

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <random>
#include <string>
#include <vector>

#include <frugal/attention/masks.hpp>

namespace frugal::bench {

struct serve_batch {
    std::vector<std::size_t> kv_lens, q_lens, qo_indptr{0};
    attention::attention_mask mask;

    /// `causal` applies to prefill (decode and mixed are always causal).
    serve_batch(const std::string& mode, std::size_t batch, std::size_t kv_len, double spread, std::size_t chunk,
                bool causal) {
        std::mt19937 rng(7);
        std::uniform_real_distribution<double> len(double(kv_len) * (1 - spread), double(kv_len) * (1 + spread));
        for (std::size_t s = 0; s < batch; ++s) {
            const auto n = std::max<std::size_t>(1, spread > 0 ? std::size_t(std::llround(len(rng))) : kv_len);
            kv_lens.push_back(n);
            const bool prefill = mode == "prefill" || (mode == "mixed" && s % 2 == 1);
            q_lens.push_back(!prefill ? 1 : mode == "mixed" ? std::min(n, chunk) : n);
            qo_indptr.push_back(qo_indptr.back() + q_lens.back());
        }
        mask = mode == "prefill" && !causal ? attention::attention_mask::none() : attention::attention_mask::causal();
    }
};

}  // namespace frugal::bench
