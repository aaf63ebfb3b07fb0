// shm-direct's schedules (cells, pipelined slots, single copy) through the schedule checker for
// 1..64 ranks on every collective it serves, with region shapes small enough that odd counts
// cross several chunks and slot stages are reused; and hand-made shared-region schedules that
// the checker must refuse (a read of data not yet published, a window rewritten while a peer
// reads it, a rank returning while a peer reads its buffer, a flag never raised).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <iostream>
#include <string>
#include <vector>

#include "comm/region_shape.h"
#include "schedule/checker.h"
#include "schedule/schedule.h"
#include "schedule/schedule_builders.h"
#include "support/test_scale.h"

namespace hoop::schedule {
namespace {

constexpr OpType kDirectOps[] = {OpType::allreduce, OpType::reducescatter, OpType::allgather,
                                 OpType::broadcast, OpType::reduce,        OpType::barrier,
                                 OpType::alltoall};

bool rooted(OpType op) { return op == OpType::broadcast || op == OpType::reduce; }
bool reducing(OpType op) { return op == OpType::allreduce || op == OpType::reducescatter || op == OpType::reduce; }

// Cells of 8 elements, slots of 48 (4 per rank beyond 12 ranks: ReduceScatter cuts a slot in N
// blocks) in `stages` stages, parts cut at 4; single copy from 16 elements (8 per peer and
// read) when asked.
RegionShape small_shape(size_t stages, bool single_copy, int nranks = 1) {
  RegionShape s;
  s.cell_elements = 8;
  s.chunk_elements = std::max<size_t>(48, 4 * static_cast<size_t>(nranks));
  s.stages = stages;
  s.align_elements = 4;
  if (single_copy) {
    s.single_copy_elements = 16;
    s.single_copy_allreduce_elements = 16;
    s.single_copy_alltoall_elements = 16;
    s.single_copy_part_elements = 8;
  }
  return s;
}

std::vector<int> roots(OpType op, int n) {
  if (!rooted(op)) return {0};
  std::vector<int> r{0, n / 2, n - 1};
  std::sort(r.begin(), r.end());
  r.erase(std::unique(r.begin(), r.end()), r.end());
  return r;
}

void expect_refused(const std::string& problem, const std::string& fragment) {
  EXPECT_NE(problem.find(fragment), std::string::npos) << "problem: '" << problem << "', expected '" << fragment << "'";
}

enum class Path { cells, slots, single_copy };

// The path of the schedule as it runs when every rank calls alike (a branch's variant 0).
Path path_of(const RankSchedule& branching) {
  const RankSchedule s = with_variant(branching, 0);
  for (const Step& step : s.steps) {
    for (const Action& a : step.actions) {
      if ((a.kind == ActionKind::read || a.kind == ActionKind::read_reduce) && a.flag > 0 && a.remote.buf != Buf::region)
        return Path::single_copy;
    }
  }
  return s.region_count > 8 ? Path::slots : Path::cells;  // cells hold up to 8 elements here
}

TEST(DirectScheduleChecker, EveryPathOfEveryCollectiveUpTo64Ranks) {
  struct Shape {
    size_t stages;
    bool single_copy;
    const char* name;
    bool broadcast_cells_done = false;
  };
  const Shape shapes[] = {{1, false, "slots, 1 stage"},
                          {2, false, "slots, 2 stages"},
                          {3, false, "slots, 3 stages"},
                          {2, true, "single copy"},
                          {2, false, "Broadcast's cells with a done publish", true}};
  int checked = 0, failures = 0;
  int paths[3] = {0, 0, 0};
  for (int n : test::rank_counts_up_to(kCheckerMaxRanks)) {
    for (OpType op : kDirectOps) {
      for (const Shape& sh : shapes) {
        // Beyond 16 ranks, one stage count of the slots (the others differ in no rank-count way).
        if (n > 16 && sh.stages != 2) continue;
        if (sh.broadcast_cells_done && op != OpType::broadcast) continue;
        // 0, 1, within a cell, over a cell, several chunks (prime); per-rank counts for RS/AG.
        const std::vector<size_t> counts =
            op == OpType::barrier ? std::vector<size_t>{0} : std::vector<size_t>{0, 1, 7, 13, 101};
        for (size_t count : counts) {
          // AllToAll moves N blocks: beyond 16 ranks, 13 per block already crosses many chunks.
          if (op == OpType::alltoall && n > 16 && count > 13) continue;
          for (int root : roots(op, n)) {
            for (bool in_place : {false, true}) {
              for (RedOp redop : {RedOp::sum, RedOp::avg}) {
                if (redop == RedOp::avg && (!reducing(op) || count < 13)) continue;
                CollectiveDesc d{.op = op, .count = count, .nranks = n, .root = root, .redop = redop,
                                 .in_place = in_place, .region = small_shape(sh.stages, sh.single_copy, n)};
                d.region.broadcast_cells_done = sh.broadcast_cells_done;
                const std::string problem = check_algorithm(kDirectAlgorithm, d);
                ++checked;
                if (!problem.empty() && ++failures <= 10) ADD_FAILURE() << sh.name << ": " << problem;
                if (n > 1) ++paths[static_cast<int>(path_of(direct_schedule(d, 0)))];
              }
            }
          }
        }
      }
    }
  }
  std::cout << "[ checker ] " << checked << " shm-direct schedule sets checked (cells " << paths[0] << ", slots "
            << paths[1] << ", single copy " << paths[2] << ")\n";
  EXPECT_EQ(failures, 0);
  EXPECT_GT(checked, test::small_scale() ? 5000 : 10000);
  for (int p : paths) EXPECT_GT(p, test::small_scale() ? 500 : 1000);
}

// The registry's shm-direct builds the path the shape says, from one decision.
TEST(DirectScheduleChecker, PathFollowsTheShape) {
  CollectiveDesc d;
  d.op = OpType::allreduce;
  d.nranks = 4;
  d.region = small_shape(2, true);
  d.count = 8;
  EXPECT_EQ(path_of(build(kDirectAlgorithm, d, 1)), Path::cells);
  d.count = 9;
  d.region.single_copy_allreduce_elements = 64;  // AllReduce needs more than the others
  EXPECT_EQ(path_of(build(kDirectAlgorithm, d, 1)), Path::slots);
  d.count = 64;
  EXPECT_EQ(path_of(build(kDirectAlgorithm, d, 1)), Path::single_copy);
  d.op = OpType::reduce;  // never single copy: non-roots have no output
  EXPECT_EQ(path_of(build(kDirectAlgorithm, d, 1)), Path::slots);
  d.op = OpType::reducescatter;  // N blocks count
  d.count = 4;
  EXPECT_EQ(path_of(build(kDirectAlgorithm, d, 1)), Path::single_copy);
  d.op = OpType::allgather;  // N blocks (beyond a cell), and its own threshold when set
  d.count = 9;
  EXPECT_EQ(path_of(build(kDirectAlgorithm, d, 1)), Path::single_copy);
  d.region.single_copy_allgather_elements = 64;
  EXPECT_EQ(path_of(build(kDirectAlgorithm, d, 1)), Path::slots);
  d.count = 16;
  EXPECT_EQ(path_of(build(kDirectAlgorithm, d, 1)), Path::single_copy);
  d.op = OpType::reducescatter;  // not AllGather's threshold
  d.count = 4;
  EXPECT_EQ(path_of(build(kDirectAlgorithm, d, 1)), Path::single_copy);
  // Broadcast through the cells: a closing "done" publish only when the shape asks for it.
  d.op = OpType::broadcast;
  d.count = 5;
  for (bool done : {false, true}) {
    d.region.broadcast_cells_done = done;
    for (int rank : {0, 1}) {
      const RankSchedule s = build(kDirectAlgorithm, d, rank);
      EXPECT_EQ(path_of(s), Path::cells);
      EXPECT_EQ(s.closing_publish, done) << "rank " << rank;
    }
  }
  d.op = OpType::allreduce;  // the others never
  EXPECT_FALSE(build(kDirectAlgorithm, d, 1).closing_publish);
}

// AllGather by single copy with more ranks than cores: an eighth of the threshold per block,
// times the ranks per core; nothing of its own otherwise.
TEST(DirectScheduleChecker, AllGatherSingleCopyThresholdGrowsWithRanksPerCore) {
  constexpr size_t M = 1 << 20;
  EXPECT_EQ(detail::single_copy_allgather_bytes(M, 2, 2), 0u);
  EXPECT_EQ(detail::single_copy_allgather_bytes(M, 8, 8), 0u);
  EXPECT_EQ(detail::single_copy_allgather_bytes(M, 3, 2), 3 * M / 4);
  EXPECT_EQ(detail::single_copy_allgather_bytes(M, 4, 2), M);
  EXPECT_EQ(detail::single_copy_allgather_bytes(M, 8, 2), 4 * M);
  EXPECT_EQ(detail::single_copy_allgather_bytes(M, 16, 4), 8 * M);
  EXPECT_EQ(detail::single_copy_allgather_bytes(0, 8, 2), 0u);
  EXPECT_EQ(detail::single_copy_allgather_bytes(M, 8, 0), 0u);  // cores unknown
}

// The single-copy thresholds the environment leaves unset follow the calibration's kernel read
// beyond 32 KiB (the read the defaults stand for); one set in the environment stays.
TEST(DirectScheduleChecker, SingleCopyThresholdsFollowTheMeasuredKernelRead) {
  constexpr size_t K = 1024;
  const auto& defaults = detail::direct_tunables(2, 0);
  EXPECT_EQ(defaults.single_copy_bytes, 64 * K);
  EXPECT_EQ(defaults.single_copy_alltoall_bytes, 4 * K * 2 * 2);
  EXPECT_EQ(detail::direct_tunables(2, 16 * K).single_copy_bytes, 64 * K);  // never below the defaults
  const auto& slow_read = detail::direct_tunables(2, 512 * K);
  EXPECT_EQ(slow_read.single_copy_bytes, 1024 * K);
  EXPECT_EQ(slow_read.single_copy_alltoall_bytes, 128 * K * 2);  // blocks of a quarter of the read
  EXPECT_EQ(detail::direct_tunables(8, 512 * K).single_copy_alltoall_bytes, 128 * K * 8);
  EXPECT_EQ(detail::direct_tunables(8, 128 * K).single_copy_alltoall_bytes, 4 * K * 8 * 8);  // the defaults' own
  EXPECT_EQ(slow_read.single_copy_allreduce_bytes, defaults.single_copy_allreduce_bytes);
  EXPECT_EQ(slow_read.registered_bytes, defaults.registered_bytes);
  ::setenv("HOOP_DIRECT_SINGLE_COPY_BYTES", "100K", 1);
  const size_t set = detail::direct_tunables(3, 512 * K).single_copy_bytes;  // 3 ranks: not cached yet
  ::unsetenv("HOOP_DIRECT_SINGLE_COPY_BYTES");
  EXPECT_EQ(set, 100 * K);
  EXPECT_EQ(detail::direct_tunables(3, 512 * K).single_copy_alltoall_bytes, 128 * K * 3);
}

// AllToAll by single copy: a rank in place would overwrite blocks its peers still read, so all
// ranks take the slots once one is in place, deciding alike from what every rank announced.
// Each rank's own call differs (in place or not): checked from one desc per rank.
TEST(DirectScheduleChecker, AllToAllInPlaceOnSomeRanksTakesTheSlotsEverywhere) {
  int checked = 0;
  for (int n = 2; n <= 16; ++n) {
    for (size_t count : {size_t{9}, size_t{13}, size_t{40}}) {  // N blocks: single copy from 16 elements
      for (int pattern = 0; pattern < 3; ++pattern) {
        std::vector<CollectiveDesc> descs;
        for (int r = 0; r < n; ++r) {
          const bool in_place = pattern == 0 ? r == n - 1 : pattern == 1 ? r % 2 == 0 : true;
          descs.push_back(CollectiveDesc{.op = OpType::alltoall, .count = count, .nranks = n, .in_place = in_place,
                                         .region = small_shape(2, true, n)});
        }
        EXPECT_EQ(check_algorithm(kDirectAlgorithm, descs), "") << n << " ranks, count " << count << ", pattern "
                                                                << pattern;
        const RankSchedule s = direct_schedule(descs[0], 0);
        EXPECT_EQ(s.branch, BranchRule::any_in_place);
        ASSERT_EQ(s.variants.size(), 2u);
        EXPECT_EQ(path_of(s), Path::single_copy) << "variant 0: nobody in place";
        ++checked;
      }
    }
  }
  EXPECT_EQ(checked, 15 * 3 * 3);
  // Without the branch (every rank reading the others' buffers whatever they are), an in-place
  // rank overwrites a block its peers still read: the checker must see it.
  std::vector<CollectiveDesc> descs;
  std::vector<RankSchedule> forced;
  for (int r = 0; r < 3; ++r) {
    descs.push_back(CollectiveDesc{.op = OpType::alltoall, .count = 13, .nranks = 3, .in_place = r == 1,
                                   .region = small_shape(2, true, 3)});
    forced.push_back(with_variant(direct_schedule(descs.back(), r), 0));
  }
  EXPECT_NE(check_schedules(descs, forced), "");
}

// AllReduce and Reduce over registered buffers: every rank reduces its part reading the peers'
// inputs in place and writes the result into every output (zero copy); when one rank's buffers
// are not registered, all take the other path alike. Checked up to 64 ranks, in and out of
// place, with every root; and the zero-copy path without its final wait must be refused.
TEST(DirectScheduleChecker, ZeroCopyOverRegisteredBuffersUpTo64Ranks) {
  int checked = 0, failures = 0;
  for (int n : test::rank_counts_up_to(kCheckerMaxRanks)) {
    if (n > 16 && n % 7 != 0 && n != kCheckerMaxRanks) continue;
    for (OpType op : {OpType::allreduce, OpType::reduce}) {
      for (size_t count : {size_t{16}, size_t{17}, size_t{101}, size_t{1000}}) {
        for (int root : roots(op, n)) {
          for (bool in_place : {false, true}) {
            for (int registered : {0, 1, 2}) {  // none, all, all but the last rank
              for (bool single_copy : {false, true}) {
                RegionShape shape = small_shape(2, single_copy, n);
                shape.registered_elements = 16;
                shape.zero_copy_piece_elements = 8;
                std::vector<CollectiveDesc> descs;
                for (int r = 0; r < n; ++r) {
                  const bool reg = registered == 1 || (registered == 2 && r != n - 1);
                  descs.push_back(CollectiveDesc{.op = op, .count = count, .nranks = n, .root = root,
                                                 .redop = count == 101 ? RedOp::avg : RedOp::sum,
                                                 .in_place = in_place, .region = shape, .registered = reg});
                }
                const std::string problem = check_algorithm(kDirectAlgorithm, descs);
                ++checked;
                if (!problem.empty() && ++failures <= 10) ADD_FAILURE() << problem;
              }
            }
          }
        }
      }
    }
  }
  EXPECT_EQ(failures, 0);
  EXPECT_GT(checked, 1000);

  CollectiveDesc d{.op = OpType::allreduce, .count = 40, .nranks = 3, .region = small_shape(2, false, 3),
                   .registered = true};
  d.region.registered_elements = 16;
  d.region.zero_copy_piece_elements = 8;
  std::vector<RankSchedule> s;
  for (int r = 0; r < 3; ++r) {
    s.push_back(direct_schedule(d, r));
    ASSERT_EQ(s.back().branch, BranchRule::all_registered);
    s.back() = with_variant(s.back(), 1);
  }
  ASSERT_EQ(check_schedules(d, s), "");
  for (auto& r : s) {
    ASSERT_EQ(r.steps.back().actions.back().kind, ActionKind::wait_flag);
    while (r.steps.back().actions.back().kind == ActionKind::wait_flag) r.steps.back().actions.pop_back();
  }
  expect_refused(check_schedules(d, s), "may still");
}

// A write into a peer's buffer must follow the peer's own reads there (it published after
// them and the writer waited), and the peer may read what was written only after the writer
// published it.
TEST(DirectScheduleChecker, RefusesWritesIntoAPeerThatRaceItsOwnAccesses) {
  const CollectiveDesc d{.op = OpType::allreduce, .count = 4, .nranks = 2, .in_place = true};
  const Range all_recv{Buf::recv, 0, 4}, all_scratch{Buf::scratch, 0, 4};
  // Rank 1 writes rank 0's buffer at rank 0's flag 1, which rank 0 raises before reading it.
  std::vector<RankSchedule> s(2);
  for (auto& r : s) {
    r.scratch_count = 4;
    r.shared_region = true;
  }
  s[0].steps.push_back({{publish(), local_copy(all_recv, all_scratch), wait_flag(1, 1)}});
  s[1].steps.push_back({{write_to(0, 1, all_recv, Range{Buf::recv, 0, 4}), publish()}});
  expect_refused(check_schedules(d, s), "while rank 0 may still read it");
  // Rank 0 reads its buffer before rank 1 published what it wrote there.
  std::vector<RankSchedule> t(2);
  for (auto& r : t) {
    r.scratch_count = 4;
    r.shared_region = true;
  }
  t[0].steps.push_back({{publish(), wait_flag(1, 1), local_copy(all_recv, all_scratch)}});
  t[1].steps.push_back({{publish(), wait_flag(0, 1), write_to(0, 1, all_recv, Range{Buf::recv, 0, 4})}});
  expect_refused(check_schedules(d, t), "before rank 1 published what it wrote there");
}

TEST(DirectScheduleChecker, OneRegistryDecidesWhereItRuns) {
  EXPECT_TRUE(runs_here(kDirectAlgorithm, OpType::allreduce, Reach{true, true}));
  EXPECT_FALSE(runs_here(kDirectAlgorithm, OpType::allreduce, Reach{false, true}));
  EXPECT_FALSE(runs_here(kDirectAlgorithm, OpType::allreduce, Reach{true, false}));
  EXPECT_TRUE(runs_here(kDirectAlgorithm, OpType::alltoall, Reach{true, true}));
  EXPECT_FALSE(runs_here(kDirectAlgorithm, OpType::alltoallv, Reach{true, true}));
  EXPECT_TRUE(runs_here("ring", OpType::allreduce, Reach{false, false}));
  EXPECT_NE(why_not_here(kDirectAlgorithm, OpType::allreduce, Reach{false, true}).find("one host"), std::string::npos);
  const auto across_hosts = algorithms_for(OpType::allreduce, Reach{false, true});
  EXPECT_EQ(std::count(across_hosts.begin(), across_hosts.end(), kDirectAlgorithm), 0);
  const auto one_host = algorithms_for(OpType::barrier, Reach{true, true});
  EXPECT_EQ(std::count(one_host.begin(), one_host.end(), kDirectAlgorithm), 1);
  // The leaders' ReduceScatter, AllGather and AllToAll are chosen only across hosts; they run
  // anywhere.
  for (OpType op : {OpType::reducescatter, OpType::allgather, OpType::alltoall}) {
    EXPECT_TRUE(chosen_across_hosts_only("leaders", op));
    EXPECT_TRUE(runs_here("leaders", op, Reach{true, false}));
  }
  EXPECT_FALSE(chosen_across_hosts_only("leaders", OpType::allreduce));
  EXPECT_FALSE(chosen_across_hosts_only("ring", OpType::allgather));
}

CollectiveDesc allgather_desc(int n, size_t count) {
  return CollectiveDesc{.op = OpType::allgather, .count = count, .nranks = n};
}

// The slots and single copy end with a "done" publish on every rank (then waits only), which
// lets the peers rewrite their windows two operations on without waiting for the rank to start
// the next; the cells do not claim it. A claim that does not hold is refused.
TEST(DirectScheduleChecker, AllButTheCellsEndWithAClosingPublish) {
  CollectiveDesc d;
  d.op = OpType::broadcast;
  d.nranks = 4;
  d.region = small_shape(2, true);
  for (const auto& [count, closing] : {std::pair<size_t, bool>{0, false}, {8, false}, {9, true}, {64, true}}) {
    d.count = count;
    for (int r = 0; r < d.nranks; ++r) EXPECT_EQ(build(kDirectAlgorithm, d, r).closing_publish, closing) << count;
  }
  // Rank 1 reads after its last publish: it cannot claim one; rank 0 waits after it: it can.
  const CollectiveDesc ag = allgather_desc(2, 2);
  std::vector<RankSchedule> s(2);
  for (auto& r : s) {
    r.region_count = 2;
    r.closing_publish = true;
  }
  const Range win{Buf::region, 0, 2};
  s[0].steps.push_back({{local_copy(Range{Buf::send, 0, 2}, win), publish(), wait_flag(1, 1)}});
  s[1].steps.push_back({{publish(), read_from(0, 1, win, Range{Buf::recv, 0, 2})}});
  expect_refused(check_schedules(ag, s), "rank 1 claims a closing publish but acts after its last publish");
  s[1].steps[0].actions.push_back(publish());
  s[1].steps[0].actions.push_back(publish());
  expect_refused(check_schedules(ag, s), "rank 1 publishes 3 times, rank 0 1");
  s[1].closing_publish = false;
  expect_refused(check_schedules(ag, s), "rank 0 claims a closing publish, rank 1 does not");
}

TEST(DirectScheduleChecker, RefusesAReadOfDataNotYetPublished) {
  // Rank 0 publishes, then writes its window: rank 1 reads it at flag 1.
  const CollectiveDesc d = allgather_desc(2, 2);
  std::vector<RankSchedule> s(2);
  for (auto& r : s) r.region_count = 2;
  const Range win{Buf::region, 0, 2};
  s[0].steps.push_back({{publish(), local_copy(Range{Buf::send, 0, 2}, win)}});
  s[1].steps.push_back({{read_from(0, 1, win, Range{Buf::recv, 0, 2})}});
  expect_refused(check_schedules(d, s), "before rank 0 published what it wrote there");
}

TEST(DirectScheduleChecker, RefusesAWindowRewrittenWhileAPeerReadsIt) {
  // Rank 0 waits for rank 1's flag 1, but rank 1 raises it before reading, not after.
  const CollectiveDesc d = allgather_desc(2, 2);
  std::vector<RankSchedule> s(2);
  for (auto& r : s) r.region_count = 2;
  const Range win{Buf::region, 0, 2}, in{Buf::send, 0, 2};
  s[0].steps.push_back({{local_copy(in, win), publish(), wait_flag(1, 1), local_copy(Range{Buf::recv, 0, 2}, win)}});
  s[1].steps.push_back({{publish(), read_from(0, 1, win, Range{Buf::recv, 0, 2})}});
  expect_refused(check_schedules(d, s), "overwrites region[0..2) while rank 1 may still read it");
}

TEST(DirectScheduleChecker, RefusesARankReturningWhileAPeerReadsItsBuffer) {
  // Single-copy broadcast whose root does not wait for the readers' done flags.
  CollectiveDesc d;
  d.op = OpType::broadcast;
  d.nranks = 2;
  d.count = 64;
  d.region = small_shape(2, true);
  auto build_all = [&] {
    std::vector<RankSchedule> s;
    for (int r = 0; r < 2; ++r) s.push_back(direct_schedule(d, r));
    return s;
  };
  auto s = build_all();
  ASSERT_EQ(check_schedules(d, s), "");
  auto& last = s[0].steps.back().actions;
  ASSERT_EQ(last.back().kind, ActionKind::wait_flag);
  last.pop_back();
  expect_refused(check_schedules(d, s), "rank 0 returns while rank 1 may still read its send buffer");
}

TEST(DirectScheduleChecker, RefusesAFlagNeverRaisedAndMixedSteps) {
  const CollectiveDesc d = allgather_desc(2, 0);
  std::vector<RankSchedule> s(2);
  s[0].steps.push_back({{publish(), wait_flag(1, 2)}});
  s[1].steps.push_back({{publish(), wait_flag(0, 1)}});
  const std::string problem = check_schedules(d, s);
  expect_refused(problem, "deadlock");
  expect_refused(problem, "waits for rank 1's flag 2 (it raised 1)");

  std::vector<RankSchedule> t(2);
  t[0].steps.push_back({{publish(), send_to(1, Range{})}});
  t[1].steps.push_back({{recv_copy_from(0, Range{Buf::recv, 0, 0})}});
  expect_refused(check_schedules(d, t), "mixes shared-region actions with sends and receives");
}

}  // namespace
}  // namespace hoop::schedule
