#include "transport/futex_watcher.h"

#include <linux/futex.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <algorithm>

#include "core/errors.h"

namespace hoop::transport {

namespace {

uint32_t* address(const std::atomic<uint32_t>* word) {
  return reinterpret_cast<uint32_t*>(const_cast<std::atomic<uint32_t>*>(word));
}

}  // namespace

FutexWatcher::FutexWatcher() {
  fd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (fd_ < 0) throw_system_error(ErrorCode::internal, "eventfd for the futex watcher", errno);
  // The thread takes no signals: they stay with the application's threads.
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_BLOCK, &all, &old);
  try {
    thread_ = std::thread([this] { run(); });
  } catch (...) {
    pthread_sigmask(SIG_SETMASK, &old, nullptr);
    close(fd_);
    throw;
  }
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
}

FutexWatcher::~FutexWatcher() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  requested_.notify_one();
  stop_watching();
  thread_.join();
  close(fd_);
}

void FutexWatcher::watch(std::span<const Word> words) {
  {
    std::lock_guard lock(mu_);
    words_.assign(words.begin(), words.begin() + static_cast<std::ptrdiff_t>(std::min(words.size(), kMaxWords)));
    ++generation_;
  }
  requested_.notify_one();
}

void FutexWatcher::stop_watching() noexcept {
  uint32_t generation = 0;
  {
    std::lock_guard lock(mu_);
    generation = generation_;
  }
  if (cancelled_.load(std::memory_order_relaxed) == generation) return;
  cancelled_.store(generation, std::memory_order_release);
  syscall(SYS_futex, address(&cancelled_), FUTEX_WAKE | FUTEX_PRIVATE_FLAG, INT_MAX, nullptr, nullptr, 0);
}

void FutexWatcher::run() {
  uint32_t seen = 0;
  std::vector<futex_waitv> v;
  for (;;) {
    {
      std::unique_lock lock(mu_);
      requested_.wait(lock, [&] { return stop_ || generation_ != seen; });
      if (stop_) return;
      seen = generation_;
      v.assign(words_.size() + 1, futex_waitv{});
      for (size_t i = 0; i < words_.size(); ++i) {
        v[i].val = words_[i].expected;
        v[i].uaddr = reinterpret_cast<uintptr_t>(words_[i].word);
        v[i].flags = FUTEX_32 | (words_[i].shared ? 0 : FUTEX_PRIVATE_FLAG);
      }
    }
    // Every watch is stopped before the next begins: the cancel word holds seen - 1 until this
    // one is stopped, and futex_waitv returns at once if it already was.
    v.back().val = seen - 1;
    v.back().uaddr = reinterpret_cast<uintptr_t>(&cancelled_);
    v.back().flags = FUTEX_32 | FUTEX_PRIVATE_FLAG;
    const long rc = syscall(SYS_futex_waitv, v.data(), v.size(), 0, nullptr, CLOCK_MONOTONIC);
    if (rc < 0 && errno == ENOSYS) missing_.store(true, std::memory_order_relaxed);
    // Woken by a word (or spuriously) while still wanted: tell the Waiter.
    if (cancelled_.load(std::memory_order_acquire) != seen) {
      const uint64_t one = 1;
      [[maybe_unused]] ssize_t n = ::write(fd_, &one, sizeof(one));
    }
  }
}

}  // namespace hoop::transport
