// hoop-bench's pure logic: command line, sizes, per-collective counts, bandwidth formulas,
// statistics, and the verification data's exactness guarantees.
#include <gtest/gtest.h>

#include <cstdlib>
#include <set>
#include <string>
#include <vector>

#include "../tools/bench/bench_args.h"
#include "../tools/bench/bench_data.h"
#include "../tools/bench/bench_math.h"

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
  EXPECT_TRUE(c.csv_path.empty());
  EXPECT_TRUE(c.json_path.empty());
}

TEST(BenchArgs, ShortFlags) {
  const BenchConfig c = parse_bench_args(
      {"reducescatter", "-b", "8", "-e", "1M", "-f", "4", "-n", "7", "-w", "0", "-c", "0", "-o",
       "max", "-d", "bf16", "-r", "1", "-a", "0", "--algo", "ring,all", "--csv", "x.csv",
       "--json", "y.json", "-z", "0", "--timeout", "2.5"});
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
  for (const char* name : {"allreduce", "reducescatter", "allgather", "broadcast", "reduce"}) {
    EXPECT_NO_THROW(parse_bench_args({name})) << name;
  }
  for (DataType dt : kAllDataTypes) {
    EXPECT_EQ(parse_bench_args({"allreduce", "-d", std::string(to_string(dt))}).dtype, dt);
  }
  for (RedOp op : kAllRedOps) {
    EXPECT_EQ(parse_bench_args({"allreduce", "-o", std::string(to_string(op))}).op, op);
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
                             "--timeout"}) {
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

TEST(BenchData, GatheredBlocksDifferFromRankToRank) {
  std::set<int64_t> first_elements;
  for (int r = 0; r < 101; ++r) {
    first_elements.insert(input_value(OpType::allgather, RedOp::sum, DataType::i8, 101, r, 0));
  }
  EXPECT_EQ(first_elements.size(), 101u);
}

}  // namespace
}  // namespace hoop::bench
