#include "verify.h"

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "bench_data.h"
#include "bench_math.h"
#include "kernels/reduce.h"

namespace hoop::bench {

namespace {

constexpr size_t P = kPatternPeriod;

// Stores an exact small integer, or for floats `numerator / divisor` computed as hoop's avg
// does: a true division in the element type (f16 and bf16 in f32, rounded once).
void store_element(DataType dt, std::byte* dst, int64_t numerator, int divisor) {
  auto put = [dst](auto v) { std::memcpy(dst, &v, sizeof v); };
  const float q32 = static_cast<float>(numerator) / static_cast<float>(divisor);
  switch (dt) {
    case DataType::f32: return put(q32);
    case DataType::f64:
      return put(static_cast<double>(numerator) / static_cast<double>(divisor));
    case DataType::f16: return put(kernels::float_to_half(q32));
    case DataType::bf16: return put(kernels::float_to_bf16(q32));
    case DataType::i8: return put(static_cast<int8_t>(numerator));
    case DataType::u8: return put(static_cast<uint8_t>(numerator));
    case DataType::i32: return put(static_cast<int32_t>(numerator));
    case DataType::u32: return put(static_cast<uint32_t>(numerator));
    case DataType::i64: return put(static_cast<int64_t>(numerator));
    case DataType::u64: return put(static_cast<uint64_t>(numerator));
  }
}

// Counts data[i] != table[(first + i) % P] for i < n, comparing values (so +0 equals -0).
// Every expected value is exact: inputs keep every partial result exact (bench_data.h) and
// hoop's avg divides with a correctly rounded division, which store_element reproduces, so
// no tolerance is needed anywhere.
template <class T, class Equal>
size_t count_mismatches(const T* data, const T* table, size_t n, size_t first, Equal equal) {
  size_t wrong = 0;
  size_t i = 0;
  size_t j = first % P;
  while (i < n) {
    const size_t run = std::min(n - i, P - j);
    for (size_t k = 0; k < run; ++k) wrong += equal(data[i + k], table[j + k]) ? 0 : 1;
    i += run;
    j = 0;
  }
  return wrong;
}

template <class T>
size_t count_plain(const void* data, const std::byte* table, size_t n, size_t first) {
  return count_mismatches(static_cast<const T*>(data), reinterpret_cast<const T*>(table), n,
                          first, [](T a, T b) { return a == b; });
}

template <float (*ToFloat)(uint16_t) noexcept>
size_t count_half(const void* data, const std::byte* table, size_t n, size_t first) {
  return count_mismatches(static_cast<const uint16_t*>(data),
                          reinterpret_cast<const uint16_t*>(table), n, first,
                          [](uint16_t a, uint16_t b) { return a == b || ToFloat(a) == ToFloat(b); });
}

}  // namespace

Verifier::Verifier(OpType collective, DataType dt, RedOp op, int rank, int nranks)
    : dt_(dt), elem_(dtype_size(dt)), rank_(rank) {
  inputs_.resize(static_cast<size_t>(nranks) * P * elem_);
  for (int r = 0; r < nranks; ++r) {
    for (size_t j = 0; j < P; ++j) {
      std::byte* dst = inputs_.data() + (static_cast<size_t>(r) * P + j) * elem_;
      store_element(dt, dst, input_value(collective, op, dt, nranks, r, j), 1);
    }
  }
  if (is_reducing(collective)) {
    reduced_.resize(P * elem_);
    const int divisor = op == RedOp::avg && is_float(dt) ? nranks : 1;
    for (size_t j = 0; j < P; ++j) {
      store_element(dt, reduced_.data() + j * elem_, expected_reduction(op, dt, nranks, j), divisor);
    }
  }
}

void Verifier::fill_input(void* dst, size_t n, size_t first) const {
  const std::byte* table = inputs_.data() + static_cast<size_t>(rank_) * P * elem_;
  auto* out = static_cast<std::byte*>(dst);
  size_t i = 0;
  size_t j = first % P;
  while (i < n) {
    const size_t run = std::min(n - i, P - j);
    std::memcpy(out + i * elem_, table + j * elem_, run * elem_);
    i += run;
    j = 0;
  }
}

void Verifier::poison(void* dst, size_t n) const { std::memset(dst, 0xA5, n * elem_); }

size_t Verifier::count_wrong_reduced(const void* data, size_t n, size_t first) const {
  return count_wrong(reduced_.data(), data, n, first);
}

size_t Verifier::count_wrong_input(int src, const void* data, size_t n, size_t first) const {
  return count_wrong(inputs_.data() + static_cast<size_t>(src) * P * elem_, data, n, first);
}

size_t Verifier::count_wrong(const std::byte* table, const void* data, size_t n,
                             size_t first) const {
  switch (dt_) {
    case DataType::f32: return count_plain<float>(data, table, n, first);
    case DataType::f64: return count_plain<double>(data, table, n, first);
    case DataType::f16: return count_half<kernels::half_to_float>(data, table, n, first);
    case DataType::bf16: return count_half<kernels::bf16_to_float>(data, table, n, first);
    case DataType::i8: return count_plain<int8_t>(data, table, n, first);
    case DataType::u8: return count_plain<uint8_t>(data, table, n, first);
    case DataType::i32: return count_plain<int32_t>(data, table, n, first);
    case DataType::u32: return count_plain<uint32_t>(data, table, n, first);
    case DataType::i64: return count_plain<int64_t>(data, table, n, first);
    case DataType::u64: return count_plain<uint64_t>(data, table, n, first);
  }
  return n;
}

}  // namespace hoop::bench
