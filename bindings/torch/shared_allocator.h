// An allocation helper for tensors torch allocates itself, such as DDP's gradient buckets:
// while installed, torch's CPU allocations of at least `min_bytes` come from hoop's registered
// shared memory (Communicator::alloc), so collectives on them read and write the peers' memory
// in place; smaller ones go to the allocator installed before. torch has one CPU allocator per
// process, so the helper is process-wide while installed, and not nested.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/Allocator.h>

#include <memory>

#include "hoop/communicator.h"

namespace hoop_torch {

// Makes torch allocate CPU memory of at least min_bytes through `comm` until
// remove_shared_allocator(). Fails when one is already installed.
void install_shared_allocator(std::shared_ptr<hoop::Communicator> comm, size_t min_bytes);
// Puts back the allocator that install_shared_allocator found; false when none was installed.
// Tensors allocated meanwhile keep their shared memory until torch frees them.
bool remove_shared_allocator();
// Whether t's storage was allocated by the helper.
bool in_shared_allocation(const at::Tensor& t);

}  // namespace hoop_torch
