// The dual-layer sliding window and the hidden-state offload: data through real files,
// the overlap of the next layer's load with the current layer, error and cancellation
// paths. Runs under ThreadSanitizer (label `threads`).
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <stdexcept>
#include <string>
#include <mutex>
#include <thread>
#include <vector>

#include <frugal/stream/file_layer_loader.hpp>
#include <frugal/stream/hidden_state_offload.hpp>
#include <frugal/stream/io_thread.hpp>
#include <frugal/stream/layer_window.hpp>

#include "frugal_test_temp.hpp"

namespace {

std::filesystem::path temp_file(const std::string& name) {
    return frugal::testing::temp_path_for_test("frugal_stream_" + name);
}

// Layer i holds bytes (i * 31 + b) mod 251, layer sizes vary.
std::vector<std::size_t> write_weights(const std::filesystem::path& path, std::size_t layers) {
    std::vector<std::size_t> offsets = {0};
    std::ofstream out(path, std::ios::binary);
    for (std::size_t i = 0; i < layers; ++i) {
        const std::size_t bytes = 1000 + 37 * i;
        for (std::size_t b = 0; b < bytes; ++b) out.put(static_cast<char>((i * 31 + b) % 251));
        offsets.push_back(offsets.back() + bytes);
    }
    return offsets;
}

TEST(LayerWindow, StreamsEveryLayerFromAFileWithTwoBuffers) {
    const auto path = temp_file("weights");
    const auto offsets = write_weights(path, 6);
    frugal::stream::file_layer_loader loader(path, offsets);
    {
        frugal::stream::layer_window window(loader);
        EXPECT_EQ(window.resident_bytes(), 2 * (1000 + 37 * 5));
        for (std::size_t i = 0; i < 6; ++i) {
            const auto w = window.acquire(i);
            ASSERT_EQ(w.size(), 1000 + 37 * i);
            for (std::size_t b = 0; b < w.size(); b += 97)
                ASSERT_EQ(static_cast<unsigned char>(w[b]), (i * 31 + b) % 251) << "layer " << i << " byte " << b;
            EXPECT_THROW(window.acquire(i + 1), frugal::invalid_argument);  // still holding i
            window.release(i);
        }
    }
    std::filesystem::remove(path);
    EXPECT_THROW(frugal::stream::file_layer_loader(path, {0, 10}), frugal::runtime_error);
}

// A loader that reports when each load starts and can be held inside load().
struct gated_loader {
    std::size_t layers = 5;
    std::mutex m;
    std::condition_variable cv;
    std::vector<std::size_t> started;
    bool gate_open = true;
    std::size_t fail_at = static_cast<std::size_t>(-1);
    std::size_t layer_count() const { return layers; }
    std::size_t layer_bytes(std::size_t) const { return 64; }
    void load(std::size_t layer, std::span<std::byte> dst) {
        std::unique_lock lock(m);
        started.push_back(layer);
        cv.notify_all();
        cv.wait(lock, [&] { return gate_open; });
        if (layer == fail_at) throw std::runtime_error("disk error on layer " + std::to_string(layer));
        std::fill(dst.begin(), dst.end(), std::byte(layer));
    }
    bool wait_started(std::size_t layer) {
        std::unique_lock lock(m);
        return cv.wait_for(lock, std::chrono::seconds(10), [&] {
            return std::find(started.begin(), started.end(), layer) != started.end();
        });
    }
};
static_assert(frugal::stream::layer_loader<gated_loader>);
struct not_a_loader {
    std::size_t layer_count() const { return 1; }
};
static_assert(!frugal::stream::layer_loader<not_a_loader>);

TEST(LayerWindow, LoadsTheNextLayerWhileTheCurrentOneIsHeld) {
    gated_loader loader;
    frugal::stream::layer_window window(loader);
    for (std::size_t i = 0; i < loader.layers; ++i) {
        const auto w = window.acquire(i);
        EXPECT_EQ(w[0], std::byte(i));
        // while layer i is held (computing), layer i + 1's load has started
        if (i + 1 < loader.layers) {
            EXPECT_TRUE(loader.wait_started(i + 1)) << "no prefetch of layer " << i + 1;
        }
        {
            std::lock_guard lock(loader.m);  // and nothing beyond i + 1: only two buffers
            EXPECT_EQ(std::count_if(loader.started.begin(), loader.started.end(), [&](std::size_t l) { return l > i + 1; }), 0);
        }
        window.release(i);
    }
}

TEST(LayerWindow, LoaderErrorReachesTheCaller) {
    gated_loader loader;
    loader.fail_at = 2;
    frugal::stream::layer_window window(loader);
    window.release((void(window.acquire(0)), 0));
    EXPECT_THROW(
        {  // the load of layer 2 fails: release(1), which queues layer 3, or acquire(2) reports it
            window.release((void(window.acquire(1)), 1));
            (void)window.acquire(2);
        },
        std::runtime_error);
    EXPECT_THROW(window.acquire(2), std::runtime_error);  // and every call after it
}

TEST(LayerWindow, CancelAndDestroyDuringALoad) {
    gated_loader loader;
    loader.gate_open = false;
    {
        frugal::stream::layer_window window(loader);
        ASSERT_TRUE(loader.wait_started(0));  // the I/O thread is blocked inside load(0)
        std::thread opener([&] {
            std::this_thread::sleep_for(std::chrono::milliseconds(20));
            std::lock_guard lock(loader.m);
            loader.gate_open = true;
            loader.cv.notify_all();
        });
        window.cancel();  // joins after the in-flight load
        opener.join();
        EXPECT_THROW(window.acquire(0), frugal::runtime_error);
    }  // destructor after cancel: nothing left running
    loader.gate_open = true;
    { frugal::stream::layer_window window(loader); }  // destroyed with loads pending
}

TEST(HiddenStateOffload, KeepsChunksInAFileAcrossPasses) {
    const auto path = temp_file("hidden");
    const std::size_t chunks = 7, bytes = 256;
    {
        frugal::stream::hidden_state_offload store(path, chunks, bytes);
        EXPECT_EQ(store.resident_bytes(), 3 * bytes);
        for (std::size_t pass = 0; pass < 4; ++pass) {
            store.begin_pass(pass == 0);
            for (std::size_t c = 0; c < chunks; ++c) {
                auto h = store.acquire(c);
                for (std::size_t b = 0; b < bytes; ++b) {
                    const auto expect = pass == 0 ? std::byte{0} : std::byte((c * 7 + b + pass - 1) % 256);
                    ASSERT_EQ(h[b], expect) << "pass " << pass << " chunk " << c << " byte " << b;
                    h[b] = std::byte((c * 7 + b + pass) % 256);
                }
                store.release(c);
            }
            store.end_pass();
        }
        EXPECT_THROW(store.acquire(0), frugal::invalid_argument);  // no pass begun
        EXPECT_EQ(std::filesystem::file_size(path), chunks * bytes);
    }
    EXPECT_FALSE(std::filesystem::exists(path));
    EXPECT_THROW(frugal::stream::hidden_state_offload("/nonexistent/dir/h.bin", 2, 8), frugal::runtime_error);
    EXPECT_THROW(frugal::stream::hidden_state_offload(path, 0, 8), frugal::invalid_argument);
}

TEST(IoChannel, FirstErrorIsKeptAndCancelWakesWaiters) {
    frugal::stream::io_thread thread;
    frugal::stream::io_channel io(thread);
    int done = 0;
    io.submit([] {}, [&] { ++done; });
    io.wait([&] { return done == 1; });
    io.submit([] { throw std::logic_error("boom"); });
    EXPECT_THROW(io.wait([] { return false; }), std::logic_error);
    EXPECT_NO_THROW(io.wait([&] { return done == 1; }));  // a result already published stays readable
    // issue 23, item 10: later work was dropped silently; now submit says why it takes none
    bool ran = false;
    EXPECT_THROW(io.submit([&] { ran = true; }), std::logic_error);
    io.discard();  // forgets the error: the channel takes work again
    io.submit([&] { ran = true; });
    io.wait([&] { return ran; });
    frugal::stream::io_channel idle(thread);
    std::thread canceller([&] { idle.cancel(); });
    EXPECT_THROW(idle.wait([] { return false; }), frugal::runtime_error);
    canceller.join();
    EXPECT_THROW(idle.submit([] {}), frugal::runtime_error);
    EXPECT_THROW(idle.discard(), frugal::runtime_error);
}

TEST(IoChannel, ChannelsShareOneFifoAndKeepTheirErrorsApart) {
    frugal::stream::io_thread thread;
    frugal::stream::io_channel a(thread), b(thread);
    std::vector<int> order;  // written by the I/O thread only, read after a wait
    std::mutex gate_mutex;
    std::unique_lock gate(gate_mutex);  // holds the thread in a's first task while both queue
    bool a_done = false, b_done = false;
    a.submit([&] { std::lock_guard wait_for_gate(gate_mutex); order.push_back(0); });
    b.submit([&] { order.push_back(1); });
    a.submit([&] { throw std::runtime_error("disk error in a"); });
    a.submit([&] { order.push_back(2); }, [&] { a_done = true; });  // discarded with a's error
    b.submit([&] { order.push_back(3); }, [&] { b_done = true; });
    gate.unlock();
    b.wait([&] { return b_done; });  // b runs on
    EXPECT_THROW(a.wait([&] { return a_done; }), std::runtime_error);
    EXPECT_EQ(order, (std::vector<int>{0, 1, 3}));
}

TEST(IoChannel, DiscardWaitsForTheTaskInFlight) {
    frugal::stream::io_thread thread;
    frugal::stream::io_channel io(thread);
    std::atomic<bool> started{false}, finished{false};
    io.submit([&] {
        started = true;
        std::this_thread::sleep_for(std::chrono::milliseconds(30));
        finished = true;
    });
    bool never = false;
    io.submit([&] { never = true; });
    while (!started) std::this_thread::yield();
    io.discard();
    EXPECT_TRUE(finished);  // discard returned after the task in flight
    io.submit([] {}, [&] { started = false; });
    io.wait([&] { return !started; });
    EXPECT_FALSE(never);  // the pending task was dropped
}

// The threads of this process, where /proc says (Linux); 0 elsewhere.
std::size_t thread_count() {
    std::error_code ec;
    std::size_t n = 0;
    for (auto it = std::filesystem::directory_iterator("/proc/self/task", ec); !ec && it != std::filesystem::directory_iterator(); ++it) ++n;
    return n;
}

TEST(Streaming, WindowsAndOffloadsStartNoThreadOfTheirOwn) {
    if (thread_count() == 0) GTEST_SKIP() << "no /proc/self/task";
    (void)frugal::stream::default_io_thread();
    const std::size_t before = thread_count();
    gated_loader loader;
    {
        std::vector<std::unique_ptr<frugal::stream::layer_window<gated_loader>>> windows;
        for (int i = 0; i < 4; ++i) windows.push_back(std::make_unique<frugal::stream::layer_window<gated_loader>>(loader));
        frugal::stream::hidden_state_offload store(temp_file("no_thread"), 3, 64);
        EXPECT_EQ(thread_count(), before);
        for (auto& w : windows) EXPECT_EQ(w->acquire(0)[0], std::byte{0});
    }
    EXPECT_EQ(thread_count(), before);
}

TEST(Streaming, AWindowAndAnOffloadShareTheCallersIoThread) {
    const auto weights = temp_file("shared_weights");
    const auto offsets = write_weights(weights, 5);
    frugal::stream::file_layer_loader loader(weights, offsets);
    frugal::stream::io_thread disk;
    {
        frugal::stream::layer_window window(loader, disk);
        frugal::stream::hidden_state_offload store(temp_file("shared_hidden"), 4, 128, disk);
        for (std::size_t layer = 0; layer < 5; ++layer) {
            const auto w = window.acquire(layer);
            store.begin_pass(layer == 0);
            for (std::size_t c = 0; c < 4; ++c) {
                auto h = store.acquire(c);
                for (std::size_t b = 0; b < h.size(); ++b) {
                    ASSERT_EQ(h[b], layer == 0 ? std::byte{0} : std::byte((c + b + layer - 1) % 256));
                    h[b] = std::byte((c + b + layer) % 256);
                }
                store.release(c);
            }
            store.end_pass();
            ASSERT_EQ(static_cast<unsigned char>(w[7]), (layer * 31 + 7) % 251);
            window.release(layer);
        }
    }
    std::filesystem::remove(weights);
}

// Issue 23, item 6: chunks x chunk_bytes wrapped; an oversized file threw std::filesystem errors.
TEST(HiddenStateOffload, SizesThatOverflowOrCannotBeMadeAreFrugalErrors) {
    const auto path = temp_file("hidden_huge");
    try {
        frugal::stream::hidden_state_offload(path, std::size_t{1} << 33, std::size_t{1} << 33);
        ADD_FAILURE() << "accepted 2^66 bytes";
    } catch (const frugal::invalid_argument& e) {
        EXPECT_NE(std::string(e.what()).find("8589934592 x 8589934592 overflows"), std::string::npos) << e.what();
    }
    EXPECT_THROW(frugal::stream::hidden_state_offload(path, std::size_t{1} << 2, std::size_t{1} << 62),
                 frugal::invalid_argument);  // 2^64: past the file offsets too
    bool made = false;
    try {  // 2^62 bytes: a valid offset, past what ext4, tmpfs or overlayfs can make
        frugal::stream::hidden_state_offload(path, std::size_t{1} << 56, 64);
        made = true;
    } catch (const frugal::runtime_error& e) {
        EXPECT_NE(std::string(e.what()).find("failed at sizing it"), std::string::npos) << e.what();
    }
    EXPECT_FALSE(std::filesystem::exists(path));  // nothing left behind
    if (made) GTEST_SKIP() << "this file system makes sparse files of 4 EiB: the sizing failure is not reachable";
}

// Issue 23, item 10: after an I/O error the offload could never start another pass.
TEST(HiddenStateOffload, AnAbortedPassIsFollowedByAnOverwritingOne) {
    const auto path = temp_file("hidden_abort");
    frugal::stream::hidden_state_offload store(path, 4, 64);
    store.begin_pass(true);
    for (std::size_t c = 0; c < 4; ++c) store.release((void(store.acquire(c)), c));
    store.end_pass();
    std::filesystem::resize_file(path, 64);  // the file loses chunks 1..3 under the store
    store.begin_pass();
    EXPECT_THROW(
        {  // the prefetch of chunk 1 fails: release(0), which queues a write, or acquire(1) reports it
            store.release((void(store.acquire(0)), 0));
            (void)store.acquire(1);
        },
        frugal::runtime_error);
    EXPECT_THROW(store.begin_pass(true), frugal::invalid_argument);  // the failed pass is still open
    store.abort_pass();
    try {
        store.begin_pass();
        ADD_FAILURE() << "a reading pass began over chunks of two passes";
    } catch (const frugal::invalid_argument& e) {
        EXPECT_NE(std::string(e.what()).find("begin_pass(true)"), std::string::npos) << e.what();
    }
    std::filesystem::resize_file(path, 4 * 64);
    for (std::size_t pass = 0; pass < 2; ++pass) {  // an overwriting pass, then one reading it back
        store.begin_pass(pass == 0);
        for (std::size_t c = 0; c < 4; ++c) {
            auto h = store.acquire(c);
            for (auto& b : h) {
                ASSERT_EQ(b, pass == 0 ? std::byte{0} : std::byte(c + 1));
                b = std::byte(c + 1);
            }
            store.release(c);
        }
        store.end_pass();
    }
    // a pass given up by the caller (its compute failed), with I/O still queued
    store.begin_pass();
    (void)store.acquire(0);
    store.abort_pass();
    EXPECT_THROW(store.begin_pass(), frugal::invalid_argument);
    store.begin_pass(true);
    for (std::size_t c = 0; c < 4; ++c) store.release((void(store.acquire(c)), c));
    store.end_pass();
    store.cancel();
    EXPECT_THROW(store.begin_pass(true), frugal::runtime_error);
}

}  // namespace
