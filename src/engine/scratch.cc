#include "engine/scratch.h"

#include <sys/mman.h>

#include <algorithm>
#include <cerrno>

#include "core/errors.h"

namespace hoop::engine {

ScratchPool::~ScratchPool() {
  if (data_) ::munmap(data_, size_);
}

void* ScratchPool::get(size_t bytes) {
  if (bytes <= size_ && data_) return data_;
  if (data_) ::munmap(data_, size_);
  data_ = nullptr;
  size_ = 0;
  // Round up to 2 MiB so huge pages can back it and growth happens rarely.
  const size_t want = std::max<size_t>((bytes + (2u << 20) - 1) & ~((size_t{2} << 20) - 1), 2u << 20);
  void* p = ::mmap(nullptr, want, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
  if (p == MAP_FAILED) throw_system_error(ErrorCode::internal, "cannot allocate scratch memory", errno);
  ::madvise(p, want, MADV_HUGEPAGE);
  data_ = p;
  size_ = want;
  return data_;
}

}  // namespace hoop::engine
