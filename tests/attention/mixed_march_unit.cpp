// One unit of the mixed -march program, compiled once per level with
// FRUGAL_MIXED_MARCH_ENTRY naming its entry point. It calls nothing but frugal's
// conversions on the caller's buffers, so that every function it shares with the other
// units is one of frugal's.
#include <frugal/attention/dtype.hpp>

#include "mixed_march.hpp"

namespace frugal::testing {

const char* FRUGAL_MIXED_MARCH_ENTRY(const mixed_march_io& io) {
    namespace fa = frugal::attention;
    static_assert(sizeof(fa::bfloat16) == sizeof(std::uint16_t) && sizeof(fa::float16) == sizeof(std::uint16_t));
    fa::to_floats(reinterpret_cast<const fa::bfloat16*>(io.half_bits), io.from_bf16, io.n16);
    fa::to_floats(reinterpret_cast<const fa::float16*>(io.half_bits), io.from_f16, io.n16);
    fa::from_floats(io.floats, reinterpret_cast<fa::bfloat16*>(io.to_bf16), io.n32);
    fa::from_floats(io.floats, reinterpret_cast<fa::float16*>(io.to_f16), io.n32);
    return fa::conversion_isa();
}

}  // namespace frugal::testing
