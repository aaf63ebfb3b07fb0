// hoop-run on several hosts (--hosts, --hostfile, --launcher), tested on this machine: the
// launcher is `env LAB_HOST={host}` (an exec-style launcher that starts the rank here with one
// more variable) or a stand-in for ssh that clears the environment and hands its last argument to
// a shell, as ssh does. Host names differ, so the ranks of different "hosts" use TCP.
#include <fcntl.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <regex>
#include <string>
#include <vector>

#include <gtest/gtest.h>

extern char** environ;

namespace {

const std::string kBin = HOOP_BIN_DIR;

struct Result {
  int exit_code = -1;
  std::string output;  // stdout and stderr, interleaved
};

Result run(const std::vector<std::string>& args) {
  int pipe_fds[2];
  if (::pipe2(pipe_fds, O_CLOEXEC) != 0) throw std::runtime_error("pipe2");
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, pipe_fds[1], STDOUT_FILENO);
  posix_spawn_file_actions_adddup2(&actions, pipe_fds[1], STDERR_FILENO);
  std::vector<std::string> argv_strings{kBin + "/hoop-run"};
  argv_strings.insert(argv_strings.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& s : argv_strings) argv.push_back(s.data());
  argv.push_back(nullptr);
  pid_t pid = 0;
  const int rc = ::posix_spawn(&pid, argv[0], &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  ::close(pipe_fds[1]);
  if (rc != 0) throw std::runtime_error(std::string("posix_spawn: ") + std::strerror(rc));
  Result r;
  char buf[4096];
  for (ssize_t n; (n = ::read(pipe_fds[0], buf, sizeof buf)) != 0;) {
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) break;
    r.output.append(buf, static_cast<size_t>(n));
  }
  ::close(pipe_fds[0]);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return r;
}

const std::vector<std::string> kEnvLauncher = {"--store-addr", "127.0.0.1", "--launcher",
                                               "env LAB_HOST={host}"};

