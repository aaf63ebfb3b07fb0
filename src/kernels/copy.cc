#include "kernels/copy.h"

#include <emmintrin.h>

#include <algorithm>
#include <cstdint>
#include <cstring>

namespace hoop::kernels {

namespace {

// Below this a streamed copy's fence costs more than the cache lines it spares.
constexpr size_t kStreamFrom = 32 * 1024;

}  // namespace

void copy_stream(void* dst, const void* src, size_t bytes) {
  if (bytes < kStreamFrom) {
    if (bytes > 0) std::memcpy(dst, src, bytes);
    return;
  }
  copy_stream_piece(dst, src, bytes);
  stream_fence();
}

void copy_stream_piece(void* dst, const void* src, size_t bytes) {
  auto* d = static_cast<char*>(dst);
  const auto* s = static_cast<const char*>(src);
  // Up to the first 16-byte boundary of the destination, as a plain copy.
  const size_t head = std::min<size_t>((16 - (reinterpret_cast<uintptr_t>(d) & 15)) & 15, bytes);
  std::memcpy(d, s, head);
  d += head;
  s += head;
  size_t left = bytes - head;
  // SSE2 is part of x86-64: streaming stores of 16 bytes fill the write-combining buffers as
  // well as wider ones.
  for (; left >= 64; left -= 64, d += 64, s += 64) {
    const __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s));
    const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + 16));
    const __m128i c = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + 32));
    const __m128i e = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + 48));
    _mm_stream_si128(reinterpret_cast<__m128i*>(d), a);
    _mm_stream_si128(reinterpret_cast<__m128i*>(d + 16), b);
    _mm_stream_si128(reinterpret_cast<__m128i*>(d + 32), c);
    _mm_stream_si128(reinterpret_cast<__m128i*>(d + 48), e);
  }
  std::memcpy(d, s, left);
}

// Streaming stores are weakly ordered: make them visible before a later flag is published.
void stream_fence() { _mm_sfence(); }

}  // namespace hoop::kernels
