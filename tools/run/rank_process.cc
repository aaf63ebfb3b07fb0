#include "rank_process.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>

#include <fmt/format.h>

#include "core/errors.h"
#include "core/open_files.h"

namespace hoop::run {

namespace {

std::vector<char*> c_strings(const std::vector<std::string>& strings) {
  std::vector<char*> out;
  out.reserve(strings.size() + 1);
  for (const auto& s : strings) out.push_back(const_cast<char*>(s.c_str()));
  out.push_back(nullptr);
  return out;
}

bool is_executable_file(const std::string& path) {
  struct stat st{};
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(path.c_str(), X_OK) == 0;
}

void make_pipe(UniqueFd& read_end, UniqueFd& write_end) {
  int fds[2];
  // A rank's output takes two pipes in hoop-run: a job of a few hundred ranks passes the usual
  // soft limit of 1024 open files, which is then raised to the hard one.
  if (::pipe2(fds, O_CLOEXEC) != 0 && !(errno == EMFILE && raise_open_file_limit() && ::pipe2(fds, O_CLOEXEC) == 0)) {
    const int err = errno;
    throw_error(ErrorCode::internal, fmt::format("cannot make a pipe for a rank's output: {}{}", std::strerror(err),
                                                 out_of_descriptors_note(err)));
  }
  read_end.reset(fds[0]);
  write_end.reset(fds[1]);
}

// In the child, between fork and exec: only async-signal-safe calls (hoop-run has threads).
[[noreturn]] void exec_child(const LaunchSpec& spec, pid_t parent, int out_fd, int err_fd,
                             int report_fd, char* const* argv, char* const* shell_argv,
                             char* const* envp) {
  ::setpgid(0, 0);
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  // hoop-run may have died before the line above: the child would then outlive it.
  if (::getppid() != parent) ::_exit(127);
  if (::dup2(spec.stdin_fd, STDIN_FILENO) < 0 || ::dup2(out_fd, STDOUT_FILENO) < 0 ||
      ::dup2(err_fd, STDERR_FILENO) < 0) {
    int err = errno;
    [[maybe_unused]] auto n = ::write(report_fd, &err, sizeof err);
    ::_exit(127);
  }
  // Whatever else hoop-run has open (the store's sockets, the pipe ends...) is not the rank's
  // business: closed at exec. The report pipe must stay open until then.
  ::close_range(STDERR_FILENO + 1, ~0U, CLOSE_RANGE_CLOEXEC);
  struct sigaction dfl{};
  dfl.sa_handler = SIG_DFL;
  ::sigaction(SIGPIPE, &dfl, nullptr);  // hoop-run ignores it; exec keeps an ignored signal
  ::sigprocmask(SIG_SETMASK, &spec.child_sigmask, nullptr);
  // Best effort: a CPU taken away meanwhile (cgroup change) leaves the rank unpinned.
  if (spec.bind) ::sched_setaffinity(0, sizeof spec.cpus, &spec.cpus);

  ::execve(spec.program_path.c_str(), argv, envp);
  if (errno == ENOEXEC) ::execve("/bin/sh", shell_argv, envp);  // a script without "#!", as execvp does
  int err = errno;
  [[maybe_unused]] auto n = ::write(report_fd, &err, sizeof err);
  ::_exit(127);
}

}  // namespace

std::optional<std::string> resolve_program(const std::string& program,
                                           const std::optional<std::string>& path_var) {
  if (program.empty()) return std::nullopt;
  if (program.find('/') != std::string::npos)
    return is_executable_file(program) ? std::optional(program) : std::nullopt;
  std::string path = path_var.value_or("/usr/local/bin:/usr/bin:/bin");
  size_t start = 0;
  while (start <= path.size()) {
    size_t end = path.find(':', start);
    if (end == std::string::npos) end = path.size();
    std::string dir = path.substr(start, end - start);
    std::string candidate = (dir.empty() ? std::string(".") : dir) + "/" + program;
    if (is_executable_file(candidate)) return candidate;
    start = end + 1;
  }
  return std::nullopt;
}

std::string signal_name(int sig) {
  if (const char* abbrev = ::sigabbrev_np(sig)) return std::string("SIG") + abbrev;
  return fmt::format("signal {}", sig);
}

RankProcess::RankProcess(int rank, const LaunchSpec& spec) : rank_(rank) {
  UniqueFd out_write, err_write, report_read, report_write;
  make_pipe(stdout_, out_write);
  make_pipe(stderr_, err_write);
  make_pipe(report_read, report_write);

  // Everything the child needs is prepared before fork: it must not allocate.
  auto argv = c_strings(spec.argv);
  std::vector<std::string> shell_args{"/bin/sh", spec.program_path};
  shell_args.insert(shell_args.end(), spec.argv.begin() + (spec.argv.empty() ? 0 : 1), spec.argv.end());
  auto shell_argv = c_strings(shell_args);
  auto envp = c_strings(spec.env);
  const pid_t parent = ::getpid();

  pid_t pid = ::fork();
  if (pid < 0) throw_system_error(ErrorCode::internal, fmt::format("rank {}: fork", rank), errno);
  if (pid == 0) {
    exec_child(spec, parent, out_write.get(), err_write.get(), report_write.get(), argv.data(),
               shell_argv.data(), envp.data());
  }
  pid_ = pid;
  running_ = true;
  // Also from this side, so that the group exists before any signal is forwarded to it.
  ::setpgid(pid, pid);
  out_write.reset();
  err_write.reset();
  report_write.reset();

  // End of file on the report pipe: the exec succeeded (the pipe was close-on-exec).
  int child_errno = 0;
  ssize_t got;
  do {
    got = ::read(report_read.get(), &child_errno, sizeof child_errno);
  } while (got < 0 && errno == EINTR);
  if (got > 0) {
    int status = 0;
    while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    running_ = false;
    wait_status_ = status;
    throw_system_error(ErrorCode::init,
                       fmt::format("rank {}: cannot execute {}", rank, spec.program_path),
                       child_errno);
  }
  for (const UniqueFd* fd : {&stdout_, &stderr_})
    ::fcntl(fd->get(), F_SETFL, ::fcntl(fd->get(), F_GETFL) | O_NONBLOCK);
}

bool RankProcess::reap() {
  if (!running_) return false;
  // Look first without reaping: while the rank is a zombie its pid, and so its process
  // group's id, cannot be reused, and what it left in its group can be killed safely.
  siginfo_t info{};
  if (::waitid(P_PID, static_cast<id_t>(pid_), &info, WEXITED | WNOHANG | WNOWAIT) != 0 ||
      info.si_pid != pid_)
    return false;
  ::kill(-pid_, SIGKILL);
  int status = 0;
  while (::waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
  }
  running_ = false;
  wait_status_ = status;
  return true;
}

void RankProcess::signal_group(int sig) const {
  // After the reap the group's id may in principle be reused: never signal it then.
  if (running_) ::kill(-pid_, sig);
}

bool RankProcess::failed() const {
  return !(WIFEXITED(wait_status_) && WEXITSTATUS(wait_status_) == 0);
}

int RankProcess::exit_code() const {
  if (WIFSIGNALED(wait_status_)) return 128 + WTERMSIG(wait_status_);
  return WIFEXITED(wait_status_) ? WEXITSTATUS(wait_status_) : 1;
}

std::string RankProcess::describe_exit() const {
  if (WIFSIGNALED(wait_status_)) {
    int sig = WTERMSIG(wait_status_);
    return fmt::format("rank {} (pid {}) was killed by signal {} ({})", rank_, pid_, sig,
                       signal_name(sig));
  }
  return fmt::format("rank {} (pid {}) exited with code {}", rank_, pid_,
                     WEXITSTATUS(wait_status_));
}

}  // namespace hoop::run
