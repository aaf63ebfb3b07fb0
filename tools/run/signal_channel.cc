#include "signal_channel.h"

#include <errno.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include "core/errors.h"

namespace hoop::run {

SignalChannel::SignalChannel() {
  sigset_t handled;
  sigemptyset(&handled);
  sigaddset(&handled, SIGCHLD);
  for (int sig : {SIGINT, SIGTERM, SIGHUP}) {
    // A signal ignored when hoop-run starts (nohup, a background job of a script) stays
    // ignored, as in any program: the ranks inherit that, and hoop-run does not stop for it.
    // (A blocked signal is queued even when ignored, so it must stay out of the set.)
    struct sigaction current{};
    ::sigaction(sig, nullptr, &current);
    if (current.sa_handler != SIG_IGN) sigaddset(&handled, sig);
  }
  if (int err = ::pthread_sigmask(SIG_BLOCK, &handled, &original_mask_); err != 0)
    throw_system_error(ErrorCode::internal, "pthread_sigmask", err);
  fd_.reset(::signalfd(-1, &handled, SFD_NONBLOCK | SFD_CLOEXEC));
  if (!fd_.valid()) {
    int err = errno;
    ::pthread_sigmask(SIG_SETMASK, &original_mask_, nullptr);
    throw_system_error(ErrorCode::internal, "signalfd", err);
  }
  struct sigaction ignore{};
  ignore.sa_handler = SIG_IGN;
  ::sigaction(SIGPIPE, &ignore, nullptr);
}

std::vector<int> SignalChannel::drain() {
  std::vector<int> received;
  signalfd_siginfo info[16];
  for (;;) {
    ssize_t got = ::read(fd_.get(), info, sizeof info);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) break;
    for (size_t i = 0; i < static_cast<size_t>(got) / sizeof info[0]; ++i)
      received.push_back(static_cast<int>(info[i].ssi_signo));
  }
  return received;
}

}  // namespace hoop::run
