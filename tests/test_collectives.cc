// Every collective x dtype x op x rank count x transport, against references computed in the
// ranks (the shared fixture, support/collective_cases.h). One job per (rank count, transport);
// the ranks loop over all cases. Replicated results (AllReduce, AllGather, Broadcast) are
// hashed per case and the parent checks that every rank got the same bits.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "hoop/communicator.h"
#include "hoop/error.h"
#include "hoop/types.h"
#include "support/collective_cases.h"
#include "support/spawn.h"
#include "transport/shm/shm_transport.h"

namespace hoop::test {
namespace {

bool has_redop(OpType op) { return op != OpType::allgather && op != OpType::broadcast; }
bool has_root(OpType op) { return op == OpType::broadcast || op == OpType::reduce; }

// A large prime count: chunks of every algorithm come out uneven.
constexpr size_t kBigCount = 1000003;
// Above this many output elements a rank checks only its 1/N slice against the reference (the
// hash comparison covers the rest); below it, everything.
constexpr size_t kFullCheckLimit = 1 << 16;

// The cases of a job of n ranks, identical in the parent and in every rank. Small counts get
// the full cross product; the big count runs on fewer combinations (time on 2 cores):
// every dtype with sum, f32, i32, f16 and bf16 with every op, a few dtypes for the data
// movers, and broadcast/reduce with one root each.
std::vector<CollCase> make_cases(int n) {
  std::vector<CollCase> cases;
  const OpType all_colls[] = {OpType::allreduce, OpType::reducescatter, OpType::allgather,
                              OpType::broadcast, OpType::reduce};
  for (size_t count : {size_t{0}, size_t{1}, size_t{7}}) {
    for (OpType coll : all_colls) {
      for (DataType dt : kAllDataTypes) {
        for (RedOp op : kAllRedOps) {
          if (!has_redop(coll) && op != RedOp::sum) continue;
          for (int root = 0; root < (has_root(coll) ? n : 1); ++root) {
            for (bool in_place : {false, true}) add_case(cases, coll, dt, op, root, count, in_place);
          }
        }
      }
    }
  }
  // Big counts. ReduceScatter and AllGather keep about kBigCount elements in total.
  const size_t big_per_rank = (kBigCount + n - 1) / n;
  int alternate = 0;
  for (OpType coll : all_colls) {
    const size_t count =
        (coll == OpType::reducescatter || coll == OpType::allgather) ? big_per_rank : kBigCount;
    for (DataType dt : kAllDataTypes) {
      for (RedOp op : kAllRedOps) {
        bool wanted;
        if (has_redop(coll)) {
          wanted = op == RedOp::sum || dt == DataType::f32 || dt == DataType::i32 ||
                   dt == DataType::f16 || dt == DataType::bf16;
        } else {
          wanted = op == RedOp::sum && (dt == DataType::f32 || dt == DataType::f64 ||
                                        dt == DataType::bf16 || dt == DataType::u8);
        }
        if (!wanted) continue;
        const int root = has_root(coll) ? (alternate % n) : 0;
        add_case(cases, coll, dt, op, root, count, alternate % 2 == 1);
        ++alternate;
      }
    }
  }
  return cases;
}

class CollectivesTest : public ::testing::TestWithParam<JobParam> {};

TEST_P(CollectivesTest, EveryCollectiveDtypeOpAndCount) {
  const int n = GetParam().nranks;
  const std::string transport = GetParam().transport;
  const std::vector<CollCase> cases = make_cases(n);

  SpawnOptions opts;
  opts.timeout = std::chrono::seconds(240);
  if (transport == "tcp") opts.env.emplace_back("HOOP_TRANSPORT", "tcp");

  const auto start = std::chrono::steady_clock::now();
  auto results = run_ranks(n, [&](RankContext& ctx) {
    CommOptions copts;
    copts.timeout = std::chrono::seconds(60);
    auto comm = ctx.make_comm(copts);
    ctx.report("JOB " + comm->job_id());
    ASSERT_EQ(comm->rank(), ctx.rank);
    ASSERT_EQ(comm->size(), n);
    RunnerOptions ropts;
    ropts.full_check_limit = kFullCheckLimit;
    CaseRunner runner(ctx, *comm, max_buffer_bytes(cases, n), ropts);
    runner.run_all(cases);
    // Every link ran over the transport asked for.
    for (const LinkStats& link : comm->stats().links) {
      EXPECT_EQ(link.transport, transport) << "link to peer " << link.peer;
    }
  }, opts);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::cout << "[ timing ] " << cases.size() << " cases on " << n << " ranks over " << transport
            << ": " << seconds << " s\n";

  EXPECT_TRUE(all_ok(results));
  expect_cases_done_and_identical(cases, results);
  expect_no_job_segments(results);
}

INSTANTIATE_TEST_SUITE_P(Collectives, CollectivesTest,
                         ::testing::Values(JobParam{1, "shm"}, JobParam{2, "shm"},
                                           JobParam{3, "shm"}, JobParam{4, "shm"},
                                           JobParam{5, "shm"}, JobParam{8, "shm"},
                                           JobParam{1, "tcp"}, JobParam{2, "tcp"},
                                           JobParam{3, "tcp"}, JobParam{4, "tcp"},
                                           JobParam{5, "tcp"}, JobParam{8, "tcp"}),
                         job_param_name);

}  // namespace
}  // namespace hoop::test
