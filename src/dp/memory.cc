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

TrackedBuffer::TrackedBuffer(MemoryLedger& ledger, MemKind kind, size_t bytes)
    : ledger_(&ledger), kind_(kind), bytes_(bytes), data_(new std::byte[bytes > 0 ? bytes : 1]()) {
  ledger_->add(kind_, bytes_);
}

TrackedBuffer& TrackedBuffer::operator=(TrackedBuffer&& o) noexcept {
  if (this != &o) {
    reset();
    ledger_ = o.ledger_;
    kind_ = o.kind_;
    bytes_ = o.bytes_;
    data_ = std::move(o.data_);
    o.ledger_ = nullptr;
    o.bytes_ = 0;
  }
  return *this;
}

void TrackedBuffer::reset() {
  if (data_ && ledger_) ledger_->sub(kind_, bytes_);
  data_.reset();
  ledger_ = nullptr;
  bytes_ = 0;
}

}  // namespace hoop::dp
