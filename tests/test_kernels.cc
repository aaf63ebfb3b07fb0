// Reduction kernels: every instruction set this CPU runs must reproduce the scalar reference
// bit for bit, and the reference must agree with independent oracles written here (integer
// arithmetic in 128 bits, f16/bf16 through exact double arithmetic and a rounding routine that
// searches the encodings).
#include <gtest/gtest.h>

#include <atomic>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <thread>
#include <tuple>
#include <type_traits>
#include <vector>

#include "hoop/error.h"
#include "hoop/types.h"
#include "kernels/reduce.h"
#include "support/scoped_env.h"

namespace hoop::kernels {
namespace {

// ---- helpers -------------------------------------------------------------------------------

// Selects an instruction set for the lifetime of the object, then restores the default.
class IsaScope {
 public:
  explicit IsaScope(std::string_view isa) : ok_(set_isa_for_testing(isa)) {}
  ~IsaScope() { set_isa_for_testing(""); }
  IsaScope(const IsaScope&) = delete;
  IsaScope& operator=(const IsaScope&) = delete;
  bool ok() const { return ok_; }

 private:
  bool ok_;
};

std::vector<std::string> isas() {
  std::vector<std::string> names;
  for (std::string_view n : available_isas()) names.emplace_back(n);
  return names;
}

// Bytes aligned to 64, so that an offset of a few elements gives a known misalignment.
class Buffer {
 public:
  explicit Buffer(size_t bytes) : storage_(bytes + 64) {}
  uint8_t* at(size_t byte_offset) {
    const auto base = reinterpret_cast<uintptr_t>(storage_.data());
    return reinterpret_cast<uint8_t*>((base + 63) / 64 * 64) + byte_offset;
  }

 private:
  std::vector<uint8_t> storage_;
};

uint32_t bits_of(float f) { return std::bit_cast<uint32_t>(f); }
uint64_t bits_of(double d) { return std::bit_cast<uint64_t>(d); }

// ---- an independent model of the 16-bit float formats ---------------------------------------

struct HalfFormat {
  int mantissa_bits;
  int exponent_bits;

