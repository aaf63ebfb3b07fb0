// Grow-only, pre-faulted memory for schedules' scratch and for f32 staging of f16/bf16
// reductions. First touch of fresh pages is very slow on some machines, so the memory is kept
// for the communicator's lifetime and faulted in once, when it grows.
#pragma once

#include <cstddef>

namespace hoop::engine {

class ScratchPool {
 public:
  ScratchPool() = default;
  ~ScratchPool();
  ScratchPool(const ScratchPool&) = delete;
  ScratchPool& operator=(const ScratchPool&) = delete;

  // At least `bytes` bytes, 64-byte aligned; contents are not preserved across growth.
  void* get(size_t bytes);
  size_t capacity() const { return size_; }

 private:
  void* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace hoop::engine
