// Registered buffers: SharedBuffer and the Communicator's alloc / register_buffer /
// deregister_buffer, over the process's buffer registry (transport/shm/buffer_registry.h).
#include <fmt/format.h>

#include <utility>

#include "comm/comm_impl.h"
#include "core/errors.h"
#include "hoop/communicator.h"
#include "transport/shm/buffer_registry.h"

namespace hoop {

using transport::shm::BufferRegistry;

SharedBuffer::SharedBuffer(SharedBuffer&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)), size_(std::exchange(other.size_, 0)) {}

SharedBuffer& SharedBuffer::operator=(SharedBuffer&& other) noexcept {
  if (this != &other) {
    free();
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
  }
  return *this;
}

SharedBuffer::~SharedBuffer() { free(); }

void SharedBuffer::free() {
  if (data_) BufferRegistry::instance().remove(data_);
  data_ = nullptr;
  size_ = 0;
}

SharedBuffer Communicator::alloc(size_t bytes) {
  const auto r = BufferRegistry::instance().alloc(bytes, fmt::format("hoop-{}-buffer", job_id()));
  return SharedBuffer(reinterpret_cast<void*>(r.base), bytes);
}

void Communicator::register_buffer(void* ptr, size_t bytes) { BufferRegistry::instance().add(ptr, bytes); }

void Communicator::deregister_buffer(void* ptr) {
  if (!BufferRegistry::instance().remove(ptr)) {
    throw_error(ErrorCode::invalid_argument, fmt::format("deregister_buffer: no buffer was registered at {}", ptr),
                ErrorContext{rank(), "deregister_buffer", 0, -1});
  }
}

}  // namespace hoop
