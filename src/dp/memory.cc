#include "dp/memory.h"

#include <algorithm>

namespace hoop::dp {

uint64_t& MemoryLedger::slot(MemoryUsage& u, MemKind kind) {
  switch (kind) {
    case MemKind::params: return u.params;
    case MemKind::grads: return u.grads;
    case MemKind::optimizer: return u.optimizer;
    case MemKind::redundancy: return u.redundancy;
    case MemKind::comm: break;
  }
  return u.comm;
}

void MemoryLedger::add(MemKind kind, uint64_t bytes) {
  uint64_t& now = slot(report_.current, kind);
  now += bytes;
  uint64_t& peak = slot(report_.peak, kind);
  peak = std::max(peak, now);
  report_.peak_total = std::max(report_.peak_total, report_.current.total());
}

void MemoryLedger::sub(MemKind kind, uint64_t bytes) { slot(report_.current, kind) -= bytes; }

SharedBuffer RegisteredPool::take(size_t bytes) {
  const size_t size = bytes > 0 ? bytes : 1;
  auto it = free_.find(size);
  if (it == free_.end() || it->second.empty()) return comm_->alloc(size);  // fresh: zero
  SharedBuffer b = std::move(it->second.back());
  it->second.pop_back();
  std::memset(b.data(), 0, size);
  return b;
}

void RegisteredPool::give_back(SharedBuffer b) {
  if (b) free_[b.size()].push_back(std::move(b));
}

TrackedBuffer::TrackedBuffer(MemoryLedger& ledger, MemKind kind, size_t bytes, RegisteredPool* pool)
    : ledger_(&ledger), kind_(kind), bytes_(bytes), pool_(pool) {
  if (pool_) {
    shared_ = pool_->take(bytes);
  } else {
    data_.reset(new std::byte[bytes > 0 ? bytes : 1]());
  }
  ledger_->add(kind_, bytes_);
}

TrackedBuffer& TrackedBuffer::operator=(TrackedBuffer&& o) noexcept {
  if (this != &o) {
    reset();
    ledger_ = o.ledger_;
    kind_ = o.kind_;
    bytes_ = o.bytes_;
    data_ = std::move(o.data_);
    shared_ = std::move(o.shared_);
    pool_ = o.pool_;
    o.ledger_ = nullptr;
    o.bytes_ = 0;
    o.pool_ = nullptr;
  }
  return *this;
}

void TrackedBuffer::reset() {
  if (!empty() && ledger_) ledger_->sub(kind_, bytes_);
  data_.reset();
  if (shared_ && pool_) pool_->give_back(std::move(shared_));
  shared_ = SharedBuffer();
  ledger_ = nullptr;
  pool_ = nullptr;
  bytes_ = 0;
}

}  // namespace hoop::dp
