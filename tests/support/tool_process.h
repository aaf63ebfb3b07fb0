// A tool of hoop (hoop-run, hoop-bench) started as users start it: posix_spawn, its stdout and
// stderr captured through pipes, reaped (or killed at a time limit) by finish().
#pragma once

#include <sys/types.h>

#include <chrono>
#include <string>
#include <vector>

namespace hoop::test {

struct ToolResult {
  int exit_code = -1;  // 128+signal when the tool itself was killed
  std::string out;
  std::string err;
  double seconds = 0;
  bool timed_out = false;  // finish() had to kill it
};

class ToolProcess {
 public:
  // argv[0] is the executable's path; extra_env is added to this process's environment.
  explicit ToolProcess(const std::vector<std::string>& argv,
                       const std::vector<std::string>& extra_env = {});
  ~ToolProcess();
  ToolProcess(const ToolProcess&) = delete;
  ToolProcess& operator=(const ToolProcess&) = delete;

  pid_t pid() const { return pid_; }
  const std::string& out() const { return out_; }
  const std::string& err() const { return err_; }

  // Reads output until `text` appears in stdout (or stderr when `in_err`); false at the limit
  // or when the tool closed its output first.
  bool wait_for(const std::string& text, std::chrono::milliseconds limit, bool in_err = false);
  // Reads everything until the tool closes its output, then reaps it; kills it at the limit.
  ToolResult finish(std::chrono::milliseconds limit = std::chrono::seconds(60));

 private:
  bool read_some(std::chrono::steady_clock::time_point deadline);

  pid_t pid_ = -1;
  int out_fd_ = -1;
  int err_fd_ = -1;
  bool reaped_ = false;
  std::string out_, err_;
  std::chrono::steady_clock::time_point start_;
};

// The whole of a /proc file; empty when it cannot be read, also when its process exits while
// it is read (a std::ifstream would throw from the read's ESRCH).
std::string read_proc_file(const std::string& path);
// Pids of the processes whose parent is `parent` (from /proc).
std::vector<pid_t> children_of(pid_t parent);
// A process that is gone or a zombie no longer runs.
bool process_ended(pid_t pid);

}  // namespace hoop::test
