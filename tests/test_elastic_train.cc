// Elastic restart end to end: hoop-train checkpoints every few steps; on the first attempt its
// last rank is killed mid-run; hoop-run --max-restarts starts the group again, which resumes
// from the newest complete checkpoint and finishes with exactly the parameters of a run that
// never failed.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "support/tool_process.h"

namespace hoop::test {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

const std::string kHoopRun = HOOP_BIN_DIR "/hoop-run";
const std::string kHoopTrain = HOOP_BIN_DIR "/hoop-train";

std::string file_bytes(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

ToolResult train(const fs::path& dir, const std::vector<std::string>& extra) {
  std::vector<std::string> argv{kHoopRun, "-n", "3", "--grace", "1"};
  argv.insert(argv.end(), extra.begin(), extra.end());
  const std::vector<std::string> tail{
      "--", kHoopTrain, "--stage", "2", "--data", "synthetic", "--hidden", "32,32", "--batch", "24",
      "--steps", "20", "--print-every", "5", "--algo", "ring", "--checkpoint-dir", dir.string(),
      "--checkpoint-every", "5"};
  argv.insert(argv.end(), tail.begin(), tail.end());
  return ToolProcess(argv).finish(180s);
}

TEST(ElasticTrain, AKilledRankIsRestartedFromTheCheckpointToTheSameParameters) {
  const fs::path root = fs::temp_directory_path() / ("hoop-elastic-" + std::to_string(::getpid()));
  fs::remove_all(root);
  const fs::path clean = root / "clean", faulty = root / "faulty";

  const ToolResult a = train(clean, {});
  ASSERT_EQ(a.exit_code, 0) << a.out << a.err;

  // Killed after step 12 on the first attempt: the checkpoint of step 10 is the newest.
  ToolResult b = [&] {
    std::vector<std::string> argv{kHoopRun, "-n", "3", "--grace", "1", "--max-restarts", "1", "--",
                                  kHoopTrain, "--stage", "2", "--data", "synthetic", "--hidden",
                                  "32,32", "--batch", "24", "--steps", "20", "--print-every", "5",
                                  "--algo", "ring", "--checkpoint-dir", faulty.string(),
                                  "--checkpoint-every", "5", "--fail-at-step", "12"};
    return ToolProcess(argv).finish(180s);
  }();
  ASSERT_EQ(b.exit_code, 0) << b.out << b.err;
  EXPECT_NE(b.out.find("resumed from " + (faulty / "step-10").string() + " at step 10"), std::string::npos)
      << b.out;

  const fs::path final_clean = clean / "step-20", final_faulty = faulty / "step-20";
  ASSERT_TRUE(fs::is_directory(final_faulty)) << b.out;
  int shards = 0;
  for (const auto& entry : fs::directory_iterator(final_clean)) {
    if (entry.path().extension() != ".bin") continue;
    ++shards;
    const fs::path other = final_faulty / entry.path().filename();
    ASSERT_TRUE(fs::exists(other)) << other;
    EXPECT_TRUE(file_bytes(entry.path()) == file_bytes(other))
        << entry.path().filename() << " differs between the uninterrupted and the restarted run";
  }
  EXPECT_EQ(shards, 3);
  fs::remove_all(root);
}

}  // namespace
}  // namespace hoop::test