std::vector<std::string> with(std::vector<std::string> a, const std::vector<std::string>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

class TempDir {
 public:
  TempDir() {
    std::string templ = (std::filesystem::temp_directory_path() / "hoop-hosts-XXXXXX").string();
    if (!::mkdtemp(templ.data())) throw std::runtime_error("mkdtemp");
    path_ = templ;
  }
  ~TempDir() { std::filesystem::remove_all(path_); }
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

TEST(HoopRunHosts, FillsTheHostsInOrderAndTellsEachRankWhereItIs) {
  const Result r = run(with(
      {"--hosts", "a:2,b:1"},
      with(kEnvLauncher,
           {"--", "sh", "-c",
            "echo $HOOP_RANK/$HOOP_WORLD_SIZE local $HOOP_LOCAL_RANK/$HOOP_LOCAL_SIZE host "
            "$HOOP_HOST_ID via $LAB_HOST group $GROUP_RANK/$GROUP_WORLD_SIZE store $HOOP_STORE_ADDR "
            "master $MASTER_ADDR"})));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(std::regex_search(r.output, std::regex(R"(\[0\] 0/3 local 0/2 host a via a group 0/2 store 127\.0\.0\.1:\d+ master 127\.0\.0\.1)")))
      << r.output;
  EXPECT_NE(r.output.find("[1] 1/3 local 1/2 host a via a group 0/2"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("[2] 2/3 local 0/1 host b via b group 1/2"), std::string::npos) << r.output;
}

TEST(HoopRunHosts, MinusNTakesTheFirstSlotsAndNoMore) {
  Result r = run(with({"--hosts", "a:2,b:2", "-n", "3"},
                      with(kEnvLauncher, {"--", "sh", "-c", "echo host $HOOP_HOST_ID"})));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("[2] host b"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("[3]"), std::string::npos) << r.output;

  r = run(with({"--hosts", "a:2,b:2", "-n", "5"}, with(kEnvLauncher, {"--", "true"})));
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("4 slots, fewer than the 5 ranks"), std::string::npos) << r.output;
}

TEST(HoopRunHosts, HostfileGivesTheStoreAddressAndTheInterfaces) {
  TempDir dir;
  const auto hostfile = dir.path() / "hosts";
  std::ofstream(hostfile) << "# lab\n"
                             "a slots=1 addr=127.0.0.1 ifname=lo\n"
                             "b:1 ifname=^docker   # comment\n";
  const Result r = run({"--hostfile", hostfile.string(), "--launcher", "env LAB_HOST={host}", "--",
                        "sh", "-c", "echo $HOOP_HOST_ID ifname=$HOOP_SOCKET_IFNAME store=$HOOP_STORE_ADDR"});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(std::regex_search(r.output, std::regex(R"(\[0\] a ifname=lo store=127\.0\.0\.1:\d+)"))) << r.output;
  EXPECT_TRUE(std::regex_search(r.output, std::regex(R"(\[1\] b ifname=\^docker store=127\.0\.0\.1:\d+)"))) << r.output;
}

TEST(HoopRunHosts, AFailedRankOnAnotherHostGivesItsExitCode) {
  const Result r = run(with({"--hosts", "a:1,b:1"},
                            with(kEnvLauncher, {"--", "sh", "-c", "[ $HOOP_HOST_ID = a ] || exit 7"})));
  EXPECT_EQ(r.exit_code, 7) << r.output;
  EXPECT_NE(r.output.find("rank 1"), std::string::npos) << r.output;
}

TEST(HoopRunHosts, SshStyleLaunchersGetOneQuotedCommandWithTheJobsVariables) {
  TempDir dir;
  // Like ssh: the first argument is the host, the rest is one command line for a shell, and
  // the local environment does not travel. The fake keeps its command lines in a file.
  const auto fake_ssh = dir.path() / "ssh";
  const auto argv_log = dir.path() / "argv";
  std::ofstream(fake_ssh) << "#!/bin/sh\n"
                             "echo \"$*\" >> " << argv_log.string() << "\n"
                             "host=$1; shift\n"
                             "exec env -i PATH=/usr/bin:/bin FAKE_SSH_HOST=$host sh -c \"$*\"\n";
  std::filesystem::permissions(fake_ssh, std::filesystem::perms::owner_all);
  const Result r = run({"--hosts", "a:1,b:1", "--store-addr", "127.0.0.1", "--launcher",
                        fake_ssh.string() + " {host}", "-x", "USER_VAR=x y", "--secret", "s3cret",
                        "--", "sh", "-c",
                        "echo \"$FAKE_SSH_HOST $HOOP_RANK $HOOP_HOST_ID [$USER_VAR] $HOOP_SECRET $1 $(pwd)\"",
                        "sh", "it's \"quoted\""});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const std::string cwd = std::filesystem::current_path().string();
  EXPECT_NE(r.output.find("[0] a 0 a [x y] s3cret it's \"quoted\" " + cwd), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("[1] b 1 b [x y] s3cret it's \"quoted\" " + cwd), std::string::npos) << r.output;
  // The secret reached the ranks through the remote shell's stdin, never on ssh's command line.
  std::ifstream in(argv_log);
  const std::string argv_text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_NE(argv_text.find("HOOP_RANK=0"), std::string::npos) << argv_text;
  EXPECT_EQ(argv_text.find("s3cret"), std::string::npos) << argv_text;
}

TEST(HoopRunHosts, AllReduceAcrossHostsIsRight) {
  const Result r = run(with({"--hosts", "a:2,b:2", "--timeout", "60"},
                            with(kEnvLauncher, {"--", kBin + "/hoop-bench", "allreduce", "-b", "1K",
                                                "-e", "64K", "-f", "8", "-n", "2", "-w", "1"})));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("4 ranks (2 on this host)"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("Wrong elements       : 0 OK"), std::string::npos) << r.output;
}

TEST(HoopRunHosts, RejectsInconsistentOptions) {
  for (const auto& args : std::vector<std::vector<std::string>>{
           {"--hosts", "a:2", "--launcher", "ssh", "--", "true"},     // no {host}
           {"-n", "2", "--launcher", "ssh {host}", "--", "true"},     // launcher without hosts
           {"--hosts", "a:0", "--", "true"},                          // no slots
           {"--hosts", "a:2", "--hostfile", "/dev/null", "--", "true"},
           {"--", "true"}}) {                                         // neither -n nor hosts
    const Result r = run(args);
    EXPECT_EQ(r.exit_code, 2) << args[0] << " " << args[1] << ": " << r.output;
  }
}

}  // namespace
