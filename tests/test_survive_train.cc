// Surviving a dead rank end to end: hoop-run --survive starts 4 ranks of hoop-train
// --redundancy 1, one of which kills itself (SIGKILL) during step 8; the other three recover
// in memory, redo the step on 3 ranks and finish, with the same test accuracy as a run where
// nobody died (the same global batches, summed in another order), and hoop-run succeeds. With
// --elastic the dead rank is started again and the group returns to 4 ranks.
#include <gtest/gtest.h>

#include <regex>
#include <string>
#include <vector>

#include "support/tool_process.h"

namespace hoop::test {
namespace {

using namespace std::chrono_literals;

const std::string kHoopRun = HOOP_BIN_DIR "/hoop-run";
const std::string kHoopTrain = HOOP_BIN_DIR "/hoop-train";

ToolResult train(const std::vector<std::string>& run_flags, const std::vector<std::string>& train_flags) {
  std::vector<std::string> argv{kHoopRun, "-n", "4", "--grace", "1"};
  argv.insert(argv.end(), run_flags.begin(), run_flags.end());
  const std::vector<std::string> common{"--", kHoopTrain, "--stage", "3", "--data", "synthetic", "--hidden",
                                        "32,32", "--batch", "24", "--steps", "16", "--print-every", "4",
                                        "--redundancy", "1"};
  argv.insert(argv.end(), common.begin(), common.end());
  argv.insert(argv.end(), train_flags.begin(), train_flags.end());
  return ToolProcess(argv).finish(180s);
}

std::string final_line(const std::string& out) {
  std::smatch m;
  static const std::regex re("final test accuracy ([0-9.]+ \\([0-9]+/[0-9]+\\)), test loss ([0-9.]+)");
  return std::regex_search(out, m, re) ? m[1].str() + " " + m[2].str() : "";
}

TEST(SurviveTrain, ADeadRankIsSurvivedInMemoryAndTheRunEndsOnTheOthers) {
  for (const char* transport : {"shm", "tcp"}) {
    const std::vector<std::string> env{"-x", std::string("HOOP_TRANSPORT=") + transport};
    const ToolResult clean = train(env, {});
    ASSERT_EQ(clean.exit_code, 0) << clean.out << clean.err;
    std::vector<std::string> run_flags = env;
    run_flags.push_back("--survive");
    const ToolResult faulty = train(run_flags, {"--fail-at-step", "8", "--fail-rank", "1"});
    ASSERT_EQ(faulty.exit_code, 0) << faulty.out << faulty.err;
    EXPECT_NE(faulty.err.find("rank 1 (pid"), std::string::npos) << faulty.err;
    EXPECT_NE(faulty.err.find("the other ranks go on without it (--survive)"), std::string::npos) << faulty.err;
    EXPECT_NE(faulty.out.find("step 8 failed; recovered in memory in"), std::string::npos) << faulty.out;
    EXPECT_NE(faulty.out.find("going on with 3 ranks"), std::string::npos) << faulty.out;
    EXPECT_NE(faulty.out.find("time lost to the failure:"), std::string::npos) << faulty.out;
    EXPECT_NE(faulty.out.find("after 16 steps"), std::string::npos) << faulty.out;
    const std::string want = final_line(clean.out), got = final_line(faulty.out);
    ASSERT_FALSE(want.empty()) << clean.out;
    EXPECT_EQ(got, want) << transport << ": the run that lost a rank ends elsewhere\n" << faulty.out;
  }
}

// hoop-run --elastic starts the dead rank again; it joins the three survivors at their next
// commit, takes a shard back, and the run ends on 4 ranks where a clean run ends.
TEST(SurviveTrain, AReplacedRankJoinsAndTheGroupReturnsToFourRanks) {
  const ToolResult clean = train({}, {});
  ASSERT_EQ(clean.exit_code, 0) << clean.out << clean.err;
  const ToolResult elastic = train({"--elastic"}, {"--fail-at-step", "8", "--fail-rank", "2"});
  ASSERT_EQ(elastic.exit_code, 0) << elastic.out << elastic.err;
  EXPECT_NE(elastic.err.find("joins them in its place (--elastic)"), std::string::npos) << elastic.err;
  EXPECT_NE(elastic.out.find("going on with 3 ranks"), std::string::npos) << elastic.out;
  EXPECT_NE(elastic.out.find("1 rank(s) joined, training goes on with 4 ranks"), std::string::npos) << elastic.out;
  EXPECT_NE(elastic.out.find("after 16 steps"), std::string::npos) << elastic.out;
  EXPECT_EQ(final_line(elastic.out), final_line(clean.out)) << elastic.out;
}

}  // namespace
}  // namespace hoop::test
