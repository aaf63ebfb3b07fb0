#include "transport/shm/shared_region.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <new>
#include <thread>
#include <utility>

#include "bootstrap/store_wait.h"
#include "core/errors.h"
#include "core/log.h"
#include "transport/shm/process_liveness.h"
#include "transport/shm/shm_transport.h"
#include "transport/waiter.h"

namespace hoop::transport::shm {

namespace {

std::string store_key(uint64_t comm_id) { return fmt::format("hoop/c{:x}/direct", comm_id); }

class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }
  int release() { return std::exchange(fd_, -1); }

 private:
  int fd_;
};

std::byte* map_region(int fd, size_t bytes) {
  void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  return p == MAP_FAILED ? nullptr : static_cast<std::byte*>(p);
}

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23  // Linux 5.14
#endif

// Maps now the pages this rank writes: the control blocks and window headers (every rank's,
// read and written on every call) and its own two windows, so that none of them is faulted in
// during an operation. The peers' windows are faulted in at their first read only: mapping the
// whole region on every rank costs N x the region's pages in page tables (at 512 ranks, tens of
// seconds of start-up) for pages most ranks never read. A kernel without MADV_POPULATE_WRITE
// faults them in at first use instead.
void populate_own_pages(std::byte* base, const RegionGeometry& geo, int rank) {
  const auto populate = [&](size_t offset, size_t len) {
    if (len > 0) (void)::madvise(base + offset, len, MADV_POPULATE_WRITE);
  };
  populate(0, geo.windows_offset());
  populate(geo.window_offset(rank, 0), 2 * geo.window_bytes);
}

// Rank 0: a fresh region of the requested geometry, initialised and reserved, in a memfd. It
// has no name in /dev/shm: the peers open it through /proc/<pid>/fd/<fd> while rank 0 holds
// the descriptor, and it is gone with the last mapping, however its processes end.
std::byte* create(const RegionParams& p, const std::string& name, int* fd_out, size_t* bytes_out,
                  const ErrorContext& ctx) {
  const RegionGeometry geo{p.nranks, p.window_bytes};
  const size_t total = geo.total_bytes();
  const int raw = ::memfd_create(name.c_str(), MFD_CLOEXEC);
  if (raw < 0) throw_system_error(ErrorCode::transport, "memfd_create " + name, errno, ctx);
  Fd fd(raw);
  const auto fail = [&](const char* what, int err) {
    throw_system_error(ErrorCode::transport,
                       fmt::format("{} of shm-direct region {} ({} bytes)", what, name, total), err, ctx);
  };
  if (::ftruncate(fd.get(), static_cast<off_t>(total)) != 0) fail("ftruncate", errno);
  // Reserve the pages now: a full /dev/shm is a clear error here, not a SIGBUS later.
  if (const int err = ::posix_fallocate(fd.get(), 0, static_cast<off_t>(total)); err != 0 && err != EOPNOTSUPP)
    fail("fallocate", err);
  std::byte* base = map_region(fd.get(), total);
  if (base == nullptr) fail("mmap", errno);
  auto* h = new (base) RegionHeader{};
  h->version = kRegionVersion;
  h->nranks = p.nranks;
  h->comm_id = p.comm_id;
  h->total_bytes = total;
  h->window_bytes = p.window_bytes;
  h->shape_key = p.shape_key;
  h->attached.store(1, std::memory_order_relaxed);
  new (base + RegionGeometry::poison_offset()) PoisonBlock{};
  auto* headers = reinterpret_cast<WindowHeader*>(base + geo.headers_offset());
  for (size_t i = 0; i < static_cast<size_t>(p.nranks) * 2; ++i) {
    for (AnnouncedBuffer& b : headers[i].buffers) b.fd = -1;  // nothing registered yet
  }
  // The remaining control blocks are zero, as ftruncate left them: counters start at 0.
  h->ready.store(kRegionReady, std::memory_order_release);
  *bytes_out = total;
  *fd_out = fd.release();
  return base;
}

