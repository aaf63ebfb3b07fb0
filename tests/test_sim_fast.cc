// The symmetric pricing (tuner/pricing.h) that hoop-sim runs by default, against the full walk
// of every rank's schedule (hoop-sim --exact): every algorithm of every collective hoop-sim
// prices, on N = 2..256 (powers of two, primes, others) over several host layouts, within 1%
// and with the same steps and the same pick; and hoop-sim's --plot and --exact as users run them.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "comm/algo_choice.h"
#include "support/test_scale.h"
#include "support/tool_process.h"
#include "tuner/tuner.h"

namespace hoop {
namespace {

// Ranks in blocks of `per_host` consecutive ranks (0: all on one host).
schedule::Topology blocks_of(int n, int per_host) {
  schedule::Topology t;
  for (int r = 0; r < n; ++r) t.host_of_rank.push_back(per_host == 0 ? 0 : r / per_host);
  return t;
}

struct Case {
  OpType op;
  int n;
  int per_host;
  size_t count;
};

std::string describe(const Case& c) {
  return fmt::format("{} N={} per_host={} count={}", to_string(c.op), c.n, c.per_host, c.count);
}

void expect_same_prices(const Case& c) {
  const schedule::Topology topo = blocks_of(c.n, c.per_host);
  tuner::Tuner fast(tuner::CostModel{}, topo, tuner::LinkView::Force::none);
  tuner::Tuner exact(tuner::CostModel{}, topo, tuner::LinkView::Force::none);
  fast.set_pricing(tuner::Pricing::symmetric);
  exact.set_pricing(tuner::Pricing::full_walk);
  schedule::CollectiveDesc d;
  d.op = c.op;
  d.count = c.count;
  d.nranks = c.n;
  d.root = c.n / 3;  // not rank 0: the rooted schedules are not symmetric around it
  const auto names = detail::candidate_algorithms(c.op);
  const auto f = fast.price_all(d, sizeof(float), names);
  const auto e = exact.price_all(d, sizeof(float), names);
  ASSERT_EQ(f.size(), e.size()) << describe(c);
  for (size_t i = 0; i < f.size(); ++i) {
    const auto& pf = f[i].prediction;
    const auto& pe = e[i].prediction;
    const std::string what = describe(c) + " " + f[i].algorithm + " x" + std::to_string(f[i].nchannels);
    ASSERT_EQ(f[i].algorithm, e[i].algorithm) << what;
    ASSERT_EQ(f[i].nchannels, e[i].nchannels) << what;
    ASSERT_EQ(pf.applicable, pe.applicable) << what << ": " << pf.why_not << " / " << pe.why_not;
    if (!pe.applicable) continue;
    EXPECT_NEAR(pf.seconds, pe.seconds, 0.01 * pe.seconds) << what;
    EXPECT_EQ(pf.steps, pe.steps) << what;
    EXPECT_NEAR(static_cast<double>(pf.max_rank_bytes_sent), static_cast<double>(pe.max_rank_bytes_sent),
                0.01 * static_cast<double>(pe.max_rank_bytes_sent) + 64)
        << what;
  }
  const auto pick_f = tuner::Tuner::best(f), pick_e = tuner::Tuner::best(e);
  EXPECT_EQ(pick_f.algorithm, pick_e.algorithm) << describe(c);
  EXPECT_EQ(pick_f.nchannels, pick_e.nchannels) << describe(c);
}

const std::vector<OpType> kSimulatedOps = {OpType::allreduce, OpType::reducescatter, OpType::allgather,
                                           OpType::broadcast, OpType::reduce,        OpType::alltoall,
                                           OpType::gather,    OpType::scatter};

// Powers of two, primes, and others; the largest where the full walk is still quick (under
// HOOP_TEST_SCALE=small, up to 97).
std::vector<int> rank_counts() {
  std::vector<int> counts = {2, 3, 4, 5, 7, 8, 12, 16, 31, 48, 64, 97, 128, 255, 256};
  if (test::small_scale()) std::erase_if(counts, [](int n) { return n > 97 || n == 48; });
  return counts;
}

// One host, one rank per host, blocks of 4 (N=5, 7, ... leave a short last host), blocks of 8.
const std::vector<int> kPerHost = {0, 1, 4, 8};

TEST(SimFast, EveryAlgorithmMatchesTheFullWalk) {
  for (OpType op : kSimulatedOps) {
    for (int n : rank_counts()) {
      for (int per_host : kPerHost) {
        // 1 element (empty chunks), a count that N rarely divides, and one of many tree chunks.
        for (size_t count : {size_t{1}, size_t{12347}, size_t{1} << 18}) {
          if (n > 64 && count > 20000 && op != OpType::allreduce) continue;  // keep the walk quick
          expect_same_prices({op, n, per_host, count});
        }
      }
    }
  }
}

// The tree with many more chunks than it is deep: priced from two short pipelines (long_pipeline.h),
// from just past their length (the chunk counts below 20) to many times it; and beyond 256 ranks.
TEST(SimFast, LongTreePipelinesMatchTheFullWalk) {
  constexpr size_t kChunk = schedule::kTreeChunkElements;
  for (int n : {2, 3, 7, 16, 31, 64, 97, 128, 300, 700}) {
    for (int per_host : kPerHost) {
      if (n > 256 && (per_host == 0 || per_host == 4)) continue;  // keep the walk quick
      const schedule::Topology topo = blocks_of(n, per_host);
      const tuner::LinkView links{&topo, tuner::LinkView::Force::none};
      for (OpType op : {OpType::allreduce, OpType::reduce}) {
        for (size_t count : {size_t{1} << 23, 2 * 90 * kChunk + 12345, 2 * 13 * kChunk, 2 * 19 * kChunk + 7}) {
          schedule::CollectiveDesc d;
          d.op = op;
          d.count = count;
          d.nranks = n;
          d.root = n / 3;
          d.topology = &topo;
          const std::string what = fmt::format("tree {} N={} per_host={} count={}", to_string(op), n, per_host, count);
          const auto f = tuner::price(tuner::Pricing::symmetric, "tree", d, 4, links, tuner::CostModel{});
          const auto e = tuner::price(tuner::Pricing::full_walk, "tree", d, 4, links, tuner::CostModel{});
          ASSERT_TRUE(f.applicable && e.applicable) << what;
          EXPECT_NEAR(f.seconds, e.seconds, 0.01 * e.seconds) << what;
          EXPECT_EQ(f.steps, e.steps) << what;
          EXPECT_NEAR(static_cast<double>(f.max_rank_bytes_sent), static_cast<double>(e.max_rank_bytes_sent),
                      0.01 * static_cast<double>(e.max_rank_bytes_sent))
              << what;
        }
      }
    }
  }
}

// Average and in place: the local work of the ring's and the hierarchical forms (the division,
// the AllGather's own copy, one rank per host's copy) follows the schedules too.
TEST(SimFast, LocalWorkMatchesTheFullWalk) {
  for (int n : {2, 5, 16, 37}) {
    for (int per_host : {1, 4}) {
      const schedule::Topology topo = blocks_of(n, per_host);
      const tuner::LinkView links{&topo, tuner::LinkView::Force::none};
      for (OpType op : {OpType::allreduce, OpType::reducescatter, OpType::allgather}) {
        for (const char* name : {"ring", "hierarchical"}) {
          if (std::string(name) == "hierarchical" && op != OpType::allreduce) continue;
          for (bool in_place : {false, true}) {
            schedule::CollectiveDesc d;
            d.op = op;
            d.count = 100003;
            d.nranks = n;
            d.topology = &topo;
            d.redop = RedOp::avg;
            d.in_place = in_place;
            for (int k : {1, 4}) {
              d.nchannels = k;
              const std::string what = fmt::format("{} {} N={} per_host={} k={} in_place={}", name, to_string(op), n,
                                                   per_host, k, in_place);
              const auto f = tuner::price(tuner::Pricing::symmetric, name, d, 4, links, tuner::CostModel{});
              const auto e = tuner::price(tuner::Pricing::full_walk, name, d, 4, links, tuner::CostModel{});
              ASSERT_TRUE(f.applicable && e.applicable) << what;
              EXPECT_NEAR(f.seconds, e.seconds, 0.01 * e.seconds) << what;
              EXPECT_EQ(f.steps, e.steps) << what;
            }
          }
        }
      }
    }
  }
}

// A forwarded receive is matched to its sender's send by rank, channel and ordinal: with more
// than 256 ranks and many chunks, so that both are large, each rank's time grows by the same
// amount per chunk (the steady state), as the long pipelines assume.
TEST(SimFast, TreeWalkIsLinearInChunksBeyond256Ranks) {
  const int n = 600;
  const schedule::Topology topo = blocks_of(n, 8);
  const tuner::LinkView links{&topo, tuner::LinkView::Force::none};
  std::vector<std::vector<std::pair<int, double>>> times;
  for (size_t chunks : {size_t{40}, size_t{80}, size_t{120}}) {
    schedule::CollectiveDesc d;
    d.op = OpType::allreduce;
    d.count = 2 * chunks * schedule::kTreeChunkElements;
    d.nranks = n;
    d.topology = &topo;
    const auto p = tuner::predict("tree", d, 4, links, tuner::CostModel{}, tuner::Walk::every_rank);
    ASSERT_TRUE(p.applicable) << p.why_not;
    times.push_back(p.rank_seconds);
  }
  ASSERT_EQ(times[0].size(), static_cast<size_t>(n));
  for (size_t i = 0; i < times[0].size(); ++i) {
    const double first = times[1][i].second - times[0][i].second, second = times[2][i].second - times[1][i].second;
    EXPECT_NEAR(first, second, 1e-3 * second) << "rank " << times[0][i].first;
  }
}

// A fast path never spreads over channels: one candidate, priced without building its schedule
// (which for 4,096 ranks and 1 GiB took tens of seconds and gigabytes).
TEST(SimFast, FastPathsArePricedOnOneChannel) {
  const schedule::Topology topo = blocks_of(4096, 8);
  tuner::Tuner t(tuner::CostModel{}, topo, tuner::LinkView::Force::none);
  t.set_pricing(tuner::Pricing::symmetric);
  schedule::CollectiveDesc d;
  d.op = OpType::allreduce;
  d.count = size_t{1} << 28;
  d.nranks = 4096;
  const auto priced = t.price_all(d, sizeof(float), {schedule::kDirectAlgorithm});
  ASSERT_EQ(priced.size(), 1u);
  EXPECT_EQ(priced[0].nchannels, 1);
  EXPECT_FALSE(priced[0].prediction.applicable);  // across hosts
}

test::ToolResult run_sim(std::vector<std::string> args) {
  args.insert(args.begin(), std::string(HOOP_BIN_DIR) + "/hoop-sim");
  test::ToolProcess p(args);
  return p.finish(std::chrono::seconds(300));
}

TEST(SimFast, PlotWritesAPng) {
  const auto dir = std::filesystem::temp_directory_path() / ("hoop-sim-plot-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string png = (dir / "allreduce.png").string();
  const auto r = run_sim({"--ranks", "64", "--hosts", "8", "allreduce", "-b", "1K", "-e", "64M", "--plot", png});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  std::ifstream in(png, std::ios::binary);
  ASSERT_TRUE(in.good()) << png;
  std::string head(8, '\0');
  in.read(head.data(), 8);
  EXPECT_EQ(head, std::string("\x89PNG\r\n\x1a\n", 8));
  EXPECT_GT(std::filesystem::file_size(png), 10000u);  // axes, lines and labels, not an empty image
  EXPECT_FALSE(std::filesystem::exists(png + ".json"));  // the plot's own JSON is removed
  std::filesystem::remove_all(dir);
}

// The v-forms every rank knows all counts of, even and uneven, and the barrier: one pick per row.
TEST(SimFast, PricesVFormsAndBarrier) {
  const std::vector<std::vector<std::string>> runs = {
      {"allgatherv", "-b", "1K", "-e", "1M", "-f", "32"},
      {"allgatherv", "-b", "1K", "-e", "1M", "-f", "32", "--uneven"},
      {"reducescatterv", "-b", "1K", "-e", "1M", "-f", "32", "--uneven"},
      {"barrier"}};
  for (const auto& run : runs) {
    std::vector<std::string> args = {"--ranks", "40", "--hosts", "5"};
    args.insert(args.end(), run.begin(), run.end());
    const auto r = run_sim(args);
    ASSERT_EQ(r.exit_code, 0) << run[0] << r.out << r.err;
    size_t picks = 0;
    for (size_t at = r.out.find("-> pick "); at != std::string::npos; at = r.out.find("-> pick ", at + 1)) ++picks;
    EXPECT_EQ(picks, run[0] == "barrier" ? 1u : 3u) << r.out;  // 1K, 32K, 1M
    EXPECT_EQ(r.out.find("no applicable algorithm"), std::string::npos) << r.out;
  }
  // Their counts are known only to each rank: not priced.
  EXPECT_EQ(run_sim({"--ranks", "8", "alltoallv"}).exit_code, 2);
}

// The sizes are priced on several threads: the same table as on one.
TEST(SimFast, ThreadsPrintTheSameTable) {
  const std::vector<std::string> args = {"--ranks", "300", "--hosts", "38", "allreduce", "-b", "1K", "-e", "256M",
                                         "-f", "4"};
  auto one = args, many = args;
  one.insert(one.end(), {"--threads", "1"});
  many.insert(many.end(), {"--threads", "3"});
  const auto a = run_sim(one), b = run_sim(many);
  ASSERT_EQ(a.exit_code, 0) << a.err;
  ASSERT_EQ(b.exit_code, 0) << b.err;
  EXPECT_EQ(a.out, b.out);
}

TEST(SimFast, ExactWalksEveryRankAndAgrees) {
  const std::vector<std::string> args = {"--ranks", "96", "--hosts", "12", "allreduce", "-b", "1M", "-e", "1M",
                                         "--algo", "ring", "--nchannels", "1"};
  auto exact_args = args;
  exact_args.push_back("--exact");
  const auto fast = run_sim(args), exact = run_sim(exact_args);
  ASSERT_EQ(fast.exit_code, 0) << fast.err;
  ASSERT_EQ(exact.exit_code, 0) << exact.err;
  EXPECT_NE(exact.out.find("every rank's schedule walked (--exact)"), std::string::npos) << exact.out;
  EXPECT_EQ(fast.out.find("every rank's schedule walked"), std::string::npos) << fast.out;
  auto pick_line = [](const std::string& out) { return out.substr(out.find("-> pick")); };
  EXPECT_EQ(pick_line(fast.out), pick_line(exact.out));
}

}  // namespace
}  // namespace hoop
