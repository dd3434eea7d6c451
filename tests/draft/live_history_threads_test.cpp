// One writer adding and evicting outputs while requests keep drafting (run under TSan):
// every snapshot a request drafts from matches a brute-force model of the history at some
// point of the writer's sequence, and every drafted token is supported by that snapshot's
// documents or the context.
#include <algorithm>
#include <atomic>
#include <cstdint>
#include <random>
#include <stop_token>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include <frugal/core/thread_pool.hpp>
#include <frugal/draft/speculator.hpp>

#include "history_model.hpp"

namespace {

using namespace frugal::draft;
using frugal::testing::count_in;
using frugal::testing::docs_t;

// The writer's documents, known to every thread in advance: document i is docs[i].
docs_t writer_docs(std::size_t n) {
    std::mt19937 rng(17);
    std::uniform_int_distribution<int> tok(0, 4), len(3, 24);
    docs_t docs(n);
    for (auto& d : docs) {
        d.resize(std::size_t(len(rng)));
        for (auto& t : d) t = tok(rng);
    }
    return docs;
}

bool occurs(std::span<const int> text, const std::vector<int>& s) {
    return std::search(text.begin(), text.end(), s.begin(), s.end()) != text.end();
}


// The snapshot holds a run of consecutive writer documents (FIFO eviction), within the
// bound, and its automata count patterns as brute force does over those documents.
void check_snapshot(const history_snapshot<int>& snap, const docs_t& all, std::size_t bound) {
    const docs_t held = frugal::testing::documents_of(snap);
    ASSERT_LE(snap.size(), bound);
    if (!held.empty()) {
        const auto first = std::find(all.begin(), all.end(), held.front());
        ASSERT_NE(first, all.end());
        // Documents can repeat by chance: accept the run if it starts at any equal document.
        bool found = false;
        for (auto it = first; it != all.end() && !found; it = std::find(it + 1, all.end(), held.front()))
            found = std::size_t(all.end() - it) >= held.size() && std::equal(held.begin(), held.end(), it);
        ASSERT_TRUE(found) << "the snapshot is not a run of consecutive documents";
    }
    for (const std::vector<int>& p : docs_t{{0}, {1, 2}, {3, 3, 3}, {4, 0, 1}}) {
        ASSERT_EQ(count_in(snap, p), count_in(held, p));
    }
}

TEST(LiveHistoryThreads, RequestsDraftWhileTheWriterAddsAndEvicts) {
    constexpr std::size_t bound = 400, readers = 3;
    const docs_t docs = writer_docs(600);
    live_history<int> history(bound, 60);
    std::atomic<bool> published{false};
    std::atomic<std::size_t> steps_done{0};  // the adder keeps pace with the readers
    std::jthread writer([&](std::stop_token stop) { history.publish_loop(stop); });
    std::jthread adder([&] {
        for (std::size_t i = 0; i < docs.size(); ++i) {
            while (steps_done.load() < i) std::this_thread::yield();
            history.add(docs[i]);
        }
    });
    std::vector<std::jthread> drafting;
    std::vector<std::size_t> versions_seen(readers, 0);
    for (std::size_t r = 0; r < readers; ++r)
        drafting.emplace_back([&, r] {
            std::mt19937 rng(static_cast<std::uint32_t>(r));
            std::uniform_int_distribution<int> tok(0, 4);
            drafter<int> d({.max_draft = 6, .tree_depth = 6, .tree_budget = 12}, &history);
            std::vector<int> context(20);
            for (auto& t : context) t = tok(rng);
            d.begin(context);
            std::uint64_t last_version = 0;
            // Until every document was added and published; the last draft then uses the final
            // snapshot, so a request that drafted before the last add saw several, whatever
            // the timing.
            for (int step = 0; step < 400 || !published; ++step) {
                const auto& t = d.tree();
                const auto& snap = d.snapshot();
                ASSERT_GE(snap->version(), last_version);  // never goes back
                if (snap->version() != last_version) {
                    ++versions_seen[r];
                    check_snapshot(*snap, docs, bound);
                    last_version = snap->version();
                }
                docs_t held;
                snap->for_each_document([&](std::span<const int> doc) { held.emplace_back(doc.begin(), doc.end()); });
                std::vector<std::vector<int>> path(t.size());
                for (std::size_t i = 0; i < t.size(); ++i) {
                    if (t.parents[i] >= 0) path[i] = path[std::size_t(t.parents[i])];
                    path[i].push_back(t.tokens[i]);
                    // The drafter's sources: suffix matches of the context and of each
                    // history generation, their back-offs (shorter matches, so only the
                    // token before the node is certain to precede it), and resume points
                    // (an earlier place of the context whose copy continues after an edit:
                    // the whole path occurs there). So the node is supported when the pair
                    // (previous token, node's token) occurs in the context or in a held
                    // document, or its whole path occurs in the context.
                    const int previous = path[i].size() > 1 ? path[i][path[i].size() - 2] : context.back();
                    const std::vector<int> pair{previous, t.tokens[i]};
                    bool seen = occurs(context, path[i]) || occurs(context, pair);
                    for (const auto& doc : held) seen = seen || occurs(doc, pair);
                    ASSERT_TRUE(seen) << "step " << step << " node " << i;
                }
                // The model accepts the first drafted token half of the time, then a random one.
                if (!t.empty() && rng() % 2 == 0) {
                    d.accept(t.tokens[0]);
                    context.push_back(t.tokens[0]);
                }
                const int next = tok(rng);
                d.accept(next);
                context.push_back(next);
                ++steps_done;
            }
            (void)d.tree();  // from the final snapshot
            if (d.snapshot()->version() != last_version) ++versions_seen[r];
            EXPECT_EQ(d.snapshot()->version(), history.version());
        });
    adder.join();
    writer.request_stop();
    writer.join();  // publishes what is left
    published = true;
    drafting.clear();  // joins
    check_snapshot(*history.snapshot(), docs, bound);
    EXPECT_EQ(history.pending(), 0u);
    std::size_t seen = 0;
    for (std::size_t r = 0; r < readers; ++r) seen += versions_seen[r];
    EXPECT_GT(seen, readers);  // the requests moved to newer snapshots while drafting
}

TEST(LiveHistoryThreads, BatchDraftsOnAPoolWhileOutputsAreAdded) {
    live_history<int> history(300, 50);
    std::jthread writer([&](std::stop_token stop) { history.publish_loop(stop); });
    speculator<int> spec({.max_draft = 5, .tree_depth = 5, .tree_budget = 10}, &history);
    frugal::thread_pool pool(3);
    std::mt19937 rng(5);
    std::uniform_int_distribution<int> tok(0, 4);
    std::vector<request_id> ids;
    request_id next_id = 0;
    for (int round = 0; round < 300; ++round) {
        while (ids.size() < 6) {
            std::vector<int> prompt(10);
            for (auto& t : prompt) t = tok(rng);
            spec.start(next_id, prompt);
            ids.push_back(next_id++);
        }
        const auto drafts = spec.propose(ids, pool);
        ASSERT_EQ(drafts.size(), ids.size());
        for (std::size_t i = 0; i < ids.size(); ++i) {
            for (std::size_t n = 0; n < drafts[i]->size(); ++n) ASSERT_LT(drafts[i]->parents[n], std::int32_t(n));
            spec.append(ids[i], std::vector<int>{drafts[i]->empty() ? tok(rng) : drafts[i]->tokens[0], tok(rng)});
        }
        const std::size_t finished = rng() % ids.size();  // one request ends, its output joins the history
        history.add(spec.stop(ids[finished]));
        ids.erase(ids.begin() + std::ptrdiff_t(finished));
    }
    writer.request_stop();
}

TEST(LiveHistoryThreads, PublishLoopStopsAndPublishesWhatIsQueued) {
    // A stop requested at any moment (before the loop starts, between its check and its
    // wait, while it waits) ends it, and what was queued by then is published.
    for (int round = 0; round < 300; ++round) {
        live_history<int> history(64);
        std::jthread writer([&](std::stop_token stop) { history.publish_loop(stop); });
        history.add(std::vector<int>{round, 1, 2});
        if (round % 3 == 0) std::this_thread::yield();
        writer.request_stop();
        writer.join();
        ASSERT_EQ(history.pending(), 0u) << "round " << round;
        ASSERT_EQ(history.snapshot()->size(), 3u) << "round " << round;
    }
}

}  // namespace
