// The loops behind every kernel, written once and compiled once per instruction set: each
// reduce_<isa>.cc includes this header and instantiates make_kernels<Lanes>() with its own
// "Lanes" type, a bundle of f32 vector operations (see ScalarLanes below for the interface).
//
// f32, f64 and the integer types use plain element loops that the compiler vectorizes for the
// instruction set of the including file. f16 and bf16 go through Lanes: load and widen to f32,
// compute in f32, round once back to 16 bits.
//
// Rules every loop here follows, so that all instruction sets give bit-identical results:
//  - min(a, b) = (a < b) ? a : b and max(a, b) = (a > b) ? a : b, exactly the semantics of
//    SSE/AVX minps/maxps (with the first argument first): when either input is NaN, or both
//    are zeros of either sign, the result is b. The vector code uses those instructions
//    with a, b in that order.
//  - sum and prod: when a is NaN the result is a made quiet; otherwise when b is NaN it is b
//    made quiet; an invalid operation (inf - inf, 0 * inf) gives the default NaN. That is
//    the x86 rule with a as the first operand, but compilers treat + and * as commutative and
//    may swap the operands, so the case "a is NaN" is selected explicitly.
//  - No multiply-add shapes exist (each result is one operation, or one division for the
//    average), so floating-point contraction into FMA cannot change any result.
//  - Integer sum and product wrap around (computed in the unsigned type: no signed overflow).
//
// Everything is in an anonymous namespace: see half_bits.h for why, and no standard-library
// function template is called from here (its instantiation would have external linkage).
#pragma once

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "hoop/types.h"
#include "kernels/half_bits.h"
#include "kernels/isa_kernels.h"

