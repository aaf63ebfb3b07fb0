#include "transport/shm/buffer_registry.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "core/errors.h"

namespace hoop::transport::shm {

namespace {

constexpr size_t kPageBytes = 4096;
constexpr size_t kFreedKept = 1024;  // freed ranges remembered for clear errors

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23  // Linux 5.14
#endif

size_t round_up_pages(size_t x) { return (x + kPageBytes - 1) / kPageBytes * kPageBytes; }

// One line of /proc/self/maps.
struct Mapping {
  uintptr_t start = 0, end = 0;
  bool shared = false;
  uint64_t offset = 0;
  unsigned dev_major = 0, dev_minor = 0;
  uint64_t inode = 0;
  std::string path;
};

std::optional<Mapping> mapping_of(uintptr_t addr) {
  std::ifstream in("/proc/self/maps");
  std::string line;
  while (std::getline(in, line)) {
    Mapping m;
    char perms[8] = {};
    char path[4096] = {};
    unsigned long long start = 0, end = 0, offset = 0, inode = 0;
    const int got = std::sscanf(line.c_str(), "%llx-%llx %7s %llx %x:%x %llu %4095[^\n]", &start, &end, perms, &offset,
                                &m.dev_major, &m.dev_minor, &inode, path);
    if (got < 7 || addr < start || addr >= end) continue;
    m.start = static_cast<uintptr_t>(start);
    m.end = static_cast<uintptr_t>(end);
    m.shared = perms[3] == 's';
    m.offset = offset;
    m.inode = inode;
    m.path = got == 8 ? std::string(path) : std::string();
    return m;
  }
  return std::nullopt;
}

// A descriptor of this process open on the mapping's file, duplicated for the registry: one of
// the process's own (torch keeps the descriptor of a shared tensor), else the mapping itself
// through /proc/self/map_files (which needs CAP_SYS_ADMIN or CAP_CHECKPOINT_RESTORE).
int descriptor_of(const Mapping& m) {
  if (DIR* dir = ::opendir("/proc/self/fd")) {
    int found = -1;
    while (dirent* e = ::readdir(dir)) {
      char* end = nullptr;
      const long fd = std::strtol(e->d_name, &end, 10);
      if (end == e->d_name || *end != '\0' || fd == ::dirfd(dir)) continue;
      struct stat st {};
      if (::fstat(static_cast<int>(fd), &st) != 0) continue;
      if (st.st_ino == m.inode && major(st.st_dev) == m.dev_major && minor(st.st_dev) == m.dev_minor) {
        found = ::fcntl(static_cast<int>(fd), F_DUPFD_CLOEXEC, 0);
        break;
      }
    }
    ::closedir(dir);
    if (found >= 0) return found;
  }
  char path[64];
  std::snprintf(path, sizeof path, "/proc/self/map_files/%" PRIxPTR "-%" PRIxPTR, m.start, m.end);
  return ::open(path, O_RDWR | O_CLOEXEC);
}

}  // namespace

BufferRegistry& BufferRegistry::instance() {
  static BufferRegistry* registry = new BufferRegistry();  // lives until exit: buffers may outlive everything
  return *registry;
}

RegisteredRange BufferRegistry::alloc(size_t bytes, const std::string& name) {
  const size_t len = round_up_pages(std::max<size_t>(bytes, 1));
  const int fd = ::memfd_create(name.c_str(), MFD_CLOEXEC);
  if (fd < 0) throw_system_error(ErrorCode::transport, "memfd_create " + name, errno);
  const auto fail = [&](const char* what, int err) {
    ::close(fd);
    throw_system_error(ErrorCode::transport, fmt::format("{} of shared buffer {} ({} bytes)", what, name, len), err);
  };
  if (::ftruncate(fd, static_cast<off_t>(len)) != 0) fail("ftruncate", errno);
  // Reserve the pages now: a full /dev/shm is a clear error here, not a SIGBUS later.
  if (const int err = ::posix_fallocate(fd, 0, static_cast<off_t>(len)); err != 0 && err != EOPNOTSUPP) fail("fallocate", err);
  void* p = ::mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) fail("mmap", errno);
  // First touch of fresh pages is slow on some machines: fault them in once, here.
  (void)::madvise(p, len, MADV_POPULATE_WRITE);
  std::lock_guard lk(mu_);
  RegisteredRange r{reinterpret_cast<uintptr_t>(p), bytes, fd, 0, len, 0, next_id_++};
  by_base_[r.base] = Entry{r, true};
  freed_.erase(r.base);
  live_.store(by_base_.size(), std::memory_order_relaxed);
  return r;
}

