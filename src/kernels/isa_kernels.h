// The table of kernels one instruction-set build provides; the dispatcher (dispatch.cc) picks
// one table at run time. Each reduce_<isa>.cc defines its table; the callee trusts its
// arguments (the dispatcher has validated them).
#pragma once

#include <cstddef>

#include "hoop/types.h"

namespace hoop::kernels::detail {

struct IsaKernels {
  const char* name;  // "scalar", "sse2", "avx2", "avx512"
  void (*reduce)(void* dst, const void* a, const void* b, size_t n, DataType dt, RedOp op);
  void (*finish_avg)(void* data, size_t n, DataType dt, int nranks);
  // Only f16 and bf16 reach these two; f32 is a copy done by the dispatcher.
  void (*to_f32)(float* dst, const void* src, DataType src_dt, size_t n);
  void (*from_f32)(void* dst, DataType dst_dt, const float* src, size_t n);
};

extern const IsaKernels kScalarKernels;  // reduce_scalar.cc: plain C++ loops
extern const IsaKernels kSse2Kernels;    // reduce_sse2.cc: x86-64 baseline
extern const IsaKernels kAvx2Kernels;    // reduce_avx2.cc: AVX2 + FMA + F16C
extern const IsaKernels kAvx512Kernels;  // reduce_avx512.cc: AVX-512 F/BW/VL/DQ

}  // namespace hoop::kernels::detail