namespace hoop::kernels {
namespace {

// ---- element operations -------------------------------------------------------------------

// Unsigned type the integer T computes in; at least `unsigned` so that u8/u16 products do not
// promote to (signed, overflowing) int.
template <class T>
using WrapType =
    std::conditional_t<(sizeof(T) < sizeof(unsigned)), unsigned, std::make_unsigned_t<T>>;

// a with its quiet bit set when a is NaN, else r. Branch-free on purpose: under the default
// -ftrapping-math the compiler will not turn a conditional floating-point operation into a
// vector select, and the loop would stay scalar.
template <class T>
T nan_a_or(T a, T r) noexcept {
  using Bits = std::conditional_t<sizeof(T) == 4, uint32_t, uint64_t>;
  constexpr Bits kQuiet = Bits{1} << (sizeof(T) == 4 ? 22 : 51);
  const Bits mask = Bits{0} - static_cast<Bits>(a != a);
  const Bits quiet_a = __builtin_bit_cast(Bits, a) | kQuiet;
  return __builtin_bit_cast(T, (__builtin_bit_cast(Bits, r) & ~mask) | (quiet_a & mask));
}

struct SumOp {
  template <class T>
  static T apply(T a, T b) noexcept {
    if constexpr (std::is_integral_v<T>) {
      return static_cast<T>(static_cast<WrapType<T>>(a) + static_cast<WrapType<T>>(b));
    } else {
      return nan_a_or(a, a + b);
    }
  }
};
struct ProdOp {
  template <class T>
  static T apply(T a, T b) noexcept {
    if constexpr (std::is_integral_v<T>) {
      return static_cast<T>(static_cast<WrapType<T>>(a) * static_cast<WrapType<T>>(b));
    } else {
      return nan_a_or(a, a * b);
    }
  }
};
struct MinOp {
  template <class T>
  static T apply(T a, T b) noexcept { return (a < b) ? a : b; }
};
struct MaxOp {
  template <class T>
  static T apply(T a, T b) noexcept { return (a > b) ? a : b; }
};

template <class T, class Op>
void elementwise(T* dst, const T* a, const T* b, size_t n) {
  for (size_t i = 0; i < n; ++i) dst[i] = Op::apply(a[i], b[i]);
}

template <class T>
void reduce_native(void* dst, const void* a, const void* b, size_t n, RedOp op) {
  auto* d = static_cast<T*>(dst);
  const auto* x = static_cast<const T*>(a);
  const auto* y = static_cast<const T*>(b);
  switch (op) {
    case RedOp::sum:
    case RedOp::avg: return elementwise<T, SumOp>(d, x, y, n);
    case RedOp::prod: return elementwise<T, ProdOp>(d, x, y, n);
    case RedOp::min: return elementwise<T, MinOp>(d, x, y, n);
    case RedOp::max: return elementwise<T, MaxOp>(d, x, y, n);
  }
}

template <class T>
void finish_avg_native(void* data, size_t n, int nranks) {
  auto* d = static_cast<T*>(data);
  if constexpr (std::is_integral_v<T>) {
    // Divide in 64 bits: nranks may not fit T (i8 data on 200 ranks). Truncates toward zero.
    using Wide = std::conditional_t<std::is_signed_v<T>, int64_t, uint64_t>;
    const auto divisor = static_cast<Wide>(nranks);
    for (size_t i = 0; i < n; ++i) d[i] = static_cast<T>(static_cast<Wide>(d[i]) / divisor);
  } else {
    // A true division (not a multiplication by 1/nranks), so the result is correctly rounded.
    const auto divisor = static_cast<T>(nranks);
    for (size_t i = 0; i < n; ++i) d[i] = d[i] / divisor;
  }
}

// ---- 16-bit floats through f32 lanes ------------------------------------------------------

// The interface every Lanes type provides, here with one f32 per "vector". It also serves the
// tails of the wider loops, so a vector loop and its tail agree by construction.
struct ScalarLanes {
  using F = float;
  static constexpr size_t kWidth = 1;
  static F add(F a, F b) noexcept { return SumOp::apply(a, b); }
  static F mul(F a, F b) noexcept { return ProdOp::apply(a, b); }
  static F min(F a, F b) noexcept { return (a < b) ? a : b; }
  static F max(F a, F b) noexcept { return (a > b) ? a : b; }
  static F div(F a, F b) noexcept { return a / b; }
  static F broadcast(float v) noexcept { return v; }
  static F load_f32(const float* p) noexcept { return *p; }
  static void store_f32(float* p, F v) noexcept { *p = v; }
  static F load_f16(const uint16_t* p) noexcept { return f16_bits_to_float(*p); }
  static void store_f16(uint16_t* p, F v) noexcept { *p = float_to_f16_bits(v); }
  static F load_bf16(const uint16_t* p) noexcept { return bf16_bits_to_float(*p); }
  static void store_bf16(uint16_t* p, F v) noexcept { *p = float_to_bf16_bits(v); }
};

struct F16Format {
  template <class L>
  static typename L::F load(const uint16_t* p) noexcept { return L::load_f16(p); }
  template <class L>
  static void store(uint16_t* p, typename L::F v) noexcept { L::store_f16(p, v); }
};
struct BF16Format {
  template <class L>
  static typename L::F load(const uint16_t* p) noexcept { return L::load_bf16(p); }
  template <class L>
  static void store(uint16_t* p, typename L::F v) noexcept { L::store_bf16(p, v); }
};

struct LaneAdd {
  template <class L>
  static typename L::F apply(typename L::F a, typename L::F b) noexcept { return L::add(a, b); }
};
struct LaneMul {
  template <class L>
  static typename L::F apply(typename L::F a, typename L::F b) noexcept { return L::mul(a, b); }
};
struct LaneMin {
  template <class L>
  static typename L::F apply(typename L::F a, typename L::F b) noexcept { return L::min(a, b); }
};
struct LaneMax {
  template <class L>
  static typename L::F apply(typename L::F a, typename L::F b) noexcept { return L::max(a, b); }
};

template <class L, class Fmt, class Op>
void half_elementwise(uint16_t* dst, const uint16_t* a, const uint16_t* b, size_t n) {
  size_t i = 0;
  // Two vectors per iteration keep two independent conversion chains in flight.
  for (; i + 2 * L::kWidth <= n; i += 2 * L::kWidth) {
    const auto x0 = Fmt::template load<L>(a + i);
    const auto y0 = Fmt::template load<L>(b + i);
    const auto x1 = Fmt::template load<L>(a + i + L::kWidth);
    const auto y1 = Fmt::template load<L>(b + i + L::kWidth);
    Fmt::template store<L>(dst + i, Op::template apply<L>(x0, y0));
    Fmt::template store<L>(dst + i + L::kWidth, Op::template apply<L>(x1, y1));
  }
  for (; i + L::kWidth <= n; i += L::kWidth) {
    Fmt::template store<L>(
        dst + i, Op::template apply<L>(Fmt::template load<L>(a + i), Fmt::template load<L>(b + i)));
  }
  using S = ScalarLanes;
  for (; i < n; ++i) {
    Fmt::template store<S>(
        dst + i, Op::template apply<S>(Fmt::template load<S>(a + i), Fmt::template load<S>(b + i)));
  }
}

template <class L, class Fmt>
void reduce_half(void* dst, const void* a, const void* b, size_t n, RedOp op) {
  auto* d = static_cast<uint16_t*>(dst);
  const auto* x = static_cast<const uint16_t*>(a);
  const auto* y = static_cast<const uint16_t*>(b);
  switch (op) {
    case RedOp::sum:
    case RedOp::avg: return half_elementwise<L, Fmt, LaneAdd>(d, x, y, n);
    case RedOp::prod: return half_elementwise<L, Fmt, LaneMul>(d, x, y, n);
    case RedOp::min: return half_elementwise<L, Fmt, LaneMin>(d, x, y, n);
    case RedOp::max: return half_elementwise<L, Fmt, LaneMax>(d, x, y, n);
  }
}

template <class L, class Fmt>
void finish_avg_half(void* data, size_t n, int nranks) {
  auto* d = static_cast<uint16_t*>(data);
  const float divisor = static_cast<float>(nranks);
  size_t i = 0;
  const auto v = L::broadcast(divisor);
  for (; i + L::kWidth <= n; i += L::kWidth) {
    Fmt::template store<L>(d + i, L::div(Fmt::template load<L>(d + i), v));
  }
  using S = ScalarLanes;
  for (; i < n; ++i) Fmt::template store<S>(d + i, S::div(Fmt::template load<S>(d + i), divisor));
}

template <class L, class Fmt>
void half_to_f32(float* dst, const uint16_t* src, size_t n) {
  size_t i = 0;
  for (; i + L::kWidth <= n; i += L::kWidth) L::store_f32(dst + i, Fmt::template load<L>(src + i));
  using S = ScalarLanes;
  for (; i < n; ++i) dst[i] = Fmt::template load<S>(src + i);
}

template <class L, class Fmt>
void f32_to_half(uint16_t* dst, const float* src, size_t n) {
  size_t i = 0;
  for (; i + L::kWidth <= n; i += L::kWidth) Fmt::template store<L>(dst + i, L::load_f32(src + i));
  using S = ScalarLanes;
  for (; i < n; ++i) Fmt::template store<S>(dst + i, src[i]);
}

// ---- the table entries ---------------------------------------------------------------------

template <class L>
void reduce_with(void* dst, const void* a, const void* b, size_t n, DataType dt, RedOp op) {
  switch (dt) {
    case DataType::f32: return reduce_native<float>(dst, a, b, n, op);
    case DataType::f64: return reduce_native<double>(dst, a, b, n, op);
    case DataType::f16: return reduce_half<L, F16Format>(dst, a, b, n, op);
    case DataType::bf16: return reduce_half<L, BF16Format>(dst, a, b, n, op);
    case DataType::i8: return reduce_native<int8_t>(dst, a, b, n, op);
    case DataType::u8: return reduce_native<uint8_t>(dst, a, b, n, op);
    case DataType::i32: return reduce_native<int32_t>(dst, a, b, n, op);
    case DataType::u32: return reduce_native<uint32_t>(dst, a, b, n, op);
    case DataType::i64: return reduce_native<int64_t>(dst, a, b, n, op);
    case DataType::u64: return reduce_native<uint64_t>(dst, a, b, n, op);
  }
}

template <class L>
void finish_avg_with(void* data, size_t n, DataType dt, int nranks) {
  switch (dt) {
    case DataType::f32: return finish_avg_native<float>(data, n, nranks);
    case DataType::f64: return finish_avg_native<double>(data, n, nranks);
    case DataType::f16: return finish_avg_half<L, F16Format>(data, n, nranks);
    case DataType::bf16: return finish_avg_half<L, BF16Format>(data, n, nranks);
    case DataType::i8: return finish_avg_native<int8_t>(data, n, nranks);
    case DataType::u8: return finish_avg_native<uint8_t>(data, n, nranks);
    case DataType::i32: return finish_avg_native<int32_t>(data, n, nranks);
    case DataType::u32: return finish_avg_native<uint32_t>(data, n, nranks);
    case DataType::i64: return finish_avg_native<int64_t>(data, n, nranks);
    case DataType::u64: return finish_avg_native<uint64_t>(data, n, nranks);
  }
}

template <class L>
void to_f32_with(float* dst, const void* src, DataType src_dt, size_t n) {
  const auto* s = static_cast<const uint16_t*>(src);
  if (src_dt == DataType::f16) return half_to_f32<L, F16Format>(dst, s, n);
  if (src_dt == DataType::bf16) return half_to_f32<L, BF16Format>(dst, s, n);
}

template <class L>
void from_f32_with(void* dst, DataType dst_dt, const float* src, size_t n) {
  auto* d = static_cast<uint16_t*>(dst);
  if (dst_dt == DataType::f16) return f32_to_half<L, F16Format>(d, src, n);
  if (dst_dt == DataType::bf16) return f32_to_half<L, BF16Format>(d, src, n);
}

template <class L>
constexpr detail::IsaKernels make_kernels(const char* name) {
  return {name, &reduce_with<L>, &finish_avg_with<L>, &to_f32_with<L>, &from_f32_with<L>};
}

}  // namespace
}  // namespace hoop::kernels
