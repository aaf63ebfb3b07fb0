// The fault matrix: jobs of 2, 4 and 8 ranks over shared memory and TCP run random collectives
// (every result checked); one rank injects one fault at a random point of a random one of
// them, and every survivor must end with an error that says what happened:
//   kill   (SIGKILL)       -> an error naming the dead rank, within the timeout;
//   stop   (SIGSTOP, hang) -> a timeout naming the op, its sequence number and the rank waited on;
//   reset / close (TCP)    -> an error, never a hang nor wrong data.
// No /dev/shm segment of the job may remain. Each case runs HOOP_FAULT_REPS times (default 2;
// 10 with HOOP_TEST_LONG=1) with fresh random choices; the seeds are printed for replay.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <cctype>
#include <cstdlib>
#include <iostream>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "hoop/communicator.h"
#include "hoop/error.h"
#include "support/fault_inject.h"
#include "support/random_ops.h"
#include "support/spawn.h"
#include "support/test_scale.h"
#include "transport/shm/shm_transport.h"

namespace hoop::test {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

int fault_reps() {
  if (const char* n = std::getenv("HOOP_FAULT_REPS")) return std::max(1, std::atoi(n));
  if (const char* l = std::getenv("HOOP_TEST_LONG"); l && std::string(l) == "1") return 10;
  return 2;
}

std::vector<std::string> reported(const RankResult& r, const std::string& key) {
  std::vector<std::string> out;
  for (const auto& line : r.reports) {
    if (line.rfind(key + " ", 0) == 0) out.push_back(line.substr(key.size() + 1));
  }
  return out;
}

// Does `text` name rank `r` as a word ("rank 2", "peer 2")?
bool names_rank(const std::string& text, int r) {
  for (const char* word : {"rank ", "peer "}) {
    const std::string needle = word + std::to_string(r);
    for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) {
      const size_t end = at + needle.size();
      const bool starts = at == 0 || !std::isalnum(static_cast<unsigned char>(text[at - 1]));
      const bool ends = end == text.size() || !std::isdigit(static_cast<unsigned char>(text[end]));
      if (starts && ends) return true;
    }
  }
  return false;
}

struct MatrixCase {
  int nranks;
  const char* transport;
  Fault fault;
};

std::string case_name(const ::testing::TestParamInfo<MatrixCase>& p) {
  return std::string(fault_name(p.param.fault)) + "_" + p.param.transport + "_" +
         std::to_string(p.param.nranks);
}

class FaultMatrix : public ::testing::TestWithParam<MatrixCase> {};

