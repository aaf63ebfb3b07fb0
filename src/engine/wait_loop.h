// The engine's one way of waiting, for a step's transfers over links and for a peer's flag in
// the shared region alike: try, spin briefly (giving the core away when the ranks of this
// machine outnumber its cores, or when the waiting says so), then sleep on the Waiter until a
// peer moves (futex words the peers bump, sockets); nothing polls on a timer. On the way: the
// communicator's abort, each 100 ms of sleep the liveness of the peers waited on, after 500 ms
// without progress whether the communicator failed elsewhere, and the stall timeout.
//
// What is waited for is a `Waitable`:
//   bool advance()            moves what it can; true when anything moved
//   bool done()
//   nanoseconds spin(const EngineConfig&)  how long to spin before sleeping
//   bool spin_yields()        true: yield while spinning even when the cores are not oversubscribed
//   void check_health()       cheap checks, run every few spins and after each sleep (throws)
//   bool arm(Waiter&)         registers what to sleep on; false: ready, do not sleep
//   void disarm()
//   void check_liveness()     throws when a peer waited on is gone
//   int blamed_peer()         the peer named when the communicator failed elsewhere
//   [[noreturn]] void raise_timeout(nanoseconds stalled)
//   static constexpr int kPausesPerSpin   pause instructions between two tries
//   static constexpr uint32_t kSpinsPerCheck  tries between two looks at the clock and the health
#pragma once

#include <sched.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <fmt/format.h>

#include "core/clock.h"
#include "core/errors.h"
#include "engine/engine.h"
#include "transport/waiter.h"

namespace hoop::engine {

inline constexpr std::chrono::milliseconds kLivenessPeriod{100};
// How long a wait goes without progress before it asks whether the communicator failed
// elsewhere (a member that fails first tells the others' watchers). Not at once: a failure
// that reaches this rank through a link or the region names its cause better.
inline constexpr std::chrono::milliseconds kFailureProbePeriod{500};

struct WaitContext {
  transport::Waiter& waiter;
  const std::atomic<bool>& abort;
  const EngineConfig& cfg;
  std::chrono::milliseconds stall_timeout;
  const Engine::FailureProbe& failure_probe;
  ErrorContext ctx;  // of the errors raised here (peer filled in)
};

template <class Waitable>
void wait_loop(Waitable& w, const WaitContext& c) {
  TimePoint last_progress = Clock::now();
  TimePoint last_liveness = last_progress;
  bool yield = c.cfg.yield_while_spinning || w.spin_yields();
  for (uint32_t spins = 1; !w.done(); ++spins) {
    if (c.abort.load(std::memory_order_relaxed)) throw_error(ErrorCode::aborted, "the communicator was aborted", c.ctx);
    if (w.advance()) {
      if (w.done()) return;  // the common end of a short wait: no clock read
      last_progress = Clock::now();
      continue;
    }
    if (spins % Waitable::kSpinsPerCheck != 0) {
      if (yield) ::sched_yield();
      else for (int k = 0; k < Waitable::kPausesPerSpin; ++k) __builtin_ia32_pause();
      continue;
    }
    // Every kSpinsPerCheck spins: the cheap checks and the clock.
    w.check_health();
    if (Clock::now() - last_progress < w.spin(c.cfg)) {
      yield = c.cfg.yield_while_spinning || w.spin_yields();
      // Where every pass looks at the clock (kSpinsPerCheck 1) this is the only place to give
      // the core away.
      if (yield) ::sched_yield();
      else for (int k = 0; k < Waitable::kPausesPerSpin; ++k) __builtin_ia32_pause();
      continue;
    }
    c.waiter.reset();
    if (w.arm(c.waiter)) {
      const auto left = c.stall_timeout - (Clock::now() - last_progress);
      c.waiter.wait(std::clamp<nanoseconds>(left, nanoseconds(0), kLivenessPeriod));
    }
    w.disarm();
    if (w.advance()) {
      last_progress = Clock::now();
      continue;
    }
    w.check_health();
    const TimePoint after = Clock::now();
    if (after - last_liveness >= kLivenessPeriod) {
      last_liveness = after;
      w.check_liveness();
    }
    // A wait past its own timeout says so (it names what it waited for) even when the
    // communicator failed elsewhere meanwhile: a sleep that overran on a loaded machine wakes
    // to both.
    if (after - last_progress >= c.stall_timeout) w.raise_timeout(after - last_progress);
    if (c.failure_probe && after - last_progress >= kFailureProbePeriod && c.failure_probe()) {
      ErrorContext ctx = c.ctx;
      ctx.peer = w.blamed_peer();
      throw_error(ErrorCode::peer_failure,
                  ctx.peer >= 0 ? fmt::format("gave up waiting for rank {}: the communicator failed elsewhere", ctx.peer)
                                : std::string("gave up: the communicator failed elsewhere"),
                  ctx);
    }
    spins = Waitable::kSpinsPerCheck - 1;  // after a sleep, no spinning until something moves again
  }
}

}  // namespace hoop::engine
