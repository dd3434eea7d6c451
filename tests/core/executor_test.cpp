// The executor concept, thread_pool and parallel_for. Oracle: a per-item counter (every item
// runs exactly once) and the serial loop's results.
#include <frugal/core/executor.hpp>
#include <frugal/core/thread_pool.hpp>

#include <gtest/gtest.h>

#include <atomic>
#include <cstddef>
#include <numeric>
#include <stdexcept>
#include <thread>
#include <vector>

namespace {

struct not_an_executor {
    std::size_t concurrency() const { return 1; }
};
static_assert(frugal::executor<frugal::thread_pool>);
static_assert(frugal::executor<frugal::inline_executor>);
static_assert(!frugal::executor<not_an_executor>);
static_assert(!frugal::executor<int>);

TEST(InlineExecutor, RunsItemsInOrderOnWorkerZero) {
    frugal::inline_executor ex;
    std::vector<std::size_t> order;
    frugal::parallel_for(ex, 5, 4, [&](std::size_t i, std::size_t w) {
        EXPECT_EQ(w, 0u);
        order.push_back(i);
    });
    EXPECT_EQ(order, (std::vector<std::size_t>{0, 1, 2, 3, 4}));
}

TEST(ThreadPool, RunsEveryItemExactlyOnceWithWorkersBelowTheLimit) {
    frugal::thread_pool pool(4);
    EXPECT_EQ(pool.concurrency(), 4u);
    for (std::size_t max_workers : {1u, 2u, 3u, 4u, 9u}) {
        for (std::size_t count : {0u, 1u, 3u, 1000u}) {
            std::vector<std::atomic<int>> runs(count);
            std::atomic<std::size_t> worst_worker{0};
            frugal::parallel_for(pool, count, max_workers, [&](std::size_t i, std::size_t w) {
                runs[i].fetch_add(1);
                std::size_t seen = worst_worker.load();
                while (w > seen && !worst_worker.compare_exchange_weak(seen, w)) {
                }
            });
            for (std::size_t i = 0; i < count; ++i) EXPECT_EQ(runs[i].load(), 1) << "item " << i;
            if (count > 0) {
                EXPECT_LT(worst_worker.load(), std::min<std::size_t>(max_workers, 4)) << max_workers;
            }
        }
    }
}

TEST(ThreadPool, PerWorkerScratchGivesTheSerialResult) {
    frugal::thread_pool pool(3);
    const std::size_t n = 5000;
    std::vector<double> scratch(3), out(n), want(n);
    for (std::size_t i = 0; i < n; ++i) want[i] = static_cast<double>(i) * 0.5 + 1.0;
    frugal::parallel_for(pool, n, 3, [&](std::size_t i, std::size_t w) {
        scratch[w] = static_cast<double>(i) * 0.5;  // only this worker touches scratch[w]
        out[i] = scratch[w] + 1.0;
    });
    EXPECT_EQ(out, want);
}

TEST(ThreadPool, RethrowsTheFirstErrorAndStaysUsable) {
    frugal::thread_pool pool(2);
    EXPECT_THROW(frugal::parallel_for(pool, 100, 2,
                                      [&](std::size_t i, std::size_t) {
                                          if (i == 7) throw std::runtime_error("item 7");
                                      }),
                 std::runtime_error);
    std::atomic<std::size_t> sum{0};
    frugal::parallel_for(pool, 100, 2, [&](std::size_t i, std::size_t) { sum += i; });
    EXPECT_EQ(sum.load(), 4950u);
}

TEST(ThreadPool, ConcurrentAndNestedBatchesAllComplete) {
    frugal::thread_pool pool(2);
    std::atomic<std::size_t> total{0};
    auto batch = [&] {
        for (int r = 0; r < 50; ++r)
            frugal::parallel_for(pool, 20, 2, [&](std::size_t, std::size_t) {
                // A batch started while another runs (here from inside an item) runs on the
                // calling thread instead of waiting for the pool: no deadlock.
                frugal::parallel_for(pool, 3, 2, [&](std::size_t, std::size_t w) {
                    EXPECT_LT(w, 2u);
                    ++total;
                });
            });
    };
    std::thread other(batch);
    batch();
    other.join();
    EXPECT_EQ(total.load(), 2u * 50 * 20 * 3);
}

TEST(ThreadPool, RejectsZeroConcurrency) {
    EXPECT_THROW(frugal::thread_pool(0), frugal::invalid_argument);
}

TEST(ThreadPool, DefaultPoolIsOneLivingInstance) {
    EXPECT_EQ(&frugal::default_thread_pool(), &frugal::default_thread_pool());
    EXPECT_GE(frugal::default_thread_pool().concurrency(), 1u);
}

}  // namespace
