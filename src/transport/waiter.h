// Sleeping until a peer makes progress, without polling on a timer: futex words in shared
// memory (woken by the peer that writes them, futex_waitv for several at once) and file
// descriptors (sockets, woken by the kernel). One Waiter per engine.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <vector>

#include "transport/futex_watcher.h"

namespace hoop::transport {

class Waiter {
 public:
  Waiter();
  ~Waiter();
  Waiter(const Waiter&) = delete;
  Waiter& operator=(const Waiter&) = delete;

  // Forget everything registered for the previous sleep.
  void reset();
  // Sleep until *word != expected (or a wake on it). `shared`: the word lives in memory shared
  // between processes (no FUTEX_PRIVATE_FLAG).
  void add_futex(const std::atomic<uint32_t>* word, uint32_t expected, bool shared);
  // Sleep until fd is readable (read) and/or writable (write), or has an error/hang-up.
  void add_fd(int fd, bool read, bool write);

  // Blocks until something registered fires, interrupt() is called, or timeout passes.
  // Spurious returns are allowed: callers re-check their state.
  void wait(std::chrono::nanoseconds timeout);

  // Wakes a concurrent or the next wait() (from any thread). Sticky until that wait returns.
  void interrupt() noexcept;

  // Wakes every waiter sleeping on a shared futex word (used by the writer side of a link).
  static void wake_shared(std::atomic<uint32_t>* word) noexcept;

  // How many times wait() has slept in the kernel (for tests: a futex change seen at once is
  // one sleep, one seen between poll slices is many).
  uint64_t kernel_sleeps() const { return kernel_sleeps_; }

 private:
  using FutexEntry = FutexWatcher::Word;
  void wait_mixed(std::chrono::nanoseconds timeout);
  struct FdEntry {
    int fd;
    short events;
  };
  std::vector<FutexEntry> futexes_;
  std::vector<FdEntry> fds_;
  std::atomic<uint32_t> interrupt_word_{0};
  int interrupt_fd_ = -1;  // eventfd, for sleeps that include file descriptors
  std::unique_ptr<FutexWatcher> watcher_;  // for sleeps that include both, made at the first
  uint64_t kernel_sleeps_ = 0;
};

}  // namespace hoop::transport
