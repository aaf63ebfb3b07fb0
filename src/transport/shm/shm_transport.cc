// Creating, attaching and cleaning up shared-memory link segments (see shm_transport.h).
#include "transport/shm/shm_transport.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <new>
#include <string_view>
#include <utility>
#include <vector>
#include <thread>

#include "core/errors.h"
#include "core/log.h"
#include "core/params.h"
#include "transport/shm/process_liveness.h"
#include "transport/shm/shm_layout.h"
#include "transport/shm/shm_link.h"

namespace hoop::transport {

namespace {

using shm::kCacheLine;
using shm::kDataOffset;
using shm::kLayoutVersion;
using shm::kSegmentReady;
using shm::SegmentControl;

constexpr size_t kLargestRingBytes = size_t{1} << 40;
// How often the second arrival looks again at a segment its creator is still initialising.
constexpr auto kAttachPoll = std::chrono::microseconds(50);
// How often that wait asks whether the creator still lives (a read of /proc).
constexpr auto kCreatorCheckPeriod = std::chrono::milliseconds(10);

class FileDescriptor {
 public:
  explicit FileDescriptor(int fd) : fd_(fd) {}
  ~FileDescriptor() {
    if (fd_ >= 0) close(fd_);
  }
  FileDescriptor(const FileDescriptor&) = delete;
  FileDescriptor& operator=(const FileDescriptor&) = delete;
  int get() const { return fd_; }

 private:
  int fd_;
};

class Mapping {
 public:
  Mapping(void* addr, size_t bytes) : addr_(addr), bytes_(bytes) {}
  ~Mapping() {
    if (addr_ != nullptr) munmap(addr_, bytes_);
  }
  Mapping(const Mapping&) = delete;
  Mapping& operator=(const Mapping&) = delete;
  void* get() const { return addr_; }
  void* release() { return std::exchange(addr_, nullptr); }

