// The engine's wait loop: where the ranks of a machine outnumber its cores it gives the core away
// while it spins, also where every pass over the links reads the clock (a step's wait), and a
// wait on a TCP link spins there while a wait on shared memory does not; a wait past its own
// timeout reports that timeout.
#include "engine/wait_loop.h"

#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <string>

#include <gtest/gtest.h>

#include "engine/engine.h"
#include "hoop/error.h"
#include "support/scoped_env.h"
#include "transport/waiter.h"

namespace {
thread_local long t_yields = 0;  // this thread's
}  // namespace

// Every sched_yield of this test program is counted per thread (and still made). The wait loop is a
// template, instantiated here with the test's Waitable: its yields are the program's.
extern "C" int sched_yield() noexcept {
  ++t_yields;
  return static_cast<int>(::syscall(SYS_sched_yield));
}

namespace hoop::engine {
namespace {

using namespace std::chrono_literals;

// Moves nothing for `idle` passes, then is done; every pass looks at the clock, as a step's
// wait over links does.
struct IdleThenDone {
  static constexpr int kPausesPerSpin = 0;
  static constexpr uint32_t kSpinsPerCheck = 1;
  int idle;
  int passes = 0;
  nanoseconds spin_for;

  bool advance() { return ++passes > idle; }
  bool done() const { return passes > idle; }
  nanoseconds spin(const EngineConfig&) const { return spin_for; }
  bool spin_yields() const { return false; }
  void check_health() {}
  bool arm(transport::Waiter&) { return false; }
  void disarm() {}
  void check_liveness() {}
  int blamed_peer() const { return -1; }
  [[noreturn]] void raise_timeout(nanoseconds) { throw std::runtime_error("stalled"); }
};

long yields_while_waiting(bool yield_while_spinning, nanoseconds spin, int idle) {
  transport::Waiter waiter;
  const std::atomic<bool> abort{false};
  EngineConfig cfg;
  cfg.yield_while_spinning = yield_while_spinning;
  const Engine::FailureProbe no_probe;
  IdleThenDone w{.idle = idle, .spin_for = spin};
  const long before = t_yields;
  wait_loop(w, WaitContext{waiter, abort, cfg, std::chrono::milliseconds(60000), no_probe, ErrorContext{}});
  EXPECT_TRUE(w.done());
  return t_yields - before;
}

TEST(WaitLoop, OnACoreSharedByMoreRanksEveryIdlePassGivesTheCoreAway) {
  // 50 passes that move nothing within a spin of a minute: one yield after each.
  EXPECT_EQ(yields_while_waiting(true, std::chrono::minutes(1), 50), 50);
}

TEST(WaitLoop, OnCoresOfTheirOwnItSpinsWithoutYielding) {
  EXPECT_EQ(yields_while_waiting(false, std::chrono::minutes(1), 50), 0);
}

TEST(WaitLoop, WithoutASpinItSleepsAtOnce) {
  // arm() says ready: each pass after the first sleeps (returns at once) instead of spinning.
  EXPECT_EQ(yields_while_waiting(true, nanoseconds(0), 50), 0);
}

// Never moves; sleeps until its timeout (nothing wakes it) and says which way it ended.
struct NeverMoves {
  static constexpr int kPausesPerSpin = 0;
  static constexpr uint32_t kSpinsPerCheck = 1;
  bool advance() { return false; }
  bool done() const { return false; }
  nanoseconds spin(const EngineConfig&) const { return nanoseconds(0); }
  bool spin_yields() const { return false; }
  void check_health() {}
  bool arm(transport::Waiter&) { return true; }
  void disarm() {}
  void check_liveness() {}
  int blamed_peer() const { return 3; }
  [[noreturn]] void raise_timeout(nanoseconds) { throw std::runtime_error("own timeout"); }
};

TEST(WaitLoop, AWaitPastItsOwnTimeoutSaysSoEvenWhenTheCommunicatorFailedElsewhere) {
  // The stall timeout equals the probe's period: the wake-up at 500 ms finds both the own
  // timeout passed and the communicator failed elsewhere.
  transport::Waiter waiter;
  const std::atomic<bool> abort{false};
  const EngineConfig cfg;
  const Engine::FailureProbe failed_elsewhere = [] { return true; };
  NeverMoves w;
  try {
    wait_loop(w, WaitContext{waiter, abort, cfg, kFailureProbePeriod, failed_elsewhere, ErrorContext{}});
    FAIL() << "the wait ended";
  } catch (const Error& e) {
    FAIL() << "gave up instead of timing out: " << e.what();
  } catch (const std::runtime_error& e) {
    EXPECT_STREQ(e.what(), "own timeout");
  }
}

TEST(EngineConfig, OnAMachineOfFewerCoresLinkWaitsSpinAndRegionWaitsDoNot) {
  test::ScopedEnv unset("HOOP_SPIN_US", nullptr);
  const long cores = ::sysconf(_SC_NPROCESSORS_ONLN);
  const EngineConfig shared = config_from_env(static_cast<int>(cores) + 1);
  EXPECT_TRUE(shared.yield_while_spinning);
  EXPECT_EQ(shared.spin, std::chrono::microseconds(kOversubscribedLinkSpinUs));
  EXPECT_EQ(shared.network_spin, std::chrono::microseconds(kOversubscribedNetworkSpinUs));
  EXPECT_EQ(shared.region_spin, 0us);

  const EngineConfig own = config_from_env(1);
  EXPECT_FALSE(own.yield_while_spinning);
  EXPECT_EQ(own.spin, 30us);
  EXPECT_EQ(own.network_spin, 30us);
  EXPECT_EQ(own.region_spin, 30us);

  test::ScopedEnv set("HOOP_SPIN_US", "7");
  const EngineConfig told = config_from_env(static_cast<int>(cores) + 1);
  EXPECT_EQ(told.spin, 7us);
  EXPECT_EQ(told.network_spin, 7us);
  EXPECT_EQ(told.region_spin, 7us);
}

}  // namespace
}  // namespace hoop::engine
