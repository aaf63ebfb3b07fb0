// hoop-bench's pure logic: command line, sizes, per-collective counts and blocks, bandwidth
// formulas, statistics, what each rank checks, and the verification data's exactness guarantees.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <numeric>
#include <set>
#include <string>
#include <vector>

#include "../tools/bench/bench_args.h"
#include "../tools/bench/bench_data.h"
#include "../tools/bench/bench_math.h"
#include "../tools/bench/data_plan.h"

namespace hoop::bench {
namespace {

constexpr uint64_t KiB = 1024;
constexpr uint64_t MiB = 1024 * KiB;

// ---- sizes ---------------------------------------------------------------------------------

TEST(BenchMath, ParsesSizesWithBinarySuffixes) {
  EXPECT_EQ(parse_bytes("0"), 0u);
  EXPECT_EQ(parse_bytes("1024"), 1024u);
  EXPECT_EQ(parse_bytes("1K"), KiB);
  EXPECT_EQ(parse_bytes("1k"), KiB);
  EXPECT_EQ(parse_bytes("64M"), 64 * MiB);
  EXPECT_EQ(parse_bytes("1G"), 1024 * MiB);
  EXPECT_EQ(parse_bytes("2T"), 2ull << 40);
  EXPECT_EQ(parse_bytes("64MB"), 64 * MiB);
  EXPECT_EQ(parse_bytes("64MiB"), 64 * MiB);
  EXPECT_EQ(parse_bytes("512B"), 512u);
}

TEST(BenchMath, RejectsMalformedSizes) {
  for (const char* bad : {"", "K", "-1", "1.5M", "1X", "1KK", "1 K", "M1", "1Kb2",
                          "99999999999999999999", "17179869184G"}) {
    EXPECT_FALSE(parse_bytes(bad).has_value()) << "'" << bad << "'";
  }
}

TEST(BenchMath, SizesGrowByFactor) {
  const auto sizes = size_sequence({KiB, 64 * MiB, 4, 0});
  const std::vector<uint64_t> want = {KiB,       4 * KiB, 16 * KiB, 64 * KiB, 256 * KiB,
                                      MiB,       4 * MiB, 16 * MiB, 64 * MiB};
  EXPECT_EQ(sizes, want);
  EXPECT_EQ(size_sequence({KiB, 5 * KiB, 2, 0}), (std::vector<uint64_t>{KiB, 2 * KiB, 4 * KiB}));
  EXPECT_EQ(size_sequence({8, 8, 2, 0}), (std::vector<uint64_t>{8}));
}

TEST(BenchMath, SizesGrowByStep) {
  EXPECT_EQ(size_sequence({0, 10, 1, 3}), (std::vector<uint64_t>{0, 3, 6, 9}));
}

TEST(BenchMath, ZeroMinimumWithFactorContinuesFromOne) {
  EXPECT_EQ(size_sequence({0, 8, 2, 0}), (std::vector<uint64_t>{0, 1, 2, 4, 8}));
}

TEST(BenchMath, SizeSequenceStopsBeforeOverflowAndOnBadRanges) {
  EXPECT_EQ(size_sequence({1ull << 63, UINT64_MAX, 2, 0}).size(), 1u);
  EXPECT_EQ(size_sequence({UINT64_MAX - 1, UINT64_MAX, 1, 5}).size(), 1u);
  EXPECT_TRUE(size_sequence({2 * KiB, KiB, 2, 0}).empty());
  EXPECT_TRUE(size_sequence({KiB, 2 * KiB, 1, 0}).empty());
}

// ---- counts per collective -----------------------------------------------------------------

TEST(BenchMath, AllReduceBroadcastReduceCountTheWholeBuffer) {
  for (OpType c : {OpType::allreduce, OpType::broadcast, OpType::reduce}) {
    const Layout l = layout_for(c, KiB, 4, 4);
    EXPECT_EQ(l.count, 256u);
    EXPECT_EQ(l.op_count, 256u);
    EXPECT_EQ(l.send_count, 256u);
    EXPECT_EQ(l.recv_count, 256u);
    EXPECT_EQ(l.bytes, KiB);
  }
  // Partial elements are dropped.
  EXPECT_EQ(layout_for(OpType::allreduce, 6, 4, 3).count, 1u);
  EXPECT_EQ(layout_for(OpType::allreduce, 6, 4, 3).bytes, 4u);
}

TEST(BenchMath, ReduceScatterSizeIsTheSendBufferRoundedToRanks) {
  const Layout l = layout_for(OpType::reducescatter, 1000, 4, 3);  // 250 elements
  EXPECT_EQ(l.count, 249u);
  EXPECT_EQ(l.op_count, 83u);  // recvcount
  EXPECT_EQ(l.send_count, 249u);
  EXPECT_EQ(l.recv_count, 83u);
  EXPECT_EQ(l.bytes, 996u);
}

TEST(BenchMath, AllGatherSizeIsTheRecvBufferRoundedToRanks) {
  const Layout l = layout_for(OpType::allgather, 1000, 4, 3);
  EXPECT_EQ(l.count, 249u);
  EXPECT_EQ(l.op_count, 83u);  // sendcount
  EXPECT_EQ(l.send_count, 83u);
  EXPECT_EQ(l.recv_count, 249u);
  EXPECT_EQ(l.bytes, 996u);
  // Fewer elements than ranks: nothing to send.
  EXPECT_EQ(layout_for(OpType::allgather, 8, 4, 4).count, 0u);
}

TEST(BenchMath, AllToAllSizeIsWhatEachRankSendsRoundedToRanks) {
  const Layout l = layout_for(OpType::alltoall, 1000, 4, 3);
  EXPECT_EQ(l.count, 249u);
  EXPECT_EQ(l.op_count, 83u);  // per peer
  EXPECT_EQ(l.send_count, 249u);
  EXPECT_EQ(l.recv_count, 249u);
  EXPECT_EQ(l.blocks, (std::vector<size_t>{83, 83, 83}));
  EXPECT_EQ(l.bytes, 996u);
}

TEST(BenchMath, GatherAndScatterSizeIsTheRootsBufferRoundedToRanks) {
  const Layout g = layout_for(OpType::gather, 1000, 4, 3);
  EXPECT_EQ(g.count, 249u);
  EXPECT_EQ(g.op_count, 83u);
  EXPECT_EQ(g.send_count, 83u);
  EXPECT_EQ(g.recv_count, 249u);
  const Layout s = layout_for(OpType::scatter, 1000, 4, 3);
  EXPECT_EQ(s.count, 249u);
  EXPECT_EQ(s.op_count, 83u);
  EXPECT_EQ(s.send_count, 249u);
  EXPECT_EQ(s.recv_count, 83u);
}

// Without --uneven a v-form runs its even form's counts.
TEST(BenchMath, VectorFormsSplitEvenlyUnlessAsked) {
  const std::vector<std::pair<OpType, OpType>> pairs = {
      {OpType::alltoallv, OpType::alltoall},   {OpType::gatherv, OpType::gather},
      {OpType::scatterv, OpType::scatter},     {OpType::allgatherv, OpType::allgather},
      {OpType::reducescatterv, OpType::reducescatter}};
  for (const auto& [v, even] : pairs) {
    const Layout a = layout_for(v, 1000, 4, 3);
    const Layout b = layout_for(even, 1000, 4, 3);
    EXPECT_EQ(a.count, b.count) << to_string(v);
    EXPECT_EQ(a.op_count, b.op_count) << to_string(v);
    EXPECT_EQ(a.send_count, b.send_count) << to_string(v);
    EXPECT_EQ(a.recv_count, b.recv_count) << to_string(v);
    EXPECT_EQ(a.blocks, b.blocks) << to_string(v);
    EXPECT_TRUE(is_vector_op(v));
    EXPECT_FALSE(is_vector_op(even));
  }
  // --uneven leaves the even forms alone.
  EXPECT_EQ(layout_for(OpType::alltoall, 1000, 4, 3, true).blocks, (std::vector<size_t>{83, 83, 83}));
}

TEST(BenchMath, UnevenSplitGivesSomeRanksNothingAndKeepsTheTotal) {
  EXPECT_EQ(uneven_split(256, 3), (std::vector<size_t>{0, 85, 171}));
  EXPECT_EQ(uneven_split(7, 2), (std::vector<size_t>{0, 7}));
  EXPECT_EQ(uneven_split(1001, 5), (std::vector<size_t>{0, 250, 500, 0, 251}));
  EXPECT_EQ(uneven_split(10, 1), (std::vector<size_t>{10}));
  EXPECT_EQ(uneven_split(0, 4), (std::vector<size_t>{0, 0, 0, 0}));
  for (int n = 1; n <= 20; ++n) {
    for (size_t total : {size_t{0}, size_t{1}, size_t{5}, size_t{1000}, size_t{1} << 40}) {
      const auto blocks = uneven_split(total, n);
      ASSERT_EQ(blocks.size(), static_cast<size_t>(n));
      EXPECT_EQ(std::accumulate(blocks.begin(), blocks.end(), size_t{0}), total) << n;
      for (int k = 0; k < n; ++k) {
        if (n > 1 && k % 3 == 0) {
          EXPECT_EQ(blocks[static_cast<size_t>(k)], 0u) << n << " " << k;
        }
        // Two shares get about twice one share.
        if (k % 3 == 2 && total >= 1000) {
          EXPECT_NEAR(static_cast<double>(blocks[static_cast<size_t>(k)]),
                      2.0 * static_cast<double>(blocks[static_cast<size_t>(k - 1)]), 2.0);
        }
      }
    }
  }
}

TEST(BenchMath, UnevenLayoutKeepsTheWholeSize) {
  const Layout l = layout_for(OpType::alltoallv, 1000, 4, 3, true);  // 250 elements
  EXPECT_EQ(l.count, 250u);
  EXPECT_EQ(l.bytes, 1000u);
  EXPECT_EQ(l.blocks, (std::vector<size_t>{0, 83, 167}));
  EXPECT_EQ(l.op_count, 167u);
  EXPECT_EQ(l.send_count, 250u);
  EXPECT_EQ(l.recv_count, 250u);
  const Layout g = layout_for(OpType::gatherv, 1000, 4, 3, true);
  EXPECT_EQ(g.send_count, 167u);  // the largest block
  EXPECT_EQ(g.recv_count, 250u);
  const Layout r = layout_for(OpType::reducescatterv, 1000, 4, 3, true);
  EXPECT_EQ(r.send_count, 250u);
  EXPECT_EQ(r.recv_count, 167u);
}

TEST(BenchMath, AllToAllPairsSendAndReceiveTheWholeSizeEach) {
  const std::vector<size_t> blocks = uneven_split(1001, 5);
  for (int r = 0; r < 5; ++r) {
    size_t sent = 0, received = 0;
    for (int j = 0; j < 5; ++j) {
      sent += pair_count(blocks, r, j);
      received += pair_count(blocks, j, r);
    }
    EXPECT_EQ(sent, 1001u) << r;
    EXPECT_EQ(received, 1001u) << r;
  }
  EXPECT_NE(pair_count(blocks, 1, 2), pair_count(blocks, 2, 1));  // not symmetric
  EXPECT_EQ(displacements({3, 0, 4, 1}), (std::vector<size_t>{0, 3, 3, 7}));
}

TEST(BenchMath, PlanDropsSizesThatRoundToTheSameCount) {
  const auto rows = plan_layouts({0, 1, 2, 4, 8, 16}, OpType::allreduce, 4, 2);
  ASSERT_EQ(rows.size(), 4u);
  EXPECT_EQ(rows[0].count, 0u);
  EXPECT_EQ(rows[1].count, 1u);
  EXPECT_EQ(rows[2].count, 2u);
  EXPECT_EQ(rows[3].count, 4u);
}

// ---- bandwidth -----------------------------------------------------------------------------

TEST(BenchMath, BusBandwidthFactors) {
  EXPECT_DOUBLE_EQ(busbw_factor(OpType::allreduce, 4), 1.5);
  EXPECT_DOUBLE_EQ(busbw_factor(OpType::allreduce, 2), 1.0);
  EXPECT_DOUBLE_EQ(busbw_factor(OpType::allreduce, 1), 0.0);
  EXPECT_DOUBLE_EQ(busbw_factor(OpType::reducescatter, 4), 0.75);
  EXPECT_DOUBLE_EQ(busbw_factor(OpType::allgather, 8), 0.875);
  EXPECT_DOUBLE_EQ(busbw_factor(OpType::broadcast, 8), 1.0);
  EXPECT_DOUBLE_EQ(busbw_factor(OpType::reduce, 8), 1.0);
  for (OpType c : {OpType::alltoall, OpType::alltoallv, OpType::gather, OpType::gatherv,
                   OpType::scatter, OpType::scatterv, OpType::allgatherv, OpType::reducescatterv}) {
    EXPECT_DOUBLE_EQ(busbw_factor(c, 4), 0.75) << to_string(c);
    EXPECT_DOUBLE_EQ(busbw_factor(c, 1), 0.0) << to_string(c);
  }
}

TEST(BenchMath, BusBandwidthCountsTheRingAllReduceTraffic) {
  // A ring AllReduce of 4 GB on 4 ranks sends 6 GB per rank: busbw * time is that traffic.
  const uint64_t bytes = 4ull << 30;
  const double time_us = 2e6;
  const double busbw = algbw_gbps(bytes, time_us) * busbw_factor(OpType::allreduce, 4);
  EXPECT_DOUBLE_EQ(busbw * 1e9 * time_us * 1e-6, 6.0 * (1ull << 30));
}

TEST(BenchMath, AlgorithmBandwidthIsGigabytesPerSecond) {
  EXPECT_DOUBLE_EQ(algbw_gbps(1000000000, 1e6), 1.0);
  EXPECT_DOUBLE_EQ(algbw_gbps(1024, 1.0), 1.024);
  EXPECT_DOUBLE_EQ(algbw_gbps(1024, 0.0), 0.0);
}

TEST(BenchMath, Median) {
  EXPECT_DOUBLE_EQ(median({}), 0.0);
  EXPECT_DOUBLE_EQ(median({5}), 5.0);
  EXPECT_DOUBLE_EQ(median({3, 1, 2}), 2.0);
  EXPECT_DOUBLE_EQ(median({4, 1, 3, 2}), 2.5);
  EXPECT_DOUBLE_EQ(median({100, 1, 1, 1, 1}), 1.0);  // one slow outlier does not move it
}

TEST(BenchMath, TimeStats) {
  const TimeStats t = time_stats({4, 1, 3, 2});
  EXPECT_DOUBLE_EQ(t.median, 2.5);
  EXPECT_DOUBLE_EQ(t.min, 1.0);
  EXPECT_DOUBLE_EQ(t.max, 4.0);
  EXPECT_DOUBLE_EQ(t.stddev, std::sqrt(5.0 / 3.0));  // sample standard deviation
  const TimeStats one = time_stats({7});
  EXPECT_DOUBLE_EQ(one.median, 7.0);
  EXPECT_DOUBLE_EQ(one.min, 7.0);
  EXPECT_DOUBLE_EQ(one.max, 7.0);
  EXPECT_DOUBLE_EQ(one.stddev, 0.0);
  EXPECT_DOUBLE_EQ(time_stats({}).max, 0.0);
  EXPECT_DOUBLE_EQ(time_stats({5, 5, 5}).stddev, 0.0);
}

// ---- command line --------------------------------------------------------------------------

TEST(BenchArgs, Defaults) {
  const BenchConfig c = parse_bench_args({"allreduce"});
  EXPECT_EQ(c.collective, OpType::allreduce);
  EXPECT_EQ(c.sizes.min_bytes, KiB);
  EXPECT_EQ(c.sizes.max_bytes, 32 * MiB);
  EXPECT_EQ(c.sizes.factor, 2u);
  EXPECT_EQ(c.iters, 20);
  EXPECT_EQ(c.warmup_iters, 5);
  EXPECT_TRUE(c.check);
  EXPECT_EQ(c.op, RedOp::sum);
  EXPECT_EQ(c.dtype, DataType::f32);
  EXPECT_EQ(c.root, 0);
  EXPECT_EQ(c.combine, RankCombine::max);
  EXPECT_TRUE(c.algos.empty());
  EXPECT_TRUE(c.blocking);
  EXPECT_FALSE(c.timeout_seconds.has_value());
  EXPECT_FALSE(c.uneven);
  EXPECT_FALSE(c.stats);
  EXPECT_TRUE(c.csv_path.empty());
  EXPECT_TRUE(c.json_path.empty());
}

TEST(BenchArgs, ShortFlags) {
  const BenchConfig c = parse_bench_args(
      {"reducescatter", "-b", "8", "-e", "1M", "-f", "4", "-n", "7", "-w", "0", "-c", "0", "-o",
       "max", "-d", "bf16", "-r", "1", "-a", "0", "--algo", "ring,all", "--csv", "x.csv",
       "--json", "y.json", "-z", "0", "--timeout", "2.5", "--stats"});
  EXPECT_EQ(c.collective, OpType::reducescatter);
  EXPECT_EQ(c.sizes.min_bytes, 8u);
  EXPECT_EQ(c.sizes.max_bytes, MiB);
  EXPECT_EQ(c.sizes.factor, 4u);
  EXPECT_EQ(c.iters, 7);
  EXPECT_EQ(c.warmup_iters, 0);
  EXPECT_FALSE(c.check);
  EXPECT_EQ(c.op, RedOp::max);
  EXPECT_EQ(c.dtype, DataType::bf16);
  EXPECT_EQ(c.root, 1);
  EXPECT_EQ(c.combine, RankCombine::rank0);
  EXPECT_EQ(c.algos, (std::vector<std::string>{"ring", "all"}));
  EXPECT_EQ(c.csv_path, "x.csv");
  EXPECT_EQ(c.json_path, "y.json");
  EXPECT_FALSE(c.blocking);
  EXPECT_DOUBLE_EQ(c.timeout_seconds.value_or(0), 2.5);
  EXPECT_TRUE(c.stats);
}

TEST(BenchArgs, LongFlagsAndStepBytes) {
  const BenchConfig c =
      parse_bench_args({"allgather", "--minbytes=1K", "--maxbytes", "64K", "--stepbytes", "1K",
                        "--iters=3", "--warmup_iters", "1", "--op", "avg", "--datatype", "u8",
                        "--root", "2", "--average", "1", "--blocking", "1", "--check", "1"});
  EXPECT_EQ(c.collective, OpType::allgather);
  EXPECT_EQ(c.sizes.min_bytes, KiB);
  EXPECT_EQ(c.sizes.max_bytes, 64 * KiB);
  EXPECT_EQ(c.sizes.factor, 1u);
  EXPECT_EQ(c.sizes.step_bytes, KiB);
  EXPECT_EQ(c.iters, 3);
  EXPECT_EQ(c.warmup_iters, 1);
  EXPECT_EQ(c.op, RedOp::avg);
  EXPECT_EQ(c.dtype, DataType::u8);
  EXPECT_EQ(c.root, 2);
  EXPECT_EQ(c.combine, RankCombine::mean);
  EXPECT_TRUE(c.blocking);
  EXPECT_EQ(size_sequence(c.sizes).size(), 64u);
}

TEST(BenchArgs, EveryCollectiveAndDatatypeParses) {
  for (const char* name : {"allreduce", "reducescatter", "allgather", "broadcast", "reduce",
                           "alltoall", "gather", "scatter", "alltoallv", "gatherv", "scatterv",
                           "allgatherv", "reducescatterv"}) {
    EXPECT_EQ(parse_bench_args({name}).collective, parse_optype(name)) << name;
  }
  for (DataType dt : kAllDataTypes) {
    EXPECT_EQ(parse_bench_args({"allreduce", "-d", std::string(to_string(dt))}).dtype, dt);
  }
  for (RedOp op : kAllRedOps) {
    EXPECT_EQ(parse_bench_args({"allreduce", "-o", std::string(to_string(op))}).op, op);
  }
}

TEST(BenchArgs, UnevenIsForTheVectorForms) {
  const BenchConfig c = parse_bench_args({"alltoallv", "--uneven", "-r", "2"});
  EXPECT_EQ(c.collective, OpType::alltoallv);
  EXPECT_TRUE(c.uneven);
  EXPECT_EQ(c.root, 2);
  for (const char* name : {"gatherv", "scatterv", "allgatherv", "reducescatterv"}) {
    EXPECT_TRUE(parse_bench_args({name, "--uneven"}).uneven) << name;
  }
}

int usage_exit_code(const std::vector<std::string>& args) {
  try {
    parse_bench_args(args);
  } catch (const UsageError& e) {
    return e.exit_code;
  }
  return -1;  // parsed
}

TEST(BenchArgs, RejectsBadCommandLines) {
  const std::vector<std::vector<std::string>> bad = {
      {},                                          // no collective
      {"barrier"},                                 // not a benchmarked collective
      {"allreduce", "extra"},                      // stray positional
      {"allreduce", "-b", "1Q"},                   // malformed size
      {"allreduce", "-b", "2M", "-e", "1M"},       // min > max
      {"allreduce", "-f", "1"},                    // factor that never grows
      {"allreduce", "-i", "0"},                    // step that never grows
      {"allreduce", "-f", "2", "-i", "4"},         // both growth rules
      {"allreduce", "-n", "0"},
      {"allreduce", "-w", "-1"},
      {"allreduce", "-c", "2"},
      {"allreduce", "-z", "3"},
      {"allreduce", "-a", "4"},
      {"allreduce", "-r", "-1"},
      {"allreduce", "-o", "xor"},
      {"allreduce", "-d", "f8"},
      {"allreduce", "--timeout", "0"},
      {"allreduce", "--no-such-flag"},
      {"alltoall", "--uneven"},                    // --uneven is for the v-forms
      {"allreduce", "--uneven"},
      {"send"},
      {"alltoallw"},
  };
  for (const auto& args : bad) {
    std::string joined;
    for (const auto& a : args) joined += a + " ";
    EXPECT_EQ(usage_exit_code(args), 2) << joined;
  }
}

TEST(BenchArgs, HelpExitsZeroWithTheFlags) {
  try {
    parse_bench_args({"--help"});
    FAIL() << "--help should stop parsing";
  } catch (const UsageError& e) {
    EXPECT_EQ(e.exit_code, 0);
    const std::string text = e.what();
    for (const char* flag : {"--minbytes", "--maxbytes", "--stepfactor", "--stepbytes", "--iters",
                             "--warmup_iters", "--check", "--op", "--datatype", "--root",
                             "--average", "--algo", "--csv", "--json", "--blocking",
                             "--timeout", "--uneven", "--stats", "alltoallv", "reducescatterv"}) {
      EXPECT_NE(text.find(flag), std::string::npos) << flag;
    }
  }
}

TEST(BenchArgs, ResolvesAlgorithms) {
  const std::vector<std::string> available = {"ring", "chain"};
  using Names = std::vector<std::string>;
  EXPECT_EQ(resolve_algos({}, available), Names{""});
  EXPECT_EQ(resolve_algos({"auto"}, available), Names{""});
  EXPECT_EQ(resolve_algos({"ring"}, available), Names{"ring"});
  EXPECT_EQ(resolve_algos({"all"}, available), (Names{"ring", "chain"}));
  EXPECT_EQ(resolve_algos({"chain", "all", "auto", "ring"}, available),
            (Names{"chain", "ring", ""}));
}

TEST(BenchArgs, UnknownAlgorithmIsRejectedWithTheList) {
  try {
    resolve_algos({"ring", "tree"}, {"ring"});
    FAIL() << "tree is not available";
  } catch (const UsageError& e) {
    EXPECT_EQ(e.exit_code, 2);
    const std::string text = e.what();
    EXPECT_NE(text.find("'tree'"), std::string::npos) << text;
    EXPECT_NE(text.find("ring"), std::string::npos) << text;
  }
}

// ---- what each rank checks ------------------------------------------------------------------

constexpr OpType kBenchmarked[] = {
    OpType::allreduce, OpType::reducescatter, OpType::allgather, OpType::broadcast,
    OpType::reduce,    OpType::alltoall,      OpType::gather,    OpType::scatter,
    OpType::alltoallv, OpType::gatherv,       OpType::scatterv,  OpType::allgatherv,
    OpType::reducescatterv};

// Elements a rank receives (and checks) in all.
size_t received_elements(OpType c, const Layout& l, int rank, int root) {
  const size_t own = l.blocks.empty() ? 0 : l.blocks[static_cast<size_t>(rank)];
  switch (c) {
    case OpType::reduce:
    case OpType::gather:
    case OpType::gatherv: return rank == root ? l.count : 0;
    case OpType::reducescatter:
    case OpType::reducescatterv:
    case OpType::scatter:
    case OpType::scatterv: return own;
    default: return l.count;
  }
}

// On every rank the checked blocks tile what it receives, inside its recv buffer, and each
// names a span its source wrote as input (or of the reduction, over the whole count).
TEST(BenchPlan, EveryReceivedElementIsCheckedOnceAgainstWhatItsSourceWrote) {
  for (OpType c : kBenchmarked) {
    EXPECT_TRUE(is_benchmarked(c)) << to_string(c);
    for (int n : {1, 2, 3, 4, 7}) {
      for (bool uneven : {false, true}) {
        for (int root : {0, n - 1}) {
          const Layout l = layout_for(c, 4000, 4, n, uneven);
          std::vector<size_t> written(static_cast<size_t>(n));
          for (int r = 0; r < n; ++r) {
            written[static_cast<size_t>(r)] =
                data_plan(c, l, vector_args(c, l, r), r, n, root).input_count;
            EXPECT_LE(written[static_cast<size_t>(r)], l.send_count);
          }
          for (int r = 0; r < n; ++r) {
            const std::string where = std::string(to_string(c)) + " n=" + std::to_string(n) +
                                      " rank " + std::to_string(r) + " root " +
                                      std::to_string(root) + (uneven ? " uneven" : "");
            const DataPlan p = data_plan(c, l, vector_args(c, l, r), r, n, root);
            size_t end = 0, checked = 0;
            for (const ExpectedBlock& o : p.outputs) {
              EXPECT_EQ(o.offset, end) << where;  // in order, no gap, no overlap
              end = o.offset + o.count;
              checked += o.count;
              if (o.source == kReduced) {
                EXPECT_LE(o.first + o.count, l.count) << where;
              } else {
                ASSERT_GE(o.source, 0) << where;
                ASSERT_LT(o.source, n) << where;
                EXPECT_LE(o.first + o.count, written[static_cast<size_t>(o.source)]) << where;
              }
            }
            EXPECT_LE(end, l.recv_count) << where;
            EXPECT_EQ(checked, received_elements(c, l, r, root)) << where;
          }
        }
      }
    }
  }
}

TEST(BenchPlan, AllToAllExpectsTheBlockEachPeerSendsIt) {
  for (OpType c : {OpType::alltoall, OpType::alltoallv}) {
    for (int n : {2, 3, 5}) {
      const Layout l = layout_for(c, 4004, 4, n, c == OpType::alltoallv);
      for (int r = 0; r < n; ++r) {
        const DataPlan p = data_plan(c, l, vector_args(c, l, r), r, n, 0);
        ASSERT_EQ(p.outputs.size(), static_cast<size_t>(n));
        for (int s = 0; s < n; ++s) {
          const VectorArgs sender = vector_args(c, l, s);
          const ExpectedBlock& o = p.outputs[static_cast<size_t>(s)];
          EXPECT_EQ(o.source, s);
          EXPECT_EQ(o.count, sender.send_counts[static_cast<size_t>(r)]);
          EXPECT_EQ(o.first, sender.send_displs[static_cast<size_t>(r)]);
        }
      }
    }
  }
}

TEST(BenchPlan, RootedCollectivesUseTheRootsBlocks) {
  const Layout l = layout_for(OpType::scatterv, 1000, 4, 3, true);  // blocks 0, 83, 167
  const DataPlan p = data_plan(OpType::scatterv, l, vector_args(OpType::scatterv, l, 2), 2, 3, 1);
  ASSERT_EQ(p.outputs.size(), 1u);
  EXPECT_EQ(p.outputs[0].source, 1);
  EXPECT_EQ(p.outputs[0].first, 83u);
  EXPECT_EQ(p.outputs[0].count, 167u);
  EXPECT_EQ(p.input_count, 0u);  // only the root sends
  EXPECT_TRUE(data_plan(OpType::gatherv, l, vector_args(OpType::gatherv, l, 0), 0, 3, 1)
                  .outputs.empty());  // only the root receives
  EXPECT_TRUE(has_root(OpType::gather) && has_root(OpType::scatterv));
  EXPECT_FALSE(has_root(OpType::alltoall));
  EXPECT_TRUE(is_reducing(OpType::reducescatterv));
  EXPECT_FALSE(is_reducing(OpType::allgatherv));
}

// ---- verification data ---------------------------------------------------------------------

TEST(BenchData, InputsRepeatWithThePatternPeriod) {
  for (OpType c : {OpType::allreduce, OpType::allgather}) {
    for (RedOp op : kAllRedOps) {
      for (size_t i = 0; i < 50; ++i) {
        EXPECT_EQ(input_value(c, op, DataType::i32, 5, 3, i),
                  input_value(c, op, DataType::i32, 5, 3, i + kPatternPeriod));
      }
    }
  }
}

// Every partial result of a reduction, in any order, stays within the range where the type is
// exact (floats) or does not overflow (products and extrema on integers), and unsigned types
// get no negative input: so the expected result is exact whatever the algorithm.
TEST(BenchData, ReductionsAreExactInAnyOrder) {
  for (DataType dt : kAllDataTypes) {
    for (RedOp op : kAllRedOps) {
      for (int n : {1, 2, 3, 4, 7, 8, 64, 100, 700}) {
        for (size_t j = 0; j < kPatternPeriod; ++j) {
          int64_t magnitude_sum = 0;
          int64_t magnitude_prod = 1;
          for (int r = 0; r < n; ++r) {
            const int64_t v = input_value(OpType::allreduce, op, dt, n, r, j);
            if (is_unsigned_type(dt)) {
              ASSERT_GE(v, 0);
            }
            ASSERT_LE(std::llabs(v), 22);  // fits every type, i8 included
            magnitude_sum += std::llabs(v);
            if (op == RedOp::prod) magnitude_prod *= std::llabs(v);
          }
          if (op == RedOp::sum || op == RedOp::avg) {
            if (is_float(dt)) {
              ASSERT_LE(magnitude_sum, exact_integer_limit(dt))
                  << to_string(dt) << " n=" << n << " j=" << j;
            }
          } else if (op == RedOp::prod) {
            ASSERT_LE(magnitude_prod, 8) << to_string(dt) << " n=" << n << " j=" << j;
          }
        }
      }
    }
  }
}

TEST(BenchData, ExpectedReductions) {
  // Element 0 of 2 ranks: inputs (0%7)-3 = -3 and (1%7)-3 = -2.
  EXPECT_EQ(expected_reduction(RedOp::sum, DataType::f32, 2, 0), -5);
  EXPECT_EQ(expected_reduction(RedOp::min, DataType::i32, 2, 0),
            std::min(input_value(OpType::allreduce, RedOp::min, DataType::i32, 2, 0, 0),
                     input_value(OpType::allreduce, RedOp::min, DataType::i32, 2, 1, 0)));
  // Integer avg truncates toward zero, as hoop's does.
  EXPECT_EQ(expected_reduction(RedOp::avg, DataType::i32, 2, 0), -2);
  // Floats keep the sum: the division is done in the element type when storing it.
  EXPECT_EQ(expected_reduction(RedOp::avg, DataType::f32, 2, 0), -5);
  // u8 sums wrap: element 0 over 100 ranks sums r % 7 = 14 * 21 + 0 + 1 = 295 -> 39.
  EXPECT_EQ(expected_reduction(RedOp::sum, DataType::u8, 100, 0), 295 - 256);
  // Integer avg divides the wrapped sum.
  EXPECT_EQ(expected_reduction(RedOp::avg, DataType::u8, 100, 0), 0);  // 39 / 100
  // Products: element 3 has factors of 2 from ranks 0..2, sign flips from ranks r with
  // (r + 3) % 3 == 0, i.e. ranks 0 and 3.
  EXPECT_EQ(expected_reduction(RedOp::prod, DataType::f64, 4, 3), 8);
  EXPECT_EQ(expected_reduction(RedOp::prod, DataType::u32, 4, 3), 8);
  EXPECT_EQ(expected_reduction(RedOp::prod, DataType::i8, 1, 3), -2);
}

TEST(BenchData, CollectivesThatMoveDataShareThePattern) {
  for (OpType c : {OpType::alltoall, OpType::alltoallv, OpType::gather, OpType::gatherv,
                   OpType::scatter, OpType::scatterv, OpType::allgatherv, OpType::broadcast}) {
    for (size_t i = 0; i < 20; ++i) {
      EXPECT_EQ(input_value(c, RedOp::sum, DataType::i32, 4, 3, i),
                input_value(OpType::allgather, RedOp::sum, DataType::i32, 4, 3, i));
    }
  }
  EXPECT_EQ(input_value(OpType::reducescatterv, RedOp::max, DataType::i32, 4, 3, 5),
            input_value(OpType::allreduce, RedOp::max, DataType::i32, 4, 3, 5));
}

TEST(BenchData, GatheredBlocksDifferFromRankToRank) {
  std::set<int64_t> first_elements;
  for (int r = 0; r < 101; ++r) {
    first_elements.insert(input_value(OpType::allgather, RedOp::sum, DataType::i8, 101, r, 0));
  }
  EXPECT_EQ(first_elements.size(), 101u);
}

}  // namespace
}  // namespace hoop::bench
