// Tensors in shared memory (torch's share_memory_(), whose storages are MAP_SHARED mappings of
// a shared-memory file) are registered with hoop the first time a collective names them, and
// deregistered once torch frees their storage: collectives on such tensors read and write the
// peers' tensors in place (zero copy). Storages that are not shared are remembered as such
// while they live, so that the check costs nothing the next time.
#pragma once

#include <ATen/ATen.h>

#include <mutex>
#include <unordered_map>

#include "hoop/communicator.h"

namespace hoop_torch {

class SharedTensors {
 public:
  explicit SharedTensors(hoop::Communicator& comm) : comm_(comm) {}
  ~SharedTensors();
  SharedTensors(const SharedTensors&) = delete;
  SharedTensors& operator=(const SharedTensors&) = delete;

  // Registers t's storage when it lives in shared memory and is not yet registered.
  void note(const at::Tensor& t);

 private:
  struct Entry {
    c10::weak_intrusive_ptr<c10::StorageImpl> storage;
    void* base;
    bool registered;
  };
  void forget(const Entry& e);  // deregisters it if registered (mu_ held)
  void forget_freed();          // every storage torch has freed (mu_ held)

  hoop::Communicator& comm_;
  std::mutex mu_;
  std::unordered_map<const c10::StorageImpl*, Entry> entries_;  // by storage
};

}  // namespace hoop_torch
