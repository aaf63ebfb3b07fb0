// The host's limits, next to which the collectives' numbers are read: a memcpy pass and an
// a += b pass (f32) over buffers much larger than the caches, on one core and on two at once
// (each on buffers of its own: the memory traffic both cores reach together, which bounds a
// collective of ranks that share the host). Prints CSV:
//   kernel,bytes,time_us,gbps        (gbps = bytes of one buffer / time, 1e9 B/s; the *2 rows:
//                                     both buffers' bytes / time)
// memcpy reads and writes each byte once (2x traffic); a += b reads two and writes one (3x).
//   host_limits [MiB per buffer, default 128] [passes, default 7]
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

#include "driver_common.h"

namespace {

// Kept out of line so the compiler cannot drop or merge passes.
__attribute__((noinline)) void add_into(float* __restrict a, const float* __restrict b, size_t n) {
  for (size_t i = 0; i < n; ++i) a[i] += b[i];
}

template <typename Fn>
double median_pass_us(int passes, Fn&& fn) {
  fn();  // warm-up: pages faulted, frequency settled
  return compare::median(compare::time_calls(passes, fn));
}

}  // namespace

int main(int argc, char** argv) {
  const size_t mib = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : 128;
  const int passes = argc > 2 ? std::atoi(argv[2]) : 7;
  const size_t bytes = mib << 20;
  const size_t n = bytes / sizeof(float);
  std::vector<float> a(n, 1.0f), b(n, 2.0f);

  const double copy_us = median_pass_us(passes, [&] { std::memcpy(a.data(), b.data(), bytes); });
  const double add_us = median_pass_us(passes, [&] { add_into(a.data(), b.data(), n); });
  // Both cores at once: a second thread does the same on buffers of its own.
  std::vector<float> c(n, 1.0f), d(n, 2.0f);
  const auto both = [&](auto&& pass_a, auto&& pass_c) {
    return [&] {
      std::thread other(pass_c);
      pass_a();
      other.join();
    };
  };
  const double copy2_us = median_pass_us(
      passes, both([&] { std::memcpy(a.data(), b.data(), bytes); }, [&] { std::memcpy(c.data(), d.data(), bytes); }));
  const double add2_us = median_pass_us(passes, both([&] { add_into(a.data(), b.data(), n); },
                                                     [&] { add_into(c.data(), d.data(), n); }));

  std::printf("kernel,bytes,time_us,gbps\n");
  std::printf("memcpy,%zu,%.1f,%.3f\n", bytes, copy_us, static_cast<double>(bytes) / (copy_us * 1e3));
  std::printf("add,%zu,%.1f,%.3f\n", bytes, add_us, static_cast<double>(bytes) / (add_us * 1e3));
  std::printf("memcpy2,%zu,%.1f,%.3f\n", 2 * bytes, copy2_us, static_cast<double>(2 * bytes) / (copy2_us * 1e3));
  std::printf("add2,%zu,%.1f,%.3f\n", 2 * bytes, add2_us, static_cast<double>(2 * bytes) / (add2_us * 1e3));
  // Keeps the results observable.
  volatile float sink = a[n / 2] + c[n / 2];
  (void)sink;
  return 0;
}
