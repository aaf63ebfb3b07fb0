// A benchmark buffer: allocated once for the largest size, backed by huge pages where the
// kernel allows, and touched page by page before any timing, because first-touch page faults
// cost more than the collectives being measured.
#pragma once

#include <cstddef>

namespace hoop::bench {

class TouchedBuffer {
 public:
  TouchedBuffer() = default;
  explicit TouchedBuffer(size_t bytes);
  ~TouchedBuffer();
  TouchedBuffer(TouchedBuffer&& other) noexcept;
  TouchedBuffer& operator=(TouchedBuffer&& other) noexcept;
  TouchedBuffer(const TouchedBuffer&) = delete;
  TouchedBuffer& operator=(const TouchedBuffer&) = delete;

  std::byte* data() { return data_; }
  size_t size() const { return bytes_; }

 private:
  std::byte* data_ = nullptr;
  size_t bytes_ = 0;
  size_t mapped_ = 0;
};

}  // namespace hoop::bench
