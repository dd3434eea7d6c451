// The live history against its brute-force model (documents held, FIFO eviction, the bound,
// substring counts), and drafts from it against brute force (every drafted path occurred
// in the context or in the snapshot drafted from; children's probabilities sum to <= 1).
#include <frugal/draft/drafter.hpp>
#include <frugal/draft/history.hpp>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "../draft/history_model.hpp"
#include "fuzz.hpp"

namespace {

bool occurs(std::span<const int> text, const std::vector<int>& s) {
    return std::search(text.begin(), text.end(), s.begin(), s.end()) != text.end();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    frugal::fuzz::input in(data, size);
    const std::size_t bound = 2 + in.below(120);
    const std::size_t young = in.below(bound);  // 0: the default
    const int alphabet = 1 + int(in.below(4));
    frugal::draft::live_history<int> history(bound, young);
    frugal::testing::history_model model{bound, history.young_tokens(), {}, {}};
    frugal::testing::docs_t pending;
    const frugal::draft::drafter_config config{
        .max_draft = 1 + in.below(8), .tree_depth = 1 + in.below(8), .tree_budget = 1 + in.below(24),
        .min_path_score = double(in.below(100)) / 1000.0, .backoff = in.below(2) == 0};
    frugal::draft::drafter<int> drafter(config, &history);
    std::vector<int> context(in.below(20));
    for (auto& t : context) t = int(in.below(std::uint64_t(alphabet)));
    drafter.begin(context);
    for (int ops = 0; !in.empty() && ops < 100; ++ops) {
        switch (in.below(4)) {
        case 0: {
            std::vector<int> doc(in.below(40));
            for (auto& t : doc) t = int(in.below(std::uint64_t(alphabet)));
            history.add(doc);
            if (!doc.empty()) pending.push_back(doc);
            break;
        }
        case 1: {
            const bool any = history.publish();
            FRUGAL_FUZZ_CHECK(any == !pending.empty(), "publish returned %d", int(any));
            model.publish(std::move(pending));
            pending.clear();
            const auto snap = history.snapshot();
            const auto held = frugal::testing::documents_of(*snap);
            FRUGAL_FUZZ_CHECK(held == model.held(), "documents differ from the model (%zu vs %zu)", held.size(),
                              model.held().size());
            FRUGAL_FUZZ_CHECK(snap->size() <= bound, "%zu tokens over the bound %zu", snap->size(), bound);
            std::vector<int> p(1 + in.below(4));
            for (auto& t : p) t = int(in.below(std::uint64_t(alphabet)));
            FRUGAL_FUZZ_CHECK(frugal::testing::count_in(*snap, p) == frugal::testing::count_in(held, p), "count");
            break;
        }
        case 2: {
            const int t = int(in.below(std::uint64_t(alphabet)));
            drafter.accept(t);
            context.push_back(t);
            break;
        }
        default: {
            const auto& tree = in.below(2) == 0 ? drafter.tree() : drafter.chain();
            const auto held = frugal::testing::documents_of(*drafter.snapshot());
            std::vector<std::vector<int>> path(tree.size());
            std::vector<double> child_sum(tree.size() + 1, 0.0);
            for (std::size_t i = 0; i < tree.size(); ++i) {
                FRUGAL_FUZZ_CHECK(tree.parents[i] >= -1 && tree.parents[i] < std::int32_t(i), "parent order");
                if (tree.parents[i] >= 0) path[i] = path[std::size_t(tree.parents[i])];
                path[i].push_back(tree.tokens[i]);
                child_sum[std::size_t(tree.parents[i] + 1)] += tree.probabilities[i];
                FRUGAL_FUZZ_CHECK(tree.probabilities[i] > 0 && tree.probabilities[i] <= 1, "probability %g",
                                  double(tree.probabilities[i]));
                // The drafted path extends a suffix of the context that occurred before it:
                // at least the path itself occurs in the context or in a held document.
                bool seen = occurs(std::span<const int>(context).first(context.size()), path[i]);
                for (const auto& d : held) seen = seen || occurs(d, path[i]);
                FRUGAL_FUZZ_CHECK(seen, "node %zu: a path that never occurred", i);
            }
            for (double s : child_sum) FRUGAL_FUZZ_CHECK(s <= 1.0 + 1e-5, "children sum to %g", s);
        }
        }
    }
    return 0;
}
