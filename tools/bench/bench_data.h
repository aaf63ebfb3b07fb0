// The data hoop-bench verifies with: every rank's input element is a small integer chosen so
// that the exact result of the collective is known in advance and floating-point reductions
// are exact in any order (no partial result ever leaves the range where the type holds every
// integer). Header-only, in the integer domain; storing the values in the element type and
// comparing are verify.cc's job.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "bench_math.h"
#include "hoop/types.h"

namespace hoop::bench {

// Inputs depend on an element's index only modulo this period, so the expected results of a
// whole buffer fit in a small table. 420 = 3*4*5*7 is a multiple of every cycle used below.
inline constexpr size_t kPatternPeriod = 420;

inline bool is_unsigned_type(DataType dt) {
  return dt == DataType::u8 || dt == DataType::u32 || dt == DataType::u64;
}

// Largest magnitude below which every integer is exact in a floating-point type (2^(p+1) for
// p mantissa bits); integers wrap modulo 2^bits, which is order-independent, so no limit.
inline int64_t exact_integer_limit(DataType dt) {
  switch (dt) {
    case DataType::f16: return int64_t{1} << 11;
    case DataType::bf16: return int64_t{1} << 8;
    case DataType::f32: return int64_t{1} << 24;
    case DataType::f64: return int64_t{1} << 53;
    default: return INT64_MAX;
  }
}

// Sum inputs lie in [-3, 3]: this many ranks may contribute non-zero terms before a partial
// sum could leave the exact range of the type (the others contribute 0).
inline int sum_contributors(DataType dt, int nranks) {
  const int64_t limit = exact_integer_limit(dt) / 3;
  return static_cast<int>(std::min<int64_t>(nranks, limit));
}

// Rank `rank`'s input at element `index`. The collectives without a reduction move data: their
// pattern differs from rank to rank and element to element to catch misplaced blocks.
inline int64_t input_value(OpType coll, RedOp op, DataType dt, int nranks, int rank,
                           size_t index) {
  const int64_t j = static_cast<int64_t>(index % kPatternPeriod);
  const int64_t r = rank;
  const bool is_signed = !is_unsigned_type(dt);
  if (!is_reducing(coll)) {
    const int64_t v = (r * 11 + j * 3) % 101;
    return is_signed ? v - 50 : v;
  }
  switch (op) {
    case RedOp::sum:
    case RedOp::avg: {
      if (rank >= sum_contributors(dt, nranks)) return 0;
      const int64_t v = (r + 3 * j) % 7;
      return is_signed ? v - 3 : v;
    }
    case RedOp::prod: {
      // At most three factors of 2 per element (|product| <= 8, no type overflows), and -1
      // factors on signed types so the sign is checked too.
      const int64_t v = r < j % 4 ? 2 : 1;
      return is_signed && (r + j) % 3 == 0 ? -v : v;
    }
    case RedOp::min:
    case RedOp::max: {
      const int64_t v = (r * 7 + j * 13) % 23;
      return is_signed ? v - 11 : v;
    }
  }
  return 0;
}

// An integer as the element type holds it: two's-complement wrap for integer types (the
// value a wrapping reduction ends with, whatever the order), unchanged for floats.
inline int64_t wrap_to_type(DataType dt, int64_t v) {
  switch (dt) {
    case DataType::i8: return static_cast<int8_t>(v);
    case DataType::u8: return static_cast<uint8_t>(v);
    case DataType::i32: return static_cast<int32_t>(v);
    case DataType::u32: return static_cast<uint32_t>(v);
    default: return v;  // 64-bit integers cannot wrap with these inputs; floats stay exact
  }
}

// The exact reduction over all ranks of element `index`. For avg this is the sum: the
// division happens in the element type (see verify.cc), except for integers, where it is the
// library's truncating division of the wrapped sum and is done here.
inline int64_t expected_reduction(RedOp op, DataType dt, int nranks, size_t index) {
  int64_t acc = input_value(OpType::allreduce, op, dt, nranks, 0, index);
  for (int r = 1; r < nranks; ++r) {
    const int64_t v = input_value(OpType::allreduce, op, dt, nranks, r, index);
    switch (op) {
      case RedOp::sum:
      case RedOp::avg: acc += v; break;
      case RedOp::prod: acc *= v; break;
      case RedOp::min: acc = std::min(acc, v); break;
      case RedOp::max: acc = std::max(acc, v); break;
    }
  }
  acc = wrap_to_type(dt, acc);
  if (op == RedOp::avg && !is_float(dt)) acc = wrap_to_type(dt, acc / nranks);
  return acc;
}

}  // namespace hoop::bench
