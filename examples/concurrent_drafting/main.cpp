// An engine's step loop over many concurrent requests and one live history: each step
// drafts for the whole batch in one call (on a thread pool), verifies every draft with the
// model, applies the end-of-sequence rule, and hands finished outputs to the history while
// the other requests keep drafting; a writer thread publishes them.
//
// The "model" is a stand-in: each request's greedy answer is fixed (ending with EOS) and
// answers reuse each other's wording, as a server's do, so later requests draft from the
// outputs of earlier ones. The output must equal plain greedy decoding.
#include <cstdio>
#include <map>
#include <span>
#include <stop_token>
#include <thread>
#include <vector>

#include <frugal/core/thread_pool.hpp>
#include <frugal/frugal.hpp>

#include "../common/phrased_requests.hpp"

namespace fd = frugal::draft;

constexpr int eos = 2;

struct request : phrased_request {
    std::vector<int> output;
    std::size_t passes = 0;
};

int main() {
    std::vector<request> requests;
    for (auto& r : phrased_requests(64, 7, eos)) requests.push_back({std::move(r), {}, 0});
    fd::live_history<int> history(1 << 16);  // past outputs, at most 64k tokens
    std::jthread writer([&](std::stop_token stop) { history.publish_loop(stop); });
    fd::speculator<int> spec({.tree_depth = 16, .tree_budget = 24}, &history);
    frugal::thread_pool pool(2);

    constexpr std::size_t max_live = 8;
    std::vector<fd::request_id> live;
    std::size_t next = 0;
    while (next < requests.size() || !live.empty()) {
        while (live.size() < max_live && next < requests.size()) {  // admit new requests
            spec.start(next, requests[next].prompt);
            live.push_back(next++);
        }
        // One step: a draft for every live request, in one call.
        const auto drafts = spec.propose(live, pool);
        std::vector<fd::request_id> still_live;
        for (std::size_t i = 0; i < live.size(); ++i) {
            request& r = requests[live[i]];
            const fd::draft_tree<int>& tree = *drafts[i];
            // The model's greedy token after the context and after every node (one pass).
            auto truth = [&](std::size_t at) { return at < r.answer.size() ? r.answer[at] : 0; };
            std::vector<int> argmax{truth(r.output.size())};
            std::vector<std::size_t> depth(tree.size());
            for (std::size_t n = 0; n < tree.size(); ++n) {
                depth[n] = tree.parents[n] < 0 ? 1 : depth[std::size_t(tree.parents[n])] + 1;
                argmax.push_back(truth(r.output.size() + depth[n]));
            }
            ++r.passes;
            const auto step = fd::emitted_tokens(tree, fd::verify_tree(tree, std::span<const int>(argmax)), eos);
            r.output.insert(r.output.end(), step.tokens.begin(), step.tokens.end());
            spec.append(live[i], step.tokens);
            if (step.finished) {
                history.add(spec.stop(live[i]));  // the whole output; queued, published by the writer
            } else {
                still_live.push_back(live[i]);
            }
        }
        live.swap(still_live);
    }
    writer.request_stop();
    writer.join();

    bool identical = true;
    std::map<bool, std::pair<std::size_t, std::size_t>> tokens_passes;  // first half, second half
    for (std::size_t i = 0; i < requests.size(); ++i) {
        identical = identical && requests[i].output == requests[i].answer;
        auto& [tokens, passes] = tokens_passes[i >= requests.size() / 2];
        tokens += requests[i].output.size();
        passes += requests[i].passes;
    }
    for (const auto& [later, tp] : tokens_passes)
        std::printf("%s 32 requests: %.2f tokens per forward pass\n", later ? "last " : "first", double(tp.first) / double(tp.second));
    // Every finished output is in the history, whole.
    std::size_t held = 0, answered = 0;
    history.snapshot()->for_each_document([&](std::span<const int> d) { held += d.size(); });
    for (const auto& r : requests) answered += r.answer.size();
    identical = identical && held == answered;
    std::printf("history: %zu documents, %zu tokens; output identical to greedy decoding: %s\n",
                history.snapshot()->documents(), held, identical ? "yes" : "no");
    return identical ? 0 : 1;
}
