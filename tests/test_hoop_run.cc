// hoop-run, tested as users run it: the real binary, with small `sh -c` programs as ranks.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "hoop/error.h"
#include "hoop/store.h"
#include "support/test_scale.h"
#include "support/tool_process.h"
#include "transport/shm/shm_transport.h"

extern char** environ;

namespace {

using namespace std::chrono_literals;
using hoop::test::process_ended;
using SteadyClock = std::chrono::steady_clock;

const std::string kHoopRun = HOOP_BIN_DIR "/hoop-run";

// Job ids unique to this test process and call (letters, digits and '.' only).
std::string unique_job_id() {
  static int counter = 0;
  return "run" + std::to_string(::getpid()) + "x" + std::to_string(counter++);
}

struct Finished {
  int exit_code = -1;  // 128+signal if hoop-run itself was killed
  std::string out;
  std::string err;
  double seconds = 0;
};

// hoop-run started with posix_spawn, its stdout and stderr captured through pipes.
class HoopRun {
 public:
  explicit HoopRun(const std::vector<std::string>& args,
                   const std::vector<std::string>& extra_env = {}) {
    int out[2], err[2];
    if (::pipe2(out, O_CLOEXEC) != 0 || ::pipe2(err, O_CLOEXEC) != 0) throw std::runtime_error("pipe2");
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, out[1], STDOUT_FILENO);
    posix_spawn_file_actions_adddup2(&actions, err[1], STDERR_FILENO);

    std::vector<std::string> argv_strings{kHoopRun};
    argv_strings.insert(argv_strings.end(), args.begin(), args.end());
    std::vector<std::string> env_strings;
    for (char** e = environ; *e != nullptr; ++e) env_strings.emplace_back(*e);
    env_strings.insert(env_strings.end(), extra_env.begin(), extra_env.end());
    auto argv = c_strings(argv_strings);
    auto envp = c_strings(env_strings);

    start_ = SteadyClock::now();
    int rc = ::posix_spawn(&pid_, kHoopRun.c_str(), &actions, nullptr, argv.data(), envp.data());
    posix_spawn_file_actions_destroy(&actions);
    ::close(out[1]);
    ::close(err[1]);
    out_fd_ = out[0];
    err_fd_ = err[0];
    if (rc != 0) throw std::runtime_error("posix_spawn " + kHoopRun + ": " + std::strerror(rc));
  }

  ~HoopRun() {
    if (!reaped_) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
    if (out_fd_ >= 0) ::close(out_fd_);
    if (err_fd_ >= 0) ::close(err_fd_);
  }

  pid_t pid() const { return pid_; }
  const std::string& out() const { return out_; }

  // Reads output until stdout holds `count` occurrences of `text`; false at the time limit.
  bool wait_for_stdout(const std::string& text, int count, std::chrono::milliseconds limit) {
    auto deadline = SteadyClock::now() + limit;
    while (occurrences(out_, text) < count) {
      if (SteadyClock::now() >= deadline || !read_some(deadline)) return false;
    }
    return true;
  }

  // Reads everything until hoop-run closes its output, then reaps it. Kills it (and fails the
  // test) when that takes longer than the limit.
  Finished finish(std::chrono::milliseconds limit = 30s) {
    auto deadline = SteadyClock::now() + limit;
    while (out_fd_ >= 0 || err_fd_ >= 0) {
      if (SteadyClock::now() >= deadline) {
        ADD_FAILURE() << "hoop-run still running at the test's time limit";
        ::kill(pid_, SIGKILL);
        deadline = SteadyClock::now() + 10s;
      }
      read_some(deadline);
    }
    int status = 0;
    ::waitpid(pid_, &status, 0);
    reaped_ = true;
    Finished f;
    f.seconds = std::chrono::duration<double>(SteadyClock::now() - start_).count();
    f.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    f.out = out_;
    f.err = err_;
    return f;
  }

