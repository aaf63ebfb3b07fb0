// One rank of the job as a child process: started with fork/exec in its own process group
// (so that signals reach the whole tree it starts), its stdout and stderr on pipes, and
// PR_SET_PDEATHSIG so that it dies with hoop-run even when hoop-run is killed with -9.
#pragma once

#include <sched.h>
#include <signal.h>
#include <sys/types.h>

#include <optional>
#include <string>
#include <vector>

#include "unique_fd.h"

namespace hoop::run {

struct LaunchSpec {
  std::string program_path;       // resolved: contains a '/'
  std::vector<std::string> argv;  // argv[0] as the user wrote it
  std::vector<std::string> env;   // "NAME=VALUE"
  sigset_t child_sigmask;         // the signal mask the child starts with
  int stdin_fd = -1;              // the child's stdin
  bool bind = false;              // pin the child to `cpus` before exec
  cpu_set_t cpus;
};

// Looks program up like execvp: as is when it contains a '/', else in the directories of
// PATH (the child's). Empty when nothing executable is found.
std::optional<std::string> resolve_program(const std::string& program,
                                           const std::optional<std::string>& path_var);

class RankProcess {
 public:
  // Starts the rank; returns once it has exec'd the program. Throws hoop::Error when fork or
  // exec fails.
  RankProcess(int rank, const LaunchSpec& spec);
  RankProcess(const RankProcess&) = delete;
  RankProcess& operator=(const RankProcess&) = delete;

  int rank() const { return rank_; }
  pid_t pid() const { return pid_; }
  bool running() const { return running_; }
  // Valid once the rank has exited.
  int wait_status() const { return wait_status_; }
  bool failed() const;  // exited non-zero or killed by a signal
  // hoop-run's exit code for this outcome: the exit code, or 128+signal.
  int exit_code() const;
  // "rank 2 (pid 123) exited with code 3" / "... was killed by signal 9 (SIGKILL)".
  std::string describe_exit() const;

  // Reaps the rank if it has exited (never blocks); true when it exited by this call.
  // Processes the rank left behind in its process group are killed then: a job leaves
  // nothing running (daemons that started their own session are beyond reach).
  bool reap();
  // Sends sig to the rank's process group, while the rank has not been reaped.
  void signal_group(int sig) const;

  // Read ends of the rank's stdout and stderr (non-blocking); reset at end of stream.
  UniqueFd& stdout_pipe() { return stdout_; }
  UniqueFd& stderr_pipe() { return stderr_; }
  const UniqueFd& stdout_pipe() const { return stdout_; }
  const UniqueFd& stderr_pipe() const { return stderr_; }

 private:
  int rank_;
  pid_t pid_ = -1;
  bool running_ = false;
  int wait_status_ = 0;
  UniqueFd stdout_;
  UniqueFd stderr_;
};

// "SIGKILL" for 9; "signal 77" for a number without a name.
std::string signal_name(int sig);

}  // namespace hoop::run
