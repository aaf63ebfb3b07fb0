// The Waiter: sleeps end on a futex change (same or another process), on descriptor
// readiness, on interrupt() from another thread, or at the timeout, and never earlier than
// the timeout when nothing happens.
#include "transport/waiter.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <new>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "core/clock.h"
#include "support/test_scale.h"

namespace hoop::transport::detail {
void force_futex_waitv_fallback(bool on);
}

namespace hoop::transport {
namespace {

using namespace std::chrono_literals;
using test::wall_bound;

double ms_since(TimePoint t0) { return seconds_between(t0, Clock::now()) * 1000.0; }

double cpu_ms() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) * 1e3 + static_cast<double>(ts.tv_nsec) / 1e6;
}

struct Pipe {
  int fds[2] = {-1, -1};
  Pipe() { EXPECT_EQ(pipe2(fds, O_CLOEXEC | O_NONBLOCK), 0); }
  ~Pipe() {
    for (int fd : fds)
      if (fd >= 0) close(fd);
  }
  int read_end() const { return fds[0]; }
  int write_end() const { return fds[1]; }
};

// A 32-bit word in memory shared with forked children.
struct SharedWord {
  std::atomic<uint32_t>* word;
  SharedWord() {
    void* p = mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    EXPECT_NE(p, MAP_FAILED);
    word = new (p) std::atomic<uint32_t>(0);
  }
  ~SharedWord() { munmap(word, 4096); }
};

// What the Waiter is given besides the interrupt: the three ways it sleeps, and none.
enum class Mode { nothing, futex, fd, mixed };

struct Registration {
  std::atomic<uint32_t> word{5};
  Pipe idle_pipe;  // never written: a descriptor that stays unreadable

  void add_to(Waiter& w, Mode mode) {
    w.reset();
    if (mode == Mode::futex || mode == Mode::mixed) w.add_futex(&word, 5, /*shared=*/false);
    if (mode == Mode::fd || mode == Mode::mixed) w.add_fd(idle_pipe.read_end(), true, false);
  }
};

class WaiterModes : public ::testing::TestWithParam<Mode> {};

TEST_P(WaiterModes, TimeoutIsHonouredWhenNothingHappens) {
  Waiter w;
  Registration reg;
  reg.add_to(w, GetParam());
  const auto t0 = Clock::now();
  w.wait(120ms);
  const double ms = ms_since(t0);
  EXPECT_GE(ms, 115.0);
  EXPECT_LT(ms, wall_bound(1000.0));
}

TEST_P(WaiterModes, InterruptFromAnotherThreadWakesAtOnce) {
  Waiter w;
  Registration reg;
  reg.add_to(w, GetParam());
  const auto t0 = Clock::now();
  std::thread t([&] {
    std::this_thread::sleep_for(50ms);
    w.interrupt();
  });
  w.wait(10s);
  const double ms = ms_since(t0);
  t.join();
  EXPECT_GE(ms, 45.0);
  EXPECT_LT(ms, wall_bound(1000.0));
}

TEST_P(WaiterModes, InterruptIsStickyUntilAWaitObservesIt) {
  Waiter w;
  Registration reg;
  reg.add_to(w, GetParam());
  w.interrupt();
  auto t0 = Clock::now();
  w.wait(10s);
  EXPECT_LT(ms_since(t0), wall_bound(500.0));
  // Cleared by the wait that returned: the next one sleeps its full timeout.
  t0 = Clock::now();
  w.wait(80ms);
  EXPECT_GE(ms_since(t0), 75.0);
}

// Every interrupt wakes exactly the wait it was meant for: one interrupt per round, sent
// only once the previous wait returned, so a lost one shows as a 5 s sleep.
TEST_P(WaiterModes, NoInterruptIsLost) {
  Waiter w;
  Registration reg;
  reg.add_to(w, GetParam());
  constexpr int kRounds = 300;
  std::atomic<int> round{0};
  std::thread t([&] {
    for (int i = 1; i <= kRounds; ++i) {
      while (round.load() < i) std::this_thread::yield();
      w.interrupt();
    }
  });
  double worst_ms = 0;
  for (int i = 1; i <= kRounds; ++i) {
    round.store(i);
    const auto t0 = Clock::now();
    w.wait(5s);
    worst_ms = std::max(worst_ms, ms_since(t0));
  }
  t.join();
  EXPECT_LT(worst_ms, wall_bound(2000.0));
}

