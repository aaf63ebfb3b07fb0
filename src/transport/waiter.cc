// The Waiter sleeps in one of three ways, chosen by what was registered:
//
//  - futex words only (shared-memory links): one futex_waitv over every word plus the private
//    interrupt word, so the first peer that bumps any word wakes us. Kernels without
//    futex_waitv (ENOSYS) fall back to FUTEX_WAIT on the first word, at most 1 ms at a time.
//  - file descriptors only (sockets): ppoll over them plus the interrupt eventfd.
//  - both (the mixed case): no single kernel call sleeps on futexes and descriptors at once,
//    so a FutexWatcher thread sleeps on the words (futex_waitv) and writes an eventfd that
//    ppoll watches beside the descriptors: a peer's futex bump wakes us at once. Without
//    futex_waitv, or with more words than one futex_waitv takes, ppoll sleeps in slices of at
//    most 1 ms and the words are checked between slices (a change is seen within about 1 ms:
//    shared-memory peers of a rank that also waits on sockets measured 0.5 ms per message).
//
// The interrupt is "pending" while interrupt_word_ is non-zero: interrupt() bumps it, wakes
// the futex and writes the eventfd; the wait() that observes it clears both and returns.
#include "transport/waiter.h"

#include <linux/futex.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>

#include "core/errors.h"

