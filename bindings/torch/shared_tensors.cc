#include "shared_tensors.h"

#include <ATen/MapAllocator.h>

#include <algorithm>

namespace hoop_torch {

SharedTensors::~SharedTensors() {
  std::lock_guard lk(mu_);
  for (const Entry& e : entries_) {
    if (!e.registered) continue;
    try {
      comm_.deregister_buffer(e.base);
    } catch (const std::exception&) {
    }
  }
}

void SharedTensors::forget_freed() {
  std::erase_if(entries_, [&](const Entry& e) {
    if (!e.storage.expired()) return false;
    if (e.registered) {
      try {
        comm_.deregister_buffer(e.base);
      } catch (const std::exception&) {
      }
    }
    return true;
  });
}

void SharedTensors::note(const at::Tensor& t) {
  if (!t.defined() || !t.has_storage() || t.device().type() != at::kCPU) return;
  const c10::Storage& storage = t.storage();
  c10::StorageImpl* impl = storage.unsafeGetStorageImpl();
  std::lock_guard lk(mu_);
  forget_freed();
  for (const Entry& e : entries_) {
    if (e.storage.lock().get() == impl) return;
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
  entries_.push_back(std::move(e));
}

}  // namespace hoop_torch
