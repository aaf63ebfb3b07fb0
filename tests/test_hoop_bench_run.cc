// hoop-bench run as users run it, under hoop-run on 2 or 3 ranks at tiny sizes: every
// collective of the extended set verified (-c 1), at a root other than 0 where it has one and
// with the uneven split for the v-forms; and --stats in the table, the CSV and the JSON.
#include <unistd.h>

#include <cctype>
#include <filesystem>
#include <fstream>
#include <ostream>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "support/tool_process.h"

namespace hoop::test {
namespace {

using namespace std::chrono_literals;
namespace fs = std::filesystem;

const std::string kHoopRun = HOOP_BIN_DIR "/hoop-run";
const std::string kHoopBench = HOOP_BIN_DIR "/hoop-bench";

ToolResult run_bench(int nranks, const std::vector<std::string>& args) {
  std::vector<std::string> argv = {kHoopRun,    "-n", std::to_string(nranks), "--no-prefix",
                                   "--timeout", "120", "--", kHoopBench};
  argv.insert(argv.end(), args.begin(), args.end());
  ToolProcess p(argv);
  return p.finish(150s);
}

struct RunCase {
  int nranks;
  std::vector<std::string> args;
};

std::string case_name(const RunCase& c) {
  std::string name = std::to_string(c.nranks) + " ranks:";
  for (const auto& a : c.args) name += " " + a;
  return name;
}

void PrintTo(const RunCase& c, std::ostream* os) { *os << case_name(c); }

class BenchRun : public ::testing::TestWithParam<RunCase> {};

TEST_P(BenchRun, EveryRankGetsExactlyItsData) {
  const RunCase& c = GetParam();
  std::vector<std::string> args = c.args;
  for (const char* a : {"-b", "64", "-e", "4K", "-f", "8", "-n", "2", "-w", "1", "-c", "1"}) {
    args.emplace_back(a);
  }
  const ToolResult r = run_bench(c.nranks, args);
  ASSERT_EQ(r.exit_code, 0) << case_name(c) << "\n" << r.out << r.err;
  EXPECT_NE(r.out.find("Wrong elements       : 0 OK"), std::string::npos) << r.out;
  // The three sizes, each with a row.
  std::istringstream lines(r.out);
  int rows = 0;
  for (std::string line; std::getline(lines, line);) rows += !line.empty() && line[0] != '#';
  EXPECT_EQ(rows, 3) << r.out;
}

INSTANTIATE_TEST_SUITE_P(
    Collectives, BenchRun,
    ::testing::Values(RunCase{3, {"alltoall"}}, RunCase{2, {"alltoall"}},
                      RunCase{3, {"gather", "-r", "2"}}, RunCase{3, {"scatter", "-r", "1"}},
                      RunCase{3, {"alltoallv"}}, RunCase{3, {"alltoallv", "--uneven"}},
                      RunCase{2, {"alltoallv", "--uneven"}},
                      RunCase{3, {"gatherv", "--uneven", "-r", "1"}},
                      RunCase{3, {"gatherv", "-r", "0"}},
                      RunCase{3, {"scatterv", "--uneven", "-r", "2"}},
                      RunCase{3, {"scatterv", "-r", "0"}},
                      RunCase{3, {"allgatherv", "--uneven"}}, RunCase{3, {"allgatherv"}},
                      RunCase{3, {"reducescatterv", "--uneven", "-d", "i32", "-o", "max"}},
                      RunCase{3, {"reducescatterv", "-o", "sum"}}),
    [](const ::testing::TestParamInfo<RunCase>& param) {
      std::string name;
      for (const auto& a : param.param.args) {
        for (char ch : a) {
          if (std::isalnum(static_cast<unsigned char>(ch))) name += ch;
        }
        name += "_";
      }
      return name + std::to_string(param.param.nranks) + "ranks";
    });

// A run with --csv and --json into a folder of its own: its output, the CSV's lines (the header
// first) and the JSON document.
struct FileRun {
  ToolResult result;
  std::vector<std::string> csv;
  nlohmann::json json;
};

FileRun run_with_files(int nranks, std::vector<std::string> args) {
  const fs::path dir = fs::temp_directory_path() / ("hoop-bench-files-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const std::string csv = (dir / "out.csv").string(), json = (dir / "out.json").string();
  args.insert(args.end(), {"--csv", csv, "--json", json});
  FileRun f;
  f.result = run_bench(nranks, args);
  std::ifstream csv_in(csv);
  for (std::string line; std::getline(csv_in, line);) f.csv.push_back(line);
  std::ifstream json_in(json);
  f.json = nlohmann::json::parse(json_in, nullptr, false);
  fs::remove_all(dir);
  return f;
}

// A collective without an in-place form has out-of-place rows only.
TEST(BenchRunOutOfPlace, NoInPlaceRowsWithoutAnInPlaceForm) {
  const FileRun f = run_with_files(2, {"alltoallv", "-b", "1K", "-e", "1K", "-n", "2", "-w", "0"});
  const std::string& out = f.result.out;
  ASSERT_EQ(f.result.exit_code, 0) << out << f.result.err;
  EXPECT_NE(out.find("out of place only: alltoallv has no in-place form"), std::string::npos) << out;
  const size_t heading = out.find("#wrong");
  ASSERT_NE(heading, std::string::npos) << out;
  EXPECT_EQ(out.find("#wrong", heading + 1), std::string::npos) << out;  // one placement
  ASSERT_EQ(f.csv.size(), 2u);
  EXPECT_NE(f.csv[1].find(",out-of-place,"), std::string::npos) << f.csv[1];
  EXPECT_EQ(f.json["rows"].size(), 1u);
}

// --stats: the table gets min, max and stddev beside each placement's median, the CSV and the
// JSON rows their three fields, and the spread is ordered: min <= median <= max, stddev >= 0.
TEST(BenchStats, SpreadOverIterationsInTableCsvAndJson) {
  const FileRun f = run_with_files(
      2, {"allreduce", "--stats", "-b", "1K", "-e", "4K", "-f", "4", "-n", "5", "-w", "1"});
  const std::string& out = f.result.out;
  ASSERT_EQ(f.result.exit_code, 0) << out << f.result.err;
  EXPECT_NE(out.find("median (and min, max, sample standard deviation)"), std::string::npos) << out;
  EXPECT_NE(out.find("      min       max    stddev"), std::string::npos) << out;
  ASSERT_EQ(f.csv.size(), 5u);  // the header, 2 sizes x out-of-place and in-place
  EXPECT_NE(f.csv[0].find(",time_us,time_min_us,time_max_us,time_stddev_us,algbw_gbps,"),
            std::string::npos)
      << f.csv[0];
  ASSERT_EQ(f.json["rows"].size(), 4u);
  for (const auto& row : f.json["rows"]) {
    const double median = row["time_us"], lo = row["time_min_us"], hi = row["time_max_us"];
    EXPECT_LE(lo, median) << row;
    EXPECT_LE(median, hi) << row;
    EXPECT_GE(row["time_stddev_us"].get<double>(), 0.0) << row;
  }
}

// Without --stats the table and the files keep their columns.
TEST(BenchStats, OffByDefault) {
  const FileRun f = run_with_files(2, {"allreduce", "-b", "1K", "-e", "1K", "-n", "2", "-w", "0"});
  ASSERT_EQ(f.result.exit_code, 0) << f.result.out << f.result.err;
  EXPECT_EQ(f.result.out.find("stddev"), std::string::npos) << f.result.out;
  ASSERT_FALSE(f.csv.empty());
  EXPECT_EQ(f.csv[0], "collective,algo,algo_used,placement,size_bytes,count,type,redop,root,time_us,"
                      "algbw_gbps,busbw_gbps,wrong,nranks,iters,warmup_iters,blocking");
  EXPECT_FALSE(f.json["rows"][0].contains("time_min_us"));
}

}  // namespace
}  // namespace hoop::test
