// Scalar bit-level conversions between f32 and the 16-bit float formats (IEEE binary16 "f16"
// and bfloat16 "bf16"), written without branches so that loops over them vectorize.
//
// Semantics (identical to the F16C instructions, so scalar and vector paths agree bit for bit):
//  - f16 -> f32 and bf16 -> f32 are exact; subnormals, infinities and signed zeros are kept.
//  - f32 -> f16 and f32 -> bf16 round to nearest, ties to even; values too large for the
//    format become infinity; tiny values become subnormals or zero.
//  - NaNs stay NaNs with their sign and the top bits of their payload, and come out quiet
//    (f16 -> f32 also quiets, as VCVTPH2PS does). bf16 -> f32 is a plain shift and keeps a
//    signalling NaN signalling; the f32 arithmetic that follows quiets it.
//
// Everything here has internal linkage on purpose: this header is compiled into translation
// units built for different instruction sets, and an inline function with external linkage
// would let the linker keep, say, the AVX-512 copy for callers built for plain x86-64.
#pragma once

#include <cstdint>

namespace hoop::kernels {
namespace {

inline uint32_t float_bits(float f) noexcept { return __builtin_bit_cast(uint32_t, f); }
inline float bits_float(uint32_t u) noexcept { return __builtin_bit_cast(float, u); }

inline float f16_bits_to_float(uint16_t h) noexcept {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t magnitude = h & 0x7fffu;  // exponent and mantissa
  const uint32_t shifted = magnitude << 13;
  // Normal numbers: move the exponent from bias 15 to bias 127.
  const uint32_t normal = shifted + ((127u - 15u) << 23);
  // Infinity and NaN: maximal exponent; a NaN also gets the quiet bit.
  const uint32_t quiet = magnitude > 0x7c00u ? 0x00400000u : 0u;
  const uint32_t inf_nan = shifted | 0x7f800000u | quiet;
  // Zero and subnormals: mantissa * 2^-24, exact in f32 (a single multiplication).
  const uint32_t subnormal = float_bits(static_cast<float>(static_cast<int32_t>(magnitude)) *
                                        0x1p-24f);
  const uint32_t body = magnitude >= 0x7c00u ? inf_nan
                        : magnitude < 0x0400u ? subnormal
                                              : normal;
  return bits_float(sign | body);
}

inline uint16_t float_to_f16_bits(float f) noexcept {
  const uint32_t u = float_bits(f);
  const uint32_t sign = (u >> 16) & 0x8000u;
  const uint32_t magnitude = u & 0x7fffffffu;
  // NaN: keep the top payload bits, force the quiet bit.
  const uint32_t nan = 0x7e00u | ((magnitude >> 13) & 0x03ffu);
  // Normal results: rebias the exponent, then round the 13 dropped bits to nearest even.
  const uint32_t odd = (magnitude >> 13) & 1u;
  const uint32_t normal = (magnitude - ((127u - 15u) << 23) + 0x0fffu + odd) >> 13;
  // Results below 2^-14 (f16 subnormals or zero): adding 0.5 puts the f16 subnormal unit
  // (2^-24) at the last mantissa bit of f32, so the hardware addition does the rounding
  // (to nearest even, the default mode); the mantissa bits are then the f16 encoding.
  const uint32_t subnormal = float_bits(bits_float(magnitude) + 0.5f) - float_bits(0.5f);
  // 0x477ff000 = 65520, halfway between the largest f16 (65504) and 2^16: ties to even round
  // up, so it and everything above it become infinity.
  const uint32_t body = magnitude > 0x7f800000u   ? nan
                        : magnitude >= 0x477ff000u ? 0x7c00u
                        : magnitude < 0x38800000u  ? subnormal
                                                   : normal;
  return static_cast<uint16_t>(sign | body);
}

inline float bf16_bits_to_float(uint16_t b) noexcept {
  return bits_float(static_cast<uint32_t>(b) << 16);
}

inline uint16_t float_to_bf16_bits(float f) noexcept {
  const uint32_t u = float_bits(f);
  // Round to nearest even on the 16 dropped bits; a carry into the exponent is correct,
  // including the overflow of the largest finite values to infinity.
  const uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
  const uint32_t nan = (u >> 16) | 0x0040u;  // keep sign and top payload, force quiet bit
  const bool is_nan = (u & 0x7fffffffu) > 0x7f800000u;
  return static_cast<uint16_t>(is_nan ? nan : rounded);
}

}  // namespace
}  // namespace hoop::kernels
