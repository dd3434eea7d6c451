#pragma once
// Shared pieces of the fuzz targets: a reader that turns the input bytes into operations,
// and the check that aborts on a disagreement with the oracle.

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <span>

/// Aborts with the condition and a message when `cond` is false (libFuzzer and the driver
/// both treat an abort as a finding and keep the input).
#define FRUGAL_FUZZ_CHECK(cond, ...)                                                \
    do {                                                                            \
        if (!(cond)) {                                                              \
            std::fprintf(stderr, "fuzz check failed: %s (%s:%d): ", #cond, __FILE__, \
                         __LINE__);                                                 \
            std::fprintf(stderr, __VA_ARGS__);                                      \
            std::fprintf(stderr, "\n");                                             \
            std::abort();                                                           \
        }                                                                           \
    } while (false)

namespace frugal::fuzz {

/// Consumes the input from the front; past its end every read returns zeros, so any input
/// decodes to some operation sequence.
class input {
public:
    input(const std::uint8_t* data, std::size_t size) : bytes_(data, size) {}
    [[nodiscard]] bool empty() const noexcept { return at_ >= bytes_.size(); }
    [[nodiscard]] std::size_t remaining() const noexcept { return empty() ? 0 : bytes_.size() - at_; }
    template <class T>
    T take() {
        T v{};
        const std::size_t n = std::min(sizeof(T), remaining());
        if (n > 0) std::memcpy(&v, bytes_.data() + at_, n);
        at_ += sizeof(T);
        return v;
    }
    /// A value in [0, bound) (bound > 0).
    std::uint64_t below(std::uint64_t bound) { return take<std::uint64_t>() % bound; }
    /// The rest of the input as bytes.
    std::span<const std::uint8_t> rest() {
        auto r = empty() ? std::span<const std::uint8_t>{} : bytes_.subspan(at_);
        at_ = bytes_.size();
        return r;
    }

private:
    std::span<const std::uint8_t> bytes_;
    std::size_t at_ = 0;
};

}  // namespace frugal::fuzz
