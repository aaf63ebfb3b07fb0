// Host ids: equal for processes of one host, different across hosts (and network namespaces).
#include <sched.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <optional>
#include <string>

#include <gtest/gtest.h>

#include "bootstrap/host_id.h"

namespace hoop::bootstrap {
namespace {

// Restores HOOP_HOST_ID as the test found it.
class HostIdTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (const char* v = std::getenv("HOOP_HOST_ID")) saved_ = v;
    ::unsetenv("HOOP_HOST_ID");
  }
  void TearDown() override {
    if (saved_) {
      ::setenv("HOOP_HOST_ID", saved_->c_str(), 1);
    } else {
      ::unsetenv("HOOP_HOST_ID");
    }
  }

 private:
  std::optional<std::string> saved_;
};

// Runs f in a forked child and returns what it wrote; exit code 77 means "cannot here".
std::string in_child(void (*f)(int fd), int* exit_code) {
  int p[2];
  EXPECT_EQ(::pipe(p), 0);
  pid_t pid = ::fork();
  if (pid == 0) {
    ::close(p[0]);
    f(p[1]);
    ::_exit(0);
  }
  ::close(p[1]);
  std::string out;
  char buf[512];
  ssize_t n;
  while ((n = ::read(p[0], buf, sizeof buf)) > 0) out.append(buf, static_cast<size_t>(n));
  ::close(p[0]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  *exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return out;
}

void write_host_id(int fd) {
  std::string id = host_id();
  if (::write(fd, id.data(), id.size()) != static_cast<ssize_t>(id.size())) ::_exit(1);
}

TEST_F(HostIdTest, StableAndMadeOfHostBootAndNetworkNamespace) {
  const std::string id = host_id();
  EXPECT_EQ(id, host_id());
  EXPECT_EQ(id.rfind(hostname() + "/", 0), 0u) << id;
  std::ifstream in("/proc/sys/kernel/random/boot_id");
  std::string boot;
  std::getline(in, boot);
  ASSERT_FALSE(boot.empty());
  EXPECT_NE(id.find("/" + boot + "/"), std::string::npos) << id;
  const std::string ns = id.substr(id.rfind('/') + 1);
  EXPECT_FALSE(ns.empty());
  EXPECT_EQ(ns.find_first_not_of("0123456789"), std::string::npos) << id;
}

TEST_F(HostIdTest, SameInAnotherProcessOfThisHost) {
  int code = 0;
  EXPECT_EQ(in_child(write_host_id, &code), host_id());
  EXPECT_EQ(code, 0);
}

TEST_F(HostIdTest, OverriddenByHoopHostId) {
  const std::string real = host_id();
  ::setenv("HOOP_HOST_ID", "pretend-host-2", 1);
  EXPECT_EQ(host_id(), "pretend-host-2");
  EXPECT_NE(host_id(), real);
  ::unsetenv("HOOP_HOST_ID");
  EXPECT_EQ(host_id(), real);
}

TEST_F(HostIdTest, AnotherNetworkNamespaceIsAnotherHost) {
  int code = 0;
  std::string other = in_child(
      [](int fd) {
        if (::unshare(CLONE_NEWUSER | CLONE_NEWNET) != 0) ::_exit(77);
        write_host_id(fd);
      },
      &code);
  if (code == 77) GTEST_SKIP() << "cannot create a network namespace here";
  ASSERT_EQ(code, 0);
  EXPECT_NE(other, host_id());
  // Same host name and boot: only the namespace part differs.
  EXPECT_EQ(other.substr(0, other.rfind('/')), host_id().substr(0, host_id().rfind('/')));
}

}  // namespace
}  // namespace hoop::bootstrap
