#pragma once
/// @file
/// The dual-layer sliding window of GRATING section 4.2: two weight buffers; while layer i
/// computes from one, an I/O thread reads layer i + 1 into the other.

#include <algorithm>
#include <array>
#include <chrono>
#include <concepts>
#include <cstddef>
#include <span>
#include <vector>

#include "frugal/core/error.hpp"
#include "frugal/stream/io_thread.hpp"

namespace frugal::stream {

/// A source of per-layer weights in the user's format: `layer_count()`, `layer_bytes(i)`,
/// and `load(i, dst)` filling `dst` (exactly layer_bytes(i) bytes) or throwing. `load` is
/// called from the window's I/O thread only, one call at a time.
/// @code
/// static_assert(frugal::stream::layer_loader<frugal::stream::file_layer_loader>);
/// @endcode
template <class L>
concept layer_loader = requires(L& loader, const L& cloader, std::size_t layer, std::span<std::byte> dst) {
    { cloader.layer_count() } -> std::convertible_to<std::size_t>;
    { cloader.layer_bytes(layer) } -> std::convertible_to<std::size_t>;
    loader.load(layer, dst);
};

/// Dual-layer sliding window over one pass of layers 0..L-1 (GRATING 4.2, Figure 5): two
/// buffers of the largest layer's size; layers 0 and 1 start loading at construction;
/// `release(i)` frees layer i's buffer and starts reading layer i + 2 into it, so layer
/// i + 1 loads while layer i computes. `acquire(i)` (in order) blocks until layer i is in
/// memory and rethrows the loader's error; `wait_seconds()` is the total time acquire()
/// blocked, i.e. load time that compute did not hide. The loads run on an io_thread: the
/// caller's (to share one with an offload or other windows), or default_io_thread(). The
/// destructor cancels the window's pending loads and waits for one in flight.
/// @code
/// frugal::stream::file_layer_loader loader("weights.bin", layer_offsets);
/// frugal::stream::layer_window window(loader);
/// for (std::size_t i = 0; i < loader.layer_count(); ++i) {
///     std::span<const std::byte> w = window.acquire(i);
///     run_layer(i, w);
///     window.release(i);
/// }
/// @endcode
template <layer_loader Loader>
class layer_window {
public:
    /// A window loading on default_io_thread().
    explicit layer_window(Loader& loader) : layer_window(loader, default_io_thread()) {}
    /// A window loading on `io`, which must outlive it.
    layer_window(Loader& loader, io_thread& io) : loader_(&loader), layers_(loader.layer_count()), io_(io) {
        FRUGAL_CHECK(layers_ > 0, "layer_window: the loader has no layer");
        std::size_t largest = 0;
        for (std::size_t i = 0; i < layers_; ++i) largest = std::max(largest, static_cast<std::size_t>(loader.layer_bytes(i)));
        for (auto& b : buffers_) b.resize(largest);
        loaded_.fill(none);
        for (std::size_t i = 0; i < std::min<std::size_t>(2, layers_); ++i) start_load(i);
    }
    layer_window(const layer_window&) = delete;
    layer_window& operator=(const layer_window&) = delete;

    /// Layer `layer`'s weights once loaded. Layers are acquired in order, each after the
    /// previous one was released.
    std::span<const std::byte> acquire(std::size_t layer) {
        FRUGAL_CHECK(layer == next_ && !held_, "layer_window::acquire: layer ", layer, " requested; expected layer ",
                     next_, held_ ? " after releasing the held one" : "");
        FRUGAL_CHECK_AS(out_of_range, layer < layers_, "layer_window::acquire: layer ", layer, " >= ", layers_);
        const auto start = std::chrono::steady_clock::now();
        io_.wait([&] { return loaded_[layer % 2] == layer; });
        wait_seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        held_ = true;
        return {buffers_[layer % 2].data(), static_cast<std::size_t>(loader_->layer_bytes(layer))};
    }

    /// Frees `layer`'s buffer and starts loading layer + 2 into it.
    void release(std::size_t layer) {
        FRUGAL_CHECK(held_ && layer == next_, "layer_window::release: layer ", layer, " is not the held layer");
        held_ = false;
        ++next_;
        io_.locked([&] { loaded_[layer % 2] = none; });
        if (layer + 2 < layers_) start_load(layer + 2);
    }

    /// Stops loading; later acquire() calls throw frugal::runtime_error.
    void cancel() { io_.cancel(); }

    /// Bytes of weights the window keeps in memory: two buffers of the largest layer.
    [[nodiscard]] std::size_t resident_bytes() const noexcept { return 2 * buffers_[0].size(); }
    /// Seconds acquire() spent waiting for loads (load time not hidden by compute).
    [[nodiscard]] double wait_seconds() const noexcept { return wait_seconds_; }

private:
    static constexpr std::size_t none = static_cast<std::size_t>(-1);

    void start_load(std::size_t layer) {
        std::byte* dst = buffers_[layer % 2].data();
        const std::size_t bytes = loader_->layer_bytes(layer);
        io_.submit([this, layer, dst, bytes] { loader_->load(layer, std::span<std::byte>(dst, bytes)); },
                   [this, layer] { loaded_[layer % 2] = layer; });
    }

    Loader* loader_;
    std::size_t layers_;
    std::array<std::vector<std::byte>, 2> buffers_;
    std::array<std::size_t, 2> loaded_{};  // guarded by io_'s mutex
    std::size_t next_ = 0;
    bool held_ = false;
    double wait_seconds_ = 0.0;
    io_channel io_;  // last: cancelled before the buffers go away
};

}  // namespace frugal::stream