 private:
  void* addr_;
  size_t bytes_;
};

size_t ring_capacity(size_t requested, const ErrorContext& ctx) {
  uint64_t bytes = requested;
  if (bytes == 0) bytes = params::bytes(params::Id::shm_ring_bytes);
  HOOP_CHECK_ARG(bytes <= kLargestRingBytes, ctx, "shared-memory ring of {} bytes is too large",
                 bytes);
  // A multiple of the cache line keeps 8-byte stream offsets 8-byte aligned across the wrap.
  return std::max<size_t>(kCacheLine, (bytes + kCacheLine - 1) / kCacheLine * kCacheLine);
}

}  // namespace

constexpr uint64_t kHostRingBudget = uint64_t{4} << 30;  // every pair's rings of a host

size_t ring_bytes_for_host(int ranks_on_host) {
  if (params::origin(params::Id::shm_ring_bytes) != params::Origin::default_value) return full_ring_bytes();
  constexpr size_t kSmallestDefaultRing = 16 * 1024;
  size_t ring = full_ring_bytes();
  while (ring > kSmallestDefaultRing && !every_pair_fits(ranks_on_host, ring)) ring /= 2;
  return ring;
}

size_t full_ring_bytes() { return static_cast<size_t>(params::bytes(params::Id::shm_ring_bytes)); }

bool every_pair_fits(int ranks_on_host, size_t ring_bytes) {
  const auto ranks = static_cast<uint64_t>(std::max(ranks_on_host, 1));
  return ranks * (ranks - 1) * ring_bytes <= kHostRingBudget;
}

namespace {

bool names_a_segment(const std::string& job_id) { return !job_id.empty() && job_id.find('/') == std::string::npos; }

// "hoop-<job>-c<comm>-": what the names of a communicator's segments start with (in /dev/shm).
std::string comm_segment_prefix(const std::string& job_id, uint64_t comm_id) {
  return fmt::format("{}c{:x}-", shm_segment_prefix(job_id), comm_id);
}

// "/<comm prefix><lo>-<hi>[-ch<channel>]"
std::string segment_name(const ShmLinkParams& p) {
  const auto lo = std::min(p.my_rank, p.peer_rank), hi = std::max(p.my_rank, p.peer_rank);
  const std::string pair = fmt::format("/{}{}-{}", comm_segment_prefix(p.job_id, p.comm_id), lo, hi);
  return p.channel == 0 ? pair : fmt::format("{}-ch{}", pair, p.channel);
}

void* map_segment(int fd, size_t bytes, int prot, int extra_flags) {
  void* addr = mmap(nullptr, bytes, prot, MAP_SHARED | extra_flags, fd, 0);
  return addr == MAP_FAILED ? nullptr : addr;
}

// First arrival: size, reserve and pre-fault the segment, initialise it, publish it.
std::unique_ptr<Link> create_segment(int raw_fd, const std::string& name, const ShmLinkParams& p,
                                     size_t capacity, const ErrorContext& ctx) {
  FileDescriptor fd(raw_fd);
  const size_t total = shm::segment_bytes(capacity);
  const auto fail = [&](const char* what, int err) {
    shm_unlink(name.c_str());
    throw_system_error(ErrorCode::transport, fmt::format("{} of shared-memory segment {} ({} bytes)",
                                                         what, name, total),
                       err, ctx);
  };
  if (ftruncate(fd.get(), static_cast<off_t>(total)) != 0) fail("ftruncate", errno);
  // Reserve the pages now: a full /dev/shm is then a clear error here rather than a SIGBUS
  // at the first touch of a hole.
  if (const int err = posix_fallocate(fd.get(), 0, static_cast<off_t>(total)); err != 0 && err != EOPNOTSUPP)
    fail("fallocate", err);
  Mapping map(map_segment(fd.get(), total, PROT_READ | PROT_WRITE, MAP_POPULATE), total);
  if (map.get() == nullptr) fail("mmap", errno);

  auto* control = new (map.get()) SegmentControl{};
  auto& h = control->header;
  h.layout_version = kLayoutVersion;
  h.capacity = capacity;
  h.total_bytes = total;
  h.comm_id = p.comm_id;
  h.lower_rank = std::min(p.my_rank, p.peer_rank);
  h.higher_rank = std::max(p.my_rank, p.peer_rank);
  const int side = p.my_rank < p.peer_rank ? 0 : 1;
  h.pid[side].store(static_cast<int32_t>(getpid()), std::memory_order_relaxed);
  h.ready.store(kSegmentReady, std::memory_order_release);
  HOOP_TRACE("shm: created {} for rank {} <-> {} ({} bytes per direction)", name, p.my_rank,
             p.peer_rank, capacity);
  auto link = std::make_unique<shm::ShmLink>(map.release(), total, p.my_rank, p.peer_rank, p.peer_pid, name);
  if (p.remove_if_unattached) link->remove_name_if_never_attached();
  return link;
}

enum class Attach { done, stale };

// Second arrival: wait for the creator to finish, map, record our pid, unlink the name.
// Returns `stale` (after unlinking it when this side is the lower rank) for a segment left
// by an earlier process in the peer's place; the caller then starts over.
Attach attach_segment(int raw_fd, const std::string& name, const ShmLinkParams& p,
                      TimePoint deadline, const ErrorContext& ctx, std::unique_ptr<Link>& link) {
  FileDescriptor fd(raw_fd);
  const auto timed_out = [&](const char* stage) {
    throw_error(ErrorCode::timeout,
                fmt::format("rank {} created shared-memory segment {} but did not {} before the "
                            "deadline",
                            p.peer_rank, name, stage),
                ctx);
  };

  // A creator that dies half-way never finishes: its death, not the deadline, ends the wait.
  // The segment is then of no use to anyone, so its name goes too.
  shm::ProcessLiveness liveness;
  TimePoint next_liveness_check = Clock::now() + kCreatorCheckPeriod;
  const auto wait_a_little = [&](const char* stage) {
    const TimePoint now = Clock::now();
    if (now >= deadline) timed_out(stage);
    if (p.peer_pid > 0 && now >= next_liveness_check) {
      next_liveness_check = now + kCreatorCheckPeriod;
      if (!liveness.alive(p.peer_pid)) {
        shm_unlink(name.c_str());
        throw_error(ErrorCode::peer_failure,
                    fmt::format("rank {} (pid {}) has exited: it created shared-memory segment {} but did "
                                "not {}",
                                p.peer_rank, static_cast<int>(p.peer_pid), name, stage),
                    ctx);
      }
    }
    std::this_thread::sleep_for(kAttachPoll);
  };

  struct stat st {};
  for (;;) {
    if (fstat(fd.get(), &st) != 0) throw_system_error(ErrorCode::transport, "fstat " + name, errno, ctx);
    if (static_cast<size_t>(st.st_size) >= kDataOffset) break;
    wait_a_little("size it");
  }
  Mapping head(map_segment(fd.get(), kDataOffset, PROT_READ, 0), kDataOffset);
  if (head.get() == nullptr) throw_system_error(ErrorCode::transport, "mmap " + name, errno, ctx);
  const auto* control = static_cast<const SegmentControl*>(head.get());
  const auto& h = control->header;
  while (h.ready.load(std::memory_order_acquire) != kSegmentReady) wait_a_little("initialise it");

  const int side = p.my_rank < p.peer_rank ? 0 : 1;
  const size_t capacity = h.capacity;
  const size_t total = h.total_bytes;
  if (fstat(fd.get(), &st) != 0) throw_system_error(ErrorCode::transport, "fstat " + name, errno, ctx);
  if (h.layout_version != kLayoutVersion || capacity == 0 || capacity % kCacheLine != 0 ||
      total != shm::segment_bytes(capacity) || static_cast<size_t>(st.st_size) != total ||
      h.comm_id != p.comm_id || h.lower_rank != std::min(p.my_rank, p.peer_rank) ||
      h.higher_rank != std::max(p.my_rank, p.peer_rank))
    throw_error(ErrorCode::protocol,
                fmt::format("shared-memory segment {} has an unexpected layout (version {}, "
                            "capacity {}, {} bytes)",
                            name, h.layout_version, capacity, static_cast<size_t>(st.st_size)),
                ctx);

  // A segment whose creator is not the peer we expect, or that someone already attached to
  // in our place, was left by an earlier run under the same job id. Only the lower rank
  // removes it, so two sides can never unlink each other's fresh segment.
  const pid_t creator = h.pid[1 - side].load(std::memory_order_acquire);
  const bool stale = h.pid[side].load(std::memory_order_acquire) != 0 ||
                     (p.peer_pid > 0 && creator != p.peer_pid);
  if (stale) {
    if (side == 0) {
      HOOP_WARN("shm: removing stale segment {} of an earlier run (attached pids {} and {}; "
                "rank {} is pid {})",
                name, h.pid[0].load(), h.pid[1].load(), p.peer_rank, static_cast<int>(p.peer_pid));
      shm_unlink(name.c_str());
    } else {
      if (Clock::now() >= deadline) timed_out("replace a stale segment of the same name");
      std::this_thread::sleep_for(kAttachPoll);
    }
    return Attach::stale;
  }
  if (capacity != ring_capacity(p.capacity, ctx))
    HOOP_INFO("shm: segment {} uses {} bytes per direction (set by rank {})", name, capacity,
              p.peer_rank);

  Mapping map(map_segment(fd.get(), total, PROT_READ | PROT_WRITE, MAP_POPULATE), total);
  if (map.get() == nullptr) throw_system_error(ErrorCode::transport, "mmap " + name, errno, ctx);
  auto* full = static_cast<SegmentControl*>(map.get());
  full->header.pid[side].store(static_cast<int32_t>(getpid()), std::memory_order_release);
  // Both sides hold a mapping now: the name is no longer needed, and removing it at once
  // leaves nothing behind whatever happens to either process later.
  if (shm_unlink(name.c_str()) != 0 && errno != ENOENT)
    HOOP_WARN("shm: cannot unlink {}: {}", name, std::strerror(errno));
  HOOP_TRACE("shm: attached {} for rank {} <-> {}", name, p.my_rank, p.peer_rank);
  link = std::make_unique<shm::ShmLink>(map.release(), total, p.my_rank, p.peer_rank, p.peer_pid, name);
  return Attach::done;
}

}  // namespace

std::string shm_segment_prefix(const std::string& job_id) { return "hoop-" + job_id + "-"; }

std::unique_ptr<Link> shm_connect(const ShmLinkParams& p, TimePoint deadline) {
  ErrorContext ctx;
  ctx.rank = p.my_rank;
  ctx.op = "shm.connect";
  ctx.peer = p.peer_rank;
  HOOP_CHECK_ARG(p.my_rank >= 0 && p.peer_rank >= 0 && p.my_rank != p.peer_rank, ctx,
                 "shared-memory link between ranks {} and {}", p.my_rank, p.peer_rank);
  HOOP_CHECK_ARG(names_a_segment(p.job_id), ctx, "job id '{}' cannot name a shared-memory segment", p.job_id);
  const size_t capacity = ring_capacity(p.capacity, ctx);
  const std::string name = segment_name(p);

  for (;;) {
    const int created = shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
    if (created >= 0) return create_segment(created, name, p, capacity, ctx);
    if (errno != EEXIST) throw_system_error(ErrorCode::transport, "shm_open " + name, errno, ctx);

    const int existing = shm_open(name.c_str(), O_RDWR, 0);
    if (existing < 0) {
      // Removed between the two calls (a stale segment cleared by the lower rank): retry.
      if (errno == ENOENT) continue;
      throw_system_error(ErrorCode::transport, "shm_open " + name, errno, ctx);
    }
    std::unique_ptr<Link> link;
    if (attach_segment(existing, name, p, deadline, ctx, link) == Attach::done) return link;
  }
}

namespace {

// Unlinks the entries of /dev/shm whose name `wanted` accepts; returns how many.
template <class Wanted>
size_t remove_segments(const Wanted& wanted) {
  DIR* dir = opendir("/dev/shm");
  if (dir == nullptr) return 0;
  std::vector<std::string> names;
  while (const dirent* entry = readdir(dir)) {
    const std::string_view entry_name(entry->d_name);
    if (wanted(entry_name)) names.emplace_back(entry_name);
  }
  closedir(dir);
  size_t removed = 0;
  for (const auto& n : names)
    if (shm_unlink(("/" + n).c_str()) == 0) ++removed;
  return removed;
}

}  // namespace

size_t shm_remove_job_segments(const std::string& job_id) {
  if (!names_a_segment(job_id)) return 0;
  const std::string prefix = shm_segment_prefix(job_id);
  return remove_segments([&](std::string_view name) { return name.starts_with(prefix); });
}

size_t shm_remove_rank_segments(const std::string& job_id, uint64_t comm_id, int rank) {
  if (!names_a_segment(job_id) || rank < 0) return 0;
  const std::string prefix = comm_segment_prefix(job_id, comm_id);  // then "<lo>-<hi>[-ch<channel>]"
  return remove_segments([&](std::string_view name) {
    if (!name.starts_with(prefix)) return false;
    int lo = -1, hi = -1;
    const std::string pair(name.substr(prefix.size()));
    return std::sscanf(pair.c_str(), "%d-%d", &lo, &hi) == 2 && (lo == rank || hi == rank);
  });
}

}  // namespace hoop::transport
