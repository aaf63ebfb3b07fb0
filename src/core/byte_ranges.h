// Whether two byte ranges of memory share a byte (an empty or null range shares none).
#pragma once

#include <cstddef>
#include <cstdint>

namespace hoop {

inline bool ranges_overlap(const void* a, size_t abytes, const void* b, size_t bbytes) {
  if (a == nullptr || b == nullptr || abytes == 0 || bbytes == 0) return false;
  const auto pa = reinterpret_cast<uintptr_t>(a), pb = reinterpret_cast<uintptr_t>(b);
  return pa < pb + bbytes && pb < pa + abytes;
}

}  // namespace hoop
