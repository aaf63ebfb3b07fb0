// Element-wise reduction kernels for every (dtype, op) pair, vectorized with runtime dispatch
// (the widest of AVX-512 / AVX2 / SSE2 the CPU has; HOOP_KERNEL_ISA=scalar|sse2|avx2|avx512
// caps it). f16 and bf16 are computed in f32 and rounded once per call (round to nearest even).
#pragma once

#include <cstddef>
#include <string_view>

#include "hoop/types.h"

namespace hoop::kernels {

// dst[i] = op(a[i], b[i]) for i < n. dst may alias a or b (exactly, not partially).
// RedOp::avg reduces like sum: the division is finish_avg's job, done once at the end.
void reduce(void* dst, const void* a, const void* b, size_t n, DataType dt, RedOp op);

// data[i] /= nranks, for the final step of an average (integers: truncating division).
void finish_avg(void* data, size_t n, DataType dt, int nranks);

// Conversions between f32 and the 16-bit float types (round to nearest even, NaN kept).
void to_f32(float* dst, const void* src, DataType src_dt, size_t n);    // src_dt f16|bf16|f32
void from_f32(void* dst, DataType dst_dt, const float* src, size_t n);  // dst_dt f16|bf16|f32

// Scalar references (no SIMD), for tests and for the tail of vector loops.
void reduce_scalar(void* dst, const void* a, const void* b, size_t n, DataType dt, RedOp op);

// Name of the instruction set the dispatcher selected ("avx512", "avx2", "sse2", "scalar").
std::string_view active_isa() noexcept;

// Scalar f16/bf16 <-> f32 (exposed for tests and benchmarks' input generation).
float half_to_float(uint16_t h) noexcept;
uint16_t float_to_half(float f) noexcept;
float bf16_to_float(uint16_t b) noexcept;
uint16_t float_to_bf16(float f) noexcept;

}  // namespace hoop::kernels