 private:
  static std::vector<char*> c_strings(std::vector<std::string>& strings) {
    std::vector<char*> out;
    for (auto& s : strings) out.push_back(s.data());
    out.push_back(nullptr);
    return out;
  }

  static int occurrences(const std::string& haystack, const std::string& needle) {
    int n = 0;
    for (size_t pos = haystack.find(needle); pos != std::string::npos;
         pos = haystack.find(needle, pos + needle.size()))
      ++n;
    return n;
  }

  // One poll and the reads it allows; false once both streams are closed.
  bool read_some(SteadyClock::time_point deadline) {
    std::vector<pollfd> fds;
    if (out_fd_ >= 0) fds.push_back({out_fd_, POLLIN, 0});
    if (err_fd_ >= 0) fds.push_back({err_fd_, POLLIN, 0});
    if (fds.empty()) return false;
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - SteadyClock::now());
    ::poll(fds.data(), fds.size(), static_cast<int>(std::max<int64_t>(left.count(), 0)));
    for (const auto& p : fds) {
      if (!(p.revents & (POLLIN | POLLHUP | POLLERR))) continue;
      char buf[4096];
      ssize_t got = ::read(p.fd, buf, sizeof buf);
      bool is_out = p.fd == out_fd_;
      if (got > 0) {
        (is_out ? out_ : err_).append(buf, static_cast<size_t>(got));
      } else if (got == 0 || errno != EINTR) {
        ::close(p.fd);
        (is_out ? out_fd_ : err_fd_) = -1;
      }
    }
    return true;
  }

  pid_t pid_ = -1;
  int out_fd_ = -1;
  int err_fd_ = -1;
  bool reaped_ = false;
  std::string out_;
  std::string err_;
  SteadyClock::time_point start_;
};

