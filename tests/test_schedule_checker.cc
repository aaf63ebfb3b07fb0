// The schedule checker over every registered algorithm of every collective for 1..64 ranks (no
// processes: schedules are pure), the double binary tree's shape, and hand-made broken
// schedules that the checker must refuse.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <iostream>
#include <string>
#include <vector>

#include "schedule/checker.h"
#include "schedule/schedule.h"
#include "schedule/schedule_builders.h"
#include "support/test_scale.h"
#include "support/vcounts.h"

namespace hoop::schedule {
namespace {

bool has_root(OpType op) {
  return op == OpType::broadcast || op == OpType::reduce || op == OpType::gather || op == OpType::gatherv ||
         op == OpType::scatter || op == OpType::scatterv;
}
bool reduces(OpType op) {
  return op == OpType::allreduce || op == OpType::reducescatter || op == OpType::reduce;
}

// 0, 1, N-1, a prime, and a large prime: several tree chunks, uneven ring chunks. ReduceScatter
// and AllGather counts are per rank, so their large one is smaller.
std::vector<size_t> counts_for(OpType op, int n) {
  const bool per_rank = op == OpType::reducescatter || op == OpType::allgather || op == OpType::alltoall ||
                        op == OpType::gather || op == OpType::scatter;
  std::vector<size_t> c{0, 1, static_cast<size_t>(n - 1), 13, per_rank ? size_t{1009} : size_t{98317}};
  std::sort(c.begin(), c.end());
  c.erase(std::unique(c.begin(), c.end()), c.end());
  return c;
}

std::vector<int> roots_for(OpType op, int n) {
  if (!has_root(op)) return {0};
  if (n <= 8) {
    std::vector<int> all;
    for (int r = 0; r < n; ++r) all.push_back(r);
    return all;
  }
  std::vector<int> some{0, 1, n / 2, n - 1};
  some.erase(std::unique(some.begin(), some.end()), some.end());
  return some;
}

TEST(ScheduleChecker, EveryAlgorithmOfEveryCollectiveUpTo64Ranks) {
  const OpType ops[] = {OpType::allreduce, OpType::reducescatter, OpType::allgather, OpType::broadcast,
                        OpType::reduce,    OpType::barrier,       OpType::alltoall,  OpType::gather,
                        OpType::scatter};
  const auto start = std::chrono::steady_clock::now();
  int checked = 0, failures = 0;
  for (int n : test::rank_counts_up_to(kCheckerMaxRanks)) {
    for (OpType op : ops) {
      for (const std::string& algo : algorithms_for(op)) {
        for (size_t count : op == OpType::barrier ? std::vector<size_t>{0} : counts_for(op, n)) {
          for (int root : roots_for(op, n)) {
            for (bool in_place : {false, true}) {
              for (RedOp redop : {RedOp::sum, RedOp::avg}) {
                if (redop == RedOp::avg && (!reduces(op) || count < 13)) continue;
                CollectiveDesc d;
                d.op = op;
                d.count = count;
                d.nranks = n;
                d.root = root;
                d.redop = redop;
                d.in_place = in_place;
                const std::string problem = check_algorithm(algo, d);
                ++checked;
                if (!problem.empty() && ++failures <= 10) ADD_FAILURE() << problem;
              }
            }
          }
        }
      }
    }
  }
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::cout << "[ checker ] " << checked << " schedules sets checked in " << secs << " s\n";
  EXPECT_EQ(failures, 0);
  EXPECT_GT(checked, 10000);
}

// The v-forms: every rank's own call (uneven counts with zeros, packed and spread blocks), every
// registered algorithm, 1..64 ranks.
TEST(ScheduleChecker, EveryAlgorithmOfEveryVFormUpTo64Ranks) {
  const OpType ops[] = {OpType::alltoallv, OpType::gatherv, OpType::scatterv, OpType::allgatherv,
                        OpType::reducescatterv};
  int checked = 0, failures = 0;
  for (int n : test::rank_counts_up_to(kCheckerMaxRanks)) {
    for (OpType op : ops) {
      for (const std::string& algo : algorithms_for(op)) {
        for (int pattern = 0; pattern < test::kCountPatterns; ++pattern) {
          for (int root : roots_for(op, n)) {
            for (bool in_place : {false, true}) {
              if (in_place && op == OpType::alltoallv) continue;  // no in-place form
              for (RedOp redop : {RedOp::sum, RedOp::avg}) {
                if (redop == RedOp::avg && (op != OpType::reducescatterv || pattern < 2)) continue;
                const bool spread = (pattern + n) % 2 == 1 && op != OpType::reducescatterv;
                const auto descs = test::v_descs(op, n, pattern, spread, root, in_place, redop);
                const std::string problem = check_algorithm(algo, descs);
                ++checked;
                if (!problem.empty() && ++failures <= 10) ADD_FAILURE() << problem;
              }
            }
          }
        }
      }
    }
  }
  std::cout << "[ checker ] " << checked << " v-form schedule sets checked\n";
  EXPECT_EQ(failures, 0);
  EXPECT_GT(checked, 3000);
}

// The checker refuses v-form calls whose counts disagree and writes outside the blocks.
TEST(ScheduleChecker, RefusesMismatchedVCountsAndStrayWrites) {
  auto descs = test::v_descs(OpType::alltoallv, 3, 3, false, 0, false, RedOp::sum);
  auto layout = std::make_shared<BlockLayout>(*descs[1].blocks);
  layout->recv.counts[2] += 1;
  layout->recv = Blocks::packed(layout->recv.counts);
  descs[1].blocks = layout;
  EXPECT_NE(check_algorithm("pairwise", descs), "");

  // Gatherv whose root copies its own block one element too far.
  auto g = test::v_descs(OpType::gatherv, 2, 3, true, 0, false, RedOp::sum);
  std::vector<RankSchedule> s{build("linear", g[0], 0), build("linear", g[1], 1)};
  for (Action& a : s[0].steps[0].actions) {
    if (a.kind == ActionKind::copy) a.dst.offset += 1;
  }
  const std::string problem = check_schedules(g, s);
  EXPECT_NE(problem, "");
}

// Bruck moves every block in ceil(log2 N) steps; pairwise takes N-1.
TEST(ScheduleChecker, AllToAllStepCounts) {
  CollectiveDesc d;
  d.op = OpType::alltoall;
  d.count = 5;
  for (int n : {2, 3, 8, 13, 64}) {
    d.nranks = n;
    int log = 0;
    while ((1 << log) < n) ++log;
    CollectiveDesc g = d;
    g.op = OpType::gather;
    g.root = n / 2;
    for (int r = 0; r < n; ++r) {
      EXPECT_EQ(bruck_alltoall(d, r).steps.size(), static_cast<size_t>(log)) << n;
      EXPECT_EQ(pairwise_alltoall(d, r).steps.size(), static_cast<size_t>(n - 1)) << n;
      EXPECT_LE(binomial_gather(g, r).steps.size(), static_cast<size_t>(log)) << n;
    }
  }
}

// Every rank but the top has children in at most one tree; both trees span all ranks with the
// top's single child as root; depth stays logarithmic.
TEST(ScheduleChecker, DoubleBinaryTreeShape) {
  for (int n = 1; n <= 200; ++n) {
    const int top = n / 3;
    const DoubleBinaryTree dbt = double_binary_tree(n, top);
    int depth_limit = 2;
    while ((1 << (depth_limit - 1)) < n) ++depth_limit;
    for (int t = 0; t < 2; ++t) {
      const BinaryTree& tree = dbt.trees[t];
      ASSERT_EQ(tree.parent.size(), static_cast<size_t>(n));
      EXPECT_EQ(tree.parent[static_cast<size_t>(top)], -1);
      EXPECT_EQ(tree.children[static_cast<size_t>(top)].size(), n > 1 ? 1u : 0u) << "n " << n;
      for (int r = 0; r < n; ++r) {
        EXPECT_LE(tree.children[static_cast<size_t>(r)].size(), 2u);
        for (int c : tree.children[static_cast<size_t>(r)]) {
          EXPECT_EQ(tree.parent[static_cast<size_t>(c)], r) << "n " << n << " tree " << t;
        }
        if (r == top) continue;
        int depth = 0;
        for (int x = r; x != top; x = tree.parent[static_cast<size_t>(x)]) {
          ASSERT_GE(x, 0) << "rank " << r << " of " << n << " does not reach the top of tree " << t;
          ASSERT_LT(++depth, n);
        }
        EXPECT_LE(depth, depth_limit) << "rank " << r << " of " << n << " tree " << t;
      }
    }
    for (int r = 0; r < n; ++r) {
      if (r == top) continue;
      const bool inner0 = !dbt.trees[0].children[static_cast<size_t>(r)].empty();
      const bool inner1 = !dbt.trees[1].children[static_cast<size_t>(r)].empty();
      EXPECT_FALSE(inner0 && inner1) << "rank " << r << " of " << n << " is inner in both trees";
    }
  }
}

// The tree's latency is logarithmic: few steps for a small message, even on 64 ranks.
TEST(ScheduleChecker, TreeStepsGrowWithLogN) {
  CollectiveDesc d;
  d.op = OpType::allreduce;
  d.count = 1000;
  d.nranks = 64;
  size_t most = 0;
  for (int r = 0; r < d.nranks; ++r) most = std::max(most, tree_allreduce(d, r).steps.size());
  EXPECT_LE(most, 2u * 6 + 2);
  // A large message streams in chunks: more steps, each carrying about one chunk per tree.
  d.count = 10 * kTreeChunkElements;
  const RankSchedule big = tree_allreduce(d, 5);
  EXPECT_GE(big.steps.size(), 5u);
  for (const Step& s : big.steps) {
    for (const Action& a : s.actions) {
      EXPECT_LE(std::max(a.src.count, a.dst.count), kTreeChunkElements);
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Broken schedules the checker must refuse.

CollectiveDesc allreduce_desc(int n, size_t count) {
  CollectiveDesc d;
  d.op = OpType::allreduce;
  d.nranks = n;
  d.count = count;
  return d;
}

std::vector<RankSchedule> ring_schedules(const CollectiveDesc& d) {
  std::vector<RankSchedule> s;
  for (int r = 0; r < d.nranks; ++r) s.push_back(ring_allreduce(d, r));
  return s;
}

void expect_refused(const std::string& problem, const std::string& must_contain) {
  EXPECT_NE(problem.find(must_contain), std::string::npos)
      << "expected a complaint containing '" << must_contain << "', got: '" << problem << "'";
}

TEST(ScheduleChecker, AcceptsTheRingAsBuilt) {
  const CollectiveDesc d = allreduce_desc(4, 10);
  EXPECT_EQ(check_schedules(d, ring_schedules(d)), "");
}

TEST(ScheduleChecker, RefusesAMissingContribution) {
  const CollectiveDesc d = allreduce_desc(4, 10);
  auto s = ring_schedules(d);
  Action& a = s[2].steps[1].actions[1];  // a ReduceScatter receive
  ASSERT_EQ(a.kind, ActionKind::recv_reduce);
  a.kind = ActionKind::recv_copy;  // drops rank 2's partial
  const std::string problem = check_schedules(d, s);
  expect_refused(problem, "expected element");
  expect_refused(problem, "ring allreduce N=4 count=10");
}

TEST(ScheduleChecker, RefusesADoubleContribution) {
  // Two ranks; rank 0 reduces rank 1's buffer twice.
  const CollectiveDesc d = allreduce_desc(2, 5);
  const Range in{Buf::send, 0, 5}, out{Buf::recv, 0, 5};
  std::vector<RankSchedule> s(2);
  s[0].steps.push_back({{recv_reduce_from(1, in, out)}});
  s[0].steps.push_back({{recv_reduce_from(1, out, out)}});
  s[0].steps.push_back({{send_to(1, out)}});
  s[1].steps.push_back({{send_to(0, in)}});
  s[1].steps.push_back({{send_to(0, in)}});
  s[1].steps.push_back({{recv_copy_from(0, out)}});
  const std::string problem = check_schedules(d, s);
  expect_refused(problem, "counts rank(s) {1} twice");
  expect_refused(problem, "rank 0 step 1 action 0");
}

TEST(ScheduleChecker, RefusesADeadlock) {
  // Both ranks first wait for the other's data, then send: nothing ever moves.
  const CollectiveDesc d = allreduce_desc(2, 3);
  const Range in{Buf::send, 0, 3}, out{Buf::recv, 0, 3};
  std::vector<RankSchedule> s(2);
  for (int r = 0; r < 2; ++r) {
    s[r].steps.push_back({{recv_reduce_from(1 - r, in, out)}});
    s[r].steps.push_back({{send_to(1 - r, in)}});
  }
  const std::string problem = check_schedules(d, s);
  expect_refused(problem, "deadlock");
  expect_refused(problem, "rank 0 step 0 action 0");
  expect_refused(problem, "waits for rank 1");
}

TEST(ScheduleChecker, RefusesConcurrentWritesAndSizeMismatches) {
  const CollectiveDesc d = allreduce_desc(3, 4);
  const Range in{Buf::send, 0, 4}, out{Buf::recv, 0, 4};
  std::vector<RankSchedule> s(3);
  s[0].steps.push_back({{recv_reduce_from(1, in, out), recv_reduce_from(2, out, out)}});
  expect_refused(check_schedules(d, s), "writes memory that action 0");

  std::vector<RankSchedule> t(2);
  const CollectiveDesc d2 = allreduce_desc(2, 4);
  t[0].steps.push_back({{send_to(1, in)}});
  t[1].steps.push_back({{recv_copy_from(0, Range{Buf::recv, 0, 3})}});
  expect_refused(check_schedules(d2, t), "sends 4 elements");

  std::vector<RankSchedule> u(2);
  u[0].steps.push_back({{send_to(1, in), send_to(1, in)}});
  u[1].steps.push_back({{recv_copy_from(0, out)}});
  expect_refused(check_schedules(d2, u), "message 1 from rank 0 to rank 1 (channel 0) is never received");
}

TEST(ScheduleChecker, RefusesOutOfRangeAndWritesToTheInput) {
  const CollectiveDesc d = allreduce_desc(2, 4);
  std::vector<RankSchedule> s(2);
  s[0].steps.push_back({{local_copy(Range{Buf::send, 0, 4}, Range{Buf::recv, 1, 4})}});
  expect_refused(check_schedules(d, s), "outside the recv buffer of 4 elements");

  std::vector<RankSchedule> t(2);
  t[1].steps.push_back({{local_copy(Range{Buf::recv, 0, 4}, Range{Buf::send, 0, 4})}});
  expect_refused(check_schedules(d, t), "holds the caller's input");
}

TEST(ScheduleChecker, RefusesRanksThatReduceInDifferentOrders) {
  // Three ranks each receive the other two inputs, but in a rotating order: every rank has the
  // full sum, yet rank 0 computes (x0+x1)+x2 and rank 1 (x1+x2)+x0 -- other float bits.
  const CollectiveDesc d = allreduce_desc(3, 6);
  const Range in{Buf::send, 0, 6}, out{Buf::recv, 0, 6};
  std::vector<RankSchedule> s(3);
  for (int r = 0; r < 3; ++r) {
    const int next = (r + 1) % 3, prev = (r + 2) % 3;
    s[r].steps.push_back({{send_to(prev, in), recv_reduce_from(next, in, out)}});
    s[r].steps.push_back({{send_to(next, in), recv_reduce_from(prev, out, out)}});
  }
  expect_refused(check_schedules(d, s), "reduced in another order than on rank 0");
}

TEST(ScheduleChecker, RefusesABarrierThatDoesNotWait) {
  CollectiveDesc d;
  d.op = OpType::barrier;
  d.nranks = 3;
  std::vector<RankSchedule> s(3);
  // Rank 0 hears from rank 1 only; rank 2 never speaks.
  s[1].steps.push_back({{send_to(0, Range{})}});
  s[0].steps.push_back({{recv_copy_from(1, Range{Buf::recv, 0, 0})}});
  expect_refused(check_schedules(d, s), "rank 0 leaves the barrier without hearing from ranks {2}");
}

}  // namespace
}  // namespace hoop::schedule