// One run of one case; returns whether every check held (failures are reported by gtest).
bool run_case(const MatrixCase& mc, uint64_t seed) {
  const int n = mc.nranks;
  std::mt19937_64 plan(seed);
  const int victim = 1 + static_cast<int>(plan() % static_cast<uint64_t>(n - 1));  // rank 0 survives
  const int fault_op = 1 + static_cast<int>(plan() % 8);
  const auto delay = std::chrono::microseconds(plan() % 3000);
  const auto timeout = mc.fault == Fault::stop ? 2000ms : 3000ms;

  SpawnOptions opts;
  opts.timeout = 90s;
  opts.env.emplace_back("HOOP_TRANSPORT", mc.transport);
  auto results = run_ranks(n, [&](RankContext& ctx) {
    // Links connect lazily, within the timeout of the op that first needs them: on this
    // 2-core machine eight ranks may take longer than the short timeout to connect. A first
    // round of every collective and root, under a long timeout, connects them all.
    CommOptions copts;
    copts.timeout = 60s;
    auto comm = ctx.make_comm(copts);
    auto store = ctx.store();
    ctx.report("JOB " + comm->job_id());
    uint64_t warm_tag = 1u << 20;
    for (OpType kind : {OpType::allreduce, OpType::reducescatter, OpType::allgather, OpType::barrier,
                        OpType::broadcast, OpType::reduce}) {
      const bool rooted = kind == OpType::broadcast || kind == OpType::reduce;
      for (int root = 0; root < (rooted ? n : 1); ++root) {
        RandomOp warm;
        warm.op = kind;
        warm.count = 64;
        warm.root = root;
        OpBuffers bufs(warm, ++warm_tag, ctx.rank, n);
        bufs.run(*comm);
        ASSERT_EQ(bufs.verify(), "");
      }
    }
    comm->set_timeout(timeout);
    if (ctx.rank == victim) store->set_string("victim-pid", std::to_string(::getpid()));
    std::mt19937_64 rng(seed ^ 0x5eed);
    int k = 0;
    try {
      for (; k < fault_op + 200; ++k) {
        const RandomOp op = draw_op(rng, n, 1 << 15);
        OpBuffers bufs(op, static_cast<uint64_t>(k), ctx.rank, n);
        if (ctx.rank == victim && k == fault_op) {
          ctx.report("FAULT " + std::to_string(now_ns()) + " in " + op.describe());
          inject_fault_later(mc.fault, delay, ctx.store_port);
        }
        bufs.run(*comm);
        const std::string bad = bufs.verify();
        if (!bad.empty()) {
          ctx.report("WRONG " + bad);
          ADD_FAILURE() << "op " << k << ": " << bad;
          return;
        }
      }
      if (ctx.rank != victim) ADD_FAILURE() << fault_op + 200 << " ops succeeded despite the fault";
    } catch (const Error& e) {
      ctx.report("ERROR " + std::to_string(now_ns()) + " " + std::to_string(static_cast<int>(e.code())) +
                 " " + std::to_string(e.peer()) + " " + std::to_string(e.seq()) + " " + e.op() + " | " +
                 e.what());
    }
    if (ctx.rank == victim) return;  // a victim of a TCP fault learns too, but is not judged
    store->add("survivors-done", 1);
    if (ctx.rank == 0 && mc.fault == Fault::stop) {
      // Every survivor has its error: the hung rank can go.
      while (store->add("survivors-done", 0) < n - 1) std::this_thread::sleep_for(5ms);
      ::kill(std::stoi(store->get_string("victim-pid")), SIGKILL);
    }
  }, opts);

  std::string job;
  int64_t fault_at = 0;
  for (const auto& r : results) {
    for (const auto& j : reported(r, "JOB")) job = j;
    for (const auto& f : reported(r, "FAULT")) fault_at = std::stoll(f);
  }
  EXPECT_NE(fault_at, 0) << "the fault was never injected";
  const double limit = std::chrono::duration<double>(timeout).count();
  bool someone_blamed_the_victim = false;
  for (const auto& r : results) {
    if (r.rank == victim) {
      if (mc.fault == Fault::kill || mc.fault == Fault::stop) {
        EXPECT_EQ(r.signal, SIGKILL);
      }
      continue;
    }
    EXPECT_TRUE(r.ok()) << "survivor " << r.rank << " exit " << r.exit_code << " signal " << r.signal;
    EXPECT_TRUE(reported(r, "WRONG").empty()) << "survivor " << r.rank << " got wrong data";
    const auto errors = reported(r, "ERROR");
    if (errors.size() != 1) {
      ADD_FAILURE() << "survivor " << r.rank << " got no error";
      continue;
    }
    std::istringstream in(errors[0]);
    int64_t at = 0;
    int code = 0, peer = 0;
    uint64_t seq = 0;
    std::string op, bar;
    in >> at >> code >> peer >> seq >> op >> bar;
    std::string what;
    std::getline(in, what);
    const auto ecode = static_cast<ErrorCode>(code);
    const double latency = (at - fault_at) / 1e9;
    EXPECT_NE(ecode, ErrorCode::invalid_argument) << what;
    EXPECT_NE(ecode, ErrorCode::mismatch) << what;
    // Told within the timeout, plus scheduling slack: 8 ranks on 2 cores may wait a few hundred
    // ms for the CPU at each hop of the failure's propagation (longer under a sanitizer).
    EXPECT_LE(latency, limit + wall_bound(4.0)) << "survivor " << r.rank << ": " << what;
    switch (mc.fault) {
      case Fault::kill:
        EXPECT_TRUE(names_rank(what, victim)) << "survivor " << r.rank << " does not name rank "
                                              << victim << ": " << what;
        someone_blamed_the_victim = true;
        break;
      case Fault::stop:
        EXPECT_TRUE(ecode == ErrorCode::timeout || ecode == ErrorCode::peer_failure) << what;
        EXPECT_NE(what.find(op + " #" + std::to_string(seq)), std::string::npos)
            << "no op and sequence number: " << what;
        EXPECT_TRUE(peer >= 0 && names_rank(what, peer)) << "names no peer: " << what;
        someone_blamed_the_victim |= ecode == ErrorCode::timeout && peer == victim;
        break;
      case Fault::reset:
      case Fault::close:
        someone_blamed_the_victim |= names_rank(what, victim);
        break;
    }
  }
  EXPECT_TRUE(someone_blamed_the_victim) << "no survivor named rank " << victim;
  if (!job.empty()) {
    EXPECT_EQ(job_segments(job), std::vector<std::string>{}) << "left in /dev/shm by job " << job;
    transport::shm_remove_job_segments(job);
  }
  const bool ok = !::testing::Test::HasFailure();  // the loop stops at the first failed run
  if (!ok) {
    for (const auto& r : results) {
      for (const auto& line : r.reports) std::cout << "    rank " << r.rank << ": " << line << "\n";
    }
  }
  return ok;
}

TEST_P(FaultMatrix, EverySurvivorGetsAnErrorThatSaysWhatHappened) {
  const MatrixCase& mc = GetParam();
  const int reps = fault_reps();
  int passed = 0;
  for (int rep = 0; rep < reps; ++rep) {
    const uint64_t seed = std::random_device{}() ^ (uint64_t(rep) << 32);
    const auto start = Clock::now();
    const bool ok = run_case(mc, seed);
    passed += ok;
    std::cout << "  " << fault_name(mc.fault) << " " << mc.transport << " n=" << mc.nranks
              << " run " << rep + 1 << "/" << reps << " seed " << seed << ": "
              << (ok ? "ok" : "FAILED") << " (" << seconds_since(start) << " s)\n";
    if (::testing::Test::HasFailure()) break;
  }
  // One line per case, collected into docs/RELIABILITY.md.
  std::cout << "FAULT-MATRIX " << fault_name(mc.fault) << " " << mc.transport << " n=" << mc.nranks
            << ": " << passed << "/" << reps << " as expected\n";
}

std::vector<MatrixCase> matrix() {
  std::vector<MatrixCase> cases;
  for (Fault f : {Fault::kill, Fault::stop}) {
    for (const char* t : {"shm", "tcp"}) {
      for (int n : {2, 4, 8}) cases.push_back({n, t, f});
    }
  }
  for (Fault f : {Fault::reset, Fault::close}) {
    for (int n : {2, 4, 8}) cases.push_back({n, "tcp", f});
  }
  return cases;
}

INSTANTIATE_TEST_SUITE_P(Faults, FaultMatrix, ::testing::ValuesIn(matrix()), case_name);

}  // namespace
}  // namespace hoop::test
