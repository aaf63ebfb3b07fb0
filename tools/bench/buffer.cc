#include "buffer.h"

#include <sys/mman.h>

#include <cerrno>
#include <cstdint>
#include <algorithm>
#include <cstring>
#include <string>
#include <utility>

#include "core/errors.h"

namespace hoop::bench {

namespace {
constexpr size_t kHugePage = size_t{2} << 20;
}

TouchedBuffer::TouchedBuffer(size_t bytes, Communicator* registered_with) : bytes_(bytes) {
  if (registered_with) {
    shared_ = registered_with->alloc(std::max<size_t>(bytes, 1));
    return;
  }
  // Round up to whole huge pages; an empty buffer still gets one so data() is never null.
  mapped_ = (bytes + kHugePage - 1) / kHugePage * kHugePage;
  if (mapped_ == 0) mapped_ = kHugePage;
  // Map one huge page more than needed and trim, so the buffer starts on a huge-page boundary
  // (transparent huge pages only back aligned ranges).
  const size_t reserve = mapped_ + kHugePage;
  void* raw = mmap(nullptr, reserve, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (raw == MAP_FAILED) {
    throw_system_error(ErrorCode::internal, "hoop-bench: cannot map a buffer of " +
                                                std::to_string(reserve) + " bytes", errno);
  }
  const auto start = reinterpret_cast<uintptr_t>(raw);
  const uintptr_t aligned = (start + kHugePage - 1) / kHugePage * kHugePage;
  if (aligned > start) munmap(raw, aligned - start);
  const uintptr_t tail = aligned + mapped_;
  const uintptr_t end = start + reserve;
  if (end > tail) munmap(reinterpret_cast<void*>(tail), end - tail);
  void* p = reinterpret_cast<void*>(aligned);
  // Advisory: without transparent huge pages the buffer still works with 4 KiB pages.
  (void)madvise(p, mapped_, MADV_HUGEPAGE);
  data_ = static_cast<std::byte*>(p);
  std::memset(data_, 0, mapped_);
}

TouchedBuffer::~TouchedBuffer() {
  if (data_ != nullptr) munmap(data_, mapped_);
}

TouchedBuffer::TouchedBuffer(TouchedBuffer&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)),
      bytes_(std::exchange(other.bytes_, 0)),
      mapped_(std::exchange(other.mapped_, 0)),
      shared_(std::move(other.shared_)) {}

TouchedBuffer& TouchedBuffer::operator=(TouchedBuffer&& other) noexcept {
  if (this != &other) {
    if (data_ != nullptr) munmap(data_, mapped_);
    data_ = std::exchange(other.data_, nullptr);
    bytes_ = std::exchange(other.bytes_, 0);
    mapped_ = std::exchange(other.mapped_, 0);
    shared_ = std::move(other.shared_);
  }
  return *this;
}

}  // namespace hoop::bench
