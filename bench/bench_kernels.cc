// Throughput of the reduction kernels (dst = a + b) per instruction set, beside memcpy of the
// same buffer size. Bytes per second count every byte touched: a, b and dst for a reduction
// (3 x size), source and destination for memcpy (2 x size).
//
//   bench_kernels --benchmark_min_time=0.2
#include <benchmark/benchmark.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "hoop/types.h"
#include "kernels/reduce.h"

namespace {

using hoop::DataType;
namespace kernels = hoop::kernels;

constexpr int64_t kSizes[] = {64 << 10, 1 << 20, 16 << 20};

// n ordinary values of dt (no NaNs or subnormals, which some CPUs process slowly).
std::vector<uint8_t> make_input(DataType dt, size_t bytes, float seed) {
  const size_t n = bytes / hoop::dtype_size(dt);
  std::vector<float> values(n);
  for (size_t i = 0; i < n; ++i) values[i] = seed + static_cast<float>(i % 1000) * 0.001f;
  std::vector<uint8_t> out(bytes);
  if (dt == DataType::i32) {
    for (size_t i = 0; i < n; ++i) {
      const auto v = static_cast<int32_t>(i * 7 + static_cast<size_t>(seed));
      std::memcpy(out.data() + 4 * i, &v, 4);
    }
  } else {
    kernels::from_f32(out.data(), dt, values.data(), n);
  }
  return out;
}

void reduce_sum(benchmark::State& state, const std::string& isa, DataType dt) {
  const auto bytes = static_cast<size_t>(state.range(0));
  if (!kernels::set_isa_for_testing(isa)) {
    state.SkipWithError("instruction set not available");
    return;
  }
  const size_t n = bytes / hoop::dtype_size(dt);
  const std::vector<uint8_t> a = make_input(dt, bytes, 1.0f);
  const std::vector<uint8_t> b = make_input(dt, bytes, 2.0f);
  std::vector<uint8_t> dst(bytes, 0);  // touched before timing: no page faults inside
  for (auto _ : state) {
    kernels::reduce(dst.data(), a.data(), b.data(), n, dt, hoop::RedOp::sum);
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(3 * bytes));
  kernels::set_isa_for_testing("");
}

void copy_bytes(benchmark::State& state) {
  const auto bytes = static_cast<size_t>(state.range(0));
  const std::vector<uint8_t> src(bytes, 1);
  std::vector<uint8_t> dst(bytes, 0);
  for (auto _ : state) {
    std::memcpy(dst.data(), src.data(), bytes);
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(2 * bytes));
}

const bool kRegistered = [] {
  for (DataType dt : {DataType::f32, DataType::bf16, DataType::f16, DataType::i32}) {
    for (std::string_view isa_name : kernels::available_isas()) {
      const std::string isa(isa_name);
      const std::string name = "reduce_sum/" + std::string(hoop::to_string(dt)) + "/" + isa;
      auto* bench = benchmark::RegisterBenchmark(
          name.c_str(), [isa, dt](benchmark::State& state) { reduce_sum(state, isa, dt); });
      for (int64_t size : kSizes) bench->Arg(size);
    }
  }
  auto* bench = benchmark::RegisterBenchmark("memcpy", copy_bytes);
  for (int64_t size : kSizes) bench->Arg(size);
  return true;
}();

}  // namespace
