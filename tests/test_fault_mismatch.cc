// Mismatched calls beyond tests/test_comm_errors.cc: reduction ops, the counts of every
// collective, point-to-point sizes and types, one rank of four that differs, and the
// same cases under HOOP_CHECK=1, which compares each call's signature across ranks before it
// runs. Every rank must end with an error (never wrong data, never a hang past the timeout),
// and at least one must show both sides' values.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <functional>
#include <iostream>
#include <string>
#include <vector>

#include "hoop/communicator.h"
#include "hoop/error.h"
#include "support/spawn.h"
#include "transport/shm/shm_transport.h"

namespace hoop::test {
namespace {

using namespace std::chrono_literals;

struct Case {
  const char* name;
  int nranks;
  std::function<void(Communicator&, int rank)> call;
  std::vector<std::string> both_values;  // all must appear in one rank's mismatch message
  bool check = false;                     // run with HOOP_CHECK=1
};

void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }

std::vector<float> ones(size_t n) { return std::vector<float>(n, 1.0f); }

class MismatchGaps : public ::testing::TestWithParam<Case> {};

TEST_P(MismatchGaps, EveryRankFailsAndOneShowsBothValues) {
  const Case& mc = GetParam();
  SpawnOptions opts;
  opts.timeout = 60s;
  if (mc.check) opts.env.emplace_back("HOOP_CHECK", "1");
  auto results = run_ranks(mc.nranks, [&](RankContext& ctx) {
    CommOptions copts;
    copts.timeout = 5s;
    auto comm = ctx.make_comm(copts);
    ctx.report("JOB " + comm->job_id());
    comm->barrier();  // connected
    auto report = [&](const Error& e) {
      ctx.report(std::string(e.code() == ErrorCode::mismatch ? "MISMATCH " : "OTHER ") +
                 std::string(to_string(e.code())) + ": " + e.what());
      EXPECT_TRUE(e.code() == ErrorCode::mismatch || e.code() == ErrorCode::peer_failure) << e.what();
    };
    try {
      mc.call(*comm, ctx.rank);
    } catch (const Error& e) {
      report(e);
      return;
    }
    // A rank whose part was consistent may finish; it must learn at its next call at the latest.
    try {
      comm->barrier();
      ADD_FAILURE() << mc.name << ": neither the mismatched call nor the next one failed";
    } catch (const Error& e) {
      report(e);
    }
  }, opts);
  bool shown = false;
  std::string job;
  for (const auto& r : results) {
    for (const auto& line : r.reports) {
      std::cout << "  rank " << r.rank << ": " << line << "\n";
      if (line.rfind("JOB ", 0) == 0) job = line.substr(4);
      if (line.rfind("MISMATCH ", 0) != 0) continue;
      bool all = true;
      for (const auto& v : mc.both_values) all &= line.find(v) != std::string::npos;
      shown |= all;
    }
  }
  EXPECT_TRUE(all_ok(results));
  EXPECT_TRUE(shown) << mc.name << ": no rank got a mismatch error showing both values";
  EXPECT_EQ(job_segments(job), std::vector<std::string>{});
  transport::shm_remove_job_segments(job);
}

std::vector<Case> cases() {
  std::vector<Case> out{
      {"redop", 2,
       [](Communicator& c, int r) {
         auto v = ones(1000);
         c.allreduce(v.data(), v.data(), 1000, DataType::f32, r == 0 ? RedOp::sum : RedOp::max);
       },
       {"sum", "max"}},
      {"avg_vs_sum", 4,
       [](Communicator& c, int r) {
         auto v = ones(4096);
         c.allreduce(v.data(), v.data(), 4096, DataType::f32, r == 3 ? RedOp::avg : RedOp::sum);
       },
       {"sum", "avg"}},
      {"reducescatter_count", 2,
       [](Communicator& c, int r) {
         const size_t n = r == 0 ? 100 : 300;
         auto v = ones(n * 2);
         c.reducescatter(v.data(), v.data() + r * n, n, DataType::f32, RedOp::sum);
       },
       {"100", "300"}},
      {"allgather_count", 4,
       [](Communicator& c, int r) {
         const size_t n = r == 2 ? 64 : 48;
         auto v = ones(n * 4);
         c.allgather(v.data() + r * n, v.data(), n, DataType::f32);
       },
       {"64", "48"}},
      {"allgather_dtype", 2,
       [](Communicator& c, int r) {
         std::vector<double> v(2000, 1.0);
         c.allgather(v.data() + r * 1000, v.data(), 1000, r == 0 ? DataType::f64 : DataType::i64);
       },
       {"f64", "i64"}},
      {"reducescatter_vs_allgather", 2,
       [](Communicator& c, int r) {
         auto v = ones(2000);
         if (r == 0) {
           c.reducescatter(v.data(), v.data(), 1000, DataType::f32, RedOp::sum);
         } else {
           c.allgather(v.data() + 1000, v.data(), 1000, DataType::f32);
         }
       },
       {"reducescatter", "allgather"}},
      {"barrier_vs_allreduce", 2,
       [](Communicator& c, int r) {
         auto v = ones(10);
         if (r == 0) c.barrier();
         else c.allreduce(v.data(), v.data(), 10, DataType::f32, RedOp::sum);
       },
       {"barrier", "allreduce"}},
      {"send_recv_count", 2,
       [](Communicator& c, int r) {
         auto v = ones(512);
         // A receive takes a shorter message (RecvStatus::count says how long), not a longer one.
         if (r == 0) c.send(v.data(), 500, DataType::f32, 1);
         else c.recv(v.data(), 100, DataType::f32, 0);
       },
       {"500", "100"}},
      {"send_recv_dtype", 2,
       [](Communicator& c, int r) {
         auto v = ones(512);
         if (r == 0) c.send(v.data(), 100, DataType::f32, 1);
         else c.recv(v.data(), 100, DataType::u32, 0);
       },
       {"f32", "u32"}},
      {"one_of_four_count", 4,
       [](Communicator& c, int r) {
         const size_t n = r == 1 ? 5000 : 4000;
         auto v = ones(n);
         c.allreduce(v.data(), v.data(), n, DataType::f32, RedOp::sum);
       },
       {"4000", "5000"}},
      // The counts may choose different algorithms (here forced): the rank over links and
      // those over the shared region compare the calls each declared.
      {"one_of_four_count_other_path", 4,
       [](Communicator& c, int r) {
         const size_t n = r == 1 ? 5000 : 4000;
         auto v = ones(n);
         OpOptions o;
         o.algo = r == 1 ? "ring" : "shm-direct";
         c.allreduce(v.data(), v.data(), n, DataType::f32, RedOp::sum, o);
       },
       {"4000", "5000"}},
  };
  // Under HOOP_CHECK=1 the same cases, and those only the signature check can see at the call:
  // two roots of a reduce (both wait to receive: without the check, a timeout between hosts; on
  // one host the declared calls tell, see MismatchGapsUnchecked below), a broadcast
  // whose roots differ between all four ranks.
  const size_t plain = out.size();
  for (size_t i = 0; i < plain; ++i) {
    if (out[i].call == nullptr) continue;
    Case c = out[i];
    c.check = true;
    out.push_back(c);
  }
  out.push_back({"reduce_root", 2,
                 [](Communicator& c, int r) {
                   auto v = ones(1000);
                   c.reduce(v.data(), v.data(), 1000, DataType::f32, RedOp::sum, r);
                 },
                 {"root 0", "root 1"}, true});
  out.push_back({"broadcast_root_four_ways", 4,
                 [](Communicator& c, int r) {
                   auto v = ones(1000);
                   c.broadcast(v.data(), v.data(), 1000, DataType::f32, r);
                 },
                 {"root", "broadcast"}, true});
  return out;
}

INSTANTIATE_TEST_SUITE_P(Faults, MismatchGaps, ::testing::ValuesIn(cases()),
                         [](const ::testing::TestParamInfo<Case>& p) {
                           return std::string(p.param.name) + (p.param.check ? "_checked" : "");
                         });

// Without HOOP_CHECK, a reduce whose ranks name different roots along the ring's chain waits:
// every rank waits to receive, nobody sends. Between hosts (TCP alone) that is bounded by the
// timeout, whose error names the op, its sequence and the peer. On one host every rank declares
// its call in the shared region (open since the barrier, which went through it), and the wait
// compares the peer's: a mismatch naming both roots, well before the timeout.
std::vector<std::string> reduce_with_two_roots(const SpawnOptions& opts) {
  std::vector<std::string> errors;
  auto results = run_ranks(2, [](RankContext& ctx) {
    CommOptions copts;
    copts.timeout = 1500ms;
    auto comm = ctx.make_comm(copts);
    comm->barrier();
    auto v = ones(1000);
    try {
      OpOptions o;
      o.algo = "ring";
      comm->reduce(v.data(), v.data(), 1000, DataType::f32, RedOp::sum, ctx.rank, o);
      ADD_FAILURE() << "a reduce with two roots finished";
    } catch (const Error& e) {
      const char* code = e.code() == ErrorCode::mismatch       ? "mismatch"
                         : e.code() == ErrorCode::timeout      ? "timeout"
                         : e.code() == ErrorCode::peer_failure ? "peer_failure"
                                                               : "other";
      ctx.report(fmt::format("{} {}", code, e.what()));
      EXPECT_NE(std::string(e.what()).find("reduce #2"), std::string::npos) << e.what();
      EXPECT_EQ(e.peer(), 1 - ctx.rank) << e.what();
    }
  }, opts);
  EXPECT_TRUE(all_ok(results));
  for (const auto& r : results)
    for (const auto& line : r.reports) errors.push_back(line);
  return errors;
}

TEST(MismatchGapsUnchecked, ReduceWithTwoRootsBetweenHostsTimesOutNamingOpAndPeer) {
  SpawnOptions tcp;
  tcp.env = {{"HOOP_TRANSPORT", "tcp"}};
  for (const std::string& e : reduce_with_two_roots(tcp)) {
    EXPECT_TRUE(e.rfind("timeout ", 0) == 0 || e.rfind("peer_failure ", 0) == 0) << e;
  }
}

TEST(MismatchGapsUnchecked, ReduceWithTwoRootsOnOneHostIsAMismatchNamingBothRoots) {
  bool shown = false;
  for (const std::string& e : reduce_with_two_roots(SpawnOptions{})) {
    EXPECT_TRUE(e.rfind("mismatch ", 0) == 0 || e.rfind("peer_failure ", 0) == 0) << e;
    shown |= e.rfind("mismatch ", 0) == 0 && e.find("root 0") != std::string::npos &&
             e.find("root 1") != std::string::npos;
  }
  EXPECT_TRUE(shown) << "no rank named both roots";
}

}  // namespace
}  // namespace hoop::test