// The others: wait for rank 0 to publish the name, map the segment, check it.
std::byte* attach(const RegionParams& p, Store& store, TimePoint deadline,
                  const std::atomic<bool>& abort_flag, std::string* name_out, size_t* bytes_out,
                  const ErrorContext& ctx) {
  const std::string key = store_key(p.comm_id);
  ProcessLiveness creator;
  // Slices of a quarter second: rank 0's death and an abort are noticed within one.
  constexpr auto kSlice = std::chrono::milliseconds(250);
  const auto slice = [&] {
    return std::clamp(std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()),
                      std::chrono::milliseconds(1), kSlice);
  };
  while (!bootstrap::key_set_within(store, key, slice())) {
    if (abort_flag.load()) throw_error(ErrorCode::aborted, "the communicator was aborted", ctx);
    if (!p.pids.empty() && p.pids[0] > 0 && !creator.alive(p.pids[0]))
      throw_error(ErrorCode::peer_failure,
                  fmt::format("rank 0 (pid {}) exited before creating the shm-direct region", p.pids[0]),
                  ErrorContext{ctx.rank, ctx.op, ctx.seq, 0});
    if (Clock::now() >= deadline)
      throw_error(ErrorCode::timeout, "timed out waiting for rank 0 to create the shm-direct region",
                  ErrorContext{ctx.rank, ctx.op, ctx.seq, 0});
  }
  const std::string name = store.get_string(key);
  const int raw = ::open(name.c_str(), O_RDWR | O_CLOEXEC);
  if (raw < 0 && errno == ENOENT)
    throw_error(ErrorCode::peer_failure,
                fmt::format("rank 0 exited before this rank opened the shm-direct region ({})", name),
                ErrorContext{ctx.rank, ctx.op, ctx.seq, 0});
  if (raw < 0) throw_system_error(ErrorCode::transport, "open " + name, errno, ctx);
  Fd fd(raw);
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) throw_system_error(ErrorCode::transport, "fstat " + name, errno, ctx);
  const auto size = static_cast<size_t>(st.st_size);
  if (size < sizeof(RegionHeader))
    throw_error(ErrorCode::protocol, fmt::format("shm-direct region {} is truncated ({} bytes)", name, size), ctx);
  std::byte* base = map_region(fd.get(), size);
  if (base == nullptr) throw_system_error(ErrorCode::transport, "mmap " + name, errno, ctx);
  const auto* h = reinterpret_cast<const RegionHeader*>(base);
  const RegionGeometry geo{h->nranks, h->window_bytes};
  if (h->ready.load(std::memory_order_acquire) != kRegionReady || h->version != kRegionVersion ||
      h->nranks != p.nranks || h->comm_id != p.comm_id || h->total_bytes != size ||
      geo.total_bytes() != size || h->window_bytes == 0) {
    ::munmap(base, size);
    throw_error(ErrorCode::protocol,
                fmt::format("shm-direct region {} has an unexpected layout (version {}, {} ranks, "
                            "{} bytes)",
                            name, h->version, h->nranks, size),
                ctx);
  }
  if (h->shape_key != p.shape_key || h->window_bytes != p.window_bytes) {
    const uint64_t theirs = h->window_bytes;
    ::munmap(base, size);
    throw_error(ErrorCode::invalid_argument,
                fmt::format("rank 0 cut the shm-direct region for other shm-direct settings than this rank's "
                            "(windows of {} bytes against {} here): every rank must see the same values",
                            theirs, p.window_bytes),
                ErrorContext{ctx.rank, ctx.op, ctx.seq, 0});
  }
  *name_out = name;
  *bytes_out = size;
  return base;
}

}  // namespace

SharedRegion::SharedRegion(std::byte* base, size_t bytes, std::string name, int fd)
    : base_(base), bytes_(bytes), name_(std::move(name)), fd_(fd) {
  const auto* h = reinterpret_cast<const RegionHeader*>(base_);
  geo_ = RegionGeometry{h->nranks, h->window_bytes};
  poison_ = reinterpret_cast<PoisonBlock*>(base_ + RegionGeometry::poison_offset());
  ranks_ = reinterpret_cast<RankControl*>(base_ + RegionGeometry::ranks_offset());
  headers_ = reinterpret_cast<WindowHeader*>(base_ + geo_.headers_offset());
}

