// HOOP_TRACE: a 4-rank ring AllReduce over real processes leaves one merged Chrome trace whose
// steps, per rank, are exactly those of the ring schedule (kind, peer, bytes, step number); so
// does a 3-rank shm-direct AllReduce, whose steps are the shared region's (publish, wait, read,
// read-reduce).
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <tuple>
#include <vector>

#include "comm/region_shape.h"
#include "engine/timeline.h"
#include "hoop/communicator.h"
#include "schedule/schedule.h"
#include "support/spawn.h"

namespace hoop::test {
namespace {

namespace fs = std::filesystem;

// (step, kind, peer, bytes), sorted: what one rank did in one operation.
using StepRecord = std::tuple<int, std::string, int, uint64_t>;

std::vector<StepRecord> expected_steps(const schedule::RankSchedule& s) {
  using schedule::ActionKind;
  std::vector<StepRecord> out;
  for (size_t k = 0; k < s.steps.size(); ++k) {
    for (const auto& a : s.steps[k].actions) {
      // Local work names no peer; a flag moves no data.
      const bool local = a.kind == ActionKind::copy || a.kind == ActionKind::finish_avg || a.kind == ActionKind::publish;
      const bool moves = a.kind != ActionKind::publish && a.kind != ActionKind::wait_flag;
      const size_t count = a.kind == ActionKind::send ? a.src.count : a.dst.count;
      out.emplace_back(static_cast<int>(k), engine::action_name(a.kind), local ? -1 : a.peer,
                       moves ? count * sizeof(float) : 0);
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

// Runs two AllReduces of `algo` on `nranks` ranks with HOOP_TRACE and checks, per rank, that the
// first one's traced steps are those of `schedule_of(rank)`.
void expect_trace_matches(const char* algo, int nranks, size_t count,
                          const std::function<schedule::RankSchedule(int)>& schedule_of) {
  const fs::path dir = fs::temp_directory_path() / ("hoop-trace-" + std::to_string(::getpid()) + "-" + algo);
  fs::create_directories(dir);
  const fs::path file = dir / "trace.json";
  SpawnOptions opts;
  opts.env = {{"HOOP_TRACE", file.string()}, {"HOOP_TRANSPORT", "shm"}};
  auto results = run_ranks(nranks, [&](RankContext& ctx) {
    auto comm = ctx.make_comm();
    std::vector<float> in(count, static_cast<float>(ctx.rank + 1)), out(count);
    OpOptions o;
    o.algo = algo;
    comm->allreduce(in.data(), out.data(), count, DataType::f32, RedOp::sum, o);
    comm->allreduce(in.data(), out.data(), count, DataType::f32, RedOp::sum, o);
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
      EXPECT_EQ(args["algorithm"], algo);
      EXPECT_GE(e["dur"].get<double>(), 0.0);
      continue;
    }
    if (args["op"] != "allreduce" || args["seq"].get<int>() != 1) continue;
    seen[rank].emplace_back(args["step"].get<int>(), e["name"].get<std::string>(),
                            args.contains("peer") ? args["peer"].get<int>() : -1,
                            args["bytes"].get<uint64_t>());
  }
  for (int r = 0; r < nranks; ++r) {
    auto got = seen[r];
    std::sort(got.begin(), got.end());
    EXPECT_EQ(got, expected_steps(schedule_of(r))) << "rank " << r;
    EXPECT_EQ(ops[r], 2) << "rank " << r << " should show both AllReduce calls";
  }
  // The per-rank parts were merged away.
  for (const auto& entry : fs::directory_iterator(dir)) {
    EXPECT_EQ(entry.path(), file) << "left behind: " << entry.path();
  }
  fs::remove_all(dir);
}

TEST(Trace, RingAllReduceStepsMatchTheSchedule) {
  constexpr int kRanks = 4;
  constexpr size_t kCount = 1003;  // not a multiple of the rank count: uneven chunks
  schedule::CollectiveDesc d;
  d.op = OpType::allreduce;
  d.count = kCount;
  d.nranks = kRanks;
  expect_trace_matches("ring", kRanks, kCount, [&](int r) { return schedule::ring_allreduce(d, r); });
}

// shm-direct runs on the engine like the others: its steps (the cells here) are traced too.
TEST(Trace, ShmDirectAllReduceStepsMatchTheSchedule) {
  constexpr int kRanks = 3;
  constexpr size_t kCount = 1003;
  schedule::CollectiveDesc d;
  d.op = OpType::allreduce;
  d.count = kCount;
  d.nranks = kRanks;
  d.region = detail::region_shape(detail::direct_tunables(kRanks, 0), sizeof(float), false);
  expect_trace_matches(schedule::kDirectAlgorithm, kRanks, kCount,
                       [&](int r) { return schedule::direct_schedule(d, r); });
}

}  // namespace
}  // namespace hoop::test
