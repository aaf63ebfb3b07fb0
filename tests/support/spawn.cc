#include "support/spawn.h"

#include <dirent.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <map>
#include <random>
#include <thread>

#include "hoop/store.h"
#include "transport/shm/shm_transport.h"

namespace hoop::test {

void RankContext::report(const std::string& line) const {
  std::string msg = line + "\n";
  const char* p = msg.data();
  size_t left = msg.size();
  while (left > 0) {
    ssize_t n = ::write(report_fd, p, left);
    if (n <= 0) {
      if (n < 0 && errno == EINTR) continue;
      return;
    }
    p += n;
    left -= static_cast<size_t>(n);
  }
}

std::shared_ptr<Store> RankContext::store() const {
  return connect_tcp_store("127.0.0.1", store_port, std::chrono::seconds(30));
}

std::string unique_job_id() {
  // Process ids repeat (pid_max is often 32768), so a part drawn at random keeps a job of this
  // test from meeting a segment an earlier test process of the same pid left behind.
  static const unsigned salt = std::random_device{}() % 46656;
  static std::atomic<int> counter{0};
  return "t" + std::to_string(::getpid()) + "s" + std::to_string(salt) + "x" + std::to_string(counter++);
}

std::vector<std::string> hoop_shm_entries() {
  std::vector<std::string> out;
  if (DIR* d = ::opendir("/dev/shm")) {
    while (dirent* e = ::readdir(d)) {
      if (std::strncmp(e->d_name, "hoop-", 5) == 0) out.emplace_back(e->d_name);
    }
    ::closedir(d);
  }
  return out;
}

std::vector<std::string> job_segments(const std::string& job_id) {
  std::vector<std::string> out;
  const std::string prefix = "hoop-" + job_id + "-";
  for (const auto& e : hoop_shm_entries()) {
    if (e.rfind(prefix, 0) == 0) out.push_back(e);
  }
  return out;
}

double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

namespace {

// Moves the complete lines of `partial` (without their '\n') to `lines`, keeping the rest.
void take_lines(std::string& partial, std::vector<std::string>& lines) {
  size_t pos;
  while ((pos = partial.find('\n')) != std::string::npos) {
    lines.push_back(partial.substr(0, pos));
    partial.erase(0, pos + 1);
  }
}

int listen_loopback(uint16_t* port) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 || ::listen(fd, 512) != 0) {
    ::close(fd);
    return -1;
  }
  socklen_t len = sizeof addr;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  *port = ntohs(addr.sin_port);
  return fd;
}

// The store process (with the ranks' environment, HOOP_SECRET included): serves until its
// parent kills it.
pid_t start_store_process(int listen_fd, const SpawnOptions& opts) {
  pid_t pid = ::fork();
  if (pid == 0) {
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    for (auto& [k, v] : opts.env) ::setenv(k.c_str(), v.c_str(), 1);
    auto server = TcpStoreServer::from_listening_fd(listen_fd);
    for (;;) ::pause();
  }
  return pid;
}

}  // namespace

