// HOOP_TRACE: a 4-rank ring AllReduce over real processes leaves one merged Chrome trace whose
// steps, per rank, are exactly those of the ring schedule (kind, peer, bytes, step number).
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <tuple>
#include <vector>

#include "hoop/communicator.h"
#include "schedule/schedule.h"
#include "support/spawn.h"

namespace hoop::test {
namespace {

namespace fs = std::filesystem;

// (step, kind, peer, bytes), sorted: what one rank did in one operation.
using StepRecord = std::tuple<int, std::string, int, uint64_t>;

std::vector<StepRecord> expected_steps(const schedule::RankSchedule& s) {
  std::vector<StepRecord> out;
  for (size_t k = 0; k < s.steps.size(); ++k) {
    for (const auto& a : s.steps[k].actions) {
      switch (a.kind) {
        case schedule::ActionKind::send:
          out.emplace_back(static_cast<int>(k), "send", a.peer, a.src.count * sizeof(float));
          break;
        case schedule::ActionKind::recv_copy:
          out.emplace_back(static_cast<int>(k), "recv", a.peer, a.dst.count * sizeof(float));
          break;
        case schedule::ActionKind::recv_reduce:
          out.emplace_back(static_cast<int>(k), "recv-reduce", a.peer, a.dst.count * sizeof(float));
          break;
        case schedule::ActionKind::copy:
          out.emplace_back(static_cast<int>(k), "copy", -1, a.dst.count * sizeof(float));
          break;
        case schedule::ActionKind::finish_avg:
          out.emplace_back(static_cast<int>(k), "finish-avg", -1, a.dst.count * sizeof(float));
          break;
        default: break;  // shared-region actions: not in the schedules traced here
      }
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

TEST(Trace, RingAllReduceStepsMatchTheSchedule) {
  const fs::path dir = fs::temp_directory_path() / ("hoop-trace-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const fs::path file = dir / "trace.json";
  constexpr int kRanks = 4;
  constexpr size_t kCount = 1003;  // not a multiple of the rank count: uneven chunks
  SpawnOptions opts;
  opts.env = {{"HOOP_TRACE", file.string()}, {"HOOP_TRANSPORT", "shm"}};
  auto results = run_ranks(kRanks, [&](RankContext& ctx) {
    auto comm = ctx.make_comm();
    std::vector<float> in(kCount, static_cast<float>(ctx.rank + 1)), out(kCount);
    OpOptions o;
    o.algo = "ring";
    comm->allreduce(in.data(), out.data(), kCount, DataType::f32, RedOp::sum, o);
    comm->allreduce(in.data(), out.data(), kCount, DataType::f32, RedOp::sum, o);
  }, opts);
  ASSERT_TRUE(all_ok(results));
  ASSERT_TRUE(fs::exists(file)) << "no merged trace at " << file;
  std::ifstream f(file);
  const auto trace = nlohmann::json::parse(f);
  ASSERT_TRUE(trace.contains("traceEvents"));

  std::map<int, std::vector<StepRecord>> seen;  // rank -> steps of the first AllReduce
  std::map<int, int> ops;                        // rank -> AllReduce op events
  for (const auto& e : trace["traceEvents"]) {
    if (e.value("ph", "") != "X") continue;
    const int rank = e["pid"].get<int>();
    const auto& args = e["args"];
    if (e["cat"] == "op") {
      ops[rank] += e["name"].get<std::string>().rfind("allreduce #", 0) == 0;
      EXPECT_EQ(args["algorithm"], "ring");
      EXPECT_GE(e["dur"].get<double>(), 0.0);
      continue;
    }
    if (args["op"] != "allreduce" || args["seq"].get<int>() != 1) continue;
    seen[rank].emplace_back(args["step"].get<int>(), e["name"].get<std::string>(),
                            args.contains("peer") ? args["peer"].get<int>() : -1,
                            args["bytes"].get<uint64_t>());
  }
  for (int r = 0; r < kRanks; ++r) {
    schedule::CollectiveDesc d;
    d.op = OpType::allreduce;
    d.count = kCount;
    d.nranks = kRanks;
    auto got = seen[r];
    std::sort(got.begin(), got.end());
    EXPECT_EQ(got, expected_steps(schedule::ring_allreduce(d, r))) << "rank " << r;
    EXPECT_EQ(ops[r], 2) << "rank " << r << " should show both AllReduce calls";
  }
  // The per-rank parts were merged away.
  for (const auto& entry : fs::directory_iterator(dir)) {
    EXPECT_EQ(entry.path(), file) << "left behind: " << entry.path();
  }
  fs::remove_all(dir);
}

}  // namespace
}  // namespace hoop::test
