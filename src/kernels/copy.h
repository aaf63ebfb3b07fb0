// Copies whose destination is not read again soon (an operation's output): stored around the
// caches with non-temporal stores, so that they neither evict what the copy reads nor make the
// core read every destination line before writing it.
#pragma once

#include <cstddef>

namespace hoop::kernels {

// dst = src for `bytes` bytes (no overlap). Small copies go through memcpy.
void copy_stream(void* dst, const void* src, size_t bytes);

// A piece of a longer streamed copy, whatever its size and without the fence: the caller
// ends the whole copy with stream_fence() before anything that publishes it.
void copy_stream_piece(void* dst, const void* src, size_t bytes);
void stream_fence();

}  // namespace hoop::kernels
