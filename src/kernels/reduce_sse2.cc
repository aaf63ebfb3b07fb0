// Kernels for the x86-64 baseline (SSE2). f32, f64 and integers come from the compiler's
// vectorization of reduce_loops.h; f16 and bf16 are converted here with integer SSE2 code
// (there is no F16C at this level), four lanes at a time, following half_bits.h exactly.
#include <emmintrin.h>

#include "kernels/reduce_loops.h"

namespace hoop::kernels {
namespace {

// mask ? if_set : if_clear, lane by lane (SSE2 has no blend instruction).
inline __m128i select(__m128i mask, __m128i if_set, __m128i if_clear) noexcept {
  return _mm_or_si128(_mm_and_si128(mask, if_set), _mm_andnot_si128(mask, if_clear));
}

inline __m128i splat(uint32_t v) noexcept { return _mm_set1_epi32(static_cast<int>(v)); }

// Four 32-bit lanes holding values below 2^16 -> four uint16 stored at p.
inline void store_low_halves(uint16_t* p, __m128i v) noexcept {
  // packs_epi32 saturates as signed, so sign-extend the 16-bit values first; they then pack
  // unchanged.
  const __m128i sext = _mm_srai_epi32(_mm_slli_epi32(v, 16), 16);
  _mm_storel_epi64(reinterpret_cast<__m128i*>(p), _mm_packs_epi32(sext, sext));
}

// Four 32-bit lanes -> their top 16 bits, stored as four uint16 at p.
inline void store_high_halves(uint16_t* p, __m128i v) noexcept {
  const __m128i sext = _mm_srai_epi32(v, 16);  // in int16 range: packs keeps it unchanged
  _mm_storel_epi64(reinterpret_cast<__m128i*>(p), _mm_packs_epi32(sext, sext));
}

inline __m128i load_four_halves(const uint16_t* p) noexcept {
  return _mm_loadl_epi64(reinterpret_cast<const __m128i*>(p));
}

struct Sse2Lanes {
  using F = __m128;
  static constexpr size_t kWidth = 4;
  // a made quiet where a is NaN, r elsewhere (the NaN rule of reduce_loops.h).
  static F nan_a_or(F a, F r) noexcept {
    const F a_is_nan = _mm_cmpunord_ps(a, a);
    return _mm_or_ps(_mm_and_ps(a_is_nan, _mm_add_ps(a, a)), _mm_andnot_ps(a_is_nan, r));
  }
  static F add(F a, F b) noexcept { return nan_a_or(a, _mm_add_ps(a, b)); }
  static F mul(F a, F b) noexcept { return nan_a_or(a, _mm_mul_ps(a, b)); }
  static F min(F a, F b) noexcept { return _mm_min_ps(a, b); }  // (a < b) ? a : b
  static F max(F a, F b) noexcept { return _mm_max_ps(a, b); }  // (a > b) ? a : b
  static F div(F a, F b) noexcept { return _mm_div_ps(a, b); }
  static F broadcast(float v) noexcept { return _mm_set1_ps(v); }
  static F load_f32(const float* p) noexcept { return _mm_loadu_ps(p); }
  static void store_f32(float* p, F v) noexcept { _mm_storeu_ps(p, v); }

  static F load_bf16(const uint16_t* p) noexcept {
    return _mm_castsi128_ps(_mm_unpacklo_epi16(_mm_setzero_si128(), load_four_halves(p)));
  }
  static void store_bf16(uint16_t* p, F v) noexcept {
    // half_bits.h's float_to_bf16_bits, with the NaN case selected before the final shift.
    const __m128i u = _mm_castps_si128(v);
    const __m128i odd = _mm_and_si128(_mm_srli_epi32(u, 16), splat(1));
    const __m128i rounded = _mm_add_epi32(_mm_add_epi32(u, splat(0x7fff)), odd);
    const __m128i quieted = _mm_or_si128(u, splat(0x00400000));
    const __m128i is_nan = _mm_castps_si128(_mm_cmpunord_ps(v, v));
    store_high_halves(p, select(is_nan, quieted, rounded));
  }

  static F load_f16(const uint16_t* p) noexcept {
    const __m128i h = _mm_unpacklo_epi16(load_four_halves(p), _mm_setzero_si128());
    const __m128i sign = _mm_slli_epi32(_mm_and_si128(h, splat(0x8000)), 16);
    const __m128i magnitude = _mm_and_si128(h, splat(0x7fff));
    const __m128i shifted = _mm_slli_epi32(magnitude, 13);
    const __m128i normal = _mm_add_epi32(shifted, splat((127u - 15u) << 23));
    const __m128i quiet =
        _mm_and_si128(_mm_cmpgt_epi32(magnitude, splat(0x7c00)), splat(0x00400000));
    const __m128i inf_nan = _mm_or_si128(_mm_or_si128(shifted, splat(0x7f800000)), quiet);
    const __m128i subnormal =
        _mm_castps_si128(_mm_mul_ps(_mm_cvtepi32_ps(magnitude), _mm_set1_ps(0x1p-24f)));
    const __m128i is_inf_nan = _mm_cmpgt_epi32(magnitude, splat(0x7bff));
    const __m128i is_subnormal = _mm_cmplt_epi32(magnitude, splat(0x0400));
    const __m128i body = select(is_inf_nan, inf_nan, select(is_subnormal, subnormal, normal));
    return _mm_castsi128_ps(_mm_or_si128(sign, body));
  }
  static void store_f16(uint16_t* p, F v) noexcept {
    const __m128i u = _mm_castps_si128(v);
    const __m128i sign = _mm_and_si128(_mm_srli_epi32(u, 16), splat(0x8000));
    const __m128i magnitude = _mm_and_si128(u, splat(0x7fffffff));
    const __m128i nan =
        _mm_or_si128(splat(0x7e00), _mm_and_si128(_mm_srli_epi32(magnitude, 13), splat(0x03ff)));
    const __m128i odd = _mm_and_si128(_mm_srli_epi32(magnitude, 13), splat(1));
    const __m128i rebiased = _mm_sub_epi32(magnitude, splat((127u - 15u) << 23));
    const __m128i normal =
        _mm_srli_epi32(_mm_add_epi32(rebiased, _mm_add_epi32(splat(0x0fff), odd)), 13);
    const __m128 plus_half = _mm_add_ps(_mm_castsi128_ps(magnitude), _mm_set1_ps(0.5f));
    const __m128i subnormal = _mm_sub_epi32(_mm_castps_si128(plus_half), splat(0x3f000000));
    // magnitude is below 2^31, so the signed compares are exact.
    const __m128i is_nan = _mm_cmpgt_epi32(magnitude, splat(0x7f800000));
    const __m128i is_inf = _mm_cmpgt_epi32(magnitude, splat(0x477fefff));
    const __m128i is_subnormal = _mm_cmplt_epi32(magnitude, splat(0x38800000));
    const __m128i body =
        select(is_nan, nan, select(is_inf, splat(0x7c00), select(is_subnormal, subnormal, normal)));
    store_low_halves(p, _mm_or_si128(sign, body));
  }
};

}  // namespace

namespace detail {
const IsaKernels kSse2Kernels = make_kernels<Sse2Lanes>("sse2");
}  // namespace detail

}  // namespace hoop::kernels
