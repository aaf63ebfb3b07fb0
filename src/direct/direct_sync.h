// Waiting for peers in the shm-direct region, and waking them.
//
// A wait first checks its condition, then spins for a bounded time (pause, or sched_yield when
// this host's ranks outnumber its cores), then sleeps on this rank's futex word. Sleeping is a
// Dekker handshake with the publishers: the sleeper raises `sleeping`, reads `wake`, re-checks
// its condition and sleeps only if `wake` still holds what it read; a publisher stores its
// counter, fences, and bumps `wake` of every peer whose `sleeping` is up. No syscall happens
// while the peers keep up, and no thread polls while idle.
//
// While asleep the wait honours the communicator's abort (the Waiter's interrupt), a poisoned
// region, the death of the peer it waits on (checked every 100 ms) and the stall timeout, and
// fails with an error naming that peer.
#pragma once

#include <sched.h>
#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <string_view>
#include <vector>

#include "core/clock.h"
#include "direct/direct_region.h"
#include "hoop/error.h"
#include "transport/shm/process_liveness.h"
#include "transport/waiter.h"

namespace hoop::direct {

struct SpinPolicy {
  std::chrono::microseconds spin{30};
  bool yield = false;  // more local ranks than cores: give the core away while spinning
};

class Sync {
 public:
  Sync(Region& region, int rank, std::vector<pid_t> pids, transport::Waiter& waiter,
       const std::atomic<bool>& abort_flag, SpinPolicy spin);

  // The context and stall timeout of errors raised by the following waits.
  void begin_op(const ErrorContext& ctx, std::chrono::milliseconds timeout) {
    ctx_ = ctx;
    timeout_ = timeout;
  }
  const ErrorContext& context() const { return ctx_; }

  // Announces the op this rank starts (see RankControl::op_number).
  void announce(uint64_t op_number, const OpSignature& sig) {
    op_number_ = op_number;
    op_sig_ = sig;
    RankControl& me = region_.control(rank_);
    me.op_sig = sig;
    me.op_number.store(op_number, std::memory_order_release);
  }

  // Returns once ready() holds; `peer` and `what` ("publish its data") name what it waits for.
  template <class Ready>
  void wait(int peer, std::string_view what, Ready&& ready) {
    if (ready()) [[likely]] return;
    wait_slow(peer, what, ready);
  }

  // After publishing a counter or a cell: wakes the peers that sleep.
  void notify() noexcept {
#if defined(__SANITIZE_THREAD__)
    // ThreadSanitizer cannot instrument fences; a seq_cst read-modify-write is a full barrier on
    // x86 too, and a wake-up lost to weaker ordering would cost one 100 ms sleep slice, not a hang.
    tsan_fence_word_.fetch_add(0, std::memory_order_seq_cst);
#else
    std::atomic_thread_fence(std::memory_order_seq_cst);
#endif
    for (int p = 0; p < region_.nranks(); ++p) {
      if (p == rank_) continue;
      RankControl& c = region_.control(p);
      if (c.sleeping.load(std::memory_order_relaxed) != 0) [[unlikely]] {
        c.wake.fetch_add(1, std::memory_order_seq_cst);
        transport::Waiter::wake_shared(&c.wake);
      }
    }
  }

  [[noreturn]] void raise_mismatch(int peer, const OpSignature& mine, const OpSignature& theirs) const;

 private:
  template <class Ready>
  void wait_slow(int peer, std::string_view what, Ready& ready) {
    const TimePoint start = Clock::now();
    RankControl& me = region_.control(rank_);
    // Spinning only helps while the peer runs on another CPU: sharing ours (the scheduler put
    // both there), every spin delays the very write we wait for, so yield to it instead.
    const int cpu = ::sched_getcpu();
    // Stored only when it changed: this line also holds `sleeping`, which every peer's notify()
    // reads, and a store would take the line from all their caches (a miss each, every op).
    if (me.cpu.load(std::memory_order_relaxed) != cpu) me.cpu.store(cpu, std::memory_order_relaxed);
    bool yield = spin_.yield || peer_shares_cpu(peer, cpu);
    for (uint32_t i = 1;; ++i) {
      if (ready()) return;
      if ((i & 63) == 0) {
        check_health();
        check_same_call(peer);
        if (Clock::now() - start >= spin_.spin) break;
        yield = spin_.yield || peer_shares_cpu(peer, cpu);
      }
      if (yield) ::sched_yield();
      else __builtin_ia32_pause();
    }
    TimePoint last_liveness = Clock::now();
    for (;;) {
      me.sleeping.store(1, std::memory_order_seq_cst);
      const uint32_t seen = me.wake.load(std::memory_order_seq_cst);
      if (ready()) break;
      const TimePoint now = Clock::now();
      if (now - start >= timeout_) {
        me.sleeping.store(0, std::memory_order_relaxed);
        raise_timeout(peer, what, now - start);
      }
      sleep(seen, start);
      me.sleeping.store(0, std::memory_order_relaxed);
      if (ready()) return;
      check_health();
      check_same_call(peer);
      if (Clock::now() - last_liveness >= kLivenessPeriod) {
        last_liveness = Clock::now();
        check_alive(peer);
      }
    }
    me.sleeping.store(0, std::memory_order_relaxed);
  }

  static constexpr std::chrono::milliseconds kLivenessPeriod{100};

  bool peer_shares_cpu(int peer, int cpu) const {
    return peer >= 0 && cpu >= 0 && region_.control(peer).cpu.load(std::memory_order_relaxed) == cpu;
  }

  void sleep(uint32_t seen, TimePoint start);
  void check_health();  // abort, poison
  void check_same_call(int peer) const;
  void check_alive(int peer);
  [[noreturn]] void raise_timeout(int peer, std::string_view what, nanoseconds waited) const;

  Region& region_;
  int rank_;
  std::vector<pid_t> pids_;
  std::vector<transport::shm::ProcessLiveness> liveness_;
  transport::Waiter& waiter_;
  const std::atomic<bool>& abort_;
  SpinPolicy spin_;
  ErrorContext ctx_;
  uint64_t op_number_ = 0;
  OpSignature op_sig_;
  std::chrono::milliseconds timeout_{300000};
  std::atomic<uint32_t> tsan_fence_word_{0};  // see notify()
};

}  // namespace hoop::direct