namespace hoop::transport {

namespace {

constexpr auto kSliceLimit = std::chrono::milliseconds(1);
// Longer timeouts are cut to this (a spurious return, which callers allow) so that
// now + timeout cannot overflow.
constexpr auto kLongestSleep = std::chrono::hours(24);

std::atomic<bool> g_futex_waitv_missing{false};

// The futex syscalls want plain integer addresses; the atomics are lock-free 32-bit words.
static_assert(sizeof(std::atomic<uint32_t>) == sizeof(uint32_t));
static_assert(std::atomic<uint32_t>::is_always_lock_free);

uint32_t* word_address(const std::atomic<uint32_t>* word) {
  return reinterpret_cast<uint32_t*>(const_cast<std::atomic<uint32_t>*>(word));
}

timespec monotonic_now() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts;
}

timespec add(timespec t, std::chrono::nanoseconds d) {
  const int64_t ns = d.count();
  t.tv_sec += static_cast<time_t>(ns / 1'000'000'000);
  t.tv_nsec += static_cast<long>(ns % 1'000'000'000);
  if (t.tv_nsec >= 1'000'000'000) {
    t.tv_sec += 1;
    t.tv_nsec -= 1'000'000'000;
  }
  return t;
}

timespec to_timespec(std::chrono::nanoseconds d) {
  timespec ts{};
  ts.tv_sec = static_cast<time_t>(d.count() / 1'000'000'000);
  ts.tv_nsec = static_cast<long>(d.count() % 1'000'000'000);
  return ts;
}

long futex_wait_relative(uint32_t* word, uint32_t expected, bool shared,
                         std::chrono::nanoseconds timeout) {
  const timespec ts = to_timespec(timeout);
  const int op = FUTEX_WAIT | (shared ? 0 : FUTEX_PRIVATE_FLAG);
  return syscall(SYS_futex, word, op, expected, &ts, nullptr, 0);
}

void futex_wake_all(uint32_t* word, bool shared) {
  const int op = FUTEX_WAKE | (shared ? 0 : FUTEX_PRIVATE_FLAG);
  syscall(SYS_futex, word, op, INT_MAX, nullptr, nullptr, 0);
}

}  // namespace

namespace detail {
// For tests: exercise the path taken on kernels without futex_waitv.
void force_futex_waitv_fallback(bool on) { g_futex_waitv_missing.store(on); }
}  // namespace detail

Waiter::Waiter() {
  interrupt_fd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (interrupt_fd_ < 0) throw_system_error(ErrorCode::internal, "eventfd for the waiter", errno);
}

Waiter::~Waiter() {
  if (interrupt_fd_ >= 0) close(interrupt_fd_);
}

void Waiter::reset() {
  futexes_.clear();
  fds_.clear();
}

void Waiter::add_futex(const std::atomic<uint32_t>* word, uint32_t expected, bool shared) {
  futexes_.push_back(FutexEntry{word, expected, shared});
}

void Waiter::add_fd(int fd, bool read, bool write) {
  short events = 0;
  if (read) events |= POLLIN;
  if (write) events |= POLLOUT;
  fds_.push_back(FdEntry{fd, events});
}

void Waiter::interrupt() noexcept {
  // Never let the counter wrap to 0, which would read as "nothing pending".
  if (interrupt_word_.fetch_add(1) == UINT32_MAX) interrupt_word_.fetch_add(1);
  futex_wake_all(word_address(&interrupt_word_), /*shared=*/false);
  const uint64_t one = 1;
  [[maybe_unused]] ssize_t n = ::write(interrupt_fd_, &one, sizeof(one));
}

void Waiter::wake_shared(std::atomic<uint32_t>* word) noexcept {
  futex_wake_all(word_address(word), /*shared=*/true);
}

namespace {

bool any_futex_changed(const auto& futexes) {
  for (const auto& f : futexes)
    if (f.word->load(std::memory_order_acquire) != f.expected) return true;
  return false;
}

void drain_eventfd(int fd) {
  uint64_t count = 0;
  [[maybe_unused]] ssize_t n = ::read(fd, &count, sizeof(count));
}

}  // namespace

void Waiter::wait(std::chrono::nanoseconds timeout) {
  const auto pending_interrupt = [this] {
    return interrupt_word_.load(std::memory_order_acquire) != 0;
  };
  // Clears an observed interrupt; the eventfd is drained after the word so that a write still
  // in flight from interrupt() can only leave a stale count behind (a harmless early poll).
  const auto clear_interrupt = [this] {
    interrupt_word_.store(0, std::memory_order_release);
    drain_eventfd(interrupt_fd_);
  };

  if (pending_interrupt()) {
    clear_interrupt();
    return;
  }
  timeout = std::min<std::chrono::nanoseconds>(timeout, kLongestSleep);
  if (timeout <= std::chrono::nanoseconds::zero()) return;
  const timespec deadline = add(monotonic_now(), timeout);
  const auto remaining = [&deadline] {
    const timespec now = monotonic_now();
    const int64_t ns = (deadline.tv_sec - now.tv_sec) * 1'000'000'000LL +
                       (deadline.tv_nsec - now.tv_nsec);
    return std::chrono::nanoseconds(std::max<int64_t>(ns, 0));
  };

  if (fds_.empty()) {
    // Futex words only (possibly none: then only the interrupt can end the sleep early).
    if (any_futex_changed(futexes_)) return;
    bool use_waitv = !g_futex_waitv_missing.load(std::memory_order_relaxed);
    if (use_waitv) {
      // futex_waitv takes at most FUTEX_WAITV_MAX words including the interrupt word; with
      // more, the rest are only re-checked after slices of at most 1 ms.
      const size_t n = std::min<size_t>(futexes_.size(), FUTEX_WAITV_MAX - 1);
      futex_waitv v[FUTEX_WAITV_MAX];
      std::memset(v, 0, sizeof(v));
      for (size_t i = 0; i < n; ++i) {
        v[i].val = futexes_[i].expected;
        v[i].uaddr = reinterpret_cast<uintptr_t>(futexes_[i].word);
        v[i].flags = FUTEX_32 | (futexes_[i].shared ? 0 : FUTEX_PRIVATE_FLAG);
      }
      v[n].val = 0;
      v[n].uaddr = reinterpret_cast<uintptr_t>(&interrupt_word_);
      v[n].flags = FUTEX_32 | FUTEX_PRIVATE_FLAG;
      const bool truncated = n < futexes_.size();
      timespec until = deadline;
      if (truncated) until = add(monotonic_now(), std::min<std::chrono::nanoseconds>(
                                                       kSliceLimit, remaining()));
      ++kernel_sleeps_;
      const long rc = syscall(SYS_futex_waitv, v, n + 1, 0, &until, CLOCK_MONOTONIC);
      if (rc < 0 && errno == ENOSYS) {
        g_futex_waitv_missing.store(true);
        use_waitv = false;
      }
      // Other outcomes (a wake, EAGAIN: a word already changed, ETIMEDOUT, EINTR) all return.
    }
    if (!use_waitv && !pending_interrupt()) {
      ++kernel_sleeps_;
      if (futexes_.empty()) {
        futex_wait_relative(word_address(&interrupt_word_), 0, false, remaining());
      } else {
        const auto& first = futexes_.front();
        futex_wait_relative(word_address(first.word), first.expected, first.shared,
                            std::min<std::chrono::nanoseconds>(kSliceLimit, remaining()));
      }
    }
    if (pending_interrupt()) clear_interrupt();
    return;
  }

  const bool mixed = !futexes_.empty();
  if (mixed && futexes_.size() <= FutexWatcher::kMaxWords && !g_futex_waitv_missing.load(std::memory_order_relaxed)) {
    wait_mixed(remaining());
    return;
  }

  // File descriptors, with the interrupt eventfd as the last entry.
  std::vector<pollfd> pfds;
  pfds.reserve(fds_.size() + 1);
  for (const auto& f : fds_) pfds.push_back(pollfd{f.fd, f.events, 0});
  pfds.push_back(pollfd{interrupt_fd_, POLLIN, 0});

  for (;;) {
    if (mixed && any_futex_changed(futexes_)) return;
    auto slice = remaining();
    if (mixed) slice = std::min<std::chrono::nanoseconds>(slice, kSliceLimit);
    const timespec ts = to_timespec(slice);
    ++kernel_sleeps_;
    const int rc = ppoll(pfds.data(), pfds.size(), &ts, nullptr);
    if (rc < 0) return;  // EINTR (or a bad descriptor, which the caller's own calls report)
    if (rc > 0) {
      bool fd_ready = false;
      for (size_t i = 0; i + 1 < pfds.size(); ++i) fd_ready |= pfds[i].revents != 0;
      if (pfds.back().revents != 0) {
        drain_eventfd(interrupt_fd_);
        // The count may be stale (its interrupt was already observed and cleared): then sleep on.
        if (pending_interrupt()) {
          clear_interrupt();
          return;
        }
      }
      if (fd_ready) {
        if (pending_interrupt()) clear_interrupt();
        return;
      }
    }
    if (remaining() == std::chrono::nanoseconds::zero()) {
      if (pending_interrupt()) clear_interrupt();
      return;
    }
  }
}

// Descriptors and futex words: ppoll over the descriptors, the interrupt eventfd and the
// watcher's eventfd, while the watcher sleeps on the words.
void Waiter::wait_mixed(std::chrono::nanoseconds timeout) {
  if (!watcher_) watcher_ = std::make_unique<FutexWatcher>();
  if (!watcher_->works()) {
    g_futex_waitv_missing.store(true);
    return;  // spurious: the next wait takes the sliced path
  }
  drain_eventfd(watcher_->fd());  // a stale wake of an earlier watch
  if (any_futex_changed(futexes_)) return;
  watcher_->watch(futexes_);
  struct Stop {
    FutexWatcher& w;
    ~Stop() { w.stop_watching(); }
  } stop{*watcher_};

  std::vector<pollfd> pfds;
  pfds.reserve(fds_.size() + 2);
  for (const auto& f : fds_) pfds.push_back(pollfd{f.fd, f.events, 0});
  pfds.push_back(pollfd{watcher_->fd(), POLLIN, 0});
  pfds.push_back(pollfd{interrupt_fd_, POLLIN, 0});
  const timespec ts = to_timespec(timeout);
  ++kernel_sleeps_;
  const int rc = ppoll(pfds.data(), pfds.size(), &ts, nullptr);
  if (rc > 0 && pfds.back().revents != 0) {
    drain_eventfd(interrupt_fd_);
    // The count may be stale (its interrupt was already observed and cleared).
    if (interrupt_word_.load(std::memory_order_acquire) == 0) return;
  }
  if (interrupt_word_.load(std::memory_order_acquire) != 0) {
    interrupt_word_.store(0, std::memory_order_release);
    drain_eventfd(interrupt_fd_);
  }
  // Anything else (a descriptor, a word, the timeout, EINTR): the caller re-checks.
}

}  // namespace hoop::transport
