// The public kernel entry points: argument checks, then a call through the table of the
// instruction set chosen at run time (the widest this CPU has, capped by HOOP_KERNEL_ISA).
#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

#include "core/byte_ranges.h"
#include "core/errors.h"
#include "core/log.h"
#include "core/op_traits.h"
#include "core/params.h"
#include "kernels/copy.h"
#include "kernels/isa_kernels.h"
#include "kernels/reduce.h"

namespace hoop::kernels {
namespace {

using detail::IsaKernels;

// Narrowest first; the index is the order used for capping.
const IsaKernels* const kTiers[] = {&detail::kScalarKernels, &detail::kSse2Kernels,
                                    &detail::kAvx2Kernels, &detail::kAvx512Kernels};

bool cpu_runs(const IsaKernels* tier) {
  // Needed before __builtin_cpu_supports when this runs from a static constructor.
  __builtin_cpu_init();
  // Each check lists every -m flag its file is compiled with (see the root CMakeLists).
  if (tier == &detail::kAvx512Kernels) {
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
           __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") &&
           __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
           __builtin_cpu_supports("f16c");
  }
  if (tier == &detail::kAvx2Kernels) {
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
           __builtin_cpu_supports("f16c");
  }
  return true;  // scalar and SSE2 are part of x86-64
}

const IsaKernels* find_tier(std::string_view name) {
  for (const IsaKernels* tier : kTiers) {
    if (name == tier->name) return tier;
  }
  return nullptr;
}

const IsaKernels* choose_default() {
  const IsaKernels* cap = kTiers[std::size(kTiers) - 1];
  bool capped = false;
  if (const auto requested = params::text(params::Id::kernel_isa)) {
    if (const IsaKernels* named = find_tier(*requested)) {
      cap = named;
      capped = true;
    } else {
      HOOP_WARN("HOOP_KERNEL_ISA='{}' is not one of scalar|sse2|avx2|avx512; ignoring it",
                *requested);
    }
  }
  const IsaKernels* chosen = kTiers[0];
  for (const IsaKernels* tier : kTiers) {
    if (cpu_runs(tier)) chosen = tier;
    if (tier == cap) break;
  }
  if (capped && chosen != cap) {
    HOOP_INFO("HOOP_KERNEL_ISA={}: this CPU lacks it, using {}", cap->name, chosen->name);
  }
  HOOP_INFO("reduction kernels: {}", chosen->name);
  return chosen;
}

std::atomic<const IsaKernels*> g_active{nullptr};

const IsaKernels& active() {
  const IsaKernels* kernels = g_active.load(std::memory_order_acquire);
  if (kernels == nullptr) [[unlikely]] {
    static const bool initialized = [] {
      const IsaKernels* expected = nullptr;
      g_active.compare_exchange_strong(expected, choose_default(), std::memory_order_acq_rel);
      return true;
    }();
    (void)initialized;
    kernels = g_active.load(std::memory_order_acquire);
  }
  return *kernels;
}

ErrorContext context(const char* fn) {
  ErrorContext ctx;
  ctx.op = fn;
  return ctx;
}

// Checks one buffer of n elements of dt; n > 0. The message of a failed check names the
// function through the context ("hoop: kernels.reduce: dst is null ...").
void check_buffer(const void* p, size_t n, DataType dt, const char* fn, const char* what) {
  HOOP_CHECK_ARG(p != nullptr, context(fn), "{} is null ({} elements of {})", what, n,
                 to_string(dt));
  HOOP_CHECK_ARG(n <= SIZE_MAX / dtype_size(dt), context(fn), "{} elements of {} overflow size_t",
                 n, to_string(dt));
}

void check_reduce(void* dst, const void* a, const void* b, size_t n, DataType dt, RedOp op,
                  const char* fn) {
  HOOP_CHECK_ARG(is_valid(dt), context(fn), "unknown data type {}", static_cast<int>(dt));
  HOOP_CHECK_ARG(is_valid(op), context(fn), "unknown reduction operator {}", static_cast<int>(op));
  if (n == 0) return;
  check_buffer(dst, n, dt, fn, "dst");
  check_buffer(a, n, dt, fn, "a");
  check_buffer(b, n, dt, fn, "b");
  const size_t bytes = n * dtype_size(dt);
  HOOP_CHECK_ARG(dst == a || !ranges_overlap(dst, bytes, a, bytes), context(fn),
                 "dst partially overlaps a (it must be a, or disjoint from it)");
  HOOP_CHECK_ARG(dst == b || !ranges_overlap(dst, bytes, b, bytes), context(fn),
                 "dst partially overlaps b (it must be b, or disjoint from it)");
}

void check_conversion(const void* dst, const void* src, DataType dt, size_t n, const char* fn) {
  HOOP_CHECK_ARG(is_half(dt) || dt == DataType::f32, context(fn),
                 "{} is not a float type convertible to f32 (f16, bf16, f32)", to_string(dt));
  if (n == 0) return;
  check_buffer(dst, n, DataType::f32, fn, "the f32 buffer");
  check_buffer(src, n, dt, fn, dt == DataType::f32 ? "the other f32 buffer" : "the 16-bit buffer");
  if (dt != DataType::f32) {
    HOOP_CHECK_ARG(!ranges_overlap(dst, n * 4, src, n * 2), context(fn),
                   "the f32 and {} buffers overlap", to_string(dt));
  }
}

bool misaligned(const void* p, size_t alignment) {
  return reinterpret_cast<uintptr_t>(p) % alignment != 0;
}

// Buffers not aligned to their element size (data read straight out of a byte stream can be)
// are staged through aligned buffers a few KiB at a time: the kernels access elements through
// typed pointers, which must be aligned. Slower, but rare.
constexpr size_t kBounceBytes = 4096;

void reduce_via_bounce(const IsaKernels& kernels, void* dst, const void* a, const void* b,
                       size_t n, DataType dt, RedOp op) {
  alignas(64) unsigned char bounce_a[kBounceBytes], bounce_b[kBounceBytes], bounce_d[kBounceBytes];
  const size_t size = dtype_size(dt);
  const size_t per_chunk = kBounceBytes / size;
  for (size_t i = 0; i < n; i += per_chunk) {
    const size_t count = std::min(per_chunk, n - i);
    const size_t offset = i * size;
    // Both inputs are read before dst is written, so dst may still be a or b.
    std::memcpy(bounce_a, static_cast<const unsigned char*>(a) + offset, count * size);
    std::memcpy(bounce_b, static_cast<const unsigned char*>(b) + offset, count * size);
    kernels.reduce(bounce_d, bounce_a, bounce_b, count, dt, op);
    std::memcpy(static_cast<unsigned char*>(dst) + offset, bounce_d, count * size);
  }
}

void finish_avg_via_bounce(const IsaKernels& kernels, void* data, size_t n, DataType dt,
                           int nranks) {
  alignas(64) unsigned char bounce[kBounceBytes];
  const size_t size = dtype_size(dt);
  const size_t per_chunk = kBounceBytes / size;
  for (size_t i = 0; i < n; i += per_chunk) {
    const size_t count = std::min(per_chunk, n - i);
    unsigned char* chunk = static_cast<unsigned char*>(data) + i * size;
    std::memcpy(bounce, chunk, count * size);
    kernels.finish_avg(bounce, count, dt, nranks);
    std::memcpy(chunk, bounce, count * size);
  }
}

constexpr size_t kBounceFloats = kBounceBytes / sizeof(float);

void to_f32_via_bounce(const IsaKernels& kernels, float* dst, const void* src, DataType dt,
                       size_t n) {
  alignas(64) uint16_t bounce_src[kBounceFloats];
  alignas(64) float bounce_dst[kBounceFloats];
  for (size_t i = 0; i < n; i += kBounceFloats) {
    const size_t count = std::min(kBounceFloats, n - i);
    std::memcpy(bounce_src, static_cast<const unsigned char*>(src) + i * 2, count * 2);
    kernels.to_f32(bounce_dst, bounce_src, dt, count);
    std::memcpy(reinterpret_cast<unsigned char*>(dst) + i * 4, bounce_dst, count * 4);
  }
}

void from_f32_via_bounce(const IsaKernels& kernels, void* dst, DataType dt, const float* src,
                         size_t n) {
  alignas(64) float bounce_src[kBounceFloats];
  alignas(64) uint16_t bounce_dst[kBounceFloats];
  for (size_t i = 0; i < n; i += kBounceFloats) {
    const size_t count = std::min(kBounceFloats, n - i);
    std::memcpy(bounce_src, reinterpret_cast<const unsigned char*>(src) + i * 4, count * 4);
    kernels.from_f32(bounce_dst, dt, bounce_src, count);
    std::memcpy(static_cast<unsigned char*>(dst) + i * 2, bounce_dst, count * 2);
  }
}

void run_reduce(const IsaKernels& kernels, void* dst, const void* a, const void* b, size_t n,
                DataType dt, RedOp op) {
  const size_t size = dtype_size(dt);
  if (misaligned(dst, size) || misaligned(a, size) || misaligned(b, size)) [[unlikely]] {
    reduce_via_bounce(kernels, dst, a, b, n, dt, op);
  } else {
    kernels.reduce(dst, a, b, n, dt, op);
  }
}

}  // namespace

void reduce(void* dst, const void* a, const void* b, size_t n, DataType dt, RedOp op) {
  check_reduce(dst, a, b, n, dt, op, "kernels.reduce");
  if (n != 0) run_reduce(active(), dst, a, b, n, dt, op);
}

void reduce_fan_out(void* dst, const void* a, const void* b, size_t n, DataType dt, RedOp op, const FanOut* outs,
                    size_t nouts) {
  const char* fn = "kernels.reduce_fan_out";
  check_reduce(dst, a, b, n, dt, op, fn);
  if (n == 0) return;
  const size_t es = dtype_size(dt);
  const size_t bytes = n * es;
  HOOP_CHECK_ARG(outs != nullptr || nouts == 0, context(fn), "outs is null");
  for (size_t k = 0; k < nouts; ++k) {
    const void* o = outs[k].dst;
    check_buffer(o, n, dt, fn, "an output");
    HOOP_CHECK_ARG((o == a || !ranges_overlap(o, bytes, a, bytes)) && (o == b || !ranges_overlap(o, bytes, b, bytes)),
                   context(fn), "output {} partially overlaps an input (it must be one, or disjoint from both)", k);
    HOOP_CHECK_ARG(!ranges_overlap(o, bytes, dst, bytes), context(fn), "output {} overlaps dst", k);
    for (size_t j = 0; j < k; ++j)
      HOOP_CHECK_ARG(!ranges_overlap(o, bytes, outs[j].dst, bytes), context(fn), "outputs {} and {} overlap", j, k);
  }
  // Small enough that a block stays in L1 between its reduction and its copies; measured on
  // 256 MiB buffers, 256-512 bytes beat 4 KiB by 1.5x and the whole-buffer passes by 1.5-2x.
  constexpr size_t kBlockBytes = 512;
  const size_t block = std::max<size_t>(kBlockBytes / es, 1);
  const IsaKernels& kernels = active();
  auto* d = static_cast<std::byte*>(dst);
  const auto* x = static_cast<const std::byte*>(a);
  const auto* y = static_cast<const std::byte*>(b);
  bool streamed = false;
  for (size_t at = 0; at < n; at += block) {
    const size_t m = std::min(block, n - at);
    const size_t off = at * es;
    run_reduce(kernels, d + off, x + off, y + off, m, dt, op);
    for (size_t k = 0; k < nouts; ++k) {
      auto* o = static_cast<std::byte*>(outs[k].dst) + off;
      if (outs[k].stream) {
        copy_stream_piece(o, d + off, m * es);
        streamed = true;
      } else {
        std::memcpy(o, d + off, m * es);
      }
    }
  }
  if (streamed) stream_fence();
}

void reduce_scalar(void* dst, const void* a, const void* b, size_t n, DataType dt, RedOp op) {
  check_reduce(dst, a, b, n, dt, op, "kernels.reduce_scalar");
  if (n != 0) run_reduce(detail::kScalarKernels, dst, a, b, n, dt, op);
}

void finish_avg(void* data, size_t n, DataType dt, int nranks) {
  const char* fn = "kernels.finish_avg";
  HOOP_CHECK_ARG(is_valid(dt), context(fn), "unknown data type {}", static_cast<int>(dt));
  HOOP_CHECK_ARG(nranks >= 1, context(fn), "nranks must be at least 1, got {}", nranks);
  if (n == 0 || nranks == 1) return;
  check_buffer(data, n, dt, fn, "data");
  if (misaligned(data, dtype_size(dt))) [[unlikely]] {
    finish_avg_via_bounce(active(), data, n, dt, nranks);
  } else {
    active().finish_avg(data, n, dt, nranks);
  }
}

void to_f32(float* dst, const void* src, DataType src_dt, size_t n) {
  check_conversion(dst, src, src_dt, n, "kernels.to_f32");
  if (n == 0) return;
  if (src_dt == DataType::f32) {
    if (dst != src) std::memmove(dst, src, n * sizeof(float));
    return;
  }
  if (misaligned(dst, sizeof(float)) || misaligned(src, sizeof(uint16_t))) [[unlikely]] {
    to_f32_via_bounce(active(), dst, src, src_dt, n);
  } else {
    active().to_f32(dst, src, src_dt, n);
  }
}

void from_f32(void* dst, DataType dst_dt, const float* src, size_t n) {
  check_conversion(src, dst, dst_dt, n, "kernels.from_f32");
  if (n == 0) return;
  if (dst_dt == DataType::f32) {
    if (dst != src) std::memmove(dst, src, n * sizeof(float));
    return;
  }
  if (misaligned(dst, sizeof(uint16_t)) || misaligned(src, sizeof(float))) [[unlikely]] {
    from_f32_via_bounce(active(), dst, dst_dt, src, n);
  } else {
    active().from_f32(dst, dst_dt, src, n);
  }
}

std::string_view active_isa() noexcept { return active().name; }

std::vector<std::string_view> available_isas() {
  std::vector<std::string_view> names;
  for (const IsaKernels* tier : kTiers) {
    if (cpu_runs(tier)) names.emplace_back(tier->name);
  }
  return names;
}

bool set_isa_for_testing(std::string_view isa) {
  if (isa.empty()) {
    g_active.store(choose_default(), std::memory_order_release);
    return true;
  }
  const IsaKernels* tier = find_tier(isa);
  if (tier == nullptr || !cpu_runs(tier)) return false;
  g_active.store(tier, std::memory_order_release);
  return true;
}

}  // namespace hoop::kernels
