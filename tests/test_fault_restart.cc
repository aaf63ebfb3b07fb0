// hoop-run --max-restarts: a failed group is started again as a whole, under a new job id and
// a new store, with HOOP_RESTART_COUNT telling the ranks which attempt they are; the exit code
// is the last attempt's and nothing of an attempt (processes, /dev/shm) outlives it.
#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "support/spawn.h"
#include "support/tool_process.h"

namespace hoop::test {
namespace {

using namespace std::chrono_literals;

const std::string kHoopRun = HOOP_BIN_DIR "/hoop-run";
const std::string kHoopBench = HOOP_BIN_DIR "/hoop-bench";

std::string restart_job_id() {
  static int counter = 0;
  return "rs" + std::to_string(::getpid()) + "x" + std::to_string(counter++);
}

ToolResult run_hoop(const std::vector<std::string>& args) {
  std::vector<std::string> argv{kHoopRun};
  argv.insert(argv.end(), args.begin(), args.end());
  return ToolProcess(argv).finish(120s);
}

// "[r] attempt A job J" lines: rank -> attempt -> job id.
std::map<int, std::map<int, std::string>> attempts_by_rank(const std::string& out) {
  std::map<int, std::map<int, std::string>> seen;
  std::istringstream in(out);
  const std::regex line_re(R"(^\[(\d+)\] attempt (\d+) job (\S+)$)");
  for (std::string line; std::getline(in, line);) {
    std::smatch m;
    if (std::regex_match(line, m, line_re)) seen[std::stoi(m[1])][std::stoi(m[2])] = m[3];
  }
  return seen;
}

TEST(FaultRestart, RestartsTheGroupAfterAFailureWithANewJobIdAndRestartCount) {
  const std::string job = restart_job_id();
  // Attempt 0: rank 1 leaves a segment of its job in /dev/shm and fails; every later attempt
  // succeeds and says whether the earlier attempt's segment is gone.
  // Rank 1 fails only once every rank has said which attempt it runs (each leaves a mark in
  // the job's /dev/shm prefix, which the sweep removes), so no line is lost to the kill.
  const std::string program =
      "echo attempt $HOOP_RESTART_COUNT job $HOOP_JOB_ID; "
      "touch /dev/shm/hoop-${HOOP_JOB_ID}-said-$HOOP_RANK; "
      "if [ \"$HOOP_RESTART_COUNT\" = 0 ] && [ \"$HOOP_RANK\" = 1 ]; then "
      "  for i in $(seq 600); do [ $(ls /dev/shm/hoop-${HOOP_JOB_ID}-said-* | wc -l) -ge 3 ] && break; "
      "  sleep 0.05; done; "
      "  touch /dev/shm/hoop-${HOOP_JOB_ID}-leftover; exit 3; fi; "
      "if [ \"$HOOP_RESTART_COUNT\" = 0 ]; then exec sleep 30; fi; "
      "if [ -e /dev/shm/hoop-" + job + "-leftover ]; then echo sweep missing; else echo sweep ok; fi";
  auto f = run_hoop({"-n", "3", "--job-id", job, "--max-restarts", "2", "--grace", "1", "--", "sh",
                     "-c", program});
  EXPECT_EQ(f.exit_code, 0) << f.err;
  const auto seen = attempts_by_rank(f.out);
  ASSERT_EQ(seen.size(), 3u) << f.out;
  for (const auto& [rank, attempts] : seen) {
    // Exactly two attempts: the first failed, the second succeeded and nothing followed.
    ASSERT_EQ(attempts.size(), 2u) << "rank " << rank << "\n" << f.out;
    EXPECT_EQ(attempts.at(0), job) << f.out;
    EXPECT_EQ(attempts.at(1), job + ".r1") << f.out;
  }
  // Same output prefixes on every attempt, and the sweep ran between them.
  for (int r = 0; r < 3; ++r) {
    EXPECT_NE(f.out.find("[" + std::to_string(r) + "] sweep ok"), std::string::npos) << f.out;
  }
  EXPECT_EQ(f.out.find("sweep missing"), std::string::npos) << f.out;
  EXPECT_NE(f.err.find("rank 1 (pid "), std::string::npos) << f.err;
  EXPECT_NE(f.err.find("restarting the job (1 of 2"), std::string::npos) << f.err;
  EXPECT_FALSE(std::filesystem::exists("/dev/shm/hoop-" + job + "-leftover"));
}

TEST(FaultRestart, ExitCodeIsTheLastAttemptsAndRestartsAreBounded) {
  const std::string job = restart_job_id();
  // Rank 0 fails on every attempt, with a code that tells the attempt; rank 1 would run on.
  auto f = run_hoop({"-n", "2", "--job-id", job, "--max-restarts", "2", "--grace", "1", "--", "sh", "-c",
                     "echo attempt $HOOP_RESTART_COUNT job $HOOP_JOB_ID; "
                     "if [ \"$HOOP_RANK\" = 0 ]; then exit $((10 + HOOP_RESTART_COUNT)); fi; exec sleep 30"});
  EXPECT_EQ(f.exit_code, 12) << f.err;
  const auto seen = attempts_by_rank(f.out);
  ASSERT_TRUE(seen.contains(0)) << f.out;
  const auto& attempts = seen.at(0);
  EXPECT_EQ(attempts.size(), 3u) << f.out;
  std::set<std::string> ids;
  for (const auto& [a, id] : attempts) ids.insert(id);
  EXPECT_EQ(ids.size(), 3u) << "every attempt has its own job id\n" << f.out;
  EXPECT_NE(f.err.find("attempt 3 of 3 exited with code 12"), std::string::npos) << f.err;

  // Without --max-restarts nothing is retried; a successful job is not restarted either.
  auto once = run_hoop({"-n", "2", "--", "sh", "-c", "echo attempt $HOOP_RESTART_COUNT job x; exit 5"});
  EXPECT_EQ(once.exit_code, 5);
  // The rank that fails first has printed; the other may be stopped before it prints.
  const auto once_seen = attempts_by_rank(once.out);
  EXPECT_FALSE(once_seen.empty()) << once.out;
  for (const auto& [rank, tries] : once_seen) EXPECT_EQ(tries.size(), 1u) << "rank " << rank << "\n" << once.out;
  auto ok = run_hoop({"-n", "2", "--max-restarts", "3", "--", "sh", "-c",
                      "echo attempt $HOOP_RESTART_COUNT job x"});
  EXPECT_EQ(ok.exit_code, 0);
  EXPECT_EQ(attempts_by_rank(ok.out).at(1).size(), 1u) << ok.out;
}

TEST(FaultRestart, ACollectiveJobKilledMidRunFinishesOnTheSecondAttempt) {
  const std::string job = restart_job_id();
  // Attempt 0: rank 1 is killed with SIGKILL while the group runs AllReduces (endless, so the
  // kill lands in the middle of one); attempt 1 runs a short, verified benchmark.
  const std::string bench = kHoopBench + " allreduce -b 64K -e 64K -c 1";
  const std::string program =
      "echo attempt $HOOP_RESTART_COUNT job $HOOP_JOB_ID; "
      "if [ \"$HOOP_RESTART_COUNT\" = 0 ]; then "
      "  if [ \"$HOOP_RANK\" = 1 ]; then exec timeout -s KILL 1 " + bench + " -n 1000000 -w 0 >/dev/null; fi; "
      "  exec " + bench + " -n 1000000 -w 0 >/dev/null; fi; "
      "exec " + bench + " -n 20 -w 2";
  auto f = run_hoop({"-n", "3", "--job-id", job, "--max-restarts", "1", "--grace", "1", "-x",
                     "HOOP_TIMEOUT=5", "--", "sh", "-c", program});
  EXPECT_EQ(f.exit_code, 0) << f.err << f.out;
  EXPECT_EQ(attempts_by_rank(f.out).size(), 3u) << f.out;
  EXPECT_NE(f.err.find("rank 1 (pid "), std::string::npos) << f.err;
  EXPECT_NE(f.err.find("restarting the job"), std::string::npos) << f.err;
  EXPECT_EQ(job_segments(job), std::vector<std::string>{});
  EXPECT_EQ(job_segments(job + ".r1"), std::vector<std::string>{});
}

}  // namespace
}  // namespace hoop::test