std::vector<RankResult> run_ranks(int n, const std::function<void(RankContext&)>& body,
                                  const SpawnOptions& opts) {
  std::cout.flush();
  std::cerr.flush();
  uint16_t port = 0;
  int listen_fd = listen_loopback(&port);
  if (listen_fd < 0) throw std::runtime_error("run_ranks: cannot listen on loopback");
  pid_t store_pid = start_store_process(listen_fd, opts);
  ::close(listen_fd);

  const std::string job = unique_job_id();
  std::vector<pid_t> pids(n);
  std::vector<int> report_fds(n);
  for (int r = 0; r < n; ++r) {
    int pipefd[2];
    if (::pipe2(pipefd, O_CLOEXEC) != 0) throw std::runtime_error("run_ranks: pipe failed");
    pid_t pid = ::fork();
    if (pid == 0) {
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      ::close(pipefd[0]);
      for (auto& [k, v] : opts.env) ::setenv(k.c_str(), v.c_str(), 1);
      RankContext ctx;
      ctx.rank = r;
      ctx.size = n;
      ctx.store_port = port;
      ctx.job_id = job;
      ctx.report_fd = pipefd[1];
      int code = 0;
      try {
        body(ctx);
        if (::testing::Test::HasFailure()) code = 1;
      } catch (const std::exception& e) {
        std::cerr << "rank " << r << " failed: " << e.what() << std::endl;
        ctx.report(std::string("EXCEPTION ") + e.what());
        code = 2;
      }
      std::cout.flush();
      std::cerr.flush();
      ::_exit(code);
    }
    ::close(pipefd[1]);
    pids[r] = pid;
    report_fds[r] = pipefd[0];
  }
  if (opts.on_started) opts.on_started(std::vector<int>(pids.begin(), pids.end()));

  std::vector<RankResult> results(n);
  std::vector<std::string> partial(n);
  std::vector<bool> done(n, false), eof(n, false);
  auto deadline = std::chrono::steady_clock::now() + opts.timeout;
  int remaining = n;
  while (remaining > 0) {
    std::vector<pollfd> pfds;
    std::vector<int> who;
    for (int r = 0; r < n; ++r) {
      if (!eof[r]) {
        pfds.push_back({report_fds[r], POLLIN, 0});
        who.push_back(r);
      }
    }
    ::poll(pfds.data(), pfds.size(), pfds.empty() ? 0 : 20);
    for (size_t i = 0; i < pfds.size(); ++i) {
      if (!(pfds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      int r = who[i];
      char buf[4096];
      ssize_t got = ::read(report_fds[r], buf, sizeof buf);
      if (got <= 0) {
        eof[r] = true;
        continue;
      }
      partial[r].append(buf, static_cast<size_t>(got));
      take_lines(partial[r], results[r].reports);
    }
    for (int r = 0; r < n; ++r) {
      if (done[r]) continue;
      int status = 0;
      pid_t w = ::waitpid(pids[r], &status, WNOHANG);
      if (w == pids[r]) {
        done[r] = true;
        --remaining;
        results[r].rank = r;
        if (WIFEXITED(status)) results[r].exit_code = WEXITSTATUS(status);
        if (WIFSIGNALED(status)) results[r].signal = WTERMSIG(status);
      }
    }
    if (remaining > 0 && std::chrono::steady_clock::now() > deadline) {
      for (int r = 0; r < n; ++r) {
        if (!done[r]) {
          std::cerr << "run_ranks: rank " << r << " still running at timeout, killing it\n";
          ::kill(pids[r], SIGKILL);
        }
      }
      deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    }
  }
  // Drain what is left in the pipes.
  for (int r = 0; r < n; ++r) {
    char buf[4096];
    ssize_t got;
    while (!eof[r] && (got = ::read(report_fds[r], buf, sizeof buf)) > 0) partial[r].append(buf, got);
    take_lines(partial[r], results[r].reports);
    if (!partial[r].empty()) results[r].reports.push_back(partial[r]);  // a last line without '\n'
    ::close(report_fds[r]);
  }
  ::kill(store_pid, SIGKILL);
  ::waitpid(store_pid, nullptr, 0);
  if (opts.remove_segments) transport::shm_remove_job_segments(job);
  return results;
}

SpawnOptions launcher_cleanup() {
  SpawnOptions o;
  o.remove_segments = true;
  return o;
}

::testing::AssertionResult all_ok(const std::vector<RankResult>& results) {
  std::string failures;
  for (const auto& r : results) {
    if (r.ok()) continue;
    failures += "rank " + std::to_string(r.rank) + ": ";
    failures += r.signal ? "killed by signal " + std::to_string(r.signal)
                         : "exit code " + std::to_string(r.exit_code);
    for (const auto& line : r.reports) failures += "\n    " + line;
    failures += "\n";
  }
  if (failures.empty()) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << failures;
}

}  // namespace hoop::test