RegisteredRange BufferRegistry::add(const void* ptr, size_t bytes) {
  const auto addr = reinterpret_cast<uintptr_t>(ptr);
  if (!ptr || bytes == 0) throw_error(ErrorCode::invalid_argument, "register_buffer: a null pointer or no bytes");
  const auto m = mapping_of(addr);
  if (!m || !m->shared || m->inode == 0) {
    throw_error(ErrorCode::invalid_argument,
                fmt::format("register_buffer: {} is not in a shared file mapping (MAP_SHARED of a file, a memfd or "
                            "/dev/shm: Communicator::alloc makes such memory, torch's share_memory_() too)",
                            ptr));
  }
  if (addr + bytes > m->end) {
    throw_error(ErrorCode::invalid_argument,
                fmt::format("register_buffer: {} bytes from {} run past the end of its mapping ({} bytes left)", bytes,
                            ptr, m->end - addr));
  }
  const int fd = descriptor_of(*m);
  if (fd < 0) {
    throw_system_error(ErrorCode::invalid_argument,
                       fmt::format("register_buffer: no descriptor of {}'s file to hand to the peers ({})", ptr,
                                   m->path.empty() ? std::string("unnamed") : m->path),
                       errno);
  }
  const uint64_t file_pos = m->offset + (addr - m->start);
  RegisteredRange r;
  r.base = addr;
  r.bytes = bytes;
  r.fd = fd;
  r.map_offset = file_pos / kPageBytes * kPageBytes;
  r.delta = file_pos - r.map_offset;
  r.map_bytes = round_up_pages(r.delta + bytes);
  std::lock_guard lk(mu_);
  auto next = by_base_.lower_bound(addr);
  const bool overlaps_next = next != by_base_.end() && next->first < addr + bytes;
  const bool overlaps_prev = next != by_base_.begin() && std::prev(next)->second.range.base +
                                                                 std::prev(next)->second.range.bytes > addr;
  if (overlaps_next || overlaps_prev) {
    ::close(fd);
    throw_error(ErrorCode::invalid_argument, fmt::format("register_buffer: {} bytes from {} overlap a registered buffer", bytes, ptr));
  }
  r.id = next_id_++;
  by_base_[addr] = Entry{r, false};
  freed_.erase(addr);
  live_.store(by_base_.size(), std::memory_order_relaxed);
  return r;
}

bool BufferRegistry::remove(const void* ptr) {
  std::lock_guard lk(mu_);
  auto it = by_base_.find(reinterpret_cast<uintptr_t>(ptr));
  if (it == by_base_.end()) return false;
  const Entry e = it->second;
  by_base_.erase(it);
  Freed f{e.range.base + e.range.bytes, 0, 0};
  struct stat st {};
  if (::fstat(e.range.fd, &st) == 0) {
    f.dev = st.st_dev;
    f.inode = st.st_ino;
  }
  if (e.owned) {
    // The pages go, the addresses stay: a reservation without memory takes the mapping's place
    // in one step, so nothing the process maps later lands where a stale pointer may point.
    void* base = reinterpret_cast<void*>(e.range.base);
    if (::mmap(base, e.range.map_bytes, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED | MAP_NORESERVE, -1, 0) ==
        MAP_FAILED) {
      ::munmap(base, e.range.map_bytes);
    } else {
      f.reserved_bytes = e.range.map_bytes;
    }
  }
  ::close(e.range.fd);
  if (freed_.size() >= kFreedKept) {
    const auto oldest = freed_.begin();
    if (oldest->second.reserved_bytes > 0) ::munmap(reinterpret_cast<void*>(oldest->first), oldest->second.reserved_bytes);
    freed_.erase(oldest);
  }
  freed_[e.range.base] = f;
  live_.store(by_base_.size(), std::memory_order_relaxed);
  any_freed_.store(true, std::memory_order_relaxed);
  return true;
}

std::optional<RegisteredRange> BufferRegistry::find(const void* ptr, size_t bytes) const {
  const auto addr = reinterpret_cast<uintptr_t>(ptr);
  std::lock_guard lk(mu_);
  auto it = by_base_.upper_bound(addr);
  if (it == by_base_.begin()) return std::nullopt;
  const RegisteredRange& r = std::prev(it)->second.range;
  if (addr + bytes > r.base + r.bytes) return std::nullopt;
  return r;
}

bool BufferRegistry::was_freed(const void* ptr, size_t bytes) {
  const auto addr = reinterpret_cast<uintptr_t>(ptr);
  std::lock_guard lk(mu_);
  auto it = freed_.upper_bound(addr + std::max<size_t>(bytes, 1) - 1);
  if (it == freed_.begin()) return false;
  --it;
  if (it->second.end <= addr) return false;
  // A range registered again since (the same addresses reused) is live.
  auto live = by_base_.upper_bound(addr);
  if (live != by_base_.begin() && std::prev(live)->second.range.base + std::prev(live)->second.range.bytes > addr) {
    return false;
  }
  if (it->second.reserved_bytes > 0) return true;
  // The caller's own mapping, registered once. Rare (a call naming addresses a buffer once
  // had), so worth a look at the process's maps: unmapped, or still the same file, it is the
  // freed buffer; anything else mapped there since is memory the process reused.
  const auto now = mapping_of(std::max(addr, it->first));
  if (!now) return true;
  const bool same_file =
      now->inode != 0 && now->inode == it->second.inode && makedev(now->dev_major, now->dev_minor) == it->second.dev;
  if (!same_file) {
    freed_.erase(it);
    if (freed_.empty()) any_freed_.store(false, std::memory_order_relaxed);
  }
  return same_file;
}

}  // namespace hoop::transport::shm
