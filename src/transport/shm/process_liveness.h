// Is a peer's process still alive? kill(pid, 0) alone is fooled by zombies (dead, not yet
// reaped) and by a pid recycled for another process, so /proc/<pid>/stat is read too: its
// state and its start time, which must stay the one first seen.
#pragma once

#include <sys/types.h>

#include <cstdint>

namespace hoop::transport::shm {

class ProcessLiveness {
 public:
  // False once the process is gone, a zombie, or replaced by another with the same pid.
  bool alive(pid_t pid);
  // True while the process is stopped (SIGSTOP, SIGTSTP, a debugger): alive, yet it will not
  // move, and every peer waiting on it will time out.
  static bool stopped(pid_t pid);

 private:
  pid_t watched_pid_ = 0;
  uint64_t watched_start_time_ = 0;
};

}  // namespace hoop::transport::shm
