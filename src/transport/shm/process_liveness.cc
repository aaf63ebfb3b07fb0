#include "transport/shm/process_liveness.h"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <optional>
#include <sstream>
#include <string>

namespace hoop::transport::shm {

namespace {

struct ProcessState {
  char state = '?';         // R, S, D, Z (zombie), X (dead)...
  uint64_t start_time = 0;  // clock ticks after boot: tells a recycled pid apart
};

// nullopt when /proc has no entry for the pid (the process is gone, or /proc is missing); state
// 'X' when the process vanished between opening and reading its entry (read() fails with
// ESRCH then). Plain read(): a stream would throw from inside its iterator in that case.
std::optional<ProcessState> read_process_state(pid_t pid) {
  char path[64];
  std::snprintf(path, sizeof(path), "/proc/%d/stat", static_cast<int>(pid));
  const int fd = ::open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  std::string text;
  char buf[512];
  ssize_t got = 0;
  while ((got = ::read(fd, buf, sizeof(buf))) > 0 || (got < 0 && errno == EINTR)) {
    if (got > 0) text.append(buf, static_cast<size_t>(got));
  }
  ::close(fd);
  if (got < 0) return ProcessState{'X', 0};
  // "pid (comm) state ppid ...": comm may hold spaces and parentheses, so parse after the
  // last ')'. The fields after it are numbered from 3 (state); starttime is field 22.
  const size_t close = text.rfind(')');
  if (close == std::string::npos) return std::nullopt;
  std::istringstream fields(text.substr(close + 1));
  ProcessState st;
  fields >> st.state;
  std::string skip;
  for (int field = 4; field < 22 && fields; ++field) fields >> skip;
  fields >> st.start_time;
  return st;
}

}  // namespace

bool ProcessLiveness::alive(pid_t pid) {
  if (kill(pid, 0) == -1 && errno == ESRCH) return false;
  const auto st = read_process_state(pid);
  if (!st) return true;  // no /proc: kill() is all we can tell
  if (st->state == 'Z' || st->state == 'X') return false;
  if (watched_pid_ != pid) {
    watched_pid_ = pid;
    watched_start_time_ = st->start_time;
    return true;
  }
  return st->start_time == watched_start_time_;
}

bool ProcessLiveness::stopped(pid_t pid) {
  const auto st = read_process_state(pid);
  return st && (st->state == 'T' || st->state == 't');
}

}  // namespace hoop::transport::shm
