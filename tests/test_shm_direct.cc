// shm-direct (src/direct): every collective it runs, against references computed in the ranks,
// on 1..8 real processes; both paths (cells for small inputs, pipelined chunk slots for large
// ones) with small tunables so that thresholds, chunk boundaries and slot reuse are crossed
// with little data; back-to-back and asynchronous ops; bit-identical replicated results;
// mismatched calls, an absent rank, a killed rank; nothing left in /dev/shm.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "hoop/communicator.h"
#include "hoop/error.h"
#include "hoop/types.h"
#include "support/collective_cases.h"
#include "support/spawn.h"
#include "support/test_scale.h"
#include "transport/shm/shm_transport.h"

namespace hoop::test {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

constexpr const char* kAlgo = "shm-direct";

// Options that force shm-direct.
OpOptions forced_direct() {
  OpOptions o;
  o.algo = kAlgo;
  return o;
}

// The rank's communicator; its job id is reported, for the check that nothing is left behind.
std::shared_ptr<Communicator> make_reported_comm(RankContext& ctx, CommOptions opts = {}) {
  auto comm = ctx.make_comm(std::move(opts));
  ctx.report("JOB " + comm->job_id());
  return comm;
}

struct Combo {
  OpType op;
  DataType dt;
  RedOp redop;
};

// A selection that still covers every collective, both 16-bit float types through the f32
// staging, exact integer results (sums wrap, avg truncates) and every op.
const Combo kCombos[] = {
    {OpType::allreduce, DataType::f32, RedOp::sum},      {OpType::allreduce, DataType::f32, RedOp::avg},
    {OpType::allreduce, DataType::f64, RedOp::prod},     {OpType::allreduce, DataType::i32, RedOp::sum},
    {OpType::allreduce, DataType::i64, RedOp::avg},      {OpType::allreduce, DataType::u8, RedOp::max},
    {OpType::allreduce, DataType::i8, RedOp::min},       {OpType::allreduce, DataType::f16, RedOp::sum},
    {OpType::allreduce, DataType::bf16, RedOp::avg},     {OpType::reducescatter, DataType::f32, RedOp::sum},
    {OpType::reducescatter, DataType::u32, RedOp::prod}, {OpType::reducescatter, DataType::bf16, RedOp::sum},
    {OpType::reducescatter, DataType::f64, RedOp::avg},  {OpType::reduce, DataType::f32, RedOp::sum},
    {OpType::reduce, DataType::u64, RedOp::sum},         {OpType::reduce, DataType::f16, RedOp::max},
    {OpType::allgather, DataType::f32, RedOp::sum},      {OpType::allgather, DataType::u8, RedOp::sum},
    {OpType::allgather, DataType::f16, RedOp::sum},      {OpType::broadcast, DataType::f64, RedOp::sum},
    {OpType::broadcast, DataType::i8, RedOp::sum},       {OpType::broadcast, DataType::bf16, RedOp::sum},
};

std::vector<CollCase> make_cases(int n, const std::vector<size_t>& counts) {
  std::vector<CollCase> cases;
  for (size_t count : counts) {
    for (const Combo& combo : kCombos) {
      for (bool in_place : {false, true}) {
        const int root = static_cast<int>(cases.size() / 2) % n;
        add_case(cases, combo.op, combo.dt, combo.redop, root, count, in_place, kAlgo);
      }
    }
  }
  return cases;
}

// Small tunables: a 1 KiB small-message limit in 4 KiB cells, 8 KiB chunk slots, so a few
// thousand elements already take the large path over several chunks and reuse every stage;
// from `single_copy` bytes ("0": never) out-of-place AllReduce, ReduceScatter, AllGather and
// Broadcast read the peers' buffers directly, 1 KiB per peer and read in the reductions.
SpawnOptions small_tunables(const char* stages, const char* single_copy = "16K") {
  SpawnOptions o;
  o.timeout = 120s;
  o.env = {{"HOOP_DIRECT_SMALL_BYTES", "1K"},
           {"HOOP_DIRECT_CELL_BYTES", "4K"},
           {"HOOP_DIRECT_CHUNK_BYTES", "8K"},
           {"HOOP_DIRECT_STAGES", stages},
           {"HOOP_DIRECT_SINGLE_COPY_BYTES", single_copy},
           {"HOOP_DIRECT_SINGLE_COPY_ALLREDUCE_BYTES", "16K"},
           {"HOOP_DIRECT_SINGLE_COPY_PART_BYTES", "1K"}};
  return o;
}

void run_cases(int n, const std::vector<size_t>& counts, const SpawnOptions& opts) {
  RunnerOptions ropts;
  ropts.algo_check = AlgoCheck::exact;
  run_cases_and_check(n, make_cases(n, counts), ropts, opts);
}

class ShmDirectRanks : public ::testing::TestWithParam<int> {};

// Counts: empty, one element, primes on both sides of the 1 KiB small limit (256 f32) and of
// the 8 KiB chunk (2048 f32; ReduceScatter splits it N ways), and several chunks.
TEST_P(ShmDirectRanks, EveryCollectiveMatchesTheReferenceOnBothPaths) {
  const int n = GetParam();
  std::vector<size_t> counts = {0, 1, 67, 255, 257, 2039, 2053, 9973};
  if (n <= 4) counts.push_back(40009);
  run_cases(n, counts, small_tunables("2"));
}

std::string ranks_name(const ::testing::TestParamInfo<int>& p) { return std::to_string(p.param) + "ranks"; }

INSTANTIATE_TEST_SUITE_P(ShmDirect, ShmDirectRanks, ::testing::Values(1, 2, 3, 4, 5, 8), ranks_name);

// One stage (no chunk in flight while the next is copied in) and three; broadcasts through the
// slots only, and all through the root's buffer.
TEST(ShmDirect, OneAndThreeStagesPipelineCorrectly) {
  run_cases(3, {1, 2053, 9973}, small_tunables("1", "0"));
  run_cases(3, {1, 2053, 9973}, small_tunables("3", "2K"));
}

// The default tunables: counts around the 16 KiB small limit and the 512 KiB chunk of f32.
TEST(ShmDirect, DefaultThresholdsAndChunkBoundaries) {
  SpawnOptions o;
  o.timeout = 120s;
  run_cases(2, {4095, 4096, 4097, 131071, 131072, 131073, 3 * 131072 + 5}, o);
}

// Many ops issued without waiting, alternating small and large, each with its own buffers:
// the cells' double buffering and the slots' stages are reused while peers lag behind.
TEST(ShmDirect, BackToBackAsynchronousOpsStayInOrder) {
  constexpr int kRanks = 4;
  constexpr int kOps = 120;
  auto results = run_ranks(kRanks, [&](RankContext& ctx) {
    auto comm = make_reported_comm(ctx);
    const OpOptions opts = forced_direct();
    std::vector<std::vector<int32_t>> bufs(kOps);
    std::vector<Work> works;
    for (int k = 0; k < kOps; ++k) {
      const size_t count = (k % 3 == 0) ? 5003 : static_cast<size_t>(1 + k);
      bufs[static_cast<size_t>(k)].resize(count);
      for (size_t i = 0; i < count; ++i)
        bufs[static_cast<size_t>(k)][i] = static_cast<int32_t>(i * 7 + static_cast<size_t>(k) * 1000 + static_cast<size_t>(ctx.rank));
      auto& b = bufs[static_cast<size_t>(k)];
      works.push_back(comm->allreduce_async(b.data(), b.data(), count, DataType::i32, RedOp::sum, opts));
      if (k % 10 == 9) works.push_back(comm->barrier_async(opts));
    }
    for (auto& w : works) w.wait();
    for (int k = 0; k < kOps; ++k) {
      const auto& b = bufs[static_cast<size_t>(k)];
      for (size_t i = 0; i < b.size(); ++i) {
        const int32_t want = static_cast<int32_t>(kRanks * (i * 7 + static_cast<size_t>(k) * 1000) + 0 + 1 + 2 + 3);
        if (b[i] != want) {
          ADD_FAILURE() << "rank " << ctx.rank << " op " << k << " element " << i << ": " << b[i] << " != " << want;
          return;
        }
      }
    }
  }, small_tunables("2"));
  EXPECT_TRUE(all_ok(results));
  expect_no_job_segments(results);
}

// Ranks may call one AllReduce in place on some ranks and out of place on others; every rank
// must still take the same path (cells, slots or single copy) and get the exact sum.
TEST(ShmDirect, InPlaceOnSomeRanksOnly) {
  constexpr int kRanks = 3;
  auto results = run_ranks(kRanks, [&](RankContext& ctx) {
    auto comm = make_reported_comm(ctx);
    const OpOptions opts = forced_direct();
    for (size_t count : {size_t{67}, size_t{2053}, size_t{9973}, size_t{40009}}) {
      std::vector<int32_t> in(count), out(count, -1);
      for (size_t i = 0; i < count; ++i) in[i] = static_cast<int32_t>(i * 3 + static_cast<size_t>(ctx.rank));
      const bool in_place = ctx.rank == 1;
      comm->allreduce(in.data(), in_place ? in.data() : out.data(), count, DataType::i32, RedOp::sum, opts);
      const std::vector<int32_t>& got = in_place ? in : out;
      for (size_t i = 0; i < count; ++i) {
        const auto want = static_cast<int32_t>(kRanks * i * 3 + 0 + 1 + 2);
        if (got[i] != want) {
          ADD_FAILURE() << "rank " << ctx.rank << " count " << count << " element " << i << ": " << got[i]
                        << " != " << want;
          break;
        }
      }
    }
  }, small_tunables("2"));
  EXPECT_TRUE(all_ok(results));
  expect_no_job_segments(results);
}

// AllToAll from the single-copy size on ranks some of which are in place: an in-place rank
// would overwrite blocks its peers read, so every rank takes the slots alike (decided from what
// all ranks announced, never per rank), and every result is exact.
TEST(ShmDirect, AllToAllInPlaceOnSomeRanksOnly) {
  constexpr int kRanks = 3;
  SpawnOptions o = small_tunables("2");
  o.env.emplace_back("HOOP_DIRECT_SINGLE_COPY_ALLTOALL_BYTES", "1K");  // x N²: single copy from 9 KiB per rank
  auto results = run_ranks(kRanks, [&](RankContext& ctx) {
    auto comm = make_reported_comm(ctx);
    const OpOptions opts = forced_direct();
    for (size_t count : {size_t{1000}, size_t{4099}}) {
      for (int in_place_rank : {-1, 1, 2, kRanks}) {  // none, rank 1, rank 2, all
        const bool in_place = in_place_rank == kRanks || ctx.rank == in_place_rank;
        std::vector<int32_t> in(count * kRanks), out(count * kRanks, -1);
        for (size_t i = 0; i < in.size(); ++i) in[i] = ctx.rank * 1000000 + static_cast<int32_t>(i);
        comm->alltoall(in.data(), in_place ? in.data() : out.data(), count, DataType::i32, opts);
        const std::vector<int32_t>& got = in_place ? in : out;
        for (size_t p = 0; p < static_cast<size_t>(kRanks); ++p) {
          for (size_t j = 0; j < count; ++j) {
            const auto want = static_cast<int32_t>(p * 1000000 + static_cast<size_t>(ctx.rank) * count + j);
            if (got[p * count + j] == want) continue;
            ADD_FAILURE() << "rank " << ctx.rank << " count " << count << " in place on " << in_place_rank
                          << ": block " << p << " element " << j << " is " << got[p * count + j] << ", not " << want;
            return;
          }
        }
      }
    }
  }, o);
  EXPECT_TRUE(all_ok(results));
  expect_no_job_segments(results);
}

// What a rank reads of its peers' memory is counted, per peer: on 2 ranks an AllReduce reads
// exactly one buffer's worth from the peer (its half of the inputs, then its half of the
// result), whichever path it takes (cells, slots, single copy).
TEST(ShmDirect, StatisticsCountWhatEachRankReads) {
  auto results = run_ranks(2, [&](RankContext& ctx) {
    auto comm = make_reported_comm(ctx);
    const OpOptions opts = forced_direct();
    uint64_t expected = 0;
    comm->reset_stats();
    for (size_t count : {size_t{67}, size_t{2053}, size_t{9973}, size_t{40009}}) {
      std::vector<float> v(count, 1.0f);
      comm->allreduce(v.data(), v.data(), count, DataType::f32, RedOp::sum, opts);
      expected += count * sizeof(float);
    }
    const CommStats st = comm->stats();
    EXPECT_EQ(st.ops, 4u);
    EXPECT_EQ(st.bytes_received, expected) << "rank " << ctx.rank;
    ASSERT_EQ(st.links.size(), 1u);
    EXPECT_EQ(st.links[0].peer, 1 - ctx.rank);
    EXPECT_EQ(st.links[0].bytes_received, expected);
  }, small_tunables("2"));
  EXPECT_TRUE(all_ok(results));
  expect_no_job_segments(results);
}

// No rank leaves a barrier before the last one entered it (ranks enter skewed on purpose).
TEST(ShmDirect, BarrierWaitsForTheLastRank) {
  constexpr int kRanks = 4;
  auto results = run_ranks(kRanks, [&](RankContext& ctx) {
    auto comm = make_reported_comm(ctx);
    const OpOptions opts = forced_direct();
    comm->barrier(opts);
    for (int round = 0; round < 3; ++round) {
      if (ctx.rank == round) std::this_thread::sleep_for(50ms);
      const int64_t entered = now_ns();
      comm->barrier(opts);
      const int64_t left = now_ns();
      EXPECT_EQ(comm->last_algorithm(), kAlgo);
      ctx.report("T " + std::to_string(round) + " " + std::to_string(entered) + " " + std::to_string(left));
    }
  });
  EXPECT_TRUE(all_ok(results));
  for (int round = 0; round < 3; ++round) {
    int64_t last_entry = 0;
    std::vector<int64_t> exits;
    for (const auto& r : results) {
      for (const auto& line : r.reports) {
        int rd = -1;
        long long in = 0, out = 0;
        if (std::sscanf(line.c_str(), "T %d %lld %lld", &rd, &in, &out) == 3 && rd == round) {
          last_entry = std::max<int64_t>(last_entry, in);
          exits.push_back(out);
        }
      }
    }
    ASSERT_EQ(exits.size(), static_cast<size_t>(kRanks));
    for (int64_t e : exits) EXPECT_GE(e, last_entry) << "a rank left barrier " << round << " early";
  }
  expect_no_job_segments(results);
}

// A rank that calls with another count: the others get a mismatch naming it, not wrong data.
TEST(ShmDirect, DifferentCountsFailAsAMismatch) {
  auto results = run_ranks(3, [&](RankContext& ctx) {
    CommOptions copts;
    copts.timeout = 5s;
    auto comm = make_reported_comm(ctx, copts);
    const OpOptions opts = forced_direct();
    std::vector<float> v(64, 1.0f);
    const size_t count = ctx.rank == 1 ? 33 : 32;
    try {
      comm->allreduce(v.data(), v.data(), count, DataType::f32, RedOp::sum, opts);
      ADD_FAILURE() << "rank " << ctx.rank << ": the mismatched allreduce succeeded";
    } catch (const Error& e) {
      ctx.report(std::string("ERR ") + std::string(to_string(e.code())) + " " + e.what());
    }
  });
  EXPECT_TRUE(all_ok(results));
  int mismatches = 0;
  for (const auto& r : results) {
    for (const auto& line : r.reports) {
      if (line.rfind("ERR mismatch", 0) != 0) continue;
      ++mismatches;
      EXPECT_NE(line.find("count 33"), std::string::npos) << line;
    }
  }
  EXPECT_GE(mismatches, 2) << "every rank reads rank 1's cell: ranks 0 and 2 see it differ";
  expect_no_job_segments(results);
}

// Calls different enough to take different paths (cells here, chunk slots there), or equal but
// for f16 vs bf16 (both reduced as f32): still a mismatch naming both, never a timeout.
TEST(ShmDirect, CallsOnDifferentPathsFailAsAMismatch) {
  for (int variant = 0; variant < 2; ++variant) {
    SpawnOptions o = small_tunables("2");
    auto results = run_ranks(3, [&](RankContext& ctx) {
      CommOptions copts;
      copts.timeout = 10s;
      auto comm = make_reported_comm(ctx, copts);
      const OpOptions opts = forced_direct();
      std::vector<uint16_t> v(4096, 0x3c00);
      const size_t count = variant == 0 && ctx.rank == 1 ? 3000 : 300;
      const DataType dt = variant == 1 && ctx.rank == 2 ? DataType::bf16 : DataType::f16;
      try {
        comm->allreduce(v.data(), v.data(), count, dt, RedOp::sum, opts);
        comm->barrier(opts);
        ADD_FAILURE() << "rank " << ctx.rank << ": the mismatched calls succeeded";
      } catch (const Error& e) {
        ctx.report(std::string("ERR ") + std::string(to_string(e.code())) + " " + e.what());
        EXPECT_TRUE(e.code() == ErrorCode::mismatch || e.code() == ErrorCode::peer_failure) << e.what();
      }
    }, o);
    EXPECT_TRUE(all_ok(results));
    const char* shown = variant == 0 ? "count 3000" : "bf16";
    int mismatches = 0;
    for (const auto& r : results) {
      for (const auto& line : r.reports) {
        if (line.rfind("ERR mismatch", 0) == 0 && line.find(shown) != std::string::npos) ++mismatches;
      }
    }
    EXPECT_GE(mismatches, 1) << "variant " << variant;
    expect_no_job_segments(results);
  }
}

// A rank that never calls: the others time out naming it.
TEST(ShmDirect, AnAbsentRankTimesOutNamingIt) {
  auto results = run_ranks(3, [&](RankContext& ctx) {
    CommOptions copts;
    copts.timeout = 1s;
    auto comm = make_reported_comm(ctx, copts);
    const OpOptions opts = forced_direct();
    std::vector<float> v(100000, 1.0f);
    comm->allreduce(v.data(), v.data(), v.size(), DataType::f32, RedOp::sum, opts);
    auto store = ctx.store();
    if (ctx.rank == 2) {
      store->get("done-0");
      store->get("done-1");
      return;
    }
    try {
      comm->allreduce(v.data(), v.data(), v.size(), DataType::f32, RedOp::sum, opts);
      ADD_FAILURE() << "completed without rank 2";
    } catch (const Error& e) {
      // The first to time out poisons the region: the other may learn it from there.
      EXPECT_TRUE(e.code() == ErrorCode::timeout || e.code() == ErrorCode::peer_failure) << e.what();
      EXPECT_NE(std::string(e.what()).find("waiting for rank 2"), std::string::npos) << e.what();
      if (e.code() == ErrorCode::timeout) ctx.report("TIMEOUT " + std::to_string(e.peer()));
    }
    store->set_string("done-" + std::to_string(ctx.rank), "1");
  });
  EXPECT_TRUE(all_ok(results));
  int timeouts_naming_2 = 0;
  for (const auto& r : results)
    for (const auto& line : r.reports) timeouts_naming_2 += line == "TIMEOUT 2";
  EXPECT_GE(timeouts_naming_2, 1);
  expect_no_job_segments(results);
}

// A rank killed in the middle of large AllReduces: every survivor fails within the timeout
// with an error naming it, and the region does not outlive the job.
TEST(ShmDirect, AKilledRankFailsTheSurvivorsWithinTheTimeout) {
  constexpr int kRanks = 3;
  constexpr int kVictim = 1;
  auto results = run_ranks(kRanks, [&](RankContext& ctx) {
    CommOptions copts;
    copts.timeout = 3s;
    auto comm = make_reported_comm(ctx, copts);
    const OpOptions opts = forced_direct();
    std::vector<float> v(size_t{1} << 20, 1.0f);
    comm->allreduce(v.data(), v.data(), v.size(), DataType::f32, RedOp::max, opts);
    if (ctx.rank == kVictim) {
      std::thread([] {
        std::this_thread::sleep_for(200ms);
        ::kill(::getpid(), SIGKILL);
      }).detach();
    }
    const auto start = Clock::now();
    try {
      for (int k = 0; k < 100000; ++k) comm->allreduce(v.data(), v.data(), v.size(), DataType::f32, RedOp::max, opts);
      ADD_FAILURE() << "100000 allreduces succeeded with rank " << kVictim << " dead";
    } catch (const Error& e) {
      const double took = std::chrono::duration<double>(Clock::now() - start).count();
      EXPECT_TRUE(e.code() == ErrorCode::peer_failure || e.code() == ErrorCode::timeout) << e.what();
      EXPECT_NE(std::string(e.what()).find("rank 1"), std::string::npos) << e.what();
      EXPECT_LT(took, 0.2 + 3.0 + wall_bound(1.0)) << e.what();
    }
  }, SpawnOptions{60s, {}, nullptr});
  EXPECT_EQ(results[kVictim].signal, SIGKILL);
  for (const auto& r : results) {
    if (r.rank == kVictim) continue;
    EXPECT_TRUE(r.ok()) << "survivor " << r.rank;
  }
  expect_no_job_segments(results);
}

// A rank that ends without destructors before the region exists, as torch's multiprocessing
// ranks do with os._exit: the region has no name in /dev/shm, so nothing of it outlives the
// others either, without any launcher sweeping after them.
TEST(ShmDirect, ARankEndingBeforeTheRegionExistsLeavesNothingInDevShm) {
  auto results = run_ranks(3, [&](RankContext& ctx) {
    CommOptions copts;
    copts.timeout = 1s;
    auto comm = make_reported_comm(ctx, copts);
    if (ctx.rank == 2) ::_exit(0);
    std::vector<float> v(100000, 1.0f);
    try {
      comm->allreduce(v.data(), v.data(), v.size(), DataType::f32, RedOp::sum, forced_direct());
      ADD_FAILURE() << "completed without rank 2";
    } catch (const Error& e) {
      EXPECT_TRUE(e.code() == ErrorCode::timeout || e.code() == ErrorCode::peer_failure) << e.what();
    }
    std::fflush(nullptr);
    ::_exit(::testing::Test::HasFailure() ? 1 : 0);
  });
  for (const auto& r : results) EXPECT_EQ(r.exit_code, 0) << "rank " << r.rank;
  expect_no_job_segments(results);
}

// Forced shm-direct with TCP forced: the schedule-based default runs instead.
TEST(ShmDirect, ForcedTcpFallsBackToTheRing) {
  SpawnOptions o;
  o.env = {{"HOOP_TRANSPORT", "tcp"}};
  auto results = run_ranks(2, [&](RankContext& ctx) {
    auto comm = ctx.make_comm();
    const OpOptions opts = forced_direct();
    std::vector<int32_t> v(1000, ctx.rank + 1);
    comm->allreduce(v.data(), v.data(), v.size(), DataType::i32, RedOp::sum, opts);
    EXPECT_EQ(v[999], 3);
    EXPECT_NE(comm->last_algorithm(), kAlgo);
  }, o);
  EXPECT_TRUE(all_ok(results));
}

}  // namespace
}  // namespace hoop::test