std::string mode_name(const ::testing::TestParamInfo<Mode>& param_info) {
  switch (param_info.param) {
    case Mode::nothing: return "Nothing";
    case Mode::futex: return "Futex";
    case Mode::fd: return "Fd";
    case Mode::mixed: return "Mixed";
  }
  return "Unknown";
}

INSTANTIATE_TEST_SUITE_P(All, WaiterModes,
                         ::testing::Values(Mode::nothing, Mode::futex, Mode::fd, Mode::mixed),
                         mode_name);

TEST(Waiter, ReturnsAtOnceWhenAWordAlreadyDiffers) {
  for (bool with_fd : {false, true}) {
    Waiter w;
    std::atomic<uint32_t> word{6};
    Pipe p;
    w.add_futex(&word, 5, false);
    if (with_fd) w.add_fd(p.read_end(), true, false);
    const auto t0 = Clock::now();
    w.wait(5s);
    EXPECT_LT(ms_since(t0), wall_bound(500.0)) << "with_fd=" << with_fd;
  }
}

TEST(Waiter, DescriptorReadinessWakes) {
  for (bool mixed : {false, true}) {
    Waiter w;
    Pipe p;
    std::atomic<uint32_t> word{1};
    w.add_fd(p.read_end(), true, false);
    if (mixed) w.add_futex(&word, 1, false);
    const auto t0 = Clock::now();
    std::thread t([&] {
      std::this_thread::sleep_for(50ms);
      ASSERT_EQ(write(p.write_end(), "x", 1), 1);
    });
    w.wait(10s);
    const double ms = ms_since(t0);
    t.join();
    EXPECT_GE(ms, 45.0) << "mixed=" << mixed;
    EXPECT_LT(ms, wall_bound(1000.0)) << "mixed=" << mixed;
  }
}

TEST(Waiter, WritableDescriptorReturnsAtOnce) {
  Waiter w;
  Pipe p;
  w.add_fd(p.write_end(), false, true);
  const auto t0 = Clock::now();
  w.wait(5s);
  EXPECT_LT(ms_since(t0), wall_bound(500.0));
}

// A word in memory shared with another process, bumped there and woken with wake_shared:
// the sleeper wakes soon after and used (almost) no CPU meanwhile.
void expect_cross_process_wake(bool with_fd) {
  SharedWord shared;
  Pipe idle;
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    std::this_thread::sleep_for(150ms);
    shared.word->store(1);
    Waiter::wake_shared(shared.word);
    _exit(0);
  }
  Waiter w;
  w.add_futex(shared.word, 0, /*shared=*/true);
  if (with_fd) w.add_fd(idle.read_end(), true, false);
  const auto t0 = Clock::now();
  const double cpu0 = cpu_ms();
  int waits = 0;
  while (shared.word->load() == 0 && ms_since(t0) < 10000) {
    w.wait(10s);
    ++waits;
  }
  const double ms = ms_since(t0);
  const double cpu = cpu_ms() - cpu0;
  int status = 0;
  waitpid(child, &status, 0);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  EXPECT_EQ(shared.word->load(), 1u);
  EXPECT_GE(ms, 140.0);
  // Sleeping, not spinning: a spinning waiter would burn about as much CPU as wall time (the
  // bound is relative, so a loaded machine that delays the wake-up does not fail it).
  EXPECT_LT(cpu, ms * 0.2) << "wall " << ms << " ms";
  // One sleep until the word changed, descriptors or not (sleeping in slices and looking at
  // the word between them would take one per slice: about 150). A spurious return or two is
  // allowed.
  EXPECT_LE(w.kernel_sleeps(), 3u) << waits << " waits";
}

TEST(Waiter, FutexChangeFromAnotherProcessWakes) { expect_cross_process_wake(false); }
TEST(Waiter, FutexChangeFromAnotherProcessWakesWithDescriptorsToo) { expect_cross_process_wake(true); }

class WaiterWords : public ::testing::TestWithParam<bool> {};

