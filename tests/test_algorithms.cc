// Every registered algorithm of every collective, forced per call (OpOptions::algo), on real
// processes over shared memory and TCP: int32 sums exact on all five collectives, f32 sums and
// averages against the rank-order reference and bit-identical on every rank, f16/bf16 through
// the f32 reduction path, odd sizes (0, 1, primes, non-multiples of N, several pipeline
// chunks), in place and out of place, every root on small jobs. The algorithm list comes from
// schedule::algorithms_for, so algorithms registered later are covered without editing this
// file. One job per (rank count, transport); the ranks loop over all cases.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "hoop/communicator.h"
#include "hoop/types.h"
#include "schedule/schedule.h"
#include "support/collective_cases.h"
#include "support/spawn.h"
#include "transport/shm/shm_transport.h"

namespace hoop::test {
namespace {

constexpr OpType kOps[] = {OpType::allreduce, OpType::reducescatter, OpType::allgather,
                           OpType::broadcast, OpType::reduce};
// Over three tree chunks, and prime: every split comes out uneven.
constexpr size_t kBigCount = 98317;

bool has_root(OpType op) { return op == OpType::broadcast || op == OpType::reduce; }
bool reduces(OpType op) {
  return op == OpType::allreduce || op == OpType::reducescatter || op == OpType::reduce;
}

// The algorithms that can run with this transport (shm-direct needs shared memory).
std::vector<CollCase> make_cases(int n, const schedule::Reach& reach) {
  std::vector<CollCase> cases;
  for (OpType op : kOps) {
    for (const std::string& algo : schedule::algorithms_for(op, reach)) {
      auto add = [&](DataType dt, RedOp redop, int root, size_t count, bool in_place) {
        add_case(cases, op, dt, redop, root % n, count, in_place, algo);
      };
      const bool per_rank = op == OpType::reducescatter || op == OpType::allgather;
      const size_t big = per_rank ? (kBigCount + n - 1) / n : kBigCount;
      const size_t uneven = static_cast<size_t>(7 * n + 3);  // not a multiple of n (n > 1)
      // int32 sums, exact: small odd sizes with every root, then larger ones.
      for (size_t count : {size_t{0}, size_t{1}, size_t{13}}) {
        for (bool in_place : {false, true}) {
          for (int root = 0; root < (has_root(op) && n <= 5 ? n : 1); ++root) {
            add(DataType::i32, RedOp::sum, has_root(op) && n > 5 ? n - 1 : root, count, in_place);
          }
        }
      }
      add(DataType::i32, RedOp::sum, 1, uneven, false);
      add(DataType::i32, RedOp::sum, 2, big, true);
      // f32: the parent compares every rank's bits; the ranks compare with the reference.
      add(DataType::f32, RedOp::sum, 0, big, false);
      add(DataType::f32, RedOp::sum, n - 1, uneven, true);
      if (reduces(op)) {
        add(DataType::f32, RedOp::avg, 1, uneven, false);
        add(DataType::f32, RedOp::max, 0, 13, true);
        add(DataType::f16, RedOp::sum, 0, uneven, false);
        add(DataType::bf16, RedOp::sum, n / 2, 1001, true);
        add(DataType::bf16, RedOp::avg, 1, 13, false);
      }
    }
  }
  return cases;
}

class AlgorithmsTest : public ::testing::TestWithParam<JobParam> {};

TEST_P(AlgorithmsTest, EveryAlgorithmOfEveryCollective) {
  const int n = GetParam().nranks;
  const std::string transport = GetParam().transport;
  const std::vector<CollCase> cases = make_cases(n, schedule::Reach{true, transport != "tcp"});

  SpawnOptions opts;
  opts.timeout = std::chrono::seconds(240);
  opts.env.emplace_back("HOOP_TRANSPORT", transport);

  const auto start = std::chrono::steady_clock::now();
  auto results = run_ranks(n, [&](RankContext& ctx) {
    CommOptions copts;
    copts.timeout = std::chrono::seconds(60);
    auto comm = ctx.make_comm(copts);
    ctx.report("JOB " + comm->job_id());
    RunnerOptions ropts;
    ropts.algo_check = AlgoCheck::schedule_name;
    CaseRunner runner(ctx, *comm, max_buffer_bytes(cases, n), ropts);
    runner.run_all(cases);
    for (const LinkStats& link : comm->stats().links) {
      EXPECT_EQ(link.transport, transport) << "link to peer " << link.peer;
    }
  }, opts);
  std::cout << "[ timing ] " << cases.size() << " cases on " << n << " ranks over " << transport
            << ": " << seconds_since(start) << " s\n";

  EXPECT_TRUE(all_ok(results));
  expect_cases_done_and_identical(cases, results);
  expect_no_job_segments(results);
}

INSTANTIATE_TEST_SUITE_P(Algorithms, AlgorithmsTest,
                         ::testing::Values(JobParam{1, "shm"}, JobParam{2, "shm"}, JobParam{3, "shm"},
                                           JobParam{5, "shm"}, JobParam{8, "shm"}, JobParam{2, "tcp"},
                                           JobParam{3, "tcp"}, JobParam{5, "tcp"}, JobParam{8, "tcp"}),
                         job_param_name);

}  // namespace
}  // namespace hoop::test
