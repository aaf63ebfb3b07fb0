#include "support/tool_process.h"

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <stdexcept>

extern char** environ;

namespace hoop::test {

namespace {

std::vector<char*> c_strings(std::vector<std::string>& strings) {
  std::vector<char*> out;
  for (auto& s : strings) out.push_back(s.data());
  out.push_back(nullptr);
  return out;
}

// "pid (comm) S ppid ...": the fields after the last ')' (comm may hold spaces and parens).
std::string stat_tail(pid_t pid) {
  const std::string content = read_proc_file("/proc/" + std::to_string(pid) + "/stat");
  const auto paren = content.rfind(')');
  return paren == std::string::npos ? std::string() : content.substr(paren + 2);
}

}  // namespace

ToolProcess::ToolProcess(const std::vector<std::string>& argv_in,
                         const std::vector<std::string>& extra_env) {
  int out[2], err[2];
  if (::pipe2(out, O_CLOEXEC) != 0 || ::pipe2(err, O_CLOEXEC) != 0) throw std::runtime_error("pipe2");
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, out[1], STDOUT_FILENO);
  posix_spawn_file_actions_adddup2(&actions, err[1], STDERR_FILENO);
  std::vector<std::string> argv_strings = argv_in;
  std::vector<std::string> env_strings;
  for (char** e = environ; *e != nullptr; ++e) env_strings.emplace_back(*e);
  env_strings.insert(env_strings.end(), extra_env.begin(), extra_env.end());
  auto argv = c_strings(argv_strings);
  auto envp = c_strings(env_strings);
  start_ = std::chrono::steady_clock::now();
  const int rc = ::posix_spawn(&pid_, argv_strings[0].c_str(), &actions, nullptr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  ::close(out[1]);
  ::close(err[1]);
  out_fd_ = out[0];
  err_fd_ = err[0];
  if (rc != 0) throw std::runtime_error("posix_spawn " + argv_strings[0] + ": " + std::strerror(rc));
}

ToolProcess::~ToolProcess() {
  if (!reaped_) {
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
  }
  if (out_fd_ >= 0) ::close(out_fd_);
  if (err_fd_ >= 0) ::close(err_fd_);
}

bool ToolProcess::wait_for(const std::string& text, std::chrono::milliseconds limit, bool in_err) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  const std::string& where = in_err ? err_ : out_;
  while (where.find(text) == std::string::npos) {
    if (std::chrono::steady_clock::now() >= deadline || !read_some(deadline)) return false;
  }
  return true;
}

ToolResult ToolProcess::finish(std::chrono::milliseconds limit) {
  ToolResult r;
  auto deadline = std::chrono::steady_clock::now() + limit;
  while (out_fd_ >= 0 || err_fd_ >= 0) {
    if (std::chrono::steady_clock::now() >= deadline) {
      r.timed_out = true;
      ::kill(pid_, SIGKILL);
      deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    }
    read_some(deadline);
  }
  int status = 0;
  ::waitpid(pid_, &status, 0);
  reaped_ = true;
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  r.out = out_;
  r.err = err_;
  return r;
}

bool ToolProcess::read_some(std::chrono::steady_clock::time_point deadline) {
  std::vector<pollfd> fds;
  if (out_fd_ >= 0) fds.push_back({out_fd_, POLLIN, 0});
  if (err_fd_ >= 0) fds.push_back({err_fd_, POLLIN, 0});
  if (fds.empty()) return false;
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
      deadline - std::chrono::steady_clock::now());
  ::poll(fds.data(), fds.size(), static_cast<int>(std::clamp<int64_t>(left.count(), 0, 1000)));
  for (const auto& p : fds) {
    if (!(p.revents & (POLLIN | POLLHUP | POLLERR))) continue;
    char buf[4096];
    const ssize_t got = ::read(p.fd, buf, sizeof buf);
    const bool is_out = p.fd == out_fd_;
    if (got > 0) {
      (is_out ? out_ : err_).append(buf, static_cast<size_t>(got));
    } else if (got == 0 || errno != EINTR) {
      ::close(p.fd);
      (is_out ? out_fd_ : err_fd_) = -1;
    }
  }
  return true;
}

std::string read_proc_file(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return {};
  std::string content;
  char buf[4096];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      content.clear();
      break;
    }
    if (n == 0) break;
    content.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  return content;
}

std::vector<pid_t> children_of(pid_t parent) {
  std::vector<pid_t> out;
  if (DIR* d = ::opendir("/proc")) {
    while (dirent* e = ::readdir(d)) {
      if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
      const pid_t pid = std::atoi(e->d_name);
      const std::string tail = stat_tail(pid);
      int ppid = 0;
      char state = 0;
      if (std::sscanf(tail.c_str(), "%c %d", &state, &ppid) == 2 && ppid == parent) out.push_back(pid);
    }
    ::closedir(d);
  }
  std::sort(out.begin(), out.end());
  return out;
}

bool process_ended(pid_t pid) {
  const std::string tail = stat_tail(pid);
  return tail.empty() || tail[0] == 'Z';
}

}  // namespace hoop::test