// With descriptors too (GetParam()), beyond the watcher's words: slices.
TEST_P(WaiterWords, MoreWordsThanOneFutexWaitvTakes) {
  Waiter w;
  Pipe idle;
  std::vector<std::atomic<uint32_t>> words(200);
  for (auto& word : words) w.add_futex(&word, 0, /*shared=*/true);
  if (GetParam()) w.add_fd(idle.read_end(), true, false);
  std::thread t([&] {
    std::this_thread::sleep_for(50ms);
    words[190].store(1);
    Waiter::wake_shared(&words[190]);
  });
  const auto t0 = Clock::now();
  while (words[190].load() == 0 && ms_since(t0) < 10000) w.wait(10s);
  const double ms = ms_since(t0);
  t.join();
  EXPECT_LT(ms, wall_bound(1000.0));
}

INSTANTIATE_TEST_SUITE_P(All, WaiterWords, ::testing::Bool(),
                         [](const auto& p) { return p.param ? "WithDescriptors" : "WordsOnly"; });

// A word bumped by a thread of this process while the waiter also sleeps on a descriptor:
// one sleep, woken by the watcher; then the descriptor still wakes it, and again the word.
TEST(Waiter, MixedSleepWakesOnTheWordThenTheDescriptor) {
  Waiter w;
  Pipe pipe;
  SharedWord shared;
  std::atomic<uint32_t>& word = *shared.word;
  for (int round = 0; round < 3; ++round) {
    w.reset();
    w.add_futex(&word, static_cast<uint32_t>(round), /*shared=*/true);
    w.add_fd(pipe.read_end(), true, false);
    const uint64_t before = w.kernel_sleeps();
    std::thread t([&] {
      std::this_thread::sleep_for(30ms);
      word.store(static_cast<uint32_t>(round + 1));
      Waiter::wake_shared(&word);
    });
    const auto t0 = Clock::now();
    while (word.load() == static_cast<uint32_t>(round) && ms_since(t0) < 10000) w.wait(10s);
    t.join();
    EXPECT_LT(ms_since(t0), wall_bound(5000.0));
    EXPECT_LE(w.kernel_sleeps() - before, 3u) << "round " << round;
  }
  w.reset();
  w.add_futex(&word, 3, /*shared=*/true);
  w.add_fd(pipe.read_end(), true, false);
  std::thread t([&] {
    std::this_thread::sleep_for(30ms);
    const char c = 'x';
    EXPECT_EQ(::write(pipe.write_end(), &c, 1), 1);
  });
  const auto t0 = Clock::now();
  w.wait(10s);
  t.join();
  EXPECT_LT(ms_since(t0), wall_bound(5000.0));
}

// Kernels without futex_waitv: FUTEX_WAIT on the first word in 1 ms slices; the interrupt,
// a change of any word and the timeout still end the sleep.
TEST(Waiter, FallbackWithoutFutexWaitv) {
  detail::force_futex_waitv_fallback(true);
  struct Restore {
    ~Restore() { detail::force_futex_waitv_fallback(false); }
  } restore;

  Waiter w;
  std::atomic<uint32_t> first{0}, second{0};
  w.add_futex(&first, 0, true);
  w.add_futex(&second, 0, true);
  auto t0 = Clock::now();
  w.wait(60ms);
  EXPECT_GE(ms_since(t0), 1.0);  // slices of 1 ms: returns spuriously, callers re-check

  std::thread t([&] {
    std::this_thread::sleep_for(40ms);
    second.store(1);
  });
  t0 = Clock::now();
  while (second.load() == 0 && ms_since(t0) < 10000) w.wait(10s);
  t.join();
  EXPECT_LT(ms_since(t0), wall_bound(1000.0));

  Waiter bare;  // nothing registered: sleeps on the interrupt word for the whole timeout
  t0 = Clock::now();
  bare.wait(80ms);
  EXPECT_GE(ms_since(t0), 75.0);
  std::thread ti([&] {
    std::this_thread::sleep_for(30ms);
    bare.interrupt();
  });
  t0 = Clock::now();
  bare.wait(10s);
  ti.join();
  EXPECT_LT(ms_since(t0), wall_bound(1000.0));
}

}  // namespace
}  // namespace hoop::transport
