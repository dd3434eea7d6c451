#pragma once
// Cache trace readers for `frugal-bench cache` and the OLTP reproduction test: the ARC traces'
// "start nblocks ignore reqno" lines, the LIRS traces' one key per line and libCacheSim's
// oracle-bin records, read directly from plain, gzip or zstd files (zlib and libzstd,
// detected by magic bytes).
#include <charconv>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <string>
#include <string_view>
#include <vector>

#include <zlib.h>
#include <zstd.h>

#include <frugal/core/error.hpp>

namespace frugal::bench {

/// One request of a trace: the key and its size (1 when the format has none).
struct trace_request {
    std::uint64_t key;
    std::uint32_t size;
};

namespace detail {
inline std::string read_all(const std::filesystem::path& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) FRUGAL_FAIL(frugal::runtime_error, "cache trace: cannot open ", path);
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

inline std::string gunzip(const std::string& raw, const std::filesystem::path& path) {
    z_stream zs{};
    if (inflateInit2(&zs, 15 + 32) != Z_OK) FRUGAL_FAIL(frugal::runtime_error, "cache trace: zlib init failed");
    std::string out;
    zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(raw.data()));
    zs.avail_in = static_cast<uInt>(raw.size());
    char buf[1 << 16];
    int rc = Z_OK;
    while (rc != Z_STREAM_END) {
        zs.next_out = reinterpret_cast<Bytef*>(buf);
        zs.avail_out = sizeof buf;
        rc = inflate(&zs, Z_NO_FLUSH);
        if (rc != Z_OK && rc != Z_STREAM_END) {
            inflateEnd(&zs);
            FRUGAL_FAIL(frugal::runtime_error, "cache trace: ", path, " is not valid gzip (zlib error ", rc, ")");
        }
        out.append(buf, sizeof buf - zs.avail_out);
        if (rc == Z_STREAM_END && zs.avail_in > 0) {  // concatenated gzip members
            inflateReset(&zs);
            rc = Z_OK;
        }
    }
    inflateEnd(&zs);
    return out;
}

inline std::string unzstd(const std::string& raw, const std::filesystem::path& path) {
    ZSTD_DCtx* dctx = ZSTD_createDCtx();
    std::string out;
    std::vector<char> buf(ZSTD_DStreamOutSize());
    ZSTD_inBuffer in{raw.data(), raw.size(), 0};
    std::size_t rc = 1;
    while (in.pos < in.size) {
        ZSTD_outBuffer o{buf.data(), buf.size(), 0};
        rc = ZSTD_decompressStream(dctx, &o, &in);
        if (ZSTD_isError(rc)) {
            ZSTD_freeDCtx(dctx);
            FRUGAL_FAIL(frugal::runtime_error, "cache trace: ", path, " is not valid zstd: ", ZSTD_getErrorName(rc));
        }
        out.append(buf.data(), o.pos);
    }
    ZSTD_freeDCtx(dctx);
    if (rc != 0) FRUGAL_FAIL(frugal::runtime_error, "cache trace: ", path, " ends inside a zstd frame");
    return out;
}

// Splits on whitespace; returns false at the end.
inline bool next_token(std::string_view& rest, std::string_view& token) {
    std::size_t i = 0;
    while (i < rest.size() && std::strchr(" \t\r\n", rest[i]) != nullptr) ++i;
    std::size_t j = i;
    while (j < rest.size() && std::strchr(" \t\r\n", rest[j]) == nullptr) ++j;
    token = rest.substr(i, j - i);
    rest.remove_prefix(j);
    return !token.empty();
}

inline std::uint64_t parse_u64(std::string_view token, const std::filesystem::path& path) {
    std::uint64_t v = 0;
    auto [end, ec] = std::from_chars(token.data(), token.data() + token.size(), v);
    if (ec != std::errc{} || end != token.data() + token.size())
        FRUGAL_FAIL(frugal::runtime_error, "cache trace: ", path, ": '", token, "' is not an unsigned integer");
    return v;
}
}  // namespace detail

/// The decompressed bytes of `path` (gzip and zstd detected by their magic bytes).
inline std::string read_trace_bytes(const std::filesystem::path& path) {
    std::string raw = detail::read_all(path);
    if (raw.size() >= 2 && static_cast<unsigned char>(raw[0]) == 0x1f && static_cast<unsigned char>(raw[1]) == 0x8b)
        return detail::gunzip(raw, path);
    if (raw.size() >= 4 && std::memcmp(raw.data(), "\x28\xb5\x2f\xfd", 4) == 0) return detail::unzstd(raw, path);
    return raw;
}

/// The most pages one `arc` record may name.
inline constexpr std::uint64_t max_arc_run = std::uint64_t{1} << 20;

/// Parses a trace: `lines` (one key per line; `*` and empty lines skipped), `arc` ("start
/// nblocks ignore reqno" = nblocks consecutive pages) or `oracle-bin` (libCacheSim's 24-byte
/// records <u32 time, u64 id, u32 size, i64 next>, little endian).
inline std::vector<trace_request> read_trace(const std::filesystem::path& path, const std::string& format) {
    const std::string bytes = read_trace_bytes(path);
    std::vector<trace_request> out;
    if (format == "oracle-bin") {
        constexpr std::size_t record = 24;
        if (bytes.size() % record != 0)
            FRUGAL_FAIL(frugal::runtime_error, "cache trace: ", path, " has ", bytes.size(),
                        " bytes, not a multiple of the 24-byte oracle-bin record");
        out.reserve(bytes.size() / record);
        for (std::size_t off = 0; off < bytes.size(); off += record) {
            std::uint64_t id;
            std::uint32_t size;
            std::memcpy(&id, bytes.data() + off + 4, 8);
            std::memcpy(&size, bytes.data() + off + 12, 4);
            out.push_back({id, size == 0 ? 1u : size});
        }
        return out;
    }
    std::string_view rest(bytes), token;
    if (format == "lines") {
        while (detail::next_token(rest, token))
            if (token != "*") out.push_back({detail::parse_u64(token, path), 1});
        return out;
    }
    if (format == "arc") {
        std::string_view nblocks, ignore, reqno;
        while (detail::next_token(rest, token)) {
            if (!detail::next_token(rest, nblocks) || !detail::next_token(rest, ignore) || !detail::next_token(rest, reqno))
                FRUGAL_FAIL(frugal::runtime_error, "cache trace: ", path, " ends inside an arc record");
            const std::uint64_t start = detail::parse_u64(token, path), n = detail::parse_u64(nblocks, path);
            // A record names a run of pages (the ARC traces' longest are a few hundred): a
            // count beyond max_arc_run is a corrupt file, not 2^32 requests to allocate.
            if (n > max_arc_run || start > std::numeric_limits<std::uint64_t>::max() - n)
                FRUGAL_FAIL(frugal::runtime_error, "cache trace: ", path, ": an arc record asks for ", n, " pages from ", start,
                            " (at most ", max_arc_run, ", within 64-bit page ids)");
            for (std::uint64_t i = 0; i < n; ++i) out.push_back({start + i, 1});
        }
        return out;
    }
    FRUGAL_FAIL(frugal::invalid_argument, "cache trace: unknown format '", format, "' (lines, arc, oracle-bin)");
}

}  // namespace frugal::bench
