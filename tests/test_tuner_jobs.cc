// The tuner in real jobs: every rank ends with the same cost model and the same choices;
// calibration is cached per host and reused; hoop-sim runs at thousands of ranks.
#include <gtest/gtest.h>
#include <stdio.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <iterator>
#include <nlohmann/json.hpp>
#include <sstream>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include "comm/algo_choice.h"
#include "comm/comm_access.h"
#include "support/spawn.h"
#include "tuner/calibration.h"
#include "tuner/cost_model.h"
#include "tuner/cpu_calibration.h"

namespace hoop::test {
namespace {

struct TempDir {
  std::string path;
  TempDir() {
    char tmpl[] = "/tmp/hoop-tuner-XXXXXX";
    if (!::mkdtemp(tmpl)) throw std::runtime_error("mkdtemp failed");
    path = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
};

// Each rank reports its model (JSON) and its choices for a spread of sizes, then runs an
// AllReduce and reports what the library ran.
void report_model_and_choices(RankContext& ctx) {
  auto comm = ctx.make_comm();
  auto& tuner = detail::CommAccess::impl(*comm).tuner();
  ctx.report("model " + tuner::to_json(tuner.model()));
  std::string picks;
  for (size_t count : {size_t{1}, size_t{1000}, size_t{1} << 16, size_t{1} << 22}) {
    schedule::CollectiveDesc d;
    d.op = OpType::allreduce;
    d.nranks = comm->size();
    d.count = count;
    const auto c = tuner.choose(d, 4, detail::candidate_algorithms(OpType::allreduce));
    picks += fmt::format("{}x{} ", c.algorithm, c.nchannels);
  }
  ctx.report("picks " + picks);
  std::vector<float> v(4096, 1.0f);
  comm->allreduce(v.data(), v.data(), v.size(), DataType::f32, RedOp::sum);
  if (v[0] != static_cast<float>(comm->size())) throw std::runtime_error("wrong sum");
  ctx.report("ran " + comm->last_algorithm());
}

void expect_all_agree(const std::vector<RankResult>& results) {
  ASSERT_FALSE(results.empty());
  for (const auto& r : results) {
    ASSERT_EQ(r.reports.size(), 3u) << "rank " << r.rank;
    for (size_t i = 0; i < 3; ++i) {
      EXPECT_EQ(r.reports[i], results[0].reports[i]) << "rank " << r.rank << " differs from rank 0";
    }
  }
  EXPECT_EQ(results[0].reports[2].rfind("ran ", 0), 0u);
  EXPECT_GT(results[0].reports[2].size(), 4u) << "last_algorithm() is empty";
}

TEST(TunerJobs, ThreeRanksAgreeOnAMeasuredModel) {
  TempDir cache;
  SpawnOptions opts;
  opts.env = {{"XDG_CACHE_HOME", cache.path}, {"HOOP_CALIBRATE", "force"}};
  const auto results = run_ranks(3, report_model_and_choices, opts);
  ASSERT_TRUE(all_ok(results));
  expect_all_agree(results);
  EXPECT_NE(results[0].reports[0].find("\"source\":\"measured\""), std::string::npos) << results[0].reports[0];
}

TEST(TunerJobs, FourRanksOverTcpAgree) {
  TempDir cache;
  SpawnOptions opts;
  opts.env = {{"XDG_CACHE_HOME", cache.path}, {"HOOP_CALIBRATE", "force"}, {"HOOP_TRANSPORT", "tcp"}};
  const auto results = run_ranks(4, report_model_and_choices, opts);
  ASSERT_TRUE(all_ok(results));
  expect_all_agree(results);
  // The tcp class was measured: the cache says so.
  const auto files = std::filesystem::directory_iterator(cache.path + "/hoop");
  int n = 0;
  for (const auto& f : files) {
    std::ifstream in(f.path());
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    EXPECT_NE(text.find("\"measured_tcp\": true"), std::string::npos) << text;
    ++n;
  }
  EXPECT_EQ(n, 1);
}

// Hosts of one machine (a lab of network namespaces; here host ids of their own): where they
// outnumber its cores, the calibration times AllReduces forced to two algorithms to fit the
// tcp hand-over and the call's skew. Those calls must not leave the communicator a tuner made
// with the model from before the calibration: every rank's tuner has the measured model.
TEST(TunerJobs, HostsOfOneMachineFitTheirStepsAndKeepTheMeasuredModel) {
  TempDir cache;
  SpawnOptions opts;
  opts.env = {{"XDG_CACHE_HOME", cache.path}, {"HOOP_CALIBRATE", "force"}};
  const auto results = run_ranks(4, [](RankContext& ctx) {
    ::setenv("HOOP_HOST_ID", fmt::format("one-machine-host-{}", ctx.rank).c_str(), 1);
    report_model_and_choices(ctx);
  }, opts);
  ASSERT_TRUE(all_ok(results));
  expect_all_agree(results);
  const std::string& report = results[0].reports[0];
  const auto model = tuner::model_from_json(report.substr(report.find(' ') + 1));
  EXPECT_EQ(model.source, "measured") << report;
  EXPECT_EQ(model.cores, tuner::machine_cores()) << report;
  EXPECT_GT(model.tcp.cpu, 0.0) << report;
}

// Processes that keep every core busy until the object goes away.
struct BusyCores {
  std::vector<pid_t> pids;
  explicit BusyCores(int n) {
    for (int i = 0; i < n; ++i) {
      const pid_t pid = ::fork();
      if (pid == 0) {
        volatile uint64_t spins = 0;
        for (;;) spins = spins + 1;
      }
      if (pid > 0) pids.push_back(pid);
    }
  }
  ~BusyCores() {
    for (pid_t pid : pids) ::kill(pid, SIGKILL);
    for (pid_t pid : pids) ::waitpid(pid, nullptr, 0);
  }
};

// Nothing shapes loopback. Calibrating over TCP on one host whose cores are busy (four ranks
// and as many spinning processes on this machine's cores), the stream runs well below the
// fastest burst; taken for a token bucket, it would cap every TCP link's receive window at 2 ms
// of that rate. The model must say the link is not shaped.
TEST(TunerJobs, ABusyHostIsNotTakenForAShapedLoopback) {
  TempDir cache;
  SpawnOptions opts;
  opts.env = {{"XDG_CACHE_HOME", cache.path}, {"HOOP_CALIBRATE", "force"}, {"HOOP_TRANSPORT", "tcp"}};
  std::vector<RankResult> results;
  {
    BusyCores busy(4);
    results = run_ranks(4, report_model_and_choices, opts);
  }
  ASSERT_TRUE(all_ok(results));
  expect_all_agree(results);
  const std::string& report = results[0].reports[0];
  const auto model = tuner::model_from_json(report.substr(report.find(' ') + 1));
  EXPECT_EQ(model.source, "measured");
  EXPECT_EQ(model.tcp.sustained, 0.0) << report;
  EXPECT_EQ(tuner::shaped_link_window(model), 0u);
}

std::string model_source_of_job(const std::string& cache_dir, const std::string& calibrate) {
  SpawnOptions opts;
  opts.env = {{"XDG_CACHE_HOME", cache_dir}, {"HOOP_CALIBRATE", calibrate}};
  const auto results = run_ranks(2, [](RankContext& ctx) {
    auto comm = ctx.make_comm();
    ctx.report(detail::CommAccess::impl(*comm).tuner().model().source);
    // The calibration's own messages are not counted as the user's.
    const auto stats = comm->stats();
    if (stats.bytes_sent != 0 || stats.ops != 0) throw std::runtime_error("calibration traffic in the stats");
  }, opts);
  EXPECT_TRUE(all_ok(results));
  if (results.size() != 2 || results[0].reports.size() != 1 || results[1].reports.size() != 1) return "?";
  EXPECT_EQ(results[0].reports[0], results[1].reports[0]);
  return results[0].reports[0];
}

TEST(TunerJobs, CalibrationIsCachedAndReused) {
  TempDir cache;
  EXPECT_EQ(model_source_of_job(cache.path, "1"), "measured");
  const auto files = std::vector<std::filesystem::directory_entry>(
      std::filesystem::directory_iterator(cache.path + "/hoop"), {});
  ASSERT_EQ(files.size(), 1u);
  const std::string path = files[0].path().string();
  EXPECT_EQ(path.rfind(cache.path + "/hoop/calibration-", 0), 0u) << path;
  EXPECT_EQ(model_source_of_job(cache.path, "1"), "cache " + path);
  // The kernel read that single copy pays from: one of the measured sizes, or beyond them.
  const auto measured = tuner::read_calibration_cache(path, true, false);
  ASSERT_TRUE(measured.has_value());
  const size_t read = measured->single_copy_read_bytes;
  EXPECT_TRUE(read >= (16u << 10) && read <= (16u << 20) && (read & (read - 1)) == 0) << read;  // a power of 2
  EXPECT_EQ(model_source_of_job(cache.path, "0"), "defaults");
  EXPECT_EQ(model_source_of_job(cache.path, "force"), "measured");
  // A corrupt cache is measured again and rewritten.
  { std::ofstream(path) << "{ not json"; }
  EXPECT_EQ(model_source_of_job(cache.path, "1"), "measured");
  EXPECT_TRUE(tuner::read_calibration_cache(path, true, false).has_value());
  // A cache of an earlier format (no processor figures) is measured again too.
  {
    std::ifstream in(path);
    nlohmann::json j = nlohmann::json::parse(in);
    j.erase("format");
    std::ofstream(path) << j.dump();
  }
  EXPECT_FALSE(tuner::read_calibration_cache(path, true, false).has_value());
  EXPECT_EQ(model_source_of_job(cache.path, "1"), "measured");
  EXPECT_TRUE(tuner::read_calibration_cache(path, true, false).has_value());
}

// hoop-sim, as users run it.
struct ToolRun {
  int status = -1;
  std::string out;
};

ToolRun run_tool(const std::string& command) {
  ToolRun r;
  FILE* p = ::popen(command.c_str(), "r");
  if (!p) return r;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) r.out.append(buf, n);
  const int st = ::pclose(p);
  r.status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return r;
}

// The communicator remembers its choice per call shape; a forced algorithm is part of the
// shape, so alternating forced and automatic calls of one size each run what they asked for.
// The default model decides the automatic ones (a measured one would make them the machine's).
TEST(TunerJobs, RememberedChoicesFollowTheCallShape) {
  SpawnOptions defaults;
  defaults.env = {{"HOOP_CALIBRATE", "0"}};
  const auto results = run_ranks(2, [](RankContext& ctx) {
    auto comm = ctx.make_comm();
    std::vector<int32_t> v(1000);
    std::string ran;
    for (const char* algo : {"ring", "", "ring", "recursive-doubling", ""}) {
      std::fill(v.begin(), v.end(), 1);
      OpOptions o;
      o.algo = algo;
      comm->allreduce(v.data(), v.data(), v.size(), DataType::i32, RedOp::sum, o);
      if (v[999] != 2) throw std::runtime_error("wrong sum");
      ran += comm->last_algorithm() + " ";
    }
    // The same size as another collective, and broadcasts from two roots.
    std::vector<int32_t> out(2000);
    comm->allgather(v.data(), out.data(), v.size(), DataType::i32);
    ran += comm->last_algorithm() + " ";
    for (int root : {0, 1}) {
      v.assign(v.size(), ctx.rank == root ? 7 + root : 0);
      comm->broadcast(v.data(), v.data(), v.size(), DataType::i32, root);
      if (v[0] != 7 + root) throw std::runtime_error("wrong broadcast");
    }
    ctx.report(ran);
  }, defaults);
  ASSERT_TRUE(all_ok(results));
  for (const auto& r : results) {
    ASSERT_EQ(r.reports.size(), 1u);
    EXPECT_EQ(r.reports[0], "ring shm-direct ring recursive-doubling shm-direct shm-direct ") << "rank " << r.rank;
  }
}

TEST(TunerSim, PricesFourThousandRanks) {
  const auto r = run_tool(std::string(HOOP_BIN_DIR) +
                          "/hoop-sim --ranks 4096 --hosts 512 --link 200Gbps --latency 5us allreduce -b 1M -e 16M -f 16 --nchannels 1 --algo ring,recursive-doubling");
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_NE(r.out.find("4096 ranks on 512 hosts (8 per host)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("sampled ranks"), std::string::npos) << r.out;
  // One pick per size (1M, 16M); every ring row has 2(N-1) steps; no busbw above the link.
  int picks = 0, rows = 0;
  std::istringstream in(r.out);
  for (std::string line; std::getline(in, line);) {
    if (line.find("-> pick ") != std::string::npos) {
      ++picks;
      continue;
    }
    std::istringstream words(line);
    std::vector<std::string> w{std::istream_iterator<std::string>(words), {}};
    auto ring = std::find(w.begin(), w.end(), "ring");
    if (ring == w.end() || w.size() < static_cast<size_t>(ring - w.begin()) + 5) continue;
    ++rows;
    const double busbw = std::stod(*(ring + 3));
    EXPECT_GT(busbw, 0.0) << line;
    EXPECT_LE(busbw, 25.0) << line;  // 200 Gbit/s
    EXPECT_EQ(*(ring + 4), "8190") << line;
  }
  EXPECT_EQ(picks, 2) << r.out;
  EXPECT_EQ(rows, 2) << r.out;
}

TEST(TunerSim, RejectsBadArguments) {
  EXPECT_EQ(run_tool(std::string(HOOP_BIN_DIR) + "/hoop-sim --ranks 8 --link fast allreduce 2>&1").status, 2);
  EXPECT_EQ(run_tool(std::string(HOOP_BIN_DIR) + "/hoop-sim --ranks 8 allsum 2>&1").status, 2);
  const auto ok = run_tool(std::string(HOOP_BIN_DIR) + "/hoop-sim --ranks 6 --ranks-per-host 3 broadcast -r 4 -b 4K -e 4K");
  ASSERT_EQ(ok.status, 0) << ok.out;
  EXPECT_NE(ok.out.find("6 ranks on 2 hosts (3 per host), f32, root 4"), std::string::npos) << ok.out;
  EXPECT_NE(ok.out.find("every rank evaluated"), std::string::npos) << ok.out;
}

}  // namespace
}  // namespace hoop::test
