// Two engine replicas behind a load balancer, each with a drafting history of its own, share
// their finished outputs through a disk tier (a Redis tier the same way): each publishes its
// outputs, and a pull adds the other's to its history. Replica A serves the first requests;
// then replica B serves requests whose answers reuse A's wording, once with A's outputs pulled
// and once alone. Real replicas are processes or machines; here they are two objects, each
// with its own tier object on one directory, which is all they share.
//
// The "model" is a stand-in: each request's greedy answer is fixed; verification accepts the
// longest matching prefix of the draft plus the model's next token (one pass).
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <span>
#include <vector>

#include <unistd.h>

#include <frugal/frugal.hpp>

#include "../common/phrased_requests.hpp"

namespace fc = frugal::cache;
namespace fd = frugal::draft;

// A replica: its history, a drafter over it, and its view of the shared outputs.
struct replica {
    fd::live_history<int> history{1 << 16};
    fd::drafter<int> drafter{{.max_draft = 16}, &history};
    fc::disk_tier<> tier;
    fc::shared_documents<fc::disk_tier<>, int> shared;
    replica(const std::filesystem::path& dir, const fc::tier_namespace& ns)
        : tier(dir, ns, std::size_t{1} << 26), shared(tier, ns) {}

    // Serves `r`: returns the verification passes its answer took. The output goes to the
    // history and to the tier.
    std::size_t serve(const phrased_request& r) {
        drafter.begin(r.prompt);
        std::size_t done = 0, passes = 0;
        while (done < r.answer.size()) {
            const auto& draft = drafter.chain().tokens;
            std::size_t ok = 0;
            while (ok < draft.size() && done + ok < r.answer.size() && draft[ok] == r.answer[done + ok]) ++ok;
            const std::size_t accepted = std::min(ok + 1, r.answer.size() - done);  // + the model's token
            drafter.accept(std::span<const int>(r.answer).subspan(done, accepted));
            done += accepted;
            ++passes;
        }
        history.add(r.answer);
        history.publish();
        shared.publish(r.answer);
        return passes;
    }
    // Adds the other replicas' outputs to the history; returns how many.
    std::size_t pull() {
        const std::size_t n = shared.pull([&](std::span<const int> doc) { history.add(doc); });
        history.publish();
        return n;
    }
};

int main() {
    const auto dir = std::filesystem::temp_directory_path() / ("frugal-replica-outputs-" + std::to_string(getpid()));
    const fc::tier_namespace outputs{.model = "example", .dtype = "int32", .layout = "outputs", .page_tokens = 1};
    const auto requests = phrased_requests(20, 11, /*eos=*/2);
    std::size_t shared_passes = 0, alone_passes = 0, pulled = 0;
    {
        replica a(dir, outputs), b(dir, outputs);
        for (std::size_t i = 0; i < 12; ++i) a.serve(requests[i]);
        pulled = b.pull();
        for (std::size_t i = 12; i < 20; ++i) shared_passes += b.serve(requests[i]);
    }
    std::filesystem::remove_all(dir);
    {
        replica b(dir, outputs);  // the same requests without A's outputs
        for (std::size_t i = 12; i < 20; ++i) alone_passes += b.serve(requests[i]);
    }
    std::filesystem::remove_all(dir);
    std::printf("replica B pulled %zu outputs of replica A\n", pulled);
    std::printf("replica B's 8 requests: %zu verification passes with A's outputs, %zu alone\n", shared_passes,
                alone_passes);
    std::printf("fewer verification passes with the shared outputs: %s\n", shared_passes < alone_passes ? "yes" : "no");
    return shared_passes < alone_passes ? 0 : 1;
}
