#pragma once
/// @file
/// A framed record: the header, payload and checksum frugal puts around a value it stores
/// outside the process (a file, a key of a shared server), so that a reader can tell a
/// whole record of the kind, namespace and key it asked for from a truncated, corrupted
/// or foreign one.

#include <array>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>

#include "frugal/core/hash.hpp"

namespace frugal {

static_assert(std::endian::native == std::endian::little, "frugal's record frames are written little-endian");

/// A 64-bit checksum of `bytes` over 8-byte words in eight independent lanes (the
/// multiplies overlap, so page-sized values are checked at several GB/s), folded and mixed;
/// detects truncation and flipped bytes, not tampering.
/// @code
/// std::uint64_t sum = frugal::checksum64(std::as_bytes(std::span(page)));
/// @endcode
[[nodiscard]] inline std::uint64_t checksum64(std::span<const std::byte> bytes, std::uint64_t seed = 0) noexcept {
    constexpr std::uint64_t prime = 0x9E3779B97F4A7C15ull;
    std::array<std::uint64_t, 8> lane{};
    for (std::size_t l = 0; l < lane.size(); ++l) lane[l] = hash_combine(seed, l);
    std::size_t i = 0;
    for (; i + 64 <= bytes.size(); i += 64)
        for (std::size_t l = 0; l < 8; ++l) {
            std::uint64_t w;
            std::memcpy(&w, bytes.data() + i + 8 * l, 8);
            lane[l] = std::rotl((lane[l] ^ w) * prime, 31);
        }
    std::uint64_t h = bytes.size();
    for (const std::uint64_t l : lane) h = hash_combine(h, l);
    for (; i < bytes.size(); ++i) h = hash_combine(h, std::to_integer<std::uint64_t>(bytes[i]));
    return h;
}

/// The header of a framed record: what it is (`magic`, `version`), which namespace and key
/// it belongs to, and its payload's length. Written as 48 little-endian bytes, followed by
/// the payload and an 8-byte checksum of header and payload.
struct record_header {
    std::array<char, 4> magic{};
    std::uint32_t version = 0;
    std::uint64_t space = 0;     ///< the namespace (e.g. model, dtype, layout, page size)
    std::uint64_t key_high = 0, key_low = 0;
    std::uint64_t length = 0;    ///< payload bytes
    std::uint64_t reserved = 0;

    static constexpr std::size_t bytes = 48;
    static constexpr std::size_t checksum_bytes = 8;

    /// The header's 48 bytes.
    [[nodiscard]] std::array<std::byte, bytes> encode() const noexcept {
        std::array<std::byte, bytes> out{};
        std::memcpy(out.data(), magic.data(), 4);
        std::memcpy(out.data() + 4, &version, 4);
        std::memcpy(out.data() + 8, &space, 8);
        std::memcpy(out.data() + 16, &key_high, 8);
        std::memcpy(out.data() + 24, &key_low, 8);
        std::memcpy(out.data() + 32, &length, 8);
        std::memcpy(out.data() + 40, &reserved, 8);
        return out;
    }
    /// The header in the first 48 of `in` (which must hold them).
    [[nodiscard]] static record_header decode(std::span<const std::byte> in) noexcept {
        record_header h;
        std::memcpy(h.magic.data(), in.data(), 4);
        std::memcpy(&h.version, in.data() + 4, 4);
        std::memcpy(&h.space, in.data() + 8, 8);
        std::memcpy(&h.key_high, in.data() + 16, 8);
        std::memcpy(&h.key_low, in.data() + 24, 8);
        std::memcpy(&h.length, in.data() + 32, 8);
        std::memcpy(&h.reserved, in.data() + 40, 8);
        return h;
    }
    /// Whether `other` names the same kind, namespace and key (lengths aside).
    [[nodiscard]] bool same_record(const record_header& other) const noexcept {
        return magic == other.magic && version == other.version && space == other.space &&
               key_high == other.key_high && key_low == other.key_low;
    }
};

/// The checksum a frame ends with, of its encoded header and its payload.
[[nodiscard]] inline std::uint64_t frame_checksum(std::span<const std::byte> header,
                                                  std::span<const std::byte> payload) noexcept {
    return hash_combine(checksum64(header), checksum64(payload, 1));
}

/// The whole frame of `payload` under `header` (whose length is set to the payload's).
/// @code
/// std::string frame = frugal::frame_record(header, std::as_bytes(std::span(page)));
/// @endcode
[[nodiscard]] inline std::string frame_record(record_header header, std::span<const std::byte> payload) {
    header.length = payload.size();
    const auto head = header.encode();
    const std::uint64_t sum = frame_checksum(head, payload);
    std::string out(record_header::bytes + payload.size() + record_header::checksum_bytes, '\0');
    std::memcpy(out.data(), head.data(), head.size());
    if (!payload.empty()) std::memcpy(out.data() + head.size(), payload.data(), payload.size());
    std::memcpy(out.data() + head.size() + payload.size(), &sum, sizeof sum);
    return out;
}

/// What `check_frame` found.
enum class frame_status {
    whole,         ///< the record expected, complete, checksum right
    foreign,       ///< too short for a header, or another kind, version, namespace or key
    other_length,  ///< the record expected, but its payload is not the length asked for
    damaged,       ///< truncated, overlong, or its checksum does not match
};

/// Checks that `frame` is the whole record of `expected`'s kind, namespace and key, with a
/// payload of any length.
/// @code
/// if (frugal::check_frame(bytes, want) == frugal::frame_status::whole) use(bytes);
/// @endcode
[[nodiscard]] inline frame_status check_frame(std::span<const std::byte> frame, const record_header& expected) noexcept {
    if (frame.size() < record_header::bytes + record_header::checksum_bytes) return frame_status::foreign;
    const record_header h = record_header::decode(frame);
    if (!h.same_record(expected)) return frame_status::foreign;
    if (frame.size() - record_header::bytes - record_header::checksum_bytes != h.length) return frame_status::damaged;
    std::uint64_t sum;
    std::memcpy(&sum, frame.data() + record_header::bytes + h.length, sizeof sum);
    if (sum != frame_checksum(frame.first(record_header::bytes), frame.subspan(record_header::bytes, h.length)))
        return frame_status::damaged;
    return frame_status::whole;
}

/// Checks that `frame` is the whole record of `expected`'s kind, namespace and key with a
/// payload of `payload_bytes`.
/// @code
/// if (frugal::check_frame(bytes, want, page_bytes) == frugal::frame_status::whole) use(bytes);
/// @endcode
[[nodiscard]] inline frame_status check_frame(std::span<const std::byte> frame, const record_header& expected,
                                              std::uint64_t payload_bytes) noexcept {
    const frame_status status = check_frame(frame, expected);
    if (status == frame_status::foreign) return status;
    if (record_header::decode(frame).length != payload_bytes) return frame_status::other_length;
    return status;
}

}  // namespace frugal
