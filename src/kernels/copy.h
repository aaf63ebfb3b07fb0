// Copies whose destination is not read again soon (an operation's output): stored around the
// caches with non-temporal stores, so that they neither evict what the copy reads nor make the
// core read every destination line before writing it.
#pragma once

#include <cstddef>

namespace hoop::kernels {

// dst = src for `bytes` bytes (no overlap). Small copies go through memcpy.
void copy_stream(void* dst, const void* src, size_t bytes);

}  // namespace hoop::kernels
