#pragma once
/// @file
/// write_file_atomically: the crash-safe write behind every file frugal saves, and
/// read_whole_file, the checked read behind every file it loads.

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <span>
#include <string>
#include <string_view>
#include <system_error>

#if __has_include(<fcntl.h>) && __has_include(<unistd.h>)
#include <fcntl.h>
#include <unistd.h>
#define FRUGAL_DETAIL_POSIX_FSYNC 1
#endif

#include "frugal/core/error.hpp"

namespace frugal {

namespace detail {
#ifdef FRUGAL_DETAIL_POSIX_FSYNC
// fsync of a file or directory by path; false when it cannot be opened or synced.
inline bool sync_path(const std::filesystem::path& p, int flags) noexcept {
    const int fd = ::open(p.c_str(), flags);
    if (fd < 0) return false;
    const bool ok = ::fsync(fd) == 0;
    ::close(fd);
    return ok;
}
#endif
}  // namespace detail

/// Replaces `path` with `bytes` so that a crash at any moment (kill -9, power loss on a
/// POSIX file system that honours fsync) leaves either the old file or the new one, never
/// a mix or nothing: the bytes go to a temporary file of a unique name in the same folder,
/// which is flushed and fsynced, renamed over `path`, and the folder is fsynced so the
/// rename itself is durable. On failure the temporary file is removed and
/// `frugal::runtime_error` names the step; `path` is untouched. A crash may leave a stray
/// `<name>.tmp.<pid>.<n>` file beside `path`, never a damaged `path`. With `durable` false
/// nothing is fsynced: a process crash still leaves the old file or the new one, a power
/// loss may leave neither (for data that can be recomputed, such as cached KV pages).
/// @code
/// frugal::write_file_atomically("index.bin", std::string_view(serialized));
/// @endcode
inline void write_file_atomically(const std::filesystem::path& path, std::string_view bytes, bool durable = true) {
    static std::atomic<unsigned> counter{0};
#ifdef FRUGAL_DETAIL_POSIX_FSYNC
    const long pid = static_cast<long>(::getpid());
#else
    const long pid = 0;
#endif
    std::filesystem::path tmp = path;
    tmp += ".tmp." + std::to_string(pid) + "." + std::to_string(counter++);
    auto fail = [&](const auto&... why) {
        std::error_code ignored;
        std::filesystem::remove(tmp, ignored);
        FRUGAL_FAIL(frugal::runtime_error, "cannot save ", path.string(), ": ", why...);
    };
    {
        std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
        if (!out) fail("cannot create ", tmp.string());
        out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
        out.flush();
        if (!out) fail("write to ", tmp.string(), " failed");
    }
#ifdef FRUGAL_DETAIL_POSIX_FSYNC
    if (durable && !detail::sync_path(tmp, O_RDONLY)) fail("fsync of ", tmp.string(), " failed");
#endif
    std::error_code ec;
    std::filesystem::rename(tmp, path, ec);
    if (ec) fail("rename of ", tmp.string(), " failed: ", ec.message());
#ifdef FRUGAL_DETAIL_POSIX_FSYNC
    const std::filesystem::path dir = path.has_parent_path() ? path.parent_path() : std::filesystem::path(".");
    if (durable && !detail::sync_path(dir, O_RDONLY | O_DIRECTORY))
        FRUGAL_FAIL(frugal::runtime_error, "saved ", path.string(), " but could not fsync its folder ", dir.string());
#endif
}

/// Byte-span overload of `write_file_atomically`.
inline void write_file_atomically(const std::filesystem::path& path, std::span<const unsigned char> bytes) {
    write_file_atomically(path, std::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size()));
}

/// The bytes of the regular file at `path`, for a loader to validate. A missing path, a
/// folder or another non-regular file, or a failed read throws `frugal::runtime_error`
/// naming `who` and the path (never a `std::ios_base::failure`).
/// @code
/// const std::string bytes = frugal::read_whole_file("index.bin", "prefix_tree::load");
/// @endcode
inline std::string read_whole_file(const std::filesystem::path& path, const char* who) {
    std::error_code ec;
    const bool regular = std::filesystem::is_regular_file(path, ec);
    if (!regular) FRUGAL_FAIL(frugal::runtime_error, who, ": cannot open ", path.string(), ": not a regular file");
    const auto size = std::filesystem::file_size(path, ec);
    if (ec) FRUGAL_FAIL(frugal::runtime_error, who, ": cannot read the size of ", path.string(), ": ", ec.message());
    std::ifstream f(path, std::ios::binary);
    if (!f) FRUGAL_FAIL(frugal::runtime_error, who, ": cannot open ", path.string());
    std::string bytes(static_cast<std::size_t>(size), '\0');
    f.read(bytes.data(), static_cast<std::streamsize>(bytes.size()));  // sets failbit on error, never throws
    if (static_cast<std::uintmax_t>(f.gcount()) != size)
        FRUGAL_FAIL(frugal::runtime_error, who, ": read ", f.gcount(), " of the ", size, " bytes of ", path.string());
    return bytes;
}

}  // namespace frugal
