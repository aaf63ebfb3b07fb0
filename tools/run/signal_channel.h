// hoop-run receives SIGINT, SIGTERM, SIGHUP (unless ignored at start) and SIGCHLD through a
// signalfd, in its event loop, instead of in handlers. Construct it before any thread starts (the store server's): threads
// inherit the blocked mask, so no thread can be killed by one of these signals.
#pragma once

#include <signal.h>

#include <vector>

#include "unique_fd.h"

namespace hoop::run {

class SignalChannel {
 public:
  // Blocks the signals, opens the signalfd, and ignores SIGPIPE (a closed stdout must not
  // kill the launcher while its ranks run). The signals stay blocked for the rest of the
  // process: unblocking one that arrived late would kill hoop-run before its clean-up.
  SignalChannel();
  SignalChannel(const SignalChannel&) = delete;
  SignalChannel& operator=(const SignalChannel&) = delete;

  int fd() const { return fd_.get(); }
  // The signals received since the last call, in order (never blocks).
  std::vector<int> drain();
  // The mask before construction: what the ranks start with.
  const sigset_t& original_mask() const { return original_mask_; }

 private:
  sigset_t original_mask_;
  UniqueFd fd_;
};

}  // namespace hoop::run
