#pragma once
/// @file
/// Hidden-state offload (GRATING section 4.3, Figure 6): the hidden states of a candidate
/// pool live in a file, chunk by chunk; at most three chunks are in memory: the one being
/// computed, the one being written back, and the one being prefetched.

#include <algorithm>
#include <array>
#include <exception>
#include <cstddef>
#include <filesystem>
#include <fstream>
#include <ios>
#include <span>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include "frugal/core/checked.hpp"
#include "frugal/core/error.hpp"
#include "frugal/stream/io_thread.hpp"

namespace frugal::stream {

/// A file of `chunks` fixed-size chunks of hidden states, visited in passes (one pass per
/// layer): `begin_pass()`, then for c = 0..chunks-1 `acquire(c)` (blocks until chunk c is
/// read; starts prefetching c + 1), compute in place, `release(c)` (starts writing c back),
/// then `end_pass()`. Three buffers are the only memory (slot c mod 3), and the I/O runs in
/// order on one io_thread (the caller's, or default_io_thread()), which orders each
/// write-back before the next read into the same buffer. `begin_pass(true)` starts a pass
/// that overwrites every chunk without reading (the embedding pass).
///
/// Errors: an I/O error is rethrown by the next acquire(), release() or end_pass() and the
/// pass is then failed; `abort_pass()` gives up a pass (failed or not: the caller's compute
/// may fail too), waiting for the I/O in flight. The chunks then hold a mix of two passes,
/// so the next pass must overwrite them: `begin_pass(true)`, or begin_pass() throws.
/// `cancel()` stops for good. The file is scratch space, not a saved result: it is created
/// (truncated) by the constructor and removed by the destructor (which waits for the I/O in
/// flight first), and a crash may leave it behind.
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
    /// An offload doing its I/O on default_io_thread().
    hidden_state_offload(std::filesystem::path path, std::size_t chunks, std::size_t chunk_bytes)
        : hidden_state_offload(std::move(path), chunks, chunk_bytes, default_io_thread()) {}
    /// An offload doing its I/O on `io`, which must outlive it. Throws
    /// frugal::invalid_argument when a size is 0 or chunks x chunk_bytes overflows a file
    /// offset, frugal::runtime_error when the file cannot be created at that size.
    hidden_state_offload(std::filesystem::path path, std::size_t chunks, std::size_t chunk_bytes, io_thread& io)
        : path_(std::move(path)), chunks_(chunks), chunk_bytes_(chunk_bytes), io_(io) {
        FRUGAL_CHECK(chunks > 0 && chunk_bytes > 0, "hidden_state_offload: ", chunks, " chunks of ", chunk_bytes,
                     " bytes: both must be positive");
        const std::size_t bytes = checked_mul(chunks, chunk_bytes, "hidden_state_offload: chunks x chunk_bytes");
        (void)checked_cast<std::streamoff>(bytes, "hidden_state_offload: file size");
        {
            std::ofstream create(path_, std::ios::binary | std::ios::trunc);
            FRUGAL_CHECK_AS(runtime_error, create.is_open(), "hidden_state_offload: cannot create ", path_);
        }
        std::error_code ec;
        std::filesystem::resize_file(path_, bytes, ec);
        const char* failed = ec ? "sizing it" : nullptr;
        if (!failed) {
            file_.open(path_, std::ios::binary | std::ios::in | std::ios::out);
            if (!file_.is_open()) failed = "opening it";
        }
        if (!failed) {
            try {
                for (auto& b : buffers_) b.resize(chunk_bytes);
            } catch (const std::exception&) {  // bad_alloc, length_error: chunks too large to hold
                failed = "allocating three chunk buffers";
            }
        }
        if (failed) {
            file_.close();
            std::error_code ignored;
            std::filesystem::remove(path_, ignored);
            FRUGAL_FAIL(runtime_error, "hidden_state_offload: a file ", path_, " of ", chunks, " chunks x ", chunk_bytes,
                        " bytes failed at ", failed, ec ? ": " + ec.message() : std::string());
        }
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

    /// Starts a pass over every chunk; `overwrite` skips reading (chunks start zeroed). After
    /// abort_pass(), only an overwriting pass may start.
    void begin_pass(bool overwrite = false) {
        FRUGAL_CHECK(!in_pass_, "hidden_state_offload::begin_pass: the previous pass has not ended "
                                "(end_pass(), or abort_pass() to give it up)");
        FRUGAL_CHECK(overwrite || !mixed_, "hidden_state_offload::begin_pass: after abort_pass() the chunks hold a "
                                           "mix of two passes; start over with begin_pass(true)");
        in_pass_ = true;
        mixed_ = false;
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

    /// Gives up the current pass (after an I/O error, or when the caller's compute failed):
    /// drops its pending I/O, waits for the I/O in flight and forgets the error. The next
    /// pass must be an overwriting one. Does nothing outside a pass.
    void abort_pass() {
        if (!in_pass_) return;
        io_.discard();
        io_.locked([&] { state_.fill(none); });
        in_pass_ = held_ = false;
        mixed_ = true;
    }

    /// Stops the I/O for good; later calls throw frugal::runtime_error.
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

    // Runs on the I/O thread only. chunk * chunk_bytes_ fits a file offset (checked at construction).
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
    bool mixed_ = false;  // a pass was aborted: chunks hold a mix of two passes
    io_channel io_;       // last: cancelled before the buffers and the file go away
};

}  // namespace frugal::stream
