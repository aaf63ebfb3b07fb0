// Registered buffers: memory in a shared mapping that the other ranks of this host can map
// and then read and write in place (zero copy). One registry per process, whatever the
// communicator: a buffer is a property of memory, not of a call.
//
// A range is registered with a file descriptor of the mapping's file and the file offset where
// the range starts; the registry keeps its own descriptor, so a peer can open
// /proc/<pid>/fd/<fd> (the same permission as process_vm_readv) and map the same pages, for as
// long as the range stays registered. alloc() makes such memory: a memfd named after the job,
// never in /dev/shm, gone with the last mapping however the processes end.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>

namespace hoop::transport::shm {

// What a peer needs to map a registered range: the owner's descriptor of the file, the
// page-aligned file offset and length to map, and where the range's first byte is in it.
struct RegisteredRange {
  uintptr_t base = 0;      // in this process
  size_t bytes = 0;
  int fd = -1;             // this process's descriptor of the mapping's file
  uint64_t map_offset = 0; // page aligned file offset covering the range
  uint64_t map_bytes = 0;  // whole pages from map_offset
  uint64_t delta = 0;      // base's offset within that mapping
  uint64_t id = 0;         // unique in this process, never reused
};

class BufferRegistry {
 public:
  static BufferRegistry& instance();

  // Fresh memory in a shared mapping, pre-faulted and registered: returns its range.
  RegisteredRange alloc(size_t bytes, const std::string& name);
  // Registers memory the caller has in a shared file mapping (MAP_SHARED of a file, a memfd or
  // a /dev/shm object: torch's share_memory_() tensors). Throws invalid_argument when
  // [ptr, ptr + bytes) is not inside one such mapping or overlaps a registered range.
  RegisteredRange add(const void* ptr, size_t bytes);
  // Unregisters the range that starts at ptr (and unmaps it when alloc() made it); false when
  // none starts there.
  bool remove(const void* ptr);

  // Nothing registered, nothing freed: calls need not look (no lock taken).
  bool empty() const { return live_.load(std::memory_order_relaxed) == 0; }
  bool none_freed() const { return !any_freed_.load(std::memory_order_relaxed); }

  // The registered range holding [ptr, ptr + bytes), if any.
  std::optional<RegisteredRange> find(const void* ptr, size_t bytes) const;
  // Whether [ptr, ptr + bytes) touches memory that was registered and is no longer (a freed
  // SharedBuffer): calls naming it fail clearly instead of reading unmapped memory. A freed
  // SharedBuffer keeps its addresses (reserved, without memory) while it is remembered, so a
  // stale pointer into it is never memory the allocator handed out since. A range the caller
  // registered and mapped itself is forgotten once something else is mapped there.
  bool was_freed(const void* ptr, size_t bytes);

 private:
  BufferRegistry() = default;
  struct Entry {
    RegisteredRange range;
    bool owned = false;  // made by alloc(): unmapped and closed on remove()
  };
  mutable std::mutex mu_;
  std::map<uintptr_t, Entry> by_base_;
  // A range removed: where it ended, the identity of the file it mapped, and the bytes of the
  // reservation that holds its addresses (alloc()'s ranges; 0 for the caller's own).
  struct Freed {
    uintptr_t end = 0;
    uint64_t dev = 0;
    uint64_t inode = 0;
    size_t reserved_bytes = 0;
  };
  std::map<uintptr_t, Freed> freed_;  // by base, ranges removed (bounded)
  uint64_t next_id_ = 1;
  std::atomic<size_t> live_{0};
  std::atomic<bool> any_freed_{false};
};

}  // namespace hoop::transport::shm
