// Element-wise reduction kernels for every (dtype, op) pair, vectorized with runtime dispatch
// (the widest of AVX-512 / AVX2 / SSE2 the CPU has; HOOP_KERNEL_ISA=scalar|sse2|avx2|avx512
// caps it). f16 and bf16 are computed in f32 and rounded once per call (round to nearest even).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "hoop/types.h"

namespace hoop::kernels {

// dst[i] = op(a[i], b[i]) for i < n. dst may alias a or b (exactly, not partially).
// RedOp::avg reduces like sum: the division is finish_avg's job, done once at the end.
// Every instruction set gives bit-identical results: integer sum/prod wrap around; float
// min(a, b) = (a < b) ? a : b and max(a, b) = (a > b) ? a : b (the SSE/AVX minps/maxps rule:
// b when either is NaN); a NaN in sum/prod propagates a's first, then b's, made quiet.
// Buffers not aligned to the element size work, through a slower staged path.
// Throws hoop::Error{invalid_argument} for an unknown dtype/op, a null buffer (n > 0) or a
// partial overlap.
void reduce(void* dst, const void* a, const void* b, size_t n, DataType dt, RedOp op);

// Where reduce_fan_out copies its result, and whether around the caches (copy.h).
struct FanOut {
  void* dst;
  bool stream;
};

// reduce(dst, a, b, n, dt, op), then dst copied to every `outs[k].dst`, a block of a few
// hundred bytes at a time: each block is written to the outputs right after it is reduced, so
// the outputs' stores mix with the inputs' loads instead of one pass over dst per output after
// the whole reduction (on buffers beyond the caches, 1.4-2x faster on one core). Bit for bit
// what reduce() then the copies give. An output may be a or b exactly (in place: each block is
// read before it is written), never overlap them, dst or another output otherwise.
void reduce_fan_out(void* dst, const void* a, const void* b, size_t n, DataType dt, RedOp op,
                    const FanOut* outs, size_t nouts);

// data[i] /= nranks, for the final step of an average (integers: truncating division).
void finish_avg(void* data, size_t n, DataType dt, int nranks);

// Conversions between f32 and the 16-bit float types (round to nearest even, NaN kept).
// For f16/bf16 the buffers must not overlap; for f32 this is a copy (overlap allowed).
void to_f32(float* dst, const void* src, DataType src_dt, size_t n);    // src_dt f16|bf16|f32
void from_f32(void* dst, DataType dst_dt, const float* src, size_t n);  // dst_dt f16|bf16|f32

// The reference: plain C++ loops without intrinsics, whatever instruction set is active
// (for tests; the vector kernels must match it bit for bit).
void reduce_scalar(void* dst, const void* a, const void* b, size_t n, DataType dt, RedOp op);

// Name of the instruction set the dispatcher selected ("avx512", "avx2", "sse2", "scalar").
std::string_view active_isa() noexcept;

// The instruction sets this CPU can run, narrowest first (always starts "scalar", "sse2").
std::vector<std::string_view> available_isas();

// Switches the dispatcher to the named instruction set for every later call in this process
// (tests and benchmarks compare them). Returns false, changing nothing, for an unknown name or
// one this CPU lacks. An empty name restores the default choice, re-reading HOOP_KERNEL_ISA.
// Safe while other threads run kernels (each call uses the old or the new table).
bool set_isa_for_testing(std::string_view isa);

// Scalar f16/bf16 <-> f32 (exposed for tests and benchmarks' input generation).
float half_to_float(uint16_t h) noexcept;
uint16_t float_to_half(float f) noexcept;
float bf16_to_float(uint16_t b) noexcept;
uint16_t float_to_bf16(float f) noexcept;

}  // namespace hoop::kernels
