#pragma once
/// @file
/// Hidden-state offload (GRATING section 4.3, Figure 6): the hidden states of a candidate
/// pool live in a file, chunk by chunk; at most three chunks are in memory: the one being
/// computed, the one being written back, and the one being prefetched.

#include <algorithm>
#include <array>
#include <cstddef>
#include <filesystem>
#include <fstream>
#include <span>
#include <utility>
#include <vector>

#include "frugal/core/error.hpp"
#include "frugal/stream/io_thread.hpp"

namespace frugal::stream {

/// A file of `chunks` fixed-size chunks of hidden states, visited in passes (one pass per
/// layer): `begin_pass()`, then for c = 0..chunks-1 `acquire(c)` (blocks until chunk c is
/// read; starts prefetching c + 1), compute in place, `release(c)` (starts writing c back).
/// Three buffers are the only memory (slot c mod 3), and one FIFO I/O thread orders each
/// write-back before the next read into the same buffer. `begin_pass(true)` starts a pass
/// that overwrites every chunk without reading (the embedding pass). I/O errors and
/// cancellation reach acquire()/end_pass(); the destructor cancels and joins. The file is
/// created (truncated) by the constructor and removed by the destructor.
/// @code
/// frugal::stream::hidden_state_offload store(tmp / "hidden.bin", 10, chunk_bytes);
/// for (std::size_t layer = 0; layer < layers; ++layer) {
///     store.begin_pass(layer == 0);
///     for (std::size_t c = 0; c < 10; ++c) { auto h = store.acquire(c); run(layer, h); store.release(c); }
///     store.end_pass();
/// }
/// @endcode
class hidden_state_offload {
public:
    hidden_state_offload(std::filesystem::path path, std::size_t chunks, std::size_t chunk_bytes)
        : path_(std::move(path)), chunks_(chunks), chunk_bytes_(chunk_bytes) {
        FRUGAL_CHECK(chunks > 0 && chunk_bytes > 0, "hidden_state_offload: ", chunks, " chunks of ", chunk_bytes,
                     " bytes: both must be positive");
        {
            std::ofstream create(path_, std::ios::binary | std::ios::trunc);
            FRUGAL_CHECK_AS(runtime_error, create.is_open(), "hidden_state_offload: cannot create ", path_);
        }
        std::filesystem::resize_file(path_, chunks * chunk_bytes);
        file_.open(path_, std::ios::binary | std::ios::in | std::ios::out);
        FRUGAL_CHECK_AS(runtime_error, file_.is_open(), "hidden_state_offload: cannot open ", path_);
        for (auto& b : buffers_) b.resize(chunk_bytes);
        state_.fill(none);
    }
    hidden_state_offload(const hidden_state_offload&) = delete;
    hidden_state_offload& operator=(const hidden_state_offload&) = delete;
    ~hidden_state_offload() {
        io_.cancel();
        file_.close();
        std::error_code ignored;
        std::filesystem::remove(path_, ignored);
    }

    /// Starts a pass over every chunk; `overwrite` skips reading (chunks start zeroed).
    void begin_pass(bool overwrite = false) {
        FRUGAL_CHECK(!in_pass_, "hidden_state_offload::begin_pass: the previous pass has not ended");
        in_pass_ = true;
        overwrite_ = overwrite;
        next_ = 0;
        prefetch(0);
    }

    /// Chunk `chunk`'s hidden states, in order within a pass.
    std::span<std::byte> acquire(std::size_t chunk) {
        FRUGAL_CHECK(in_pass_ && chunk == next_ && !held_, "hidden_state_offload::acquire: chunk ", chunk,
                     " requested; expected chunk ", next_, " of a begun pass with the previous chunk released");
        io_.wait([&] { return state_[chunk % 3] == chunk; });
        held_ = true;
        if (chunk + 1 < chunks_) prefetch(chunk + 1);
        return buffers_[chunk % 3];
    }

    /// Starts writing chunk `chunk` back to the file.
    void release(std::size_t chunk) {
        FRUGAL_CHECK(held_ && chunk == next_, "hidden_state_offload::release: chunk ", chunk, " is not the held chunk");
        held_ = false;
        ++next_;
        const std::size_t slot = chunk % 3;
        io_.submit([this, chunk, slot] { transfer(chunk, slot, true); }, [this, slot] { state_[slot] = none; });
    }

    /// Waits until every chunk of the pass is written back (rethrows an I/O error).
    void end_pass() {
        FRUGAL_CHECK(in_pass_ && next_ == chunks_ && !held_, "hidden_state_offload::end_pass: ", next_, " of ", chunks_,
                     " chunks released");
        io_.wait([&] { return state_[0] == none && state_[1] == none && state_[2] == none; });
        in_pass_ = false;
    }

    /// Stops the I/O thread; later calls throw frugal::runtime_error.
    void cancel() { io_.cancel(); }

    /// Bytes of hidden states held in memory: three chunks.
    [[nodiscard]] std::size_t resident_bytes() const noexcept { return 3 * chunk_bytes_; }

private:
    static constexpr std::size_t none = static_cast<std::size_t>(-1);

    void prefetch(std::size_t chunk) {
        const std::size_t slot = chunk % 3;
        if (overwrite_) {
            io_.submit([this, slot] { std::fill(buffers_[slot].begin(), buffers_[slot].end(), std::byte{0}); },
                       [this, chunk, slot] { state_[slot] = chunk; });
        } else {
            io_.submit([this, chunk, slot] { transfer(chunk, slot, false); }, [this, chunk, slot] { state_[slot] = chunk; });
        }
    }

    // Runs on the I/O thread only.
    void transfer(std::size_t chunk, std::size_t slot, bool write) {
        file_.clear();
        const auto at = static_cast<std::streamoff>(chunk * chunk_bytes_);
        char* data = reinterpret_cast<char*>(buffers_[slot].data());
        const auto n = static_cast<std::streamsize>(chunk_bytes_);
        if (write) {
            file_.seekp(at);
            file_.write(data, n);
            file_.flush();
            FRUGAL_CHECK_AS(runtime_error, file_.good(), "hidden_state_offload: writing chunk ", chunk, " to ", path_,
                            " failed");
        } else {
            file_.seekg(at);
            file_.read(data, n);
            FRUGAL_CHECK_AS(runtime_error, file_.gcount() == n, "hidden_state_offload: short read of chunk ", chunk,
                            " from ", path_);
        }
    }

    std::filesystem::path path_;
    std::size_t chunks_, chunk_bytes_;
    std::fstream file_;
    std::array<std::vector<std::byte>, 3> buffers_;
    std::array<std::size_t, 3> state_{};  // chunk held by each slot, guarded by io_'s mutex
    std::size_t next_ = 0;
    bool in_pass_ = false, held_ = false, overwrite_ = false;
    io_thread io_;  // last: joined before the buffers and the file go away
};

}  // namespace frugal::stream
