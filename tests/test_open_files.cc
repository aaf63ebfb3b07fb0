// A rank out of file descriptors: a rank holds a socket per TCP peer it talks to, and pairwise
// algorithms talk to every peer, so a job of a thousand ranks passes the usual soft limit of
// 1024 open files. hoop's links never take the last kLeftFree (16) descriptors of the soft
// limit: near them the soft limit is raised to the hard one (core/open_files.h); at the hard
// limit the rank that runs out fails at once with an error that says so, and the others with
// it, instead of spinning on a listening socket whose backlog it cannot take.
#include <gtest/gtest.h>

#include <chrono>
#include <string>

#include "support/tool_process.h"

namespace hoop::test {
namespace {

using namespace std::chrono_literals;

const std::string kHoopRun = HOOP_BIN_DIR "/hoop-run";
const std::string kHoopBench = HOOP_BIN_DIR "/hoop-bench";

// 16 ranks over TCP, each started under `limit` (a shell's ulimit argument), running a
// pairwise AllToAll: 15 links a rank, which with the few descriptors a rank holds before them
// pass 32 less the 16 left free.
ToolResult pairwise_job_under(const std::string& limit) {
  const std::string rank_command =
      "ulimit " + limit + " && exec " + kHoopBench + " alltoall --algo pairwise -b 1K -e 64K -f 8 -n 2 -w 1";
  ToolProcess run({kHoopRun, "-n", "16", "--timeout", "120", "--", "/bin/sh", "-c", rank_command},
                  {"HOOP_TRANSPORT=tcp", "HOOP_TIMEOUT=60"});
  return run.finish(180s);
}

TEST(OpenFiles, ASoftLimitTooLowIsRaisedToTheHardOne) {
  const ToolResult r = pairwise_job_under("-Sn 32");
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("pairwise"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("Wrong elements       : 0 OK"), std::string::npos) << r.out;
}

TEST(OpenFiles, AtTheHardLimitARankSaysItRanOutAndTheJobEnds) {
  const ToolResult r = pairwise_job_under("-n 32");
  const std::string all = r.out + r.err;
  EXPECT_FALSE(r.timed_out) << all;
  EXPECT_NE(r.exit_code, 0) << all;
  // Ended by a rank's error, within the ranks' own timeout, not by hoop-run's.
  EXPECT_EQ(all.find("timeout after"), std::string::npos) << all;
  EXPECT_NE(all.find("Too many open files (this process may open 32 files, 16 of them left to other than links: "
                     "raise `ulimit -n`)"),
            std::string::npos)
      << all;
  EXPECT_NE(all.find("hoop rank "), std::string::npos) << all;
}

}  // namespace
}  // namespace hoop::test
