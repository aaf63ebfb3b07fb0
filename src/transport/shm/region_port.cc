#include "transport/shm/region_port.h"

#include <fcntl.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <unistd.h>

#include <fmt/format.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>

#include "core/errors.h"

namespace hoop::transport::shm {

RegionPort::RegionPort(std::unique_ptr<SharedRegion> region, int rank, std::vector<pid_t> pids)
    : region_(std::move(region)),
      rank_(rank),
      pids_(std::move(pids)),
      liveness_(pids_.size()),
      seen_(pids_.size(), 0),
      compared_(pids_.size(), 0),
      mapped_(pids_.size()) {}

RegionPort::~RegionPort() {
  for (auto& per_peer : mapped_)
    for (const PeerMapping& m : per_peer) ::munmap(m.addr, m.map_bytes);
}

void RegionPort::begin_op() {
  ++op_;
  window_ = static_cast<unsigned>(op_ & 1);
  flag_ = 0;
}

void RegionPort::announce(const CallSignature& call, const void* input, const void* output, uint8_t bits,
                          const AnnouncedBuffer* registered) {
  WindowHeader& h = region_->header(rank_, window_);
  // A peer of the operation two back may still read this header while it waits (the flag and
  // the call): the flag says first that the operation moved on (no publish yet in it), and a
  // peer that reads a new word of the call (each stored with release) then sees that flag.
  h.flag.store(flag_word(op_, 0), std::memory_order_relaxed);
  uint64_t words[3];
  std::memcpy(words, &call, sizeof words);
  for (int i = 0; i < 3; ++i) h.call[i].store(words[i], std::memory_order_release);
  h.input_addr = reinterpret_cast<uint64_t>(input);
  h.output_addr = reinterpret_cast<uint64_t>(output);
  h.bits = bits;
  if (registered) {
    h.buffers[0] = registered[0];
    h.buffers[1] = registered[1];
  } else if (h.buffers[0].fd >= 0 || h.buffers[1].fd >= 0) {
    h.buffers[0].fd = h.buffers[1].fd = -1;
  }
}

std::byte* RegionPort::peer_mapped(int peer, bool output) {
  const AnnouncedBuffer& b = header(peer).buffers[output ? 1 : 0];
  if (b.fd < 0) return nullptr;
  auto& cache = mapped_[static_cast<size_t>(peer)];
  for (size_t i = 0; i < cache.size(); ++i) {
    PeerMapping m = cache[i];
    if (m.id != b.id || m.map_offset != b.map_offset || m.map_bytes != b.map_bytes) continue;
    if (i + 1 != cache.size()) {
      cache.erase(cache.begin() + static_cast<std::ptrdiff_t>(i));
      cache.push_back(m);
    }
    return m.addr + b.delta;
  }
  const std::string path = "/proc/" + std::to_string(pids_[static_cast<size_t>(peer)]) + "/fd/" + std::to_string(b.fd);
  const int fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
  if (fd < 0) {
    throw_system_error(ErrorCode::peer_failure, fmt::format("cannot open rank {}'s registered buffer ({})", peer, path),
                       errno, ErrorContext{rank_, "", 0, peer});
  }
  void* p = ::mmap(nullptr, b.map_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, static_cast<off_t>(b.map_offset));
  const int err = errno;
  ::close(fd);
  if (p == MAP_FAILED) {
    throw_system_error(ErrorCode::peer_failure, fmt::format("cannot map rank {}'s registered buffer ({})", peer, path),
                       err, ErrorContext{rank_, "", 0, peer});
  }
  if (cache.size() >= kMappingsPerPeer) {
    ::munmap(cache.front().addr, cache.front().map_bytes);
    cache.erase(cache.begin());
  }
  cache.push_back(PeerMapping{b.id, static_cast<std::byte*>(p), b.map_offset, b.map_bytes});
  return static_cast<std::byte*>(p) + b.delta;
}

void RegionPort::publish() {
  ++flag_;
  region_->header(rank_, window_).flag.store(flag_word(op_, flag_), std::memory_order_release);
  notify();
}

void RegionPort::notify() noexcept {
#if defined(__SANITIZE_THREAD__)
  // ThreadSanitizer cannot instrument fences; a seq_cst read-modify-write is a full barrier on
  // x86 too, and a wake-up lost to weaker ordering would cost one 100 ms sleep slice, not a hang.
  tsan_fence_word_.fetch_add(0, std::memory_order_seq_cst);
#else
  std::atomic_thread_fence(std::memory_order_seq_cst);
#endif
  const int n = region_->nranks();
  const uint32_t on_me = sleeping_on(rank_);
  for (int p = 0; p < n; ++p) {
    if (p == rank_) continue;
    RankControl& c = control(p);
    if (c.sleeping.load(std::memory_order_relaxed) == on_me) [[unlikely]] {
      c.wake.fetch_add(1, std::memory_order_seq_cst);
      Waiter::wake_shared(&c.wake);
    }
  }
}

// A sequence lock on word 0 of RankControl::call (the sequence number, never 0 for a call):
// plain stores on x86, paid by every operation. ThreadSanitizer cannot instrument fences (and
// GCC warns of them): there every access is sequentially consistent instead, which orders the
// same.
namespace {
#if defined(__SANITIZE_THREAD__)
constexpr auto kLockOrder = std::memory_order_seq_cst, kWordOrder = std::memory_order_seq_cst;
void seqlock_fence(std::memory_order) {}
#else
constexpr auto kLockOrder = std::memory_order_relaxed, kWordOrder = std::memory_order_relaxed;
void seqlock_fence(std::memory_order order) { std::atomic_thread_fence(order); }
#endif
}  // namespace

void RegionPort::declare(const CallSignature& call) {
  uint64_t words[3];
  std::memcpy(words, &call, sizeof words);
  std::atomic<uint64_t>* w = control(rank_).call;
  w[0].store(0, kLockOrder);
  seqlock_fence(std::memory_order_release);
  w[1].store(words[1], kWordOrder);
  w[2].store(words[2], kWordOrder);
  w[0].store(words[0], std::memory_order_release);
}

std::optional<CallSignature> RegionPort::declared(int peer) const {
  const std::atomic<uint64_t>* w = control(peer).call;
  uint64_t words[3];
  words[0] = w[0].load(std::memory_order_acquire);
  if (words[0] == 0) return std::nullopt;
  words[1] = w[1].load(kWordOrder);
  words[2] = w[2].load(kWordOrder);
  seqlock_fence(std::memory_order_acquire);
  if (w[0].load(kLockOrder) != words[0]) return std::nullopt;  // rewritten meanwhile
  CallSignature call;
  std::memcpy(&call, words, sizeof call);
  return call;
}

std::optional<CallSignature> RegionPort::peer_call(int peer) const {
  const WindowHeader& h = header(peer);
  const auto published_now = [&](uint64_t word) { return op_of(word) == op_ && (word & kMaxFlag) > 0; };
  if (!published_now(h.flag.load(std::memory_order_acquire))) return std::nullopt;
  uint64_t words[3];
  for (int i = 0; i < 3; ++i) words[i] = h.call[i].load(std::memory_order_acquire);
  // Still this operation's: the peer did not start rewriting the header two operations on.
  if (!published_now(h.flag.load(std::memory_order_relaxed))) return std::nullopt;
  CallSignature call;
  std::memcpy(&call, words, sizeof call);
  return call;
}

template <class Ready>
bool RegionPort::arm_until(Waiter& waiter, int peer, const Ready& ready) {
  RankControl& me = control(rank_);
  me.sleeping.store(sleeping_on(peer), std::memory_order_seq_cst);
  const uint32_t wake = me.wake.load(std::memory_order_seq_cst);
  if (ready() || poisoned()) {
    me.sleeping.store(kAwake, std::memory_order_relaxed);
    return false;
  }
  waiter.add_futex(&me.wake, wake, /*shared=*/true);
  return true;
}

bool RegionPort::arm(Waiter& waiter, int peer, uint32_t flag) {
  return arm_until(waiter, peer, [&] { return seen(peer, flag_word(op_, flag)); });
}

bool RegionPort::arm_window(Waiter& waiter, int peer) {
  return arm_until(waiter, peer, [&] { return window_ready(peer); });
}

bool RegionPort::shares_cpu_with(int peer) {
  RankControl& me = control(rank_);
  const int cpu = ::sched_getcpu();
  // Stored only when it changed: this line also holds `sleeping`, which every peer's notify()
  // reads, and a store would take the line from all their caches (a miss each, every op).
  if (me.cpu.load(std::memory_order_relaxed) != cpu) me.cpu.store(cpu, std::memory_order_relaxed);
  return peer >= 0 && cpu >= 0 && control(peer).cpu.load(std::memory_order_relaxed) == cpu;
}

bool RegionPort::alive(int peer) {
  const pid_t pid = pids_[static_cast<size_t>(peer)];
  return pid <= 0 || liveness_[static_cast<size_t>(peer)].alive(pid);
}

namespace {

// process_vm_readv or _writev of `bytes` between `local` and `addr` in `pid`, to the end.
template <class Move>
int move_peer_memory(pid_t pid, std::byte* local, uint64_t addr, size_t bytes, Move move) {
  size_t done = 0;
  while (done < bytes) {
    iovec here{local + done, bytes - done};
    iovec there{reinterpret_cast<void*>(addr + done), bytes - done};
    const ssize_t moved = move(pid, &here, 1, &there, 1, 0);
    if (moved < 0 && errno == EINTR) continue;
    if (moved <= 0) return moved < 0 ? errno : EIO;
    done += static_cast<size_t>(moved);
  }
  return 0;
}

}  // namespace

int RegionPort::read_peer_memory(int peer, void* dst, uint64_t addr, size_t bytes) const {
  return move_peer_memory(pids_[static_cast<size_t>(peer)], static_cast<std::byte*>(dst), addr, bytes,
                          ::process_vm_readv);
}

int RegionPort::write_peer_memory(int peer, uint64_t addr, const void* src, size_t bytes) const {
  return move_peer_memory(pids_[static_cast<size_t>(peer)], const_cast<std::byte*>(static_cast<const std::byte*>(src)),
                          addr, bytes, ::process_vm_writev);
}

namespace {

// The real uid on the "Uid:" line of /proc/<pid>/status; -1 when unreadable.
long real_uid_of(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("Uid:", 0) == 0) {
      std::istringstream fields(line.substr(4));
      long uid = -1;
      fields >> uid;
      return uid;
    }
  }
  return -1;
}

}  // namespace

bool peers_can_read_each_other(const std::vector<pid_t>& pids) {
  // Yama's ptrace_scope 1-3 limit process_vm_readv to ancestors (or nobody): the ranks are
  // siblings. Without Yama the classic rule applies: same user.
  std::ifstream yama("/proc/sys/kernel/yama/ptrace_scope");
  int scope = 0;
  if (yama && (yama >> scope) && scope != 0) return false;
  long uid = -2;
  for (pid_t pid : pids) {
    const long u = real_uid_of(pid);
    if (u < 0 || (uid != -2 && u != uid)) return false;
    uid = u;
  }
  return true;
}

}  // namespace hoop::transport::shm
