// A thread that sleeps on futex words for a Waiter whose sleep also includes file descriptors
// (the mixed case: a shared-memory link beside a socket or the TCP listener). No kernel call
// sleeps on futexes and descriptors at once, so the Waiter polls its descriptors plus this
// watcher's eventfd, and the watcher writes that eventfd as soon as a peer bumps one of the
// words: a shared-memory wake reaches a rank sleeping on sockets at once, not at the next of
// its poll's 1 ms slices.
//
// One request at a time: watch() hands over a copy of the words (at most kMaxWords) for one
// sleep, stop_watching() ends it (without waiting for the thread). A request is generation g;
// the private cancel word holds the last cancelled generation, so a stop that comes before the
// thread has even started sleeping still ends that sleep (futex_waitv sees the word differ).
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <span>
#include <thread>
#include <vector>

namespace hoop::transport {

class FutexWatcher {
 public:
  struct Word {
    const std::atomic<uint32_t>* word;
    uint32_t expected;
    bool shared;
  };
  // futex_waitv's limit (128) less the cancel word.
  static constexpr size_t kMaxWords = 127;

  FutexWatcher();
  ~FutexWatcher();
  FutexWatcher(const FutexWatcher&) = delete;
  FutexWatcher& operator=(const FutexWatcher&) = delete;

  // Readable once a watched word changed since watch() (or spuriously: callers re-check).
  int fd() const { return fd_; }
  // Starts watching `words` (the first kMaxWords of them).
  void watch(std::span<const Word> words);
  // Ends the current watch; the thread goes back to waiting for the next.
  void stop_watching() noexcept;
  // False once the kernel turned out to lack futex_waitv (then nothing is watched).
  bool works() const { return !missing_.load(std::memory_order_relaxed); }

 private:
  void run();

  int fd_ = -1;  // eventfd
  std::mutex mu_;
  std::condition_variable requested_;
  std::vector<Word> words_;  // guarded by mu_
  uint32_t generation_ = 0;  // guarded by mu_
  bool stop_ = false;        // guarded by mu_
  std::atomic<uint32_t> cancelled_{0};  // the last generation stopped
  std::atomic<bool> missing_{false};
  std::thread thread_;
};

}  // namespace hoop::transport
