// `frugal-bench draft --replicas`: see draft_replicas.hpp.
#include "draft_replicas.hpp"

#include <filesystem>
#include <memory>
#include <random>
#include <span>
#include <string>

#include <unistd.h>

#include <frugal/cache/disk_tier.hpp>
#include <frugal/cache/shared_documents.hpp>
#include <frugal/draft/history.hpp>

namespace frugal::bench {
namespace {

using token = std::int32_t;
using testing::token_record;

const cache::tier_namespace outputs{.model = "bench", .dtype = "tokens", .layout = "outputs", .page_tokens = 1};

struct replica {
    draft::live_history<token> history{std::size_t{1} << 22};  // never evicts on the bundled files
    draft::drafter<token> drafter;
    std::unique_ptr<cache::disk_tier<>> tier;
    std::unique_ptr<cache::shared_documents<cache::disk_tier<>, token>> shared;
    explicit replica(const draft::drafter_config& c) : drafter(c, &history) {}
};

// The MAT of the file replayed over `n` replicas (sharing through `dir` when it is set);
// `pulled` counts the outputs pulled.
double replay(const std::vector<token_record>& data, bool tree, std::size_t n, const replica_settings& s,
              const std::filesystem::path& dir, std::size_t& pulled) {
    std::vector<std::unique_ptr<replica>> rs;
    for (std::size_t r = 0; r < n; ++r) {
        rs.push_back(std::make_unique<replica>(s.config));
        if (!dir.empty()) {
            rs[r]->tier = std::make_unique<cache::disk_tier<>>(dir, outputs, std::size_t{1} << 32);
            rs[r]->shared = std::make_unique<cache::shared_documents<cache::disk_tier<>, token>>(*rs[r]->tier, outputs);
        }
    }
    std::mt19937 rng(s.seed);  // the same routing for every mode
    testing::replay_stats all;
    draft::draft_tree<token> chain;
    for (std::size_t i = 0; i < data.size(); ++i) {
        replica& at = *rs[rng() % n];
        all.merge(testing::replay_record(
            data[i], [&](std::span<const token> p) { at.drafter.begin(p); },
            [&]() -> const draft::draft_tree<token>& {
                if (tree) return at.drafter.tree();
                chain.clear();
                const auto& c = at.drafter.chain().tokens;
                for (std::size_t k = 0; k < c.size(); ++k) chain.push(static_cast<std::int32_t>(k) - 1, c[k]);
                return chain;
            },
            [&](std::span<const token> a) { at.drafter.accept(a); }));
        at.history.add(data[i].response);
        at.history.publish();
        if (!at.shared) continue;
        at.shared->publish(data[i].response);
        if ((i + 1) % s.sync_every != 0) continue;
        for (auto& r : rs) {
            pulled += r->shared->pull([&](std::span<const token> doc) { r->history.add(doc); });
            r->history.publish();
        }
    }
    return all.mat();
}

}  // namespace

std::vector<record> replica_records(const std::vector<token_record>& data, const replica_settings& s) {
    std::vector<record> out;
    const auto dir = std::filesystem::temp_directory_path() / ("frugal-bench-replicas-" + std::to_string(getpid()));
    for (const bool tree : {false, true}) {
        std::size_t none = 0;
        const double one = replay(data, tree, 1, s, {}, none);
        for (const std::size_t n : s.replicas) {
            std::size_t pulled = 0;
            const double alone = replay(data, tree, n, s, {}, none);
            std::filesystem::remove_all(dir);
            const double shared = replay(data, tree, n, s, dir, pulled);
            std::filesystem::remove_all(dir);
            out.push_back({{"kind", "replicas"}, {"drafter", tree ? "sam-tree" : "sam"}, {"replicas", n},
                           {"sync_every", s.sync_every}, {"records", data.size()}, {"mat_one", one},
                           {"mat_alone", alone}, {"mat_shared", shared}, {"shared_over_alone", shared / alone},
                           {"one_over_alone", one / alone}, {"pulled", pulled}});
        }
    }
    return out;
}

}  // namespace frugal::bench