Finished run_hoop(const std::vector<std::string>& args, const std::vector<std::string>& env = {}) {
  return HoopRun(args, env).finish();
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

// "[r] NAME=VALUE" lines into one map per rank.
std::map<int, std::map<std::string, std::string>> variables_by_rank(const std::string& out) {
  std::map<int, std::map<std::string, std::string>> vars;
  for (const auto& line : lines_of(out)) {
    int rank = -1;
    char rest[512] = {};
    if (std::sscanf(line.c_str(), "[%d] %511[^\n]", &rank, rest) != 2) continue;
    std::string kv = rest;
    auto eq = kv.find('=');
    if (eq != std::string::npos) vars[rank][kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  return vars;
}

bool shm_entry_exists(const std::string& name) {
  return std::filesystem::exists(std::filesystem::path("/dev/shm") / name);
}

const char* kPrintEnvironment =
    "for v in HOOP_RANK HOOP_WORLD_SIZE HOOP_LOCAL_RANK HOOP_LOCAL_SIZE HOOP_STORE_ADDR "
    "HOOP_JOB_ID RANK WORLD_SIZE LOCAL_RANK LOCAL_WORLD_SIZE GROUP_RANK MASTER_ADDR MASTER_PORT "
    "HOOP_TEST_INHERITED HOOP_TEST_EXPORTED; do eval \"echo $v=\\${$v-unset}\"; done";

TEST(HoopRun, GivesEachRankItsEnvironment) {
  const std::string job = unique_job_id();
  auto f = run_hoop({"-n", "3", "--job-id", job, "-x", "HOOP_TEST_EXPORTED=a=b c", "--", "sh",
                     "-c", kPrintEnvironment},
                    {"HOOP_TEST_INHERITED=yes", "RANK=99"});
  ASSERT_EQ(f.exit_code, 0) << f.err;
  auto vars = variables_by_rank(f.out);
  ASSERT_EQ(vars.size(), 3u) << f.out;

  const std::string store_addr = vars[0]["HOOP_STORE_ADDR"];
  const std::string master_port = vars[0]["MASTER_PORT"];
  ASSERT_EQ(store_addr.rfind("127.0.0.1:", 0), 0u) << store_addr;
  const int store_port = std::stoi(store_addr.substr(std::strlen("127.0.0.1:")));
  EXPECT_GT(store_port, 0);
  EXPECT_GT(std::stoi(master_port), 0);
  EXPECT_NE(std::stoi(master_port), store_port);

  for (int r = 0; r < 3; ++r) {
    auto& v = vars[r];
    const std::string rank = std::to_string(r);
    EXPECT_EQ(v["HOOP_RANK"], rank);
    EXPECT_EQ(v["HOOP_WORLD_SIZE"], "3");
    EXPECT_EQ(v["HOOP_LOCAL_RANK"], rank);
    EXPECT_EQ(v["HOOP_LOCAL_SIZE"], "3");
    EXPECT_EQ(v["HOOP_STORE_ADDR"], store_addr);
    EXPECT_EQ(v["HOOP_JOB_ID"], job);
    EXPECT_EQ(v["RANK"], rank);  // the inherited RANK=99 is replaced
    EXPECT_EQ(v["WORLD_SIZE"], "3");
    EXPECT_EQ(v["LOCAL_RANK"], rank);
    EXPECT_EQ(v["LOCAL_WORLD_SIZE"], "3");
    EXPECT_EQ(v["GROUP_RANK"], "0");
    EXPECT_EQ(v["MASTER_ADDR"], "127.0.0.1");
    EXPECT_EQ(v["MASTER_PORT"], master_port);
    EXPECT_EQ(v["HOOP_TEST_INHERITED"], "yes");
    EXPECT_EQ(v["HOOP_TEST_EXPORTED"], "a=b c");
  }
}

TEST(HoopRun, DrawsARandomJobIdAndHonoursMasterPort) {
  auto first = run_hoop({"-n", "2", "--master-port", "29577", "--", "sh", "-c", kPrintEnvironment});
  auto second = run_hoop({"-n", "1", "--", "sh", "-c", kPrintEnvironment});
  ASSERT_EQ(first.exit_code, 0) << first.err;
  ASSERT_EQ(second.exit_code, 0) << second.err;
  auto a = variables_by_rank(first.out);
  auto b = variables_by_rank(second.out);
  const std::string id = a[0]["HOOP_JOB_ID"];
  EXPECT_FALSE(id.empty());
  EXPECT_EQ(id.find_first_not_of("0123456789abcdef"), std::string::npos) << id;
  EXPECT_EQ(a[1]["HOOP_JOB_ID"], id);
  EXPECT_NE(b[0]["HOOP_JOB_ID"], id);
  EXPECT_EQ(a[0]["MASTER_PORT"], "29577");
  EXPECT_EQ(a[1]["MASTER_PORT"], "29577");
}

// Secure by default: each job gets its own random HOOP_SECRET, the same for all its ranks; an
// inherited HOOP_SECRET is kept, and --secret wins over both.
TEST(HoopRun, GivesEachJobARandomSecretUnlessOneIsGiven) {
  const std::string print = "echo HOOP_SECRET=${HOOP_SECRET-unset}";
  auto first = variables_by_rank(run_hoop({"-n", "2", "--", "sh", "-c", print}).out);
  auto second = variables_by_rank(run_hoop({"-n", "1", "--", "sh", "-c", print}).out);
  const std::string secret = first[0]["HOOP_SECRET"];
  EXPECT_EQ(secret.size(), 32u) << secret;
  EXPECT_EQ(secret.find_first_not_of("0123456789abcdef"), std::string::npos) << secret;
  EXPECT_EQ(first[1]["HOOP_SECRET"], secret);
  EXPECT_NE(second[0]["HOOP_SECRET"], secret);

  auto inherited = variables_by_rank(run_hoop({"-n", "1", "--", "sh", "-c", print},
                                              {"HOOP_SECRET=from the environment"}).out);
  EXPECT_EQ(inherited[0]["HOOP_SECRET"], "from the environment");
  auto given = variables_by_rank(run_hoop({"-n", "1", "--secret", "from the command line", "--",
                                           "sh", "-c", print},
                                          {"HOOP_SECRET=from the environment"}).out);
  EXPECT_EQ(given[0]["HOOP_SECRET"], "from the command line");
  auto exported = variables_by_rank(run_hoop({"-n", "1", "-x", "HOOP_SECRET=exported", "--", "sh",
                                              "-c", print}).out);
  EXPECT_EQ(exported[0]["HOOP_SECRET"], "exported");
}

TEST(HoopRun, ServesTheStoreWhileTheJobRuns) {
  const std::string flag = std::filesystem::temp_directory_path() / (unique_job_id() + ".go");
  // Rank 0 shows the store's address, then waits (at most 10 s) for the test to use it. The
  // store serves only clients with the job's secret (-x HOOP_SECRET sets it as --secret does).
  HoopRun job({"-n", "2", "-x", "HOOP_SECRET=job secret", "--", "sh", "-c",
               "echo addr=$HOOP_STORE_ADDR; i=0; while [ ! -e '" + flag +
                   "' ] && [ $i -lt 200 ]; do sleep 0.05; i=$((i+1)); done"});
  ASSERT_TRUE(job.wait_for_stdout("addr=", 2, 10s)) << job.out();
  auto addr = job.out().substr(job.out().find("addr=") + 5);
  addr = addr.substr(0, addr.find('\n'));
  const uint16_t port = static_cast<uint16_t>(std::stoi(addr.substr(addr.find(':') + 1)));

  EXPECT_THROW(hoop::connect_tcp_store("127.0.0.1", port, 10s)->add("hoop-run-test", 1), hoop::Error);
  ::setenv("HOOP_SECRET", "job secret", 1);
  auto store = hoop::connect_tcp_store("127.0.0.1", port, 10s);
  ::unsetenv("HOOP_SECRET");
  store->set_timeout(10s);
  EXPECT_EQ(store->add("hoop-run-test", 5), 5);
  store->set_string("key", "value");
  EXPECT_EQ(store->get_string("key"), "value");

  std::ofstream(flag).put('x');
  auto f = job.finish();
  std::filesystem::remove(flag);
  EXPECT_EQ(f.exit_code, 0) << f.err;
}

TEST(HoopRun, PrefixesEachLineWithTheRank) {
  auto f = run_hoop({"-n", "3", "--", "sh", "-c",
                     "echo out$HOOP_RANK; echo err$HOOP_RANK >&2; printf 'two\\nlines\\n'; "
                     "printf partial$HOOP_RANK"});
  ASSERT_EQ(f.exit_code, 0) << f.err;
  auto out = lines_of(f.out);
  auto err = lines_of(f.err);
  std::multiset<std::string> out_set(out.begin(), out.end());
  std::multiset<std::string> err_set(err.begin(), err.end());
  EXPECT_EQ(out.size(), 12u) << f.out;
  for (int r = 0; r < 3; ++r) {
    const std::string p = fmt::format("[{}] ", r);
    const std::string rank = std::to_string(r);
    EXPECT_EQ(out_set.count(p + "out" + rank), 1u) << f.out;
    EXPECT_EQ(out_set.count(p + "two"), 1u) << f.out;
    EXPECT_EQ(out_set.count(p + "lines"), 1u) << f.out;
    EXPECT_EQ(out_set.count(p + "partial" + rank), 1u) << f.out;  // flushed at exit
    EXPECT_EQ(err_set.count(p + "err" + rank), 1u) << f.err;
    EXPECT_EQ(out_set.count(p + "err" + rank), 0u) << f.out;
  }
}

TEST(HoopRun, NoPrefixPrintsLinesAsTheyAre) {
  auto f = run_hoop({"-n", "2", "--no-prefix", "--", "sh", "-c", "echo line$HOOP_RANK"});
  ASSERT_EQ(f.exit_code, 0) << f.err;
  auto out = lines_of(f.out);
  std::set<std::string> got(out.begin(), out.end());
  EXPECT_EQ(got, (std::set<std::string>{"line0", "line1"}));
}

TEST(HoopRun, AFailedRankStopsTheJobWithItsCode) {
  // A grace far longer than the limit below: SIGTERM itself must end the sleepers.
  auto f = run_hoop({"-n", "3", "--grace", "60", "--", "sh", "-c",
                     "if [ $HOOP_RANK = 1 ]; then exit 3; fi; sleep 100"});
  EXPECT_EQ(f.exit_code, 3) << f.err;
  EXPECT_NE(f.err.find("hoop-run: rank 1 (pid "), std::string::npos) << f.err;
  EXPECT_NE(f.err.find("exited with code 3"), std::string::npos) << f.err;
  EXPECT_LT(f.seconds, hoop::test::wall_bound(20)) << "the sleeping ranks were not terminated promptly";
}

TEST(HoopRun, ARankKilledBySigkillGives137) {
  auto f = run_hoop({"-n", "2", "--grace", "60", "--", "sh", "-c",
                     "if [ $HOOP_RANK = 0 ]; then kill -9 $$; fi; sleep 100"});
  EXPECT_EQ(f.exit_code, 137) << f.err;
  EXPECT_NE(f.err.find("hoop-run: rank 0 (pid "), std::string::npos) << f.err;
  EXPECT_NE(f.err.find("was killed by signal 9 (SIGKILL)"), std::string::npos) << f.err;
  EXPECT_LT(f.seconds, hoop::test::wall_bound(20));
}

TEST(HoopRun, RanksIgnoringSigtermGetSigkillAfterTheGrace) {
  auto f = run_hoop({"-n", "2", "--grace", "0.5", "--", "sh", "-c",
                     "if [ $HOOP_RANK = 0 ]; then sleep 0.3; exit 5; fi; trap '' TERM; sleep 100"});
  EXPECT_EQ(f.exit_code, 5) << f.err;
  EXPECT_NE(f.err.find("rank 0 (pid "), std::string::npos) << f.err;
  EXPECT_NE(f.err.find("sending SIGKILL"), std::string::npos) << f.err;
  EXPECT_NE(f.err.find("consequence: rank 1 (pid "), std::string::npos) << f.err;
  EXPECT_LT(f.seconds, hoop::test::wall_bound(20));
}

TEST(HoopRun, ForwardsSigtermToTheRanks) {
  const std::string job = unique_job_id();
  const std::string segment = hoop::transport::shm_segment_prefix(job) + "signal-path";
  HoopRun run({"-n", "3", "--job-id", job, "--grace", "60", "--", "sh", "-c",
               "trap 'echo got-TERM; exit 0' TERM; touch /dev/shm/" + segment +
                   "; echo ready; sleep 100 & wait"});
  ASSERT_TRUE(run.wait_for_stdout("ready", 3, 10s)) << run.out();
  EXPECT_TRUE(shm_entry_exists(segment));
  ::kill(run.pid(), SIGTERM);
  auto f = run.finish();
  EXPECT_EQ(f.exit_code, 128 + SIGTERM) << f.err;
  for (int r = 0; r < 3; ++r)
    EXPECT_NE(f.out.find(fmt::format("[{}] got-TERM", r)), std::string::npos) << f.out;
  EXPECT_NE(f.err.find("received SIGTERM"), std::string::npos) << f.err;
  EXPECT_LT(f.seconds, hoop::test::wall_bound(20));
  EXPECT_FALSE(shm_entry_exists(segment));
}

TEST(HoopRun, TimeoutStopsTheJobWith124) {
  auto f = run_hoop({"-n", "3", "--timeout", "1", "--grace", "60", "--", "sh", "-c",
                     "if [ $HOOP_RANK = 0 ]; then exit 0; fi; sleep 100"});
  EXPECT_EQ(f.exit_code, 124) << f.err;
  EXPECT_NE(f.err.find("timeout"), std::string::npos) << f.err;
  EXPECT_NE(f.err.find("rank 1 (pid "), std::string::npos) << f.err;
  EXPECT_NE(f.err.find("rank 2 (pid "), std::string::npos) << f.err;
  EXPECT_EQ(f.err.find("rank 0 (pid "), std::string::npos) << f.err;
  EXPECT_GE(f.seconds, 0.9);
  EXPECT_LT(f.seconds, hoop::test::wall_bound(20));
}

TEST(HoopRun, RemovesTheJobsSharedMemoryOnEveryExit) {
  for (const char* how : {"exit 0", "exit 1"}) {
    const std::string job = unique_job_id();
    const std::string segment = hoop::transport::shm_segment_prefix(job) + "leftover";
    auto f = run_hoop({"-n", "2", "--job-id", job, "--", "sh", "-c",
                       "touch /dev/shm/" + segment + "$HOOP_RANK; " + how});
    EXPECT_EQ(f.exit_code, std::string(how) == "exit 0" ? 0 : 1) << f.err;
    EXPECT_FALSE(shm_entry_exists(segment + "0")) << how;
    EXPECT_FALSE(shm_entry_exists(segment + "1")) << how;
  }
}

TEST(HoopRun, RanksDieWhenHoopRunIsKilled) {
  HoopRun run({"-n", "2", "--", "sh", "-c", "echo pid=$$; exec sleep 100"});
  ASSERT_TRUE(run.wait_for_stdout("pid=", 2, 10s)) << run.out();
  std::vector<pid_t> pids;
  for (const auto& line : lines_of(run.out())) {
    auto at = line.find("pid=");
    if (at != std::string::npos) pids.push_back(std::stoi(line.substr(at + 4)));
  }
  ASSERT_EQ(pids.size(), 2u);
  ::kill(run.pid(), SIGKILL);
  auto deadline = SteadyClock::now() + 5s;
  for (pid_t pid : pids) {
    while (!process_ended(pid) && SteadyClock::now() < deadline) std::this_thread::sleep_for(20ms);
    EXPECT_TRUE(process_ended(pid)) << "rank pid " << pid << " outlived hoop-run";
  }
}

TEST(HoopRun, KillsWhatARankLeavesBehind) {
  // The background sleep holds the rank's stdout open and would outlive it.
  auto f = run_hoop({"-n", "1", "--", "sh", "-c", "sleep 60 & echo bg=$!"});
  EXPECT_EQ(f.exit_code, 0) << f.err;
  EXPECT_LT(f.seconds, hoop::test::wall_bound(20));
  auto at = f.out.find("bg=");
  ASSERT_NE(at, std::string::npos) << f.out;
  const pid_t leftover = std::stoi(f.out.substr(at + 3));
  auto deadline = SteadyClock::now() + 5s;
  while (!process_ended(leftover) && SteadyClock::now() < deadline) std::this_thread::sleep_for(20ms);
  EXPECT_TRUE(process_ended(leftover));
}

TEST(HoopRun, ReportsUsageErrorsAndMissingPrograms) {
  auto missing = run_hoop({"-n", "2", "--", "/nonexistent/program"});
  EXPECT_EQ(missing.exit_code, 127);
  EXPECT_NE(missing.err.find("/nonexistent/program"), std::string::npos) << missing.err;

  EXPECT_EQ(run_hoop({"-n", "0", "--", "true"}).exit_code, 2);
  EXPECT_EQ(run_hoop({"-n", "2"}).exit_code, 2);
  EXPECT_EQ(run_hoop({"-n", "2", "-x", "NOEQUALS", "--", "true"}).exit_code, 2);
  EXPECT_EQ(run_hoop({"-n", "2", "--job-id", "a/b", "--", "true"}).exit_code, 2);
  // Without "--" the first argument hoop-run does not know starts the command.
  auto bare = run_hoop({"-n", "1", "sh", "-c", "echo $0 $1", "first", "--second"});
  EXPECT_EQ(bare.exit_code, 0) << bare.err;
  EXPECT_EQ(bare.out, "[0] first --second\n");
}

}  // namespace

namespace {

// This process's Cpus_allowed_list ("0-3,6"): what every unpinned rank reports too.
std::string own_cpu_list() {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("Cpus_allowed_list:", 0) == 0) {
      std::istringstream fields(line.substr(std::strlen("Cpus_allowed_list:")));
      std::string list;
      fields >> list;
      return list;
    }
  }
  return {};
}

// "0-3,6" -> {0, 1, 2, 3, 6}.
std::vector<int> expand_cpu_list(const std::string& list) {
  std::vector<int> cpus;
  std::istringstream in(list);
  std::string range;
  while (std::getline(in, range, ',')) {
    const auto dash = range.find('-');
    const int lo = std::stoi(range.substr(0, dash));
    const int hi = dash == std::string::npos ? lo : std::stoi(range.substr(dash + 1));
    for (int c = lo; c <= hi; ++c) cpus.push_back(c);
  }
  return cpus;
}

// rank -> the Cpus_allowed_list each rank of `hoop-run args -n N` reports.
std::map<int, std::string> affinity_of_ranks(int nranks, const std::vector<std::string>& bind_args) {
  std::vector<std::string> args{"-n", std::to_string(nranks), "--no-prefix"};
  args.insert(args.end(), bind_args.begin(), bind_args.end());
  for (const char* a : {"--", "sh", "-c",
                        "echo $HOOP_RANK $(sed -n 's/^Cpus_allowed_list:[[:space:]]*//p' /proc/self/status)"}) {
    args.emplace_back(a);
  }
  auto f = run_hoop(args);
  EXPECT_EQ(f.exit_code, 0) << f.err;
  std::map<int, std::string> got;
  for (const auto& line : lines_of(f.out)) {
    std::istringstream in(line);
    int rank = -1;
    std::string list;
    in >> rank >> list;
    got[rank] = list;
  }
  EXPECT_EQ(got.size(), static_cast<size_t>(nranks)) << f.out;
  return got;
}

}  // namespace

