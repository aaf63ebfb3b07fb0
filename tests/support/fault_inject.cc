#include "support/fault_inject.h"

#include <dirent.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>
#include <thread>

namespace hoop::test {

const char* fault_name(Fault f) {
  switch (f) {
    case Fault::kill: return "kill";
    case Fault::stop: return "stop";
    case Fault::reset: return "reset";
    case Fault::close: return "close";
  }
  return "?";
}

namespace {

uint16_t port_of(const sockaddr_storage& a) {
  if (a.ss_family == AF_INET) return ntohs(reinterpret_cast<const sockaddr_in&>(a).sin_port);
  if (a.ss_family == AF_INET6) return ntohs(reinterpret_cast<const sockaddr_in6&>(a).sin6_port);
  return 0;
}

}  // namespace

int connected_tcp_sockets(uint16_t skip_port, int* fds, int max_fds) {
  int n = 0;
  DIR* d = ::opendir("/proc/self/fd");
  if (!d) return 0;
  while (dirent* e = ::readdir(d)) {
    if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
    const int fd = std::atoi(e->d_name);
    int type = 0;
    socklen_t len = sizeof type;
    if (::getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &len) != 0 || type != SOCK_STREAM) continue;
    sockaddr_storage peer{};
    len = sizeof peer;
    if (::getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &len) != 0) continue;  // listener
    if (peer.ss_family != AF_INET && peer.ss_family != AF_INET6) continue;
    if (port_of(peer) == skip_port) continue;  // the store
    if (n < max_fds) fds[n++] = fd;
  }
  ::closedir(d);
  return n;
}

void inject_fault_later(Fault fault, std::chrono::microseconds delay, uint16_t store_port) {
  std::thread([=] {
    std::this_thread::sleep_for(delay);
    switch (fault) {
      case Fault::kill: ::kill(::getpid(), SIGKILL); break;
      case Fault::stop: ::kill(::getpid(), SIGSTOP); break;
      case Fault::reset:
      case Fault::close: {
        int fds[256];
        const int n = connected_tcp_sockets(store_port, fds, 256);
        const int dev_null = ::open("/dev/null", O_RDWR | O_CLOEXEC);
        for (int i = 0; i < n; ++i) {
          if (fault == Fault::close) {
            ::shutdown(fds[i], SHUT_RDWR);
          } else {
            // Closing with a zero linger sends RST; the descriptor number stays taken (by
            // /dev/null), so the rank's own code reads end-of-file instead of another file.
            const linger hard{1, 0};
            ::setsockopt(fds[i], SOL_SOCKET, SO_LINGER, &hard, sizeof hard);
            ::dup2(dev_null, fds[i]);
          }
        }
        if (dev_null >= 0) ::close(dev_null);
        break;
      }
    }
  }).detach();
}

}  // namespace hoop::test
