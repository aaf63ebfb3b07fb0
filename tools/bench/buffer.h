// A benchmark buffer: allocated once for the largest size, backed by huge pages where the
// kernel allows, and touched page by page before any timing, because first-touch page faults
// cost more than the collectives being measured. With a communicator: registered memory from
// Communicator::alloc instead (pre-faulted by it).
#pragma once

#include <cstddef>

#include "hoop/communicator.h"

namespace hoop::bench {

class TouchedBuffer {
 public:
  TouchedBuffer() = default;
  explicit TouchedBuffer(size_t bytes, Communicator* registered_with = nullptr);
  ~TouchedBuffer();
  TouchedBuffer(TouchedBuffer&& other) noexcept;
  TouchedBuffer& operator=(TouchedBuffer&& other) noexcept;
  TouchedBuffer(const TouchedBuffer&) = delete;
  TouchedBuffer& operator=(const TouchedBuffer&) = delete;

  std::byte* data() { return shared_ ? shared_.as<std::byte>() : data_; }
  size_t size() const { return bytes_; }

 private:
  std::byte* data_ = nullptr;
  size_t bytes_ = 0;
  size_t mapped_ = 0;
  SharedBuffer shared_;
};

}  // namespace hoop::bench
