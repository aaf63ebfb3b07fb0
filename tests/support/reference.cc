#include "support/reference.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <sstream>
#include <stdexcept>
#include <type_traits>

#include "kernels/reduce.h"

namespace hoop::test::ref {

namespace {

// Storage types of the 16-bit floats (the library's kernels convert them).
struct Half {
  uint16_t bits;
};
struct BFloat {
  uint16_t bits;
};

template <class T>
struct Tag {
  using type = T;
};

template <class F>
decltype(auto) visit_dtype(DataType dt, F&& f) {
  switch (dt) {
    case DataType::f32: return f(Tag<float>{});
    case DataType::f64: return f(Tag<double>{});
    case DataType::f16: return f(Tag<Half>{});
    case DataType::bf16: return f(Tag<BFloat>{});
    case DataType::i8: return f(Tag<int8_t>{});
    case DataType::u8: return f(Tag<uint8_t>{});
    case DataType::i32: return f(Tag<int32_t>{});
    case DataType::u32: return f(Tag<uint32_t>{});
    case DataType::i64: return f(Tag<int64_t>{});
    case DataType::u64: return f(Tag<uint64_t>{});
  }
  throw std::invalid_argument("reference: unknown dtype");
}

template <class T>
constexpr bool kIsFloat = std::is_same_v<T, float> || std::is_same_v<T, double> ||
                          std::is_same_v<T, Half> || std::is_same_v<T, BFloat>;

template <class T>
T load(const void* buf, size_t j) {
  T v;
  std::memcpy(&v, static_cast<const unsigned char*>(buf) + j * sizeof(T), sizeof(T));
  return v;
}

template <class T>
void store(void* buf, size_t j, T v) {
  std::memcpy(static_cast<unsigned char*>(buf) + j * sizeof(T), &v, sizeof(T));
}

template <class T>
double to_double(T v) {
  if constexpr (std::is_same_v<T, Half>) {
    return kernels::half_to_float(v.bits);
  } else if constexpr (std::is_same_v<T, BFloat>) {
    return kernels::bf16_to_float(v.bits);
  } else {
    return static_cast<double>(v);
  }
}

template <class T>
T from_double(double d) {
  if constexpr (std::is_same_v<T, Half>) {
    return Half{kernels::float_to_half(static_cast<float>(d))};
  } else if constexpr (std::is_same_v<T, BFloat>) {
    return BFloat{kernels::float_to_bf16(static_cast<float>(d))};
  } else {
    return static_cast<T>(d);
  }
}

uint64_t element_seed(uint64_t seed, int rank, size_t index) {
  return mix64(seed ^ mix64((static_cast<uint64_t>(rank) << 48) ^ index));
}

template <class T>
T generate(RedOp op, uint64_t u) {
  if constexpr (kIsFloat<T>) {
    const double x = static_cast<double>(u >> 11) * 0x1.0p-53;  // [0, 1)
    switch (op) {
      case RedOp::sum:
      case RedOp::avg: return from_double<T>(0.5 + x);
      case RedOp::prod: return from_double<T>(0.9 + 0.2 * x);
      case RedOp::min:
      case RedOp::max: return from_double<T>(-100.0 + 200.0 * x);
    }
    return from_double<T>(x);
  } else {
    using U = std::make_unsigned_t<T>;
    constexpr int bits = static_cast<int>(sizeof(T) * 8);
    switch (op) {
      case RedOp::prod: return static_cast<T>(static_cast<U>(u | 1));
      case RedOp::avg:
        // |sum over 8 ranks| stays inside T: signed in [-2^(bits-5), 2^(bits-5)),
        // unsigned in [0, 2^(bits-3)).
        if constexpr (std::is_signed_v<T>) {
          const int64_t v = static_cast<int64_t>(u >> (64 - (bits - 4)));
          return static_cast<T>(v - (int64_t{1} << (bits - 5)));
        } else {
          return static_cast<T>(u >> (64 - (bits - 3)));
        }
      default: return static_cast<T>(static_cast<U>(u));
    }
  }
}

template <class T>
T input(RedOp op, uint64_t seed, int rank, size_t index) {
  return generate<T>(op, element_seed(seed, rank, index));
}

// Integer reduction in T with wrap-around (computed on the unsigned type: no UB).
template <class T>
T int_combine(RedOp op, T a, T b) {
  using U = std::make_unsigned_t<T>;
  switch (op) {
    case RedOp::sum:
    case RedOp::avg: return static_cast<T>(static_cast<U>(static_cast<U>(a) + static_cast<U>(b)));
    case RedOp::prod: {
      // Widen to at least unsigned int so that the product of promoted values cannot overflow
      // a signed int.
      using W = std::conditional_t<(sizeof(U) < sizeof(unsigned)), unsigned, U>;
      return static_cast<T>(static_cast<U>(static_cast<W>(static_cast<U>(a)) *
                                           static_cast<W>(static_cast<U>(b))));
    }
    case RedOp::min: return std::min(a, b);
    case RedOp::max: return std::max(a, b);
  }
  return a;
}

// Spacing of the 16-bit float type T around x (normal range).
template <class T>
double ulp16(double x) {
  constexpr int mantissa_bits = std::is_same_v<T, Half> ? 10 : 7;
  int exponent = 0;
  std::frexp(x, &exponent);  // |x| = m * 2^exponent, m in [0.5, 1)
  return std::ldexp(1.0, exponent - 1 - mantissa_bits);
}

template <class T>
std::string format_value(T v) {
  std::ostringstream os;
  os.precision(17);
  if constexpr (kIsFloat<T>) {
    os << to_double(v);
  } else if constexpr (sizeof(T) == 1) {
    os << static_cast<int>(v);
  } else {
    os << v;
  }
  return os.str();
}

template <class T>
bool same_bits(T a, T b) {
  return std::memcmp(&a, &b, sizeof(T)) == 0;
}

template <class T>
std::string check_reduction_typed(const void* out, RedOp op, uint64_t seed, int nranks,
                                  size_t first, size_t n, double tol) {
  size_t bad = 0;
  std::string first_bad;
  for (size_t j = 0; j < n; ++j) {
    const size_t index = first + j;
    const T got = load<T>(out, j);
    bool ok = false;
    std::string expected;
    if constexpr (kIsFloat<T>) {
      double acc = to_double(input<T>(op, seed, 0, index));
      for (int r = 1; r < nranks; ++r) {
        const double x = to_double(input<T>(op, seed, r, index));
        switch (op) {
          case RedOp::sum:
          case RedOp::avg: acc += x; break;
          case RedOp::prod: acc *= x; break;
          case RedOp::min: acc = std::min(acc, x); break;
          case RedOp::max: acc = std::max(acc, x); break;
        }
      }
      if (op == RedOp::avg) acc /= nranks;
      const double g = to_double(got);
      if (op == RedOp::min || op == RedOp::max) {
        ok = g == acc;
      } else {
        ok = std::isfinite(g) && std::fabs(g - acc) <= tol * std::fabs(acc);
        if constexpr (std::is_same_v<T, Half> || std::is_same_v<T, BFloat>) {
          // Accumulated in f32 and rounded once: within half a unit in the last place of the
          // 16-bit type (plus the f32 accumulation's own error).
          ok = ok && std::fabs(g - acc) <= 0.5 * ulp16<T>(acc) + 1e-6 * std::fabs(acc);
        }
      }
      if (!ok) {
        std::ostringstream os;
        os.precision(17);
        os << acc;
        expected = os.str();
      }
    } else {
      T acc = input<T>(op, seed, 0, index);
      for (int r = 1; r < nranks; ++r) acc = int_combine(op, acc, input<T>(op, seed, r, index));
      if (op == RedOp::avg) acc = static_cast<T>(acc / static_cast<T>(nranks));
      ok = got == acc;
      if (!ok) expected = format_value(acc);
    }
    if (!ok) {
      if (bad++ == 0) {
        first_bad = "element " + std::to_string(j) + " (input index " + std::to_string(index) +
                    "): got " + format_value(got) + ", expected " + expected;
      }
    }
  }
  if (bad == 0) return {};
  return std::to_string(bad) + " of " + std::to_string(n) + " elements wrong; first: " + first_bad;
}

template <class T>
std::string check_inputs_typed(const void* out, RedOp op, uint64_t seed, int rank, size_t first,
                               size_t n) {
  size_t bad = 0;
  std::string first_bad;
  for (size_t j = 0; j < n; ++j) {
    const T want = input<T>(op, seed, rank, first + j);
    const T got = load<T>(out, j);
    if (!same_bits(got, want) && bad++ == 0) {
      first_bad = "element " + std::to_string(j) + ": got " + format_value(got) + ", expected " +
                  format_value(want) + " (input " + std::to_string(first + j) + " of rank " +
                  std::to_string(rank) + ")";
    }
  }
  if (bad == 0) return {};
  return std::to_string(bad) + " of " + std::to_string(n) + " elements wrong; first: " + first_bad;
}

}  // namespace

uint64_t mix64(uint64_t x) noexcept {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

uint64_t input_bits(DataType dt, RedOp op, uint64_t seed, int rank, size_t index) {
  return visit_dtype(dt, [&](auto tag) -> uint64_t {
    using T = typename decltype(tag)::type;
    const T v = input<T>(op, seed, rank, index);
    uint64_t bits = 0;
    std::memcpy(&bits, &v, sizeof(T));
    return bits;
  });
}

void fill_inputs(void* buf, DataType dt, RedOp op, uint64_t seed, int rank, size_t first,
                 size_t n) {
  visit_dtype(dt, [&](auto tag) {
    using T = typename decltype(tag)::type;
    for (size_t j = 0; j < n; ++j) store<T>(buf, j, input<T>(op, seed, rank, first + j));
  });
}

std::string check_reduction(const void* out, DataType dt, RedOp op, uint64_t seed, int nranks,
                            size_t first, size_t n) {
  const double tol = relative_tolerance(dt);
  return visit_dtype(dt, [&](auto tag) {
    using T = typename decltype(tag)::type;
    return check_reduction_typed<T>(out, op, seed, nranks, first, n, tol);
  });
}

std::string check_inputs(const void* out, DataType dt, RedOp op, uint64_t seed, int rank,
                         size_t first, size_t n) {
  return visit_dtype(dt, [&](auto tag) {
    using T = typename decltype(tag)::type;
    return check_inputs_typed<T>(out, op, seed, rank, first, n);
  });
}

double relative_tolerance(DataType dt) {
  switch (dt) {
    case DataType::f64: return 1e-12;
    case DataType::f32: return 1e-5;
    case DataType::f16:
    case DataType::bf16: return 1e-2;
    default: return 0.0;
  }
}

double element_value(const void* buf, DataType dt, size_t j) {
  return visit_dtype(dt, [&](auto tag) {
    using T = typename decltype(tag)::type;
    return to_double(load<T>(buf, j));
  });
}

uint64_t hash_bytes(const void* data, size_t n) noexcept {
  const auto* p = static_cast<const unsigned char*>(data);
  uint64_t h = 0xCBF29CE484222325ull ^ n;
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    uint64_t w;
    std::memcpy(&w, p + i, 8);
    h = (h ^ w) * 0x100000001B3ull;
    h ^= h >> 29;
  }
  for (; i < n; ++i) h = (h ^ p[i]) * 0x100000001B3ull;
  return mix64(h);
}

void fill_sentinel(void* data, size_t n) { std::memset(data, 0xA5, n); }

size_t first_non_sentinel(const void* data, size_t n) {
  const auto* p = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < n; ++i) {
    if (p[i] != 0xA5) return i;
  }
  return n;
}

}  // namespace hoop::test::ref