SharedRegion::~SharedRegion() {
  if (fd_ >= 0) {
    // Rank 0 may finish an operation (its part of a broadcast) and destroy its communicator
    // before a slower peer has opened the descriptor: hold it until every rank has mapped the
    // region, a peer still out is gone, or a bounded wait ends.
    const auto* h = reinterpret_cast<const RegionHeader*>(base_);
    const auto until = Clock::now() + kCloseGrace;
    while (h->attached.load(std::memory_order_acquire) < geo_.nranks && !poisoned() && Clock::now() < until) {
      bool someone_alive_out = false;
      for (int r = 1; r < geo_.nranks && !someone_alive_out; ++r) {
        if (ranks_[r].pid != 0) continue;
        const pid_t pid = static_cast<size_t>(r) < pids_.size() ? pids_[static_cast<size_t>(r)] : 0;
        someone_alive_out = pid <= 0 || ::kill(pid, 0) == 0;
      }
      if (!someone_alive_out) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    ::close(fd_);
  }
  ::munmap(base_, bytes_);
}

std::unique_ptr<SharedRegion> SharedRegion::open(const RegionParams& p, Store& store, TimePoint deadline,
                                     const std::atomic<bool>& abort_flag, const ErrorContext& ctx) {
  std::byte* base = nullptr;
  size_t bytes = 0;
  std::string name;
  int fd = -1;
  if (p.rank == 0) {
    base = create(p, fmt::format("{}c{:x}-direct", shm_segment_prefix(p.job_id), p.comm_id), &fd,
                  &bytes, ctx);
    name = fmt::format("/proc/{}/fd/{}", static_cast<int>(::getpid()), fd);
    try {
      store.set_string(store_key(p.comm_id), name);
    } catch (...) {
      ::munmap(base, bytes);
      ::close(fd);
      throw;
    }
  } else {
    base = attach(p, store, deadline, abort_flag, &name, &bytes, ctx);
  }
  std::unique_ptr<SharedRegion> region(new SharedRegion(base, bytes, name, fd));
  region->pids_ = p.pids;
  populate_own_pages(base, region->geometry(), p.rank);
  auto* h = reinterpret_cast<RegionHeader*>(base);
  region->control(p.rank).pid = static_cast<int32_t>(::getpid());
  region->control(p.rank).cpu.store(-1, std::memory_order_relaxed);
  if (p.rank != 0) h->attached.fetch_add(1, std::memory_order_acq_rel);
  HOOP_TRACE("shm-direct: rank {} mapped {} ({} bytes)", p.rank, name, bytes);
  return region;
}

void SharedRegion::poison(int by_rank, const std::string& reason) noexcept {
  uint32_t healthy = 0;
  if (poison_->state.compare_exchange_strong(healthy, kPoisonWriting)) {
    const size_t len = std::min(reason.size(), kReasonBytes - 1);
    std::memcpy(poison_->reason, reason.data(), len);
    poison_->reason[len] = '\0';
    poison_->by_rank = by_rank;
    poison_->state.store(kRegionPoisoned, std::memory_order_release);
  }
  for (int r = 0; r < geo_.nranks; ++r) {
    ranks_[r].wake.fetch_add(1, std::memory_order_seq_cst);
    Waiter::wake_shared(&ranks_[r].wake);
  }
}

void SharedRegion::raise_poisoned(const ErrorContext& ctx) const {
  // The poisoner writes at most 256 bytes between its two stores; give it a moment, but do
  // not depend on it (it may have been killed in between).
  uint32_t state = poison_->state.load(std::memory_order_acquire);
  const auto give_up = Clock::now() + std::chrono::milliseconds(2);
  while (state == kPoisonWriting && Clock::now() < give_up) {
    std::this_thread::yield();
    state = poison_->state.load(std::memory_order_acquire);
  }
  std::string reason = "(no reason given)";
  int by = -1;
  if (state == kRegionPoisoned) {
    const size_t len = strnlen(poison_->reason, kReasonBytes);
    if (len > 0) reason.assign(poison_->reason, len);
    by = poison_->by_rank;
  }
  ErrorContext c = ctx;
  if (by == ctx.rank)
    throw_error(ErrorCode::peer_failure, fmt::format("the shm-direct region was poisoned by this rank: {}", reason), c);
  c.peer = by;
  throw_error(ErrorCode::peer_failure, fmt::format("rank {} failed: {}", by, reason), c);
}

}  // namespace hoop::transport::shm
