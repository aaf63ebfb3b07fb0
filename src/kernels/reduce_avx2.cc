// Kernels for AVX2 machines (compiled with -mavx2 -mfma -mf16c). f32, f64 and integers come
// from the compiler's vectorization of reduce_loops.h; f16 uses the F16C conversions (which
// round to nearest even and quiet NaNs exactly like half_bits.h), bf16 integer AVX2 code.
#include <immintrin.h>

#include "kernels/reduce_loops.h"

namespace hoop::kernels {
namespace {

inline __m256i splat(uint32_t v) noexcept { return _mm256_set1_epi32(static_cast<int>(v)); }

struct Avx2Lanes {
  using F = __m256;
  static constexpr size_t kWidth = 8;
  // a made quiet where a is NaN, r elsewhere (the NaN rule of reduce_loops.h).
  static F nan_a_or(F a, F r) noexcept {
    return _mm256_blendv_ps(r, _mm256_add_ps(a, a), _mm256_cmp_ps(a, a, _CMP_UNORD_Q));
  }
  static F add(F a, F b) noexcept { return nan_a_or(a, _mm256_add_ps(a, b)); }
  static F mul(F a, F b) noexcept { return nan_a_or(a, _mm256_mul_ps(a, b)); }
  static F min(F a, F b) noexcept { return _mm256_min_ps(a, b); }  // (a < b) ? a : b
  static F max(F a, F b) noexcept { return _mm256_max_ps(a, b); }  // (a > b) ? a : b
  static F div(F a, F b) noexcept { return _mm256_div_ps(a, b); }
  static F broadcast(float v) noexcept { return _mm256_set1_ps(v); }
  static F load_f32(const float* p) noexcept { return _mm256_loadu_ps(p); }
  static void store_f32(float* p, F v) noexcept { _mm256_storeu_ps(p, v); }

  static F load_f16(const uint16_t* p) noexcept {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  }
  static void store_f16(uint16_t* p, F v) noexcept {
    _mm_storeu_si128(reinterpret_cast<__m128i*>(p),
                     _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  }

  static F load_bf16(const uint16_t* p) noexcept {
    const __m256i wide =
        _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
    return _mm256_castsi256_ps(_mm256_slli_epi32(wide, 16));
  }
  static void store_bf16(uint16_t* p, F v) noexcept {
    // half_bits.h's float_to_bf16_bits, with the NaN case selected before the final shift.
    const __m256i u = _mm256_castps_si256(v);
    const __m256i odd = _mm256_and_si256(_mm256_srli_epi32(u, 16), splat(1));
    const __m256i rounded = _mm256_add_epi32(_mm256_add_epi32(u, splat(0x7fff)), odd);
    const __m256i quieted = _mm256_or_si256(u, splat(0x00400000));
    const __m256 is_nan = _mm256_cmp_ps(v, v, _CMP_UNORD_Q);
    const __m256i chosen = _mm256_castps_si256(
        _mm256_blendv_ps(_mm256_castsi256_ps(rounded), _mm256_castsi256_ps(quieted), is_nan));
    const __m256i halves = _mm256_srli_epi32(chosen, 16);  // each lane < 2^16
    const __m128i packed =
        _mm_packus_epi32(_mm256_castsi256_si128(halves), _mm256_extracti128_si256(halves, 1));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(p), packed);
  }
};

}  // namespace

namespace detail {
const IsaKernels kAvx2Kernels = make_kernels<Avx2Lanes>("avx2");
}  // namespace detail

}  // namespace hoop::kernels
