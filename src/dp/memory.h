// Per-rank accounting of model-state memory: every buffer the data-parallel engine owns is a
// TrackedBuffer charged to one kind (parameters, gradients, optimizer states, communication).
// The buffers collectives read and write may come from registered memory (RegisteredPool):
// on one host the collectives then read and write the peers' buffers in place.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <vector>

#include "hoop/communicator.h"
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

// Registered memory (Communicator::alloc) kept for reuse: buffers of the same size come back
// every step (buckets, gathered layers), and fresh shared pages are slow to fault in.
class RegisteredPool {
 public:
  explicit RegisteredPool(Communicator* comm) : comm_(comm) {}
  SharedBuffer take(size_t bytes);  // zero-filled
  void give_back(SharedBuffer b);

 private:
  Communicator* comm_;
  std::map<size_t, std::vector<SharedBuffer>> free_;  // by size
};

// A zero-filled byte buffer whose size is counted in a ledger for its lifetime; from `pool`
// (registered memory) when one is given.
class TrackedBuffer {
 public:
  TrackedBuffer() = default;
  TrackedBuffer(MemoryLedger& ledger, MemKind kind, size_t bytes, RegisteredPool* pool = nullptr);
  ~TrackedBuffer() { reset(); }
  TrackedBuffer(TrackedBuffer&& o) noexcept { *this = std::move(o); }
  TrackedBuffer& operator=(TrackedBuffer&& o) noexcept;
  TrackedBuffer(const TrackedBuffer&) = delete;
  TrackedBuffer& operator=(const TrackedBuffer&) = delete;

  void reset();
  std::byte* data() const { return shared_ ? shared_.as<std::byte>() : data_.get(); }
  template <class T>
  T* as() const { return reinterpret_cast<T*>(data()); }
  size_t bytes() const { return bytes_; }
  bool empty() const { return data_ == nullptr && !shared_; }

 private:
  MemoryLedger* ledger_ = nullptr;
  MemKind kind_ = MemKind::comm;
  size_t bytes_ = 0;
  std::unique_ptr<std::byte[]> data_;
  SharedBuffer shared_;
  RegisteredPool* pool_ = nullptr;
};

}  // namespace hoop::dp
