// halving-doubling, recursive-doubling, hierarchical and leaders (AllReduce, ReduceScatter,
// AllGather) over real processes (forced with OpOptions::algo): exact integer sums, float
// results against the reference, odd sizes, in place and out of place, and bit-identical
// replicated results, including inputs where the float kernels are not commutative (NaNs with
// different payloads, -0.0 against +0.0).
// Hierarchical and leaders run on fake hosts (HOOP_HOST_ID per rank): ranks of one fake host
// talk over shared memory, ranks of different ones over TCP. One job per rank count or topology.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "hoop/communicator.h"
#include "hoop/error.h"
#include "hoop/types.h"
#include "schedule/schedule.h"
#include "support/collective_cases.h"
#include "support/spawn.h"

namespace hoop::test {
namespace {

const size_t kSizes[] = {0, 1, 2, 7, 13, 1009, 20011};

std::vector<CollCase> make_cases(bool host_aware_only) {
  std::vector<CollCase> cases;
  auto add = [&](OpType op, const char* algo, DataType dt, RedOp redop, size_t count, bool in_place,
                 bool special = false) {
    add_case(cases, op, dt, redop, 0, count, in_place, algo).special = special;
  };
  const std::pair<DataType, RedOp> reducing[] = {
      {DataType::i32, RedOp::sum}, {DataType::f32, RedOp::sum}, {DataType::f32, RedOp::avg},
      {DataType::f32, RedOp::min}, {DataType::f64, RedOp::max}, {DataType::f32, RedOp::prod},
      {DataType::bf16, RedOp::sum}};
  std::vector<const char*> allreduce_algos = {"hierarchical", "leaders"};
  if (!host_aware_only) allreduce_algos = {"halving-doubling", "recursive-doubling", "hierarchical", "leaders"};
  for (const char* algo : allreduce_algos) {
    for (size_t count : kSizes) {
      for (bool in_place : {false, true}) {
        for (auto [dt, redop] : reducing) add(OpType::allreduce, algo, dt, redop, count, in_place);
      }
    }
    for (RedOp redop : {RedOp::sum, RedOp::prod, RedOp::min, RedOp::max}) {
      add(OpType::allreduce, algo, DataType::f32, redop, 257, false, true);
      add(OpType::allreduce, algo, DataType::f64, redop, 31, true, true);
    }
  }
  // The ReduceScatter and AllGather through the hosts' leaders (forced: on one host too).
  const std::pair<DataType, RedOp> leaders_reducing[] = {
      {DataType::i32, RedOp::sum}, {DataType::f32, RedOp::avg}, {DataType::f64, RedOp::max},
      {DataType::bf16, RedOp::sum}};
  for (size_t count : kSizes) {
    for (bool in_place : {false, true}) {
      for (auto [dt, redop] : leaders_reducing) {
        add(OpType::reducescatter, "leaders", dt, redop, count / 4 + (count > 0), in_place);
      }
      for (DataType dt : {DataType::i32, DataType::u8}) {
        add(OpType::allgather, "leaders", dt, RedOp::sum, count / 4 + (count > 0), in_place);
      }
    }
  }
  if (host_aware_only) return cases;
  for (size_t count : kSizes) {
    for (bool in_place : {false, true}) {
      for (auto [dt, redop] : reducing) {
        add(OpType::reducescatter, "halving-doubling", dt, redop, count / 4 + (count > 0), in_place);
      }
      for (const char* algo : {"halving-doubling", "recursive-doubling"}) {
        for (DataType dt : {DataType::i32, DataType::f64, DataType::u8}) {
          add(OpType::allgather, algo, dt, RedOp::sum, count / 4 + (count > 0), in_place);
        }
      }
    }
  }
  return cases;
}

// Runs the cases on n ranks; host_of(rank) >= 0 gives fake hosts. Checks that every rank
// finished and that replicated outputs have the same bits on every rank.
void run_job(int n, const std::vector<CollCase>& cases, const std::function<int(int)>& host_of,
             const std::vector<std::pair<std::string, std::string>>& env = {}) {
  SpawnOptions opts;
  opts.timeout = std::chrono::seconds(120);
  opts.env = env;
  auto results = run_ranks(n, [&](RankContext& ctx) {
    const int host = host_of(ctx.rank);
    if (host >= 0) ::setenv("HOOP_HOST_ID", ("fake-host-" + std::to_string(host)).c_str(), 1);
    CommOptions copts;
    copts.timeout = std::chrono::seconds(60);
    auto comm = ctx.make_comm(copts);
    ctx.report("JOB " + comm->job_id());
    RunnerOptions ropts;
    ropts.algo_check = AlgoCheck::exact_if_nonempty;
    ropts.stop_at_first_failure = true;
    CaseRunner runner(ctx, *comm, max_buffer_bytes(cases, n), ropts);
    runner.run_all(cases);
    if (host >= 0) {
      // Fake hosts took effect: same host over shared memory, others over TCP, and the
      // communicator handed the hosts to the schedules: it connected exactly to the peers the
      // hierarchical and leaders schedules of that topology name.
      std::vector<std::string> ids;
      for (int r = 0; r < n; ++r) ids.push_back(std::to_string(host_of(r)));
      const schedule::Topology topo = schedule::Topology::from_host_ids(ids);
      schedule::CollectiveDesc d;
      d.nranks = n;
      d.count = kSizes[std::size(kSizes) - 1];
      d.topology = &topo;
      std::set<int> expected, connected;
      const std::pair<OpType, const char*> ran[] = {{OpType::allreduce, "hierarchical"},
                                                    {OpType::allreduce, "leaders"},
                                                    {OpType::reducescatter, "leaders"},
                                                    {OpType::allgather, "leaders"}};
      for (const auto& [op, algo] : ran) {
        d.op = op;
        for (const auto& step : schedule::build(algo, d, ctx.rank).steps) {
          for (const auto& a : step.actions) {
            if (a.peer >= 0) expected.insert(a.peer);
          }
        }
      }
      for (const LinkStats& link : comm->stats().links) {
        EXPECT_EQ(link.transport, host_of(link.peer) == host ? "shm" : "tcp") << "link to " << link.peer;
        connected.insert(link.peer);
      }
      EXPECT_EQ(connected, expected);
    }
  }, opts);
  ASSERT_TRUE(all_ok(results));
  expect_cases_done_and_identical(cases, results);
  expect_no_job_segments(results);
}

class HdRdHierTest : public ::testing::TestWithParam<int> {};

TEST_P(HdRdHierTest, OneHost) {
  run_job(GetParam(), make_cases(false), [](int) { return -1; });
}

INSTANTIATE_TEST_SUITE_P(Ranks, HdRdHierTest, ::testing::Values(1, 2, 3, 4, 5, 6, 8),
                         [](const ::testing::TestParamInfo<int>& p) { return "n" + std::to_string(p.param); });

// The ring algorithms cut into HOOP_NCHANNELS parts, each on its own links, over both
// transports; sizes below, at and above the per-channel minimum (kMinElementsPerChannel).
std::vector<CollCase> make_channel_cases(int n) {
  std::vector<CollCase> cases;
  // Broadcast from rank 1, Reduce to the last rank.
  auto add = [&](OpType op, DataType dt, RedOp redop, size_t count, bool in_place) {
    const int root = op == OpType::broadcast ? 1 % n : op == OpType::reduce ? n - 1 : 0;
    add_case(cases, op, dt, redop, root, count, in_place, "ring");
  };
  for (size_t count : {size_t{5}, size_t{3 * 4096 + 7}, size_t{50021}}) {
    for (bool in_place : {false, true}) {
      add(OpType::allreduce, DataType::i32, RedOp::sum, count, in_place);
      add(OpType::allreduce, DataType::f32, RedOp::avg, count, in_place);
      add(OpType::reducescatter, DataType::f32, RedOp::sum, count, in_place);
      add(OpType::allgather, DataType::i32, RedOp::sum, count, in_place);
      add(OpType::broadcast, DataType::f64, RedOp::sum, count, in_place);
      add(OpType::reduce, DataType::i32, RedOp::max, count, in_place);
    }
  }
  return cases;
}

class MultiChannelRingTest : public ::testing::TestWithParam<const char*> {};

TEST_P(MultiChannelRingTest, EveryRingCollective) {
  std::vector<std::pair<std::string, std::string>> env = {{"HOOP_NCHANNELS", "3"}};
  if (std::string(GetParam()) == "tcp") env.emplace_back("HOOP_TRANSPORT", "tcp");
  run_job(3, make_channel_cases(3), [](int) { return -1; }, env);
}

INSTANTIATE_TEST_SUITE_P(Transports, MultiChannelRingTest, ::testing::Values("shm", "tcp"),
                         [](const ::testing::TestParamInfo<const char*>& p) { return std::string(p.param); });

struct FakeTopology {
  const char* name;
  std::vector<int> hosts;
};

class HierarchicalFakeHostsTest : public ::testing::TestWithParam<FakeTopology> {};

TEST_P(HierarchicalFakeHostsTest, HostAwareAlgorithms) {
  const auto hosts = GetParam().hosts;
  run_job(static_cast<int>(hosts.size()), make_cases(true),
          [hosts](int r) { return hosts[static_cast<size_t>(r)]; });
}

INSTANTIATE_TEST_SUITE_P(Topologies, HierarchicalFakeHostsTest,
                         ::testing::Values(FakeTopology{"h2x2", {0, 0, 1, 1}},
                                           FakeTopology{"h2x3", {0, 0, 0, 1, 1, 1}},
                                           FakeTopology{"h3x1", {0, 1, 2}},
                                           FakeTopology{"uneven3plus1", {0, 0, 0, 1}},
                                           FakeTopology{"interleaved", {0, 1, 0, 1}}),
                         [](const ::testing::TestParamInfo<FakeTopology>& p) { return std::string(p.param.name); });

}  // namespace
}  // namespace hoop::test
