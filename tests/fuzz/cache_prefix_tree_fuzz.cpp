// The prefix tree (LRU, LFU and GDSF leaf orders) against the brute-force model of
// tests/cache/prefix_tree_model.hpp: inserts, locked matches and releases decoded from the
// input; evictions, the insert results and the bytes must agree.
#include <frugal/cache/gdsf_policy.hpp>
#include <frugal/cache/lfu_policy.hpp>
#include <frugal/cache/lru_policy.hpp>
#include <frugal/cache/prefix_tree.hpp>

#include <cstdint>
#include <utility>
#include <vector>

#include "../cache/prefix_tree_model.hpp"
#include "fuzz.hpp"

namespace {

using frugal::cache_model::seq;
using frugal::cache_model::tree_kind;
using value = frugal::cache::chunk_value<int>;

template <class Policy>
void run(tree_kind k, frugal::fuzz::input& in) {
    const std::size_t budget = 1 + in.below(200);
    const int ids = 1 + static_cast<int>(in.below(8));
    std::vector<int> log;
    frugal::cache::prefix_tree<int, int, Policy> tree{frugal::memory_budget(budget)};
    frugal::cache_model::reference_tree ref(k, budget);
    tree.set_eviction_callback([&](const int&, int& h, std::size_t, frugal::cache::eviction_reason r) {
        if (r == frugal::cache::eviction_reason::capacity) log.push_back(h);
    });
    std::vector<std::pair<typename frugal::cache::prefix_tree<int, int, Policy>::prefix_match, std::vector<seq>>> held;
    int next_handle = 0;
    for (int step = 0; step < 500 && !in.empty(); ++step) {
        seq s(1 + in.below(6));
        for (auto& c : s) c = static_cast<int>(in.below(static_cast<std::uint64_t>(ids)));
        const auto op = in.below(10);
        if (op < 4) {
            std::vector<value> v(s.size());
            for (auto& x : v) x = value{next_handle++, 1 + in.below(budget + 2), 1.0 + static_cast<double>(in.below(4))};
            const auto got = tree.insert(s, v);
            const auto want = ref.insert(s, v);
            FRUGAL_FUZZ_CHECK(got.existing == want.first && got.cached == want.second, "insert at step %d", step);
        } else if (op < 7 && held.size() < 6) {
            std::vector<seq> paths;
            const std::size_t want = ref.match(s, paths);
            auto m = tree.match(s);
            FRUGAL_FUZZ_CHECK(m.length() == want, "match at step %d", step);
            held.emplace_back(std::move(m), std::move(paths));
        } else if (!held.empty()) {
            const std::size_t i = in.below(held.size());
            held[i].first.release();
            ref.release(held[i].second);
            held.erase(held.begin() + static_cast<std::ptrdiff_t>(i));
        }
        FRUGAL_FUZZ_CHECK(log == ref.log, "evictions differ at step %d", step);
        FRUGAL_FUZZ_CHECK(tree.bytes() == ref.bytes(), "bytes differ at step %d", step);
        FRUGAL_FUZZ_CHECK(!held.empty() || tree.bytes() <= budget, "over budget at step %d", step);
    }
    for (auto& [m, paths] : held) {
        m.release();
        ref.release(paths);
    }
    FRUGAL_FUZZ_CHECK(log == ref.log, "evictions differ after the releases");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    frugal::fuzz::input in(data, size);
    try {
        switch (in.below(3)) {
            case 0: run<frugal::cache::lru_policy>(tree_kind::lru, in); break;
            case 1: run<frugal::cache::lfu_policy>(tree_kind::lfu, in); break;
            default: run<frugal::cache::gdsf_policy>(tree_kind::gdsf, in); break;
        }
    } catch (const frugal::error&) {
        FRUGAL_FUZZ_CHECK(false, "a valid operation sequence threw");
    }
    return 0;
}
