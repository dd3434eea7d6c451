// The cache core with S3-FIFO, SIEVE, ARC, LIRS and 2Q, and LRU, SIEVE and S3-FIFO behind TinyLFU
// admission (exact counts), against the brute-force models of tests/cache/policy_model.hpp:
// capacity, weights, pins, replacements and erasures decoded from the input; every eviction,
// refusal and reason must agree.
#include <frugal/cache/admitted_policy.hpp>
#include <frugal/cache/arc_policy.hpp>
#include <frugal/cache/lirs_policy.hpp>
#include <frugal/cache/lru_policy.hpp>
#include <frugal/cache/s3fifo_policy.hpp>
#include <frugal/cache/sieve_policy.hpp>
#include <frugal/cache/tinylfu_admission.hpp>
#include <frugal/cache/two_queue_policy.hpp>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "../cache/exact_sketch.hpp"
#include "../cache/policy_driver.hpp"
#include "../cache/policy_model.hpp"
#include "fuzz.hpp"

namespace {

using frugal::cache::eviction_reason;
using frugal::cache_model::admission;
using frugal::cache_model::kind;
template <class Policy>
using tinylfu = frugal::cache::admitted_policy<frugal::cache::tinylfu_admission<frugal::cache_model::exact_sketch>, Policy>;

struct value_weigher {
    std::size_t operator()(int, int v) const { return static_cast<std::size_t>(v); }
};

template <class Policy>
void run(kind k, frugal::fuzz::input& in, admission a = admission::none) {
    const std::size_t capacity = 1 + in.below(64);
    const int max_weight = 1 + static_cast<int>(in.below(capacity + 4));
    const int keys = 2 + static_cast<int>(in.below(80));
    std::vector<std::pair<int, eviction_reason>> log;
    frugal::cache::basic_cache<int, int, Policy, value_weigher> cache(capacity);
    frugal::cache_model::model ref(k, capacity, a);
    cache.set_eviction_callback([&](const int& key, int&, eviction_reason r) { log.emplace_back(key, r); });
    frugal::cache_model::checked_pair<decltype(cache), frugal::cache_model::model> pair{cache, ref, log, {}};
    for (int step = 0; step < 2000 && !in.empty(); ++step) {
        const int op = static_cast<int>(in.below(100));
        const int key = static_cast<int>(in.below(static_cast<std::uint64_t>(keys)));
        const std::string failure = pair.step(op, key, [&] {
            return std::pair<int, double>(1 + static_cast<int>(in.below(static_cast<std::uint64_t>(max_weight))), 1.0);
        });
        FRUGAL_FUZZ_CHECK(failure.empty(), "%s at step %d", failure.c_str(), step);
    }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    frugal::fuzz::input in(data, size);
    try {
        switch (in.below(9)) {
            case 0: run<frugal::cache::s3fifo_policy>(kind::s3fifo, in); break;
            case 5: run<frugal::cache::s3fifo_warm_main_policy>(kind::s3fifo_warm_main, in); break;
            case 1: run<frugal::cache::sieve_policy>(kind::sieve, in); break;
            case 2: run<frugal::cache::arc_policy>(kind::arc, in); break;
            case 3: run<frugal::cache::lirs_policy>(kind::lirs, in); break;
            case 6: run<tinylfu<frugal::cache::lru_policy>>(kind::lru, in, admission::tinylfu); break;
            case 7: run<tinylfu<frugal::cache::sieve_policy>>(kind::sieve, in, admission::tinylfu); break;
            case 8: run<tinylfu<frugal::cache::s3fifo_policy>>(kind::s3fifo, in, admission::tinylfu); break;
            default: run<frugal::cache::two_queue_policy>(kind::two_queue, in); break;
        }
    } catch (const frugal::error&) {
        FRUGAL_FUZZ_CHECK(false, "a valid operation sequence threw");
    }
    return 0;
}
