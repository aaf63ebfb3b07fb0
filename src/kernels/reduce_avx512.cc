// Kernels for AVX-512 machines (compiled with -mavx512f/bw/vl/dq). f32, f64 and integers come
// from the compiler's vectorization of reduce_loops.h; f16 uses the AVX-512 forms of the F16C
// conversions, bf16 integer AVX-512 code. (AVX512_BF16's VCVTNEPS2BF16 is not used: it flushes
// subnormals to zero.)
// GCC 12 reports its own AVX-512 intrinsics' _mm512_undefined_*() placeholders as
// "may be used uninitialized" (GCC bug 105593); the suppression covers those headers only.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>
#pragma GCC diagnostic pop

#include "kernels/reduce_loops.h"

namespace hoop::kernels {
namespace {

inline __m512i splat(uint32_t v) noexcept { return _mm512_set1_epi32(static_cast<int>(v)); }

struct Avx512Lanes {
  using F = __m512;
  static constexpr size_t kWidth = 16;
  // a made quiet where a is NaN, r elsewhere (the NaN rule of reduce_loops.h).
  static F nan_a_or(F a, F r) noexcept {
    return _mm512_mask_add_ps(r, _mm512_cmp_ps_mask(a, a, _CMP_UNORD_Q), a, a);
  }
  static F add(F a, F b) noexcept { return nan_a_or(a, _mm512_add_ps(a, b)); }
  static F mul(F a, F b) noexcept { return nan_a_or(a, _mm512_mul_ps(a, b)); }
  static F min(F a, F b) noexcept { return _mm512_min_ps(a, b); }  // (a < b) ? a : b
  static F max(F a, F b) noexcept { return _mm512_max_ps(a, b); }  // (a > b) ? a : b
  static F div(F a, F b) noexcept { return _mm512_div_ps(a, b); }
  static F broadcast(float v) noexcept { return _mm512_set1_ps(v); }
  static F load_f32(const float* p) noexcept { return _mm512_loadu_ps(p); }
  static void store_f32(float* p, F v) noexcept { _mm512_storeu_ps(p, v); }

  static F load_f16(const uint16_t* p) noexcept {
    return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
  }
  static void store_f16(uint16_t* p, F v) noexcept {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(p),
                        _mm512_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  }

  static F load_bf16(const uint16_t* p) noexcept {
    const __m512i wide =
        _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
    return _mm512_castsi512_ps(_mm512_slli_epi32(wide, 16));
  }
  static void store_bf16(uint16_t* p, F v) noexcept {
    // half_bits.h's float_to_bf16_bits, with the NaN case selected before the final shift.
    const __m512i u = _mm512_castps_si512(v);
    const __m512i odd = _mm512_and_si512(_mm512_srli_epi32(u, 16), splat(1));
    const __m512i rounded = _mm512_add_epi32(_mm512_add_epi32(u, splat(0x7fff)), odd);
    const __mmask16 is_nan = _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
    const __m512i chosen = _mm512_mask_or_epi32(rounded, is_nan, u, splat(0x00400000));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(p),
                        _mm512_cvtepi32_epi16(_mm512_srli_epi32(chosen, 16)));
  }
};

// f32, f64 and the integer types take the AVX2 loops. Measured on an AMD EPYC (bench_kernels,
// f32 sum): the compiler's 512-bit loops, masked for the NaN rule, match the AVX2 ones while
// the data sits in L1/L2 and fall to 0.5-0.65x of them beyond (16 MiB: 35 vs 54 GB/s; from
// memory, a += b 9.8 vs 17 GB/s), where the collectives spend their time. f16 and bf16,
// bound by their conversions, keep 512 bits (1.2-2.2x the AVX2 code at every size).
void reduce_avx512(void* dst, const void* a, const void* b, size_t n, DataType dt, RedOp op) {
  if (dt == DataType::f16 || dt == DataType::bf16) return reduce_with<Avx512Lanes>(dst, a, b, n, dt, op);
  detail::kAvx2Kernels.reduce(dst, a, b, n, dt, op);
}

constexpr detail::IsaKernels avx512_kernels() {
  detail::IsaKernels k = make_kernels<Avx512Lanes>("avx512");
  k.reduce = &reduce_avx512;
  return k;
}

}  // namespace

namespace detail {
const IsaKernels kAvx512Kernels = avx512_kernels();
}  // namespace detail

}  // namespace hoop::kernels
