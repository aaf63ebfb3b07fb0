#include "shared_tensors.h"

#include <ATen/MapAllocator.h>

#include <algorithm>

namespace hoop_torch {

SharedTensors::~SharedTensors() {
  std::lock_guard lk(mu_);
  for (const auto& [impl, e] : entries_) forget(e);
}

void SharedTensors::forget(const Entry& e) {
  if (!e.registered) return;
  try {
    comm_.deregister_buffer(e.base);
  } catch (const std::exception&) {
  }
}

void SharedTensors::forget_freed() {
  for (auto it = entries_.begin(); it != entries_.end();) {
    if (it->second.storage.expired()) {
      forget(it->second);
      it = entries_.erase(it);
    } else {
      ++it;
    }
  }
}

void SharedTensors::note(const at::Tensor& t) {
  if (!t.defined() || !t.has_storage() || t.device().type() != at::kCPU) return;
  const c10::Storage& storage = t.storage();
  c10::StorageImpl* impl = storage.unsafeGetStorageImpl();
  std::lock_guard lk(mu_);
  // First the storages torch freed meanwhile: their addresses may hold other memory now, which
  // must not be taken for the registered buffer.
  forget_freed();
  if (auto it = entries_.find(impl); it != entries_.end()) {
    if (!it->second.storage.expired()) return;  // known, alive
    forget(it->second);  // freed, and a new storage got its address
    entries_.erase(it);
  }
  Entry e{c10::weak_intrusive_ptr<c10::StorageImpl>(c10::intrusive_ptr<c10::StorageImpl>::reclaim_copy(impl)),
          storage.data(), false};
  // share_memory_() maps a shared-memory file (at::MapAllocator); any other storage is private.
  if (at::MapAllocator::fromDataPtr(storage.data_ptr()) != nullptr && storage.nbytes() > 0) {
    try {
      comm_.register_buffer(e.base, storage.nbytes());
      e.registered = true;
    } catch (const std::exception&) {
      // Not a mapping hoop can hand to its peers: the collectives copy as for private memory.
    }
  }
  entries_.emplace(impl, std::move(e));
}

}  // namespace hoop_torch