TEST(HoopRun, PinsOneRankPerCpuWhenTheyFit) {
  const auto cpus = expand_cpu_list(own_cpu_list());
  if (cpus.size() < 2) GTEST_SKIP() << "one CPU: nothing to share out";
  const int n = static_cast<int>(std::min<size_t>(cpus.size(), 4));
  const auto got = affinity_of_ranks(n, {});
  for (int r = 0; r < n; ++r) EXPECT_EQ(got.at(r), std::to_string(cpus[static_cast<size_t>(r)])) << "rank " << r;
}

TEST(HoopRun, PinsRoundRobinWhenTheyOutnumberTheCpusAndLeavesThemUnpinnedWhenAsked) {
  const std::string all = own_cpu_list();
  const auto cpus = expand_cpu_list(all);
  if (cpus.size() < 2 || cpus.size() > 16) GTEST_SKIP() << cpus.size() << " CPUs";
  const int over = static_cast<int>(cpus.size()) + 1;
  for (const std::vector<std::string>& mode : {std::vector<std::string>{}, {"--bind-to", "core"}}) {
    for (const auto& [rank, list] : affinity_of_ranks(over, mode)) {
      EXPECT_EQ(list, std::to_string(cpus[static_cast<size_t>(rank) % cpus.size()])) << "rank " << rank;
    }
  }
  for (const auto& [rank, list] : affinity_of_ranks(2, {"--bind-to", "none"})) EXPECT_EQ(list, all) << "rank " << rank;
  for (const auto& [rank, list] : affinity_of_ranks(over, {"--bind-to", "none"})) EXPECT_EQ(list, all) << "rank " << rank;
  auto bad = run_hoop({"-n", "2", "--bind-to", "socket", "--", "true"});
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_NE(bad.err.find("--bind-to"), std::string::npos) << bad.err;
}
