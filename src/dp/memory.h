// Per-rank accounting of model-state memory: every buffer the data-parallel engine owns is a
// TrackedBuffer charged to one kind (parameters, gradients, optimizer states, communication).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>

#include "hoop/dp.h"

namespace hoop::dp {

enum class MemKind : uint8_t { params, grads, optimizer, comm, redundancy };

class MemoryLedger {
 public:
  void add(MemKind kind, uint64_t bytes);
  void sub(MemKind kind, uint64_t bytes);
  MemoryReport report() const { return report_; }

 private:
  static uint64_t& slot(MemoryUsage& u, MemKind kind);
  MemoryReport report_;
};

// A zero-filled byte buffer whose size is counted in a ledger for its lifetime.
class TrackedBuffer {
 public:
  TrackedBuffer() = default;
  TrackedBuffer(MemoryLedger& ledger, MemKind kind, size_t bytes);
  ~TrackedBuffer() { reset(); }
  TrackedBuffer(TrackedBuffer&& o) noexcept { *this = std::move(o); }
  TrackedBuffer& operator=(TrackedBuffer&& o) noexcept;
  TrackedBuffer(const TrackedBuffer&) = delete;
  TrackedBuffer& operator=(const TrackedBuffer&) = delete;

  void reset();
  std::byte* data() const { return data_.get(); }
  template <class T>
  T* as() const { return reinterpret_cast<T*>(data_.get()); }
  size_t bytes() const { return bytes_; }
  bool empty() const { return data_ == nullptr; }

 private:
  MemoryLedger* ledger_ = nullptr;
  MemKind kind_ = MemKind::comm;
  size_t bytes_ = 0;
  std::unique_ptr<std::byte[]> data_;
};

}  // namespace hoop::dp
