// The exported scalar f16/bf16 conversions (the bit-level work is in half_bits.h).
#include "kernels/half_bits.h"
#include "kernels/reduce.h"

namespace hoop::kernels {

float half_to_float(uint16_t h) noexcept { return f16_bits_to_float(h); }
uint16_t float_to_half(float f) noexcept { return float_to_f16_bits(f); }
float bf16_to_float(uint16_t b) noexcept { return bf16_bits_to_float(b); }
uint16_t float_to_bf16(float f) noexcept { return float_to_bf16_bits(f); }

}  // namespace hoop::kernels