  int bias() const { return (1 << (exponent_bits - 1)) - 1; }
  uint16_t inf_bits() const {
    return static_cast<uint16_t>(((1u << exponent_bits) - 1) << mantissa_bits);
  }
  uint16_t quiet_bit() const { return static_cast<uint16_t>(1u << (mantissa_bits - 1)); }
  bool is_nan(uint16_t h) const {
    return (h & 0x7fff) > inf_bits();
  }
  // Value of a non-negative encoding, reading the infinity encoding as the next power of two
  // (what rounding up from the largest finite value reaches).
  double magnitude(uint16_t h) const {
    const int e = h >> mantissa_bits;
    const int frac = h & ((1 << mantissa_bits) - 1);
    if (e == 0) return std::ldexp(frac, 1 - bias() - mantissa_bits);
    return std::ldexp(frac + (1 << mantissa_bits), e - bias() - mantissa_bits);
  }
  double value(uint16_t h) const {
    if (is_nan(h)) return std::numeric_limits<double>::quiet_NaN();
    const double m = (h & 0x7fff) == inf_bits() ? std::numeric_limits<double>::infinity()
                                                : magnitude(h & 0x7fff);
    return (h & 0x8000) ? -m : m;
  }
  // Round to nearest, ties to even; x must not be NaN.
  uint16_t encode(double x) const {
    const uint16_t sign = std::signbit(x) ? 0x8000 : 0;
    const double ax = std::fabs(x);
    uint16_t lo = 0, hi = inf_bits();  // largest k with magnitude(k) <= ax, by bisection
    if (ax >= magnitude(hi)) return sign | inf_bits();
    while (hi - lo > 1) {
      const auto mid = static_cast<uint16_t>((lo + hi) / 2);
      (magnitude(mid) <= ax ? lo : hi) = mid;
    }
    const double midpoint = (magnitude(lo) + magnitude(lo + 1)) / 2;  // exact in double
    uint16_t k = lo;
    if (ax > midpoint || (ax == midpoint && (lo & 1))) k = static_cast<uint16_t>(lo + 1);
    return sign | k;
  }
};

constexpr HalfFormat kF16{10, 5};
constexpr HalfFormat kBF16{7, 8};

const HalfFormat& format_of(DataType dt) { return dt == DataType::f16 ? kF16 : kBF16; }

// ---- input data ----------------------------------------------------------------------------

const uint32_t kSpecialF32[] = {
    0x00000000, 0x80000000, 0x7f800000, 0xff800000,  // zeros, infinities
    0x7fc00000, 0xffc00000, 0x7f800001, 0xffa5a5a5,  // quiet and signalling NaNs
    0x7f7fffff, 0xff7fffff, 0x00800000, 0x80800000,  // largest finite, smallest normal
    0x00000001, 0x807fffff, 0x3f800000, 0xbf800000,  // subnormals, +-1
};
const uint64_t kSpecialF64[] = {
    0x0000000000000000, 0x8000000000000000, 0x7ff0000000000000, 0xfff0000000000000,
    0x7ff8000000000000, 0xfff8000000000000, 0x7ff0000000000001, 0xfff5a5a5a5a5a5a5,
    0x7fefffffffffffff, 0xffefffffffffffff, 0x0010000000000000, 0x0000000000000001,
    0x800fffffffffffff, 0x3ff0000000000000,
};
const uint16_t kSpecialF16[] = {0x0000, 0x8000, 0x7c00, 0xfc00, 0x7e00, 0xfe00, 0x7c01,
                                0xfd55, 0x7bff, 0xfbff, 0x0400, 0x0001, 0x83ff, 0x3c00};
const uint16_t kSpecialBF16[] = {0x0000, 0x8000, 0x7f80, 0xff80, 0x7fc0, 0xffc0, 0x7f81,
                                 0xffa5, 0x7f7f, 0xff7f, 0x0080, 0x0001, 0x807f, 0x3f80};

template <class T, size_t N>
T pick(const T (&list)[N], std::mt19937_64& rng) {
  return list[rng() % N];
}

// Random elements of dt: for floats a mix of values of similar magnitude (sums round, ties
// happen), arbitrary bit patterns, subnormals and specials (NaN, inf, -0.0, extremes).
void fill_random(void* p, size_t n, DataType dt, std::mt19937_64& rng) {
  for (size_t i = 0; i < n; ++i) {
    const uint64_t r = rng();
    const unsigned kind = static_cast<unsigned>(r % 10);
    const uint64_t bits = rng();
    switch (dt) {
      case DataType::f32: {
        uint32_t u = static_cast<uint32_t>(bits);
        if (kind < 4) u = (u & 0x807fffff) | ((120u + (r >> 8) % 16) << 23);  // near 1
        else if (kind < 5) u &= 0x807fffff;                                    // subnormal
        else if (kind < 7) u = pick(kSpecialF32, rng);
        std::memcpy(static_cast<uint32_t*>(p) + i, &u, 4);
        break;
      }
      case DataType::f64: {
        uint64_t u = bits;
        if (kind < 4) u = (u & 0x800fffffffffffff) | ((1016ull + (r >> 8) % 16) << 52);
        else if (kind < 5) u &= 0x800fffffffffffff;
        else if (kind < 7) u = pick(kSpecialF64, rng);
        std::memcpy(static_cast<uint64_t*>(p) + i, &u, 8);
        break;
      }
      case DataType::f16:
      case DataType::bf16: {
        const HalfFormat& f = format_of(dt);
        auto u = static_cast<uint16_t>(bits);
        if (kind < 4) {  // exponent within 4 of the bias
          const unsigned e = static_cast<unsigned>(f.bias() - 2 + (r >> 8) % 4);
          u = static_cast<uint16_t>((u & (0x8000 | ((1u << f.mantissa_bits) - 1))) |
                                    (e << f.mantissa_bits));
        } else if (kind < 6) {
          u = dt == DataType::f16 ? pick(kSpecialF16, rng) : pick(kSpecialBF16, rng);
        }
        std::memcpy(static_cast<uint16_t*>(p) + i, &u, 2);
        break;
      }
      default: {  // integers: arbitrary bits, with extremes and small values mixed in
        uint64_t u = bits;
        if (kind == 0) u = 0;
        else if (kind == 1) u = ~0ull;
        else if (kind == 2) u = 1ull << (8 * dtype_size(dt) - 1);  // the signed minimum
        else if (kind == 3) u = (1ull << (8 * dtype_size(dt) - 1)) - 1;
        else if (kind == 4) u = r % 5;
        std::memcpy(static_cast<uint8_t*>(p) + i * dtype_size(dt), &u, dtype_size(dt));
        break;
      }
    }
  }
}

// Index of the first differing element, or -1.
long first_difference(const void* x, const void* y, size_t n, DataType dt) {
  const size_t size = dtype_size(dt);
  if (std::memcmp(x, y, n * size) == 0) return -1;
  for (size_t i = 0; i < n; ++i) {
    if (std::memcmp(static_cast<const uint8_t*>(x) + i * size,
                    static_cast<const uint8_t*>(y) + i * size, size) != 0) {
      return static_cast<long>(i);
    }
  }
  return -1;
}

// The bits of element i, in hex, for failure messages.
std::string element_hex(const void* p, size_t i, DataType dt) {
  const size_t size = dtype_size(dt);
  uint64_t bits = 0;
  std::memcpy(&bits, static_cast<const uint8_t*>(p) + i * size, size);
  char text[32];
  std::snprintf(text, sizeof text, "0x%0*llx", static_cast<int>(2 * size),
                static_cast<unsigned long long>(bits));
  return text;
}

// "" when got == want, else where and how they first differ.
std::string compare(const void* a, const void* b, const void* got, const void* want, size_t n,
                    DataType dt) {
  const long i = first_difference(got, want, n, dt);
  if (i < 0) return "";
  const auto k = static_cast<size_t>(i);
  return "element " + std::to_string(k) + ": a=" + element_hex(a, k, dt) +
         " b=" + element_hex(b, k, dt) + " got " + element_hex(got, k, dt) + ", reference " +
         element_hex(want, k, dt);
}

// ---- oracles -------------------------------------------------------------------------------

template <class T>
T integer_oracle(T a, T b, RedOp op) {
  using Exact = std::conditional_t<std::is_signed_v<T>, __int128, unsigned __int128>;
  const Exact x = a, y = b;
  switch (op) {
    case RedOp::sum:
    case RedOp::avg: return static_cast<T>(static_cast<uint64_t>(x + y));
    case RedOp::prod: return static_cast<T>(static_cast<uint64_t>(x * y));
    case RedOp::min: return a < b ? a : b;
    case RedOp::max: return a > b ? a : b;
  }
  return 0;
}

bool is_sum_or_prod(RedOp op) { return op == RedOp::sum || op == RedOp::avg || op == RedOp::prod; }

// f32/f64: the documented rules, with NaNs made quiet by setting the top mantissa bit.
template <class T>
T float_oracle(T a, T b, RedOp op) {
  using Bits = std::conditional_t<sizeof(T) == 4, uint32_t, uint64_t>;
  constexpr Bits kQuiet = Bits{1} << (std::numeric_limits<T>::digits - 2);
  auto quiet = [&](T x) {
    return std::bit_cast<T>(static_cast<Bits>(std::bit_cast<Bits>(x) | kQuiet));
  };
  if (is_sum_or_prod(op)) {
    if (std::isnan(a)) return quiet(a);  // a NaN wins, then b's
    if (std::isnan(b)) return quiet(b);
  }
  switch (op) {
    case RedOp::sum:
    case RedOp::avg: return a + b;  // inf - inf: the default NaN
    case RedOp::prod: return a * b;
    case RedOp::min: return a < b ? a : b;  // NaN or equal zeros: b
    case RedOp::max: return a > b ? a : b;
  }
  return 0;
}

// f16/bf16: the same rules, computed exactly in double and rounded by HalfFormat::encode.
uint16_t half_oracle(const HalfFormat& f, uint16_t a, uint16_t b, RedOp op) {
  const double x = f.value(a), y = f.value(b);
  const auto quiet = [&](uint16_t h) { return static_cast<uint16_t>(h | f.quiet_bit()); };
  if (op == RedOp::min || op == RedOp::max) {
    const bool take_a = op == RedOp::min ? x < y : x > y;
    const uint16_t chosen = take_a ? a : b;
    return f.is_nan(chosen) ? quiet(chosen) : chosen;
  }
  if (f.is_nan(a)) return quiet(a);
  if (f.is_nan(b)) return quiet(b);
  const double r = op == RedOp::prod ? x * y : x + y;  // exact for f16; see Figueroa for bf16
  if (std::isnan(r)) return static_cast<uint16_t>(0x8000 | f.inf_bits() | f.quiet_bit());
  return f.encode(r);
}

// Checks got[i] == op(a[i], b[i]) bit for bit for every i; reports the first few mismatches.
template <class T>
void expect_matches_oracle(const T* a, const T* b, const T* got, size_t n, DataType dt,
                           RedOp op) {
  int failures = 0;
  for (size_t i = 0; i < n && failures < 5; ++i) {
    T expected;
    if constexpr (std::is_same_v<T, uint16_t>) {
      expected = half_oracle(format_of(dt), a[i], b[i], op);
    } else if constexpr (std::is_floating_point_v<T>) {
      expected = float_oracle(a[i], b[i], op);
    } else {
      expected = integer_oracle(a[i], b[i], op);
    }
    if (std::memcmp(&expected, &got[i], sizeof(T)) != 0) {
      ++failures;
      ADD_FAILURE() << to_string(dt) << " " << to_string(op) << " element " << i << ": a="
                    << element_hex(a, i, dt) << " b=" << element_hex(b, i, dt) << " got "
                    << element_hex(got, i, dt) << ", expected " << element_hex(&expected, 0, dt);
    }
  }
}

void expect_reference_matches_oracle(const void* a, const void* b, const void* got, size_t n,
                                     DataType dt, RedOp op) {
  auto run = [&](auto tag) {
    using T = decltype(tag);
    expect_matches_oracle(static_cast<const T*>(a), static_cast<const T*>(b),
                          static_cast<const T*>(got), n, dt, op);
  };
  switch (dt) {
    case DataType::f32: return run(float{});
    case DataType::f64: return run(double{});
    case DataType::f16:
    case DataType::bf16: return run(uint16_t{});
    case DataType::i8: return run(int8_t{});
    case DataType::u8: return run(uint8_t{});
    case DataType::i32: return run(int32_t{});
    case DataType::u32: return run(uint32_t{});
    case DataType::i64: return run(int64_t{});
    case DataType::u64: return run(uint64_t{});
  }
}

// ---- reduce: every dtype x op ----------------------------------------------------------------

class ReduceTest : public ::testing::TestWithParam<std::tuple<DataType, RedOp>> {};

TEST_P(ReduceTest, EveryIsaMatchesScalarReferenceBitForBit) {
  const auto [dt, op] = GetParam();
  const size_t size = dtype_size(dt);
  constexpr size_t kLargest = 1000003;
  constexpr size_t kMaxOffset = 3;
  const size_t bytes = (kLargest + kMaxOffset) * size;
  std::mt19937_64 rng(1234 + 16 * static_cast<int>(dt) + static_cast<int>(op));
  Buffer a(bytes), b(bytes), ref(bytes), out(bytes);
  Buffer mis_a(bytes + 8), mis_b(bytes + 8), mis_out(bytes + 8);  // for odd byte addresses

  for (size_t n : {size_t{0}, size_t{1}, size_t{3}, size_t{7}, size_t{15}, size_t{17},
                   size_t{100}, kLargest}) {
    const std::vector<size_t> offsets =
        n == kLargest ? std::vector<size_t>{1} : std::vector<size_t>{0, 1, 3};
    for (size_t offset : offsets) {
      void* pa = a.at(offset * size);
      void* pb = b.at(offset * size);
      void* pref = ref.at(offset * size);
      void* pout = out.at(offset * size);
      fill_random(pa, n, dt, rng);
      fill_random(pb, n, dt, rng);
      reduce_scalar(pref, pa, pb, n, dt, op);
      expect_reference_matches_oracle(pa, pb, pref, n, dt, op);

      for (const std::string& isa : isas()) {
        IsaScope scope(isa);
        ASSERT_TRUE(scope.ok());
        SCOPED_TRACE("isa " + isa + ", n " + std::to_string(n) + ", offset " +
                     std::to_string(offset));
        reduce(pout, pa, pb, n, dt, op);
        EXPECT_EQ(compare(pa, pb, pout, pref, n, dt), "") << "out of place";

        // dst == a, then dst == b (on copies, keeping the inputs).
        std::memcpy(pout, pa, n * size);
        reduce(pout, pout, pb, n, dt, op);
        EXPECT_EQ(compare(pa, pb, pout, pref, n, dt), "") << "dst aliases a";
        std::memcpy(pout, pb, n * size);
        reduce(pout, pa, pout, n, dt, op);
        EXPECT_EQ(compare(pa, pb, pout, pref, n, dt), "") << "dst aliases b";

        if (size > 1 && offset == 1) {
          // Buffers at odd byte addresses (staged through aligned memory), also dst == a.
          uint8_t* ma = mis_a.at(1);
          uint8_t* mb = mis_b.at(3);
          uint8_t* mo = mis_out.at(5);
          std::memcpy(ma, pa, n * size);
          std::memcpy(mb, pb, n * size);
          reduce(mo, ma, mb, n, dt, op);
          std::memcpy(pout, mo, n * size);
          EXPECT_EQ(compare(pa, pb, pout, pref, n, dt), "") << "misaligned";
          reduce(ma, ma, mb, n, dt, op);
          std::memcpy(pout, ma, n * size);
          EXPECT_EQ(compare(pa, pb, pout, pref, n, dt), "") << "misaligned, dst aliases a";
        }
      }
    }
  }
}

// reduce_fan_out: the result in dst and in every output, bit for bit what reduce() gives, on
// sizes around its block (512 bytes) and across many blocks, outputs streamed or not, one
// output being an input (in place), at element offsets that misalign the vector body.
TEST_P(ReduceTest, FanOutGivesReduceThenCopiesBitForBit) {
  const auto [dt, op] = GetParam();
  const size_t size = dtype_size(dt);
  constexpr size_t kLargest = 100003;
  const size_t bytes = (kLargest + 3) * size;
  std::mt19937_64 rng(99 + 16 * static_cast<int>(dt) + static_cast<int>(op));
  Buffer a(bytes), b(bytes), ref(bytes), dst(bytes), out1(bytes), out2(bytes), in_place(bytes);
  const size_t block = 512 / size;
  for (size_t n : {size_t{0}, size_t{1}, size_t{5}, block - 1, block, block + 1, 3 * block + 7, kLargest}) {
    for (size_t offset : {size_t{0}, size_t{1}}) {
      SCOPED_TRACE("n " + std::to_string(n) + ", offset " + std::to_string(offset));
      const auto at = [&](Buffer& buf) -> void* { return buf.at(offset * size); };
      void *pa = at(a), *pb = at(b), *pref = at(ref), *pd = at(dst), *p1 = at(out1), *p2 = at(out2);
      fill_random(pa, n, dt, rng);
      fill_random(pb, n, dt, rng);
      reduce(pref, pa, pb, n, dt, op);
      const FanOut outs[] = {{p1, true}, {p2, false}};
      reduce_fan_out(pd, pa, pb, n, dt, op, outs, 2);
      EXPECT_EQ(compare(pa, pb, pd, pref, n, dt), "") << "dst";
      EXPECT_EQ(compare(pa, pb, p1, pref, n, dt), "") << "streamed output";
      EXPECT_EQ(compare(pa, pb, p2, pref, n, dt), "") << "cached output";

      // In place: the output is the second input (each block read before it is written), and
      // dst is the first.
      void* pi = at(in_place);
      std::memcpy(pd, pa, n * size);
      std::memcpy(pi, pb, n * size);
      const FanOut onto_input[] = {{pi, true}};
      reduce_fan_out(pd, pd, pi, n, dt, op, onto_input, 1);
      EXPECT_EQ(compare(pa, pb, pd, pref, n, dt), "") << "dst aliases a";
      EXPECT_EQ(compare(pa, pb, pi, pref, n, dt), "") << "output is b";
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    AllDtypesAndOps, ReduceTest,
    ::testing::Combine(::testing::ValuesIn(kAllDataTypes), ::testing::ValuesIn(kAllRedOps)),
    [](const ::testing::TestParamInfo<ReduceTest::ParamType>& param_info) {
      return std::string(to_string(std::get<0>(param_info.param))) + "_" +
             std::string(to_string(std::get<1>(param_info.param)));
    });

// ---- reduce: the documented edge semantics, on the vector body and the scalar tail ----------

// Runs reduce on n copies of (a, b) under every ISA and checks every output element.
template <class T>
void expect_everywhere(DataType dt, RedOp op, T a, T b, T expected) {
  for (size_t n : {size_t{1}, size_t{37}}) {  // 37: two 16-lane vectors and a tail
    std::vector<T> va(n, a), vb(n, b), out(n);
    for (const std::string& isa : isas()) {
      IsaScope scope(isa);
      reduce(out.data(), va.data(), vb.data(), n, dt, op);
      for (size_t i = 0; i < n; ++i) {
        ASSERT_EQ(std::memcmp(&out[i], &expected, sizeof(T)), 0)
            << isa << " " << to_string(dt) << " " << to_string(op) << " n=" << n << " i=" << i;
      }
    }
  }
}

TEST(ReduceSemantics, FloatMinMaxFollowMinpsRule) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float snan = std::bit_cast<float>(0x7f800001u);
  // min(a, b) = (a < b) ? a : b: b whenever a comparison involves NaN, and b for +-0.
  expect_everywhere<float>(DataType::f32, RedOp::min, nan, 1.0f, 1.0f);
  expect_everywhere<float>(DataType::f32, RedOp::max, nan, 1.0f, 1.0f);
  expect_everywhere<float>(DataType::f32, RedOp::max, 1.0f, snan, snan);  // returned unchanged
  expect_everywhere<float>(DataType::f32, RedOp::min, -0.0f, 0.0f, 0.0f);
  expect_everywhere<float>(DataType::f32, RedOp::min, 0.0f, -0.0f, -0.0f);
  expect_everywhere<float>(DataType::f32, RedOp::max, -0.0f, 0.0f, 0.0f);
  expect_everywhere<double>(DataType::f64, RedOp::min, std::nan(""), 2.0, 2.0);
  expect_everywhere<double>(DataType::f64, RedOp::max, 0.0, -0.0, -0.0);
  // f16: NaN in b comes out as b (quiet); NaN in a gives b.
  expect_everywhere<uint16_t>(DataType::f16, RedOp::min, 0x7e00, 0x3c00, 0x3c00);
  expect_everywhere<uint16_t>(DataType::f16, RedOp::min, 0x3c00, 0x7c01, 0x7e01);
  expect_everywhere<uint16_t>(DataType::bf16, RedOp::max, 0x8000, 0x0000, 0x0000);
  expect_everywhere<uint16_t>(DataType::bf16, RedOp::max, 0x3f80, 0x7f81, 0x7fc1);
}

TEST(ReduceSemantics, FloatSpecialArithmetic) {
  const float inf = std::numeric_limits<float>::infinity();
  expect_everywhere<float>(DataType::f32, RedOp::sum, inf, 1.0f, inf);
  expect_everywhere<float>(DataType::f32, RedOp::sum, -0.0f, -0.0f, -0.0f);
  expect_everywhere<float>(DataType::f32, RedOp::prod, 0x1p-140f, 0x1p-5f, 0x1p-145f);  // subnormal
  expect_everywhere<uint16_t>(DataType::f16, RedOp::sum, 0x7bff, 0x7bff, 0x7c00);  // -> inf
  expect_everywhere<uint16_t>(DataType::f16, RedOp::sum, 0x0001, 0x0001, 0x0002);  // subnormal
  // 1 + 2^-11 is halfway between 1 and the next f16: ties go to the even one, 1.
  expect_everywhere<uint16_t>(DataType::f16, RedOp::sum, 0x3c00, 0x1000, 0x3c00);
  // (1 + 2^-10) + 2^-11: halfway again, now the even neighbour is above.
  expect_everywhere<uint16_t>(DataType::f16, RedOp::sum, 0x3c01, 0x1000, 0x3c02);
  // 1 + 2^-8 is halfway between 1 and the next bf16: ties to even give 1.
  expect_everywhere<uint16_t>(DataType::bf16, RedOp::sum, 0x3f80, 0x3b80, 0x3f80);
  expect_everywhere<uint16_t>(DataType::bf16, RedOp::prod, 0x7f7f, 0x4000, 0x7f80);  // -> inf
}

TEST(ReduceSemantics, IntegersWrapAround) {
  expect_everywhere<int32_t>(DataType::i32, RedOp::sum, INT32_MAX, 1, INT32_MIN);
  expect_everywhere<int8_t>(DataType::i8, RedOp::prod, 16, 16, 0);
  expect_everywhere<int8_t>(DataType::i8, RedOp::prod, -128, -1, -128);
  expect_everywhere<uint8_t>(DataType::u8, RedOp::sum, 200, 100, 44);
  expect_everywhere<int64_t>(DataType::i64, RedOp::prod, INT64_MIN, -1, INT64_MIN);
  expect_everywhere<uint64_t>(DataType::u64, RedOp::prod, 1ull << 63, 2, 0);
  expect_everywhere<uint32_t>(DataType::u32, RedOp::min, 0xffffffffu, 1u, 1u);
  expect_everywhere<int64_t>(DataType::i64, RedOp::max, -5, INT64_MIN, -5);
  expect_everywhere<int8_t>(DataType::i8, RedOp::avg, 100, 100, -56);  // avg reduces like sum
}

// ---- finish_avg ---------------------------------------------------------------------------

class FinishAvgTest : public ::testing::TestWithParam<DataType> {};

TEST_P(FinishAvgTest, MatchesOracleOnEveryIsa) {
  const DataType dt = GetParam();
  const size_t size = dtype_size(dt);
  constexpr size_t n = 10007;
  std::mt19937_64 rng(99 + static_cast<int>(dt));
  Buffer input(n * size), ref(n * size), out((n + 1) * size);  // out: room for an offset
  fill_random(input.at(0), n, dt, rng);

  for (int nranks : {1, 2, 3, 7, 200}) {
    SCOPED_TRACE("nranks " + std::to_string(nranks));
    std::memcpy(ref.at(0), input.at(0), n * size);
    {
      IsaScope scope("scalar");
      finish_avg(ref.at(0), n, dt, nranks);
    }
    for (size_t i = 0; i < n; ++i) {
      const uint8_t* x = input.at(i * size);
      const uint8_t* got = ref.at(i * size);
      auto check = [&](auto tag) {
        using T = decltype(tag);
        T in, r;
        std::memcpy(&in, x, sizeof(T));
        std::memcpy(&r, got, sizeof(T));
        if constexpr (std::is_same_v<T, uint16_t>) {
          const HalfFormat& f = format_of(dt);
          const double q = f.value(in) / nranks;  // double rounding is innocuous here
          if (std::isnan(q)) {
            ASSERT_TRUE(f.is_nan(r)) << i;
          } else {
            ASSERT_EQ(r, f.encode(q)) << "element " << i << " input " << in;
          }
        } else if constexpr (std::is_floating_point_v<T>) {
          const T q = in / static_cast<T>(nranks);
          ASSERT_TRUE(std::isnan(q) ? std::isnan(r) : bits_of(q) == bits_of(r)) << i;
        } else {
          ASSERT_EQ(r, static_cast<T>(static_cast<__int128>(in) / nranks)) << i;  // truncates
        }
      };
      switch (dt) {
        case DataType::f32: check(float{}); break;
        case DataType::f64: check(double{}); break;
        case DataType::f16:
        case DataType::bf16: check(uint16_t{}); break;
        case DataType::i8: check(int8_t{}); break;
        case DataType::u8: check(uint8_t{}); break;
        case DataType::i32: check(int32_t{}); break;
        case DataType::u32: check(uint32_t{}); break;
        case DataType::i64: check(int64_t{}); break;
        case DataType::u64: check(uint64_t{}); break;
      }
    }
    for (const std::string& isa : isas()) {
      IsaScope scope(isa);
      for (size_t byte_offset : {size, size_t{1}}) {  // one element past alignment; odd address
        std::memcpy(out.at(byte_offset), input.at(0), n * size);
        finish_avg(out.at(byte_offset), n, dt, nranks);
        EXPECT_EQ(first_difference(out.at(byte_offset), ref.at(0), n, dt), -1)
            << isa << " byte offset " << byte_offset;
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(AllDtypes, FinishAvgTest, ::testing::ValuesIn(kAllDataTypes),
                         [](const ::testing::TestParamInfo<DataType>& param_info) {
                           return std::string(to_string(param_info.param));
                         });

// ---- f16 / bf16 conversions ----------------------------------------------------------------

TEST(HalfConversion, F16AllPatternsRoundTrip) {
  for (uint32_t i = 0; i < 65536; ++i) {
    const auto h = static_cast<uint16_t>(i);
    const float f = half_to_float(h);
    if (kF16.is_nan(h)) {
      // NaN: sign and payload kept, quiet bit set (as VCVTPH2PS does).
      ASSERT_EQ(bits_of(f), ((i & 0x8000u) << 16) | 0x7fc00000u | ((i & 0x3ffu) << 13)) << i;
      ASSERT_EQ(float_to_half(f), h | 0x0200) << i;
    } else {
      ASSERT_EQ(static_cast<double>(f), kF16.value(h)) << i;
      ASSERT_EQ(std::signbit(f), (i & 0x8000) != 0) << i;
      ASSERT_EQ(float_to_half(f), h) << i;
    }
  }
}

TEST(HalfConversion, BF16AllPatternsRoundTrip) {
  for (uint32_t i = 0; i < 65536; ++i) {
    const auto h = static_cast<uint16_t>(i);
    const float f = bf16_to_float(h);
    ASSERT_EQ(bits_of(f), i << 16) << i;  // exact, NaNs included
    if (kBF16.is_nan(h)) {
      ASSERT_EQ(float_to_bf16(f), h | 0x0040) << i;
    } else {
      ASSERT_EQ(static_cast<double>(f), kBF16.value(h)) << i;
      ASSERT_EQ(float_to_bf16(f), h) << i;
    }
  }
}

// Floats that probe the rounding of format f: every midpoint between neighbouring encodings
// and the floats just beside it, both signs, plus random bit patterns of every exponent.
std::vector<float> rounding_probes(const HalfFormat& f) {
  std::vector<float> probes;
  for (uint32_t k = 0; k < f.inf_bits(); ++k) {
    const auto mid = static_cast<float>((f.magnitude(static_cast<uint16_t>(k)) +
                                         f.magnitude(static_cast<uint16_t>(k + 1))) / 2);
    for (float x : {mid, std::nextafter(mid, 0.0f), std::nextafter(mid, INFINITY)}) {
      probes.push_back(x);
      probes.push_back(-x);
    }
  }
  std::mt19937 rng(7);
  for (int i = 0; i < 200000; ++i)
    probes.push_back(std::bit_cast<float>(static_cast<uint32_t>(rng())));
  for (uint32_t u : kSpecialF32) probes.push_back(std::bit_cast<float>(u));
  return probes;
}

void expect_rounding(const HalfFormat& f, uint16_t (*convert)(float), const char* name) {
  for (float x : rounding_probes(f)) {
    const uint16_t got = convert(x);
    if (std::isnan(x)) {
      const uint16_t expected = static_cast<uint16_t>(
          ((bits_of(x) >> 16) & 0x8000) | f.inf_bits() | f.quiet_bit() |
          ((bits_of(x) & 0x7fffff) >> (23 - f.mantissa_bits)));
      ASSERT_EQ(got, expected) << name << " NaN " << bits_of(x);
    } else {
      ASSERT_EQ(got, f.encode(x)) << name << " of " << x << " (bits " << bits_of(x) << ")";
    }
  }
}

TEST(HalfConversion, F16RoundsToNearestEvenLikeDoubleReference) {
  expect_rounding(kF16, &float_to_half, "f16");
}

TEST(HalfConversion, BF16RoundsToNearestEvenLikeDoubleReference) {
  expect_rounding(kBF16, &float_to_bf16, "bf16");
}

TEST(HalfConversion, BulkConversionsMatchScalarOnEveryIsa) {
  std::vector<uint16_t> all(65536 + 1);
  for (uint32_t i = 0; i < 65536; ++i) all[i + 1] = static_cast<uint16_t>(i);
  const std::vector<float> probes = rounding_probes(kF16);
  const std::vector<float> bf16_probes = rounding_probes(kBF16);

  for (const std::string& isa : isas()) {
    IsaScope scope(isa);
    for (DataType dt : {DataType::f16, DataType::bf16}) {
      SCOPED_TRACE(isa + " " + std::string(to_string(dt)));
      auto scalar_to = dt == DataType::f16 ? &half_to_float : &bf16_to_float;
      auto scalar_from = dt == DataType::f16 ? &float_to_half : &float_to_bf16;
      // Every 16-bit pattern, from an address one element past alignment, odd length.
      std::vector<float> wide(65536);
      to_f32(wide.data(), all.data() + 1, dt, 65535);
      for (uint32_t i = 0; i < 65535; ++i) {
        ASSERT_EQ(bits_of(wide[i]), bits_of(scalar_to(static_cast<uint16_t>(i)))) << i;
      }
      const std::vector<float>& in = dt == DataType::f16 ? probes : bf16_probes;
      std::vector<uint16_t> narrow(in.size());
      from_f32(narrow.data() + 1, dt, in.data() + 1, in.size() - 1);
      for (size_t i = 1; i < in.size(); ++i) {
        ASSERT_EQ(narrow[i], scalar_from(in[i])) << "probe " << i << " bits " << bits_of(in[i]);
      }
    }
    // Odd byte addresses on both sides (staged through aligned memory).
    for (DataType dt : {DataType::f16, DataType::bf16}) {
      SCOPED_TRACE(isa + " misaligned " + std::string(to_string(dt)));
      const size_t n = 5000;  // a few staging rounds
      Buffer narrow(2 * n + 8), wide(4 * n + 8);
      std::memcpy(narrow.at(1), all.data() + 1, 2 * n);
      to_f32(reinterpret_cast<float*>(wide.at(3)), narrow.at(1), dt, n);
      std::vector<float> expected(n);
      to_f32(expected.data(), all.data() + 1, dt, n);
      EXPECT_EQ(std::memcmp(wide.at(3), expected.data(), 4 * n), 0);
      std::memset(narrow.at(1), 0, 2 * n);
      from_f32(narrow.at(1), dt, reinterpret_cast<const float*>(wide.at(3)), n);
      EXPECT_EQ(std::memcmp(narrow.at(1), all.data() + 1, 2 * n), 0);  // no NaNs: exact
    }
    // f32 "conversions" are copies.
    std::vector<float> src = {1.5f, -0.0f, std::numeric_limits<float>::quiet_NaN()}, dst(3);
    to_f32(dst.data(), src.data(), DataType::f32, 3);
    EXPECT_EQ(std::memcmp(dst.data(), src.data(), 12), 0);
    from_f32(dst.data(), DataType::f32, src.data(), 3);
    EXPECT_EQ(std::memcmp(dst.data(), src.data(), 12), 0);
  }
}

// ---- dispatch ------------------------------------------------------------------------------

// Sets or clears an environment variable for the lifetime of the object, then restores the
// default kernel choice.
class EnvScope {
 public:
  EnvScope(const char* name, const char* value) { env_.emplace(name, value); }
  ~EnvScope() {
    env_.reset();  // the variable first, so that the default choice reads it as it was
    set_isa_for_testing("");
  }

 private:
  std::optional<test::ScopedEnv> env_;
};

TEST(Dispatch, DefaultIsWidestAvailableAndEnvCapsIt) {
  const std::vector<std::string> names = isas();
  ASSERT_GE(names.size(), 2u);
  EXPECT_EQ(names[0], "scalar");
  EXPECT_EQ(names[1], "sse2");
  {
    EnvScope env("HOOP_KERNEL_ISA", nullptr);
    ASSERT_TRUE(set_isa_for_testing(""));
    EXPECT_EQ(active_isa(), names.back());
  }
  for (const std::string& cap : names) {
    EnvScope env("HOOP_KERNEL_ISA", cap.c_str());
    ASSERT_TRUE(set_isa_for_testing(""));
    EXPECT_EQ(active_isa(), cap);
  }
  {
    EnvScope env("HOOP_KERNEL_ISA", "avx512");  // capped by the CPU when it lacks AVX-512
    ASSERT_TRUE(set_isa_for_testing(""));
    EXPECT_EQ(active_isa(), names.back());
  }
  {
    EnvScope env("HOOP_KERNEL_ISA", "neon");  // unknown: warned about and ignored
    ASSERT_TRUE(set_isa_for_testing(""));
    EXPECT_EQ(active_isa(), names.back());
  }
}

TEST(Dispatch, SetIsaRejectsUnknownNames) {
  const std::string before(active_isa());
  EXPECT_FALSE(set_isa_for_testing("avx1024"));
  EXPECT_EQ(active_isa(), before);
  for (const std::string& isa : isas()) {
    IsaScope scope(isa);
    EXPECT_EQ(active_isa(), isa);
  }
}

TEST(Dispatch, ConcurrentCallsWhileSwitchingIsa) {
  // Kernels run on progress threads of several communicators at once; switching the table
  // meanwhile must be race-free (each call uses one table or the other, both correct).
  const std::vector<std::string> names = isas();
  std::atomic<int> finished{0};
  std::atomic<int> wrong{0};
  std::vector<std::thread> workers;
  for (int t = 0; t < 3; ++t) {
    workers.emplace_back([&, t] {
      std::vector<float> a(4099, 1.0f + static_cast<float>(t)), b(4099, 0.5f), out(4099);
      for (int iter = 0; iter < 300; ++iter) {
        reduce(out.data(), a.data(), b.data(), out.size(), DataType::f32, RedOp::sum);
        for (float v : out) {
          if (v != 1.5f + static_cast<float>(t)) wrong.fetch_add(1);
        }
      }
      finished.fetch_add(1);
    });
  }
  for (size_t i = 0; finished.load() < 3; ++i) set_isa_for_testing(names[i % names.size()]);
  for (auto& w : workers) w.join();
  set_isa_for_testing("");
  EXPECT_EQ(wrong.load(), 0);
}

// ---- argument errors -----------------------------------------------------------------------

template <class F>
void expect_invalid_argument(F&& call, const char* op) {
  try {
    call();
    ADD_FAILURE() << "no error for " << op;
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::invalid_argument) << e.what();
    EXPECT_EQ(e.op(), op) << e.what();
  }
}

TEST(KernelErrors, BadArgumentsAreRefused) {
  alignas(64) float buf[64] = {};
  const auto bad_dt = static_cast<DataType>(99);
  const auto bad_op = static_cast<RedOp>(42);
  expect_invalid_argument([&] { reduce(buf, buf, buf, 4, bad_dt, RedOp::sum); }, "kernels.reduce");
  expect_invalid_argument([&] { reduce(buf, buf, buf, 4, DataType::f32, bad_op); },
                          "kernels.reduce");
  expect_invalid_argument([&] { reduce(nullptr, buf, buf, 4, DataType::f32, RedOp::sum); },
                          "kernels.reduce");
  expect_invalid_argument([&] { reduce(buf + 1, buf, buf + 16, 4, DataType::f32, RedOp::sum); },
                          "kernels.reduce");  // dst partially overlaps a
  expect_invalid_argument([&] { reduce_scalar(buf, buf, nullptr, 1, DataType::u8, RedOp::max); },
                          "kernels.reduce_scalar");
  expect_invalid_argument([&] { finish_avg(buf, 4, DataType::f32, 0); }, "kernels.finish_avg");
  expect_invalid_argument([&] { to_f32(buf, buf + 32, DataType::i32, 4); }, "kernels.to_f32");
  expect_invalid_argument([&] { to_f32(buf, buf + 1, DataType::f16, 4); }, "kernels.to_f32");
  expect_invalid_argument([&] { from_f32(nullptr, DataType::bf16, buf, 4); }, "kernels.from_f32");

  // reduce_fan_out: an output partially over an input, over dst or over another output.
  const FanOut shifted[] = {{buf + 33, false}};
  expect_invalid_argument([&] { reduce_fan_out(buf, buf + 16, buf + 32, 8, DataType::f32, RedOp::sum, shifted, 1); },
                          "kernels.reduce_fan_out");
  const FanOut over_dst[] = {{buf + 4, true}};
  expect_invalid_argument([&] { reduce_fan_out(buf, buf + 16, buf + 32, 8, DataType::f32, RedOp::sum, over_dst, 1); },
                          "kernels.reduce_fan_out");
  const FanOut crossing[] = {{buf + 48, false}, {buf + 52, true}};
  expect_invalid_argument([&] { reduce_fan_out(buf, buf + 16, buf + 32, 8, DataType::f32, RedOp::sum, crossing, 2); },
                          "kernels.reduce_fan_out");

  // Zero elements: nothing is touched, null buffers are fine.
  EXPECT_NO_THROW(reduce(nullptr, nullptr, nullptr, 0, DataType::f64, RedOp::prod));
  EXPECT_NO_THROW(finish_avg(nullptr, 0, DataType::i8, 3));
  EXPECT_NO_THROW(to_f32(nullptr, nullptr, DataType::bf16, 0));
}

}  // namespace
}  // namespace hoop::kernels
