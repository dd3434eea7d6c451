// The dual-layer sliding window and the hidden-state offload: data through real files,
// the overlap of the next layer's load with the current layer, error and cancellation
// paths. Runs under ThreadSanitizer (label `threads`).
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <filesystem>
#include <fstream>
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
    window.release((void(window.acquire(1)), 1));
    EXPECT_THROW(window.acquire(2), std::runtime_error);
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

TEST(HiddenStateOffload, ReadErrorReachesTheCaller) {
    const auto path = temp_file("hidden_err");
    frugal::stream::hidden_state_offload store(path, 4, 64);
    store.begin_pass(true);
    for (std::size_t c = 0; c < 4; ++c) store.release((void(store.acquire(c)), c));
    store.end_pass();
    std::filesystem::resize_file(path, 64);  // the file loses chunks 1..3 under the store
    store.begin_pass();
    EXPECT_THROW(
        {  // the prefetch of chunk 1 fails: the next call on the store reports it
            store.release((void(store.acquire(0)), 0));
            (void)store.acquire(1);
        },
        frugal::runtime_error);
}

TEST(IoThread, FirstErrorIsKeptAndCancelWakesWaiters) {
    frugal::stream::io_thread io;
    int done = 0;
    io.submit([] {}, [&] { ++done; });
    io.wait([&] { return done == 1; });
    io.submit([] { throw std::logic_error("boom"); });
    EXPECT_THROW(io.wait([] { return false; }), std::logic_error);
    bool ran = false;
    io.submit([&] { ran = true; });  // dropped after the error
    EXPECT_THROW(io.wait([&] { return ran; }), std::logic_error);
    EXPECT_NO_THROW(io.wait([] { return true; }));  // a result already published stays readable
    frugal::stream::io_thread idle;
    std::thread canceller([&] { idle.cancel(); });
    EXPECT_THROW(idle.wait([] { return false; }), frugal::runtime_error);
    canceller.join();
}

}  // namespace
