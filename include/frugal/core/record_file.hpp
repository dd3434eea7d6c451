#pragma once
/// @file
/// The layout every file frugal saves shares (a prefix tree's index, a QA bank, a drafting
/// history): an 8-byte magic naming the format, its 32-bit version, the format's body, and
/// an 8-byte FNV-1a checksum of everything before it, little-endian. Written crash-safely;
/// read back through checks that name the file and what is wrong with it.

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>

#include "frugal/core/atomic_file.hpp"
#include "frugal/core/error.hpp"
#include "frugal/core/hash.hpp"

namespace frugal {

/// A saved format: its magic, the version this build writes and reads, and its name in
/// messages ("frugal prefix-tree index").
struct record_file_format {
    std::array<char, 8> magic;
    std::uint32_t version;
    std::string_view name;
};

/// Builds a record file: the magic and version first, the body appended by the caller,
/// then `save` adds the checksum and writes it with `write_file_atomically` (a crash leaves
/// the old file or the new one).
/// @code
/// frugal::record_file_writer out(format);
/// out.append(std::uint64_t{count});
/// out.append_bytes(records.data(), records.size() * sizeof(record));
/// std::move(out).save("index.bin");
/// @endcode
class record_file_writer {
public:
    explicit record_file_writer(const record_file_format& format) {
        bytes_.append(format.magic.data(), format.magic.size());
        append(format.version);
    }
    /// Appends a trivially copyable value's bytes.
    template <class T>
        requires std::is_trivially_copyable_v<T>
    void append(const T& value) {
        bytes_.append(reinterpret_cast<const char*>(&value), sizeof(T));
    }
    /// Appends `n` bytes from `p`.
    void append_bytes(const void* p, std::size_t n) {
        if (n > 0) bytes_.append(static_cast<const char*>(p), n);
    }
    /// Bytes written so far (the header included): where the next append lands.
    [[nodiscard]] std::size_t size() const noexcept { return bytes_.size(); }
    /// Overwrites a value appended earlier at byte `offset` (e.g. a count known at the end).
    template <class T>
        requires std::is_trivially_copyable_v<T>
    void overwrite(std::size_t offset, const T& value) {
        FRUGAL_CHECK(offset <= bytes_.size() && sizeof(T) <= bytes_.size() - offset, "record_file_writer: overwrite at ",
                     offset, " past the ", bytes_.size(), " bytes written");
        std::memcpy(bytes_.data() + offset, &value, sizeof(T));
    }
    /// Appends the checksum and writes the file crash-safely.
    void save(const std::filesystem::path& path) && {
        append(fnv1a(std::string_view(bytes_)));
        write_file_atomically(path, std::string_view(bytes_));
    }

private:
    std::string bytes_;
};

/// Reads a record file held in memory (read whole, or mapped): the constructor checks the
/// length, magic and version; `check_checksum` the checksum (after the format's own length
/// checks, so that a truncated file is called truncated); `body` is what lies between;
/// `read` takes values from the body, calling a body too short for them truncated. Every
/// failure throws `frugal::runtime_error` as "<who>: <path> <why>".
/// @code
/// const std::string bytes = frugal::read_whole_file(path, "prefix_tree::load");
/// frugal::record_file_reader in(std::as_bytes(std::span(bytes)), format, "prefix_tree::load", path);
/// std::size_t at = 0;
/// const auto count = in.read<std::uint64_t>(at, "the record count");
/// in.check_checksum();
/// @endcode
class record_file_reader {
public:
    static constexpr std::size_t header_bytes = 12, checksum_bytes = 8;

    record_file_reader(std::span<const std::byte> file, const record_file_format& format, std::string_view who,
                       const std::filesystem::path& path)
        : file_(file), who_(who), path_(path.string()) {
        const std::size_t shown = std::min(file.size(), format.magic.size());
        if (shown > 0 && std::memcmp(file.data(), format.magic.data(), shown) != 0)
            fail("is not a ", format.name, " (bad magic)");
        if (file.size() < header_bytes + checksum_bytes) fail("is truncated: ", file.size(), " bytes");
        std::uint32_t version = 0;
        std::memcpy(&version, file.data() + 8, 4);
        if (version != format.version) fail("has format version ", version, "; this build reads version ", format.version);
    }

    /// The bytes between the header and the checksum.
    [[nodiscard]] std::span<const std::byte> body() const noexcept {
        return file_.subspan(header_bytes, file_.size() - header_bytes - checksum_bytes);
    }
    /// The value of type T at byte `at` of the body (advancing `at`); `what` names it when the
    /// body is too short.
    template <class T>
        requires std::is_trivially_copyable_v<T>
    T read(std::size_t& at, std::string_view what) const {
        const auto b = body();
        if (at > b.size() || b.size() - at < sizeof(T))
            fail("is truncated: ", what, " needs ", sizeof(T), " bytes at offset ", header_bytes + at, ", the file has ",
                 file_.size());
        T v;
        std::memcpy(&v, b.data() + at, sizeof(T));
        at += sizeof(T);
        return v;
    }
    /// Throws unless the checksum matches (the file was truncated or modified).
    void check_checksum() const {
        std::uint64_t stored = 0;
        std::memcpy(&stored, file_.data() + file_.size() - checksum_bytes, checksum_bytes);
        const auto* p = reinterpret_cast<const char*>(file_.data());
        if (stored != fnv1a(std::string_view(p, file_.size() - checksum_bytes)))
            fail("is corrupt: checksum mismatch (truncated or modified)");
    }
    /// Throws `frugal::runtime_error` "<who>: <path> <why...>".
    template <class... Why>
    [[noreturn]] void fail(const Why&... why) const {
        FRUGAL_FAIL(frugal::runtime_error, who_, ": ", path_, " ", why...);
    }

private:
    std::span<const std::byte> file_;
    std::string_view who_;
    std::string path_;
};

}  // namespace frugal
