// Faults seen from outside the library: a rank of a hoop-run job killed with SIGKILL in the
// middle of its collectives (hoop-run must exit non-zero naming it, and leave no process and
// no /dev/shm segment behind), and the rendezvous store dying while the ranks initialise (a
// clear init error, after the connection retry budget for a rank that starts later).
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <iostream>
#include <iterator>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "hoop/communicator.h"
#include "hoop/error.h"
#include "hoop/store.h"
#include "support/spawn.h"
#include "support/tool_process.h"
#include "transport/shm/shm_transport.h"

namespace hoop::test {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

const std::string kHoopRun = HOOP_BIN_DIR "/hoop-run";
const std::string kHoopBench = HOOP_BIN_DIR "/hoop-bench";

int reps() {
  if (const char* l = std::getenv("HOOP_TEST_LONG"); l && std::string(l) == "1") return 10;
  return 1;
}

// HOOP_RANK of a running process, or -1.
int rank_of(pid_t pid) {
  const std::string all = read_proc_file("/proc/" + std::to_string(pid) + "/environ");
  size_t at = 0;
  for (size_t end; (end = all.find('\0', at)) != std::string::npos; at = end + 1) {
    const std::string entry = all.substr(at, end - at);
    if (entry.rfind("HOOP_RANK=", 0) == 0) return std::stoi(entry.substr(10));
  }
  return -1;
}

struct LaunchCase {
  int nranks;
  const char* transport;
};

class FaultUnderHoopRun : public ::testing::TestWithParam<LaunchCase> {};

TEST_P(FaultUnderHoopRun, KilledRankIsNamedAndNothingIsLeftBehind) {
  const auto [n, transport] = GetParam();
  int passed = 0;
  for (int rep = 0; rep < reps(); ++rep) {
    std::mt19937_64 rng(std::random_device{}());
    const std::string job = "fl" + std::to_string(::getpid()) + "x" + std::to_string(rng() % 100000);
    ToolProcess run({kHoopRun, "-n", std::to_string(n), "--job-id", job, "--grace", "2", "-x",
                     std::string("HOOP_TRANSPORT=") + transport, "-x", "HOOP_TIMEOUT=5", "--",
                     kHoopBench, "allreduce", "-b", "256K", "-e", "256K", "-n", "1000000", "-w",
                     "0"});
    // The ranks are hoop-run's children; wait until all of them run the benchmark.
    std::vector<pid_t> ranks;
    const auto deadline = Clock::now() + 30s;
    while (Clock::now() < deadline) {
      ranks = children_of(run.pid());
      // Started, and exec'd (a child between fork and exec has no HOOP_RANK yet).
      bool all_running = static_cast<int>(ranks.size()) == n;
      for (pid_t p : ranks) all_running = all_running && rank_of(p) >= 0;
      if (all_running) break;
      std::this_thread::sleep_for(10ms);
    }
    ASSERT_EQ(static_cast<int>(ranks.size()), n) << "the ranks did not all start";
    // A random point of the job: start-up, connection or the middle of an AllReduce.
    std::this_thread::sleep_for(std::chrono::milliseconds(100 + rng() % 900));
    const pid_t victim = ranks[rng() % ranks.size()];
    const int victim_rank = rank_of(victim);
    ASSERT_GE(victim_rank, 0);
    ASSERT_EQ(::kill(victim, SIGKILL), 0);
    const ToolResult f = run.finish(60s);
    EXPECT_FALSE(f.timed_out);
    EXPECT_EQ(f.exit_code, 128 + SIGKILL) << f.err;
    const std::string named = "rank " + std::to_string(victim_rank) + " (pid " + std::to_string(victim) +
                              ") was killed by signal 9";
    EXPECT_NE(f.err.find(named), std::string::npos) << f.err;
    for (pid_t p : ranks) EXPECT_TRUE(process_ended(p)) << "rank pid " << p << " outlived the job";
    EXPECT_EQ(job_segments(job), std::vector<std::string>{});
    transport::shm_remove_job_segments(job);
    if (HasFailure()) {
      std::cout << f.err << "\n";
      break;
    }
    ++passed;
  }
  std::cout << "FAULT-MATRIX hoop-run kill " << transport << " n=" << n << ": " << passed << "/"
            << reps() << " as expected\n";
}

INSTANTIATE_TEST_SUITE_P(Faults, FaultUnderHoopRun,
                         ::testing::Values(LaunchCase{2, "shm"}, LaunchCase{4, "shm"},
                                           LaunchCase{8, "shm"}, LaunchCase{2, "tcp"},
                                           LaunchCase{4, "tcp"}, LaunchCase{8, "tcp"}),
                         [](const ::testing::TestParamInfo<LaunchCase>& p) {
                           return std::string(p.param.transport) + "_" + std::to_string(p.param.nranks);
                         });

// ---------------------------------------------------------------------------------------------
// The store dies during init.

// A store server in its own process, killed by the test.
struct StoreProcess {
  pid_t pid = -1;
  uint16_t port = 0;
  StoreProcess() {
    int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof addr;
    if (fd < 0 || ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
        ::listen(fd, 64) != 0 || ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
      throw std::runtime_error("cannot listen on loopback");
    }
    port = ntohs(addr.sin_port);
    pid = ::fork();
    if (pid == 0) {
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      auto server = TcpStoreServer::from_listening_fd(fd);
      for (;;) ::pause();
    }
    ::close(fd);
  }
  ~StoreProcess() {
    ::kill(pid, SIGKILL);
    ::waitpid(pid, nullptr, 0);
  }
};

TEST(FaultStore, StoreDyingDuringInitGivesAClearInitError) {
  constexpr int kRanks = 3;
  constexpr auto kRetryBudget = 2s;
  int passed = 0;
  for (int rep = 0; rep < reps(); ++rep) {
    StoreProcess store;
    const pid_t store_pid = store.pid;
    const uint16_t port = store.port;
    auto results = run_ranks(kRanks, [&](RankContext& ctx) {
      InitParams p;
      p.rank = ctx.rank;
      p.size = kRanks;
      p.job_id = ctx.job_id;
      if (ctx.rank == kRanks - 1) {
        // The last rank is late: it waits until the others published themselves (they now
        // wait for its record), kills the store, and only then tries to join.
        auto watcher = connect_tcp_store("127.0.0.1", port, 10s);
        for (int r = 0; r < kRanks - 1; ++r) {
          while (!watcher->check("hoop/c0/peer/" + std::to_string(r))) std::this_thread::sleep_for(5ms);
        }
        ctx.report("KILLING store");
        ::kill(store_pid, SIGKILL);
        // Dead (a zombie of the test process) means its sockets are closed.
        while (!process_ended(store_pid)) std::this_thread::sleep_for(1ms);
      }
      const auto start = Clock::now();
      try {
        p.store = connect_tcp_store("127.0.0.1", port, kRetryBudget);
        auto comm = Communicator::create(p);
        ADD_FAILURE() << "init succeeded without a store";
      } catch (const Error& e) {
        const double waited = seconds_since(start);
        ctx.report("ERROR " + std::string(to_string(e.code())) + " after " + std::to_string(waited) +
                   " s: " + e.what());
        EXPECT_EQ(e.code(), ErrorCode::init) << e.what();
        EXPECT_NE(std::string(e.what()).find("store"), std::string::npos) << e.what();
        EXPECT_NE(std::string(e.what()).find(std::to_string(port)), std::string::npos)
            << "does not say which store: " << e.what();
        if (ctx.rank == kRanks - 1) {
          // A rank that connects after the death retries for its whole budget, then says so.
          EXPECT_GE(waited, 0.9 * std::chrono::duration<double>(kRetryBudget).count()) << e.what();
          EXPECT_NE(std::string(e.what()).find("attempts"), std::string::npos) << e.what();
        }
      }
    }, SpawnOptions{.timeout = 60s});
    for (const auto& r : results) {
      for (const auto& line : r.reports) std::cout << "  rank " << r.rank << ": " << line << "\n";
    }
    EXPECT_TRUE(all_ok(results));
    if (HasFailure()) break;
    ++passed;
  }
  std::cout << "FAULT-MATRIX store-dies-in-init tcp n=" << kRanks << ": " << passed << "/" << reps()
            << " as expected\n";
}

}  // namespace
}  // namespace hoop::test
