// checked_add / checked_mul / checked_cast against 128-bit arithmetic.
#include <frugal/core/checked.hpp>

#include <cstdint>
#include <limits>

#include "fuzz.hpp"

__extension__ typedef unsigned __int128 wide;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    frugal::fuzz::input in(data, size);
    while (!in.empty()) {
        const auto a = in.take<std::uint64_t>() >> in.below(64), b = in.take<std::uint64_t>() >> in.below(64);
        const wide sum = static_cast<wide>(a) + b, product = static_cast<wide>(a) * b;
        const wide max = std::numeric_limits<std::uint64_t>::max();
        try {
            const auto s = frugal::checked_add(a, b, "a + b");
            FRUGAL_FUZZ_CHECK(sum <= max && s == static_cast<std::uint64_t>(sum), "add %llu %llu",
                              static_cast<unsigned long long>(a), static_cast<unsigned long long>(b));
        } catch (const frugal::invalid_argument&) {
            FRUGAL_FUZZ_CHECK(sum > max, "add threw on %llu %llu", static_cast<unsigned long long>(a),
                              static_cast<unsigned long long>(b));
        }
        try {
            const auto p = frugal::checked_mul(a, b, "a x b");
            FRUGAL_FUZZ_CHECK(product <= max && p == static_cast<std::uint64_t>(product), "mul");
        } catch (const frugal::invalid_argument&) {
            FRUGAL_FUZZ_CHECK(product > max, "mul threw on %llu %llu", static_cast<unsigned long long>(a),
                              static_cast<unsigned long long>(b));
        }
        const auto v = in.take<std::int64_t>();
        try {
            const auto c = frugal::checked_cast<std::uint32_t>(v, "v");
            FRUGAL_FUZZ_CHECK(v >= 0 && v <= 0xffffffffll && c == static_cast<std::uint32_t>(v), "cast");
        } catch (const frugal::invalid_argument&) {
            FRUGAL_FUZZ_CHECK(v < 0 || v > 0xffffffffll, "cast threw on %lld", static_cast<long long>(v));
        }
    }
    return 0;
}
