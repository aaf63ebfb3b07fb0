#include "transport/tcp/socket_options.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <climits>
#include <cstring>
#include <optional>
#include <string>

#include "core/errors.h"
#include "core/log.h"
#include "core/params.h"

namespace hoop::transport::tcp {

namespace {

std::atomic<size_t> buffer_cap{0};
std::atomic<uint32_t> cap_generation{0};

size_t capped_buffer_bytes() {
  const size_t configured = socket_buffer_bytes();
  const size_t cap = buffer_cap.load(std::memory_order_relaxed);
  if (cap == 0) return configured;
  return configured == 0 ? cap : std::min(configured, cap);
}

}  // namespace

size_t socket_buffer_bytes() {
  const uint64_t v = params::bytes(params::Id::socket_buffer);
  return static_cast<size_t>(std::min<uint64_t>(v, INT_MAX / 2));
}

void set_buffer_sizes(int fd, size_t bytes) noexcept {
  if (bytes == 0) return;  // 0: leave the kernel's autotuning alone
  const int value = static_cast<int>(bytes);
  ::setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &value, sizeof value);
  ::setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &value, sizeof value);
}

void configure_link_socket(int fd) {
  const int flags = ::fcntl(fd, F_GETFL);
  if (flags < 0 || ::fcntl(fd, F_SETFL, flags | O_NONBLOCK) != 0) {
    throw_system_error(ErrorCode::transport, "cannot make the TCP socket non-blocking", errno);
  }
  const int one = 1;
  if (::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one) != 0) {
    throw_system_error(ErrorCode::transport, "cannot set TCP_NODELAY", errno);
  }
  ::setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof one);
  apply_buffer_cap(fd);
  set_congestion_control(fd);
}

void set_congestion_control(int fd) {
  // Unset: cubic where this process may choose it, else (silently) the system's. BBR, the
  // default on some systems, cuts a connection to four packets for 200 ms whenever ten seconds
  // pass without a round trip as short as its shortest, which a saturated link never sees
  // again; in a ring every rank then waits for the link that is probing (8 hosts at 1 Gbit/s:
  // 91% of the goodput at 256 MiB under BBR, 99.5% under cubic).
  const std::optional<std::string> configured = params::text(params::Id::tcp_congestion);
  const std::string name = configured.value_or("cubic");
  if (name == "system") return;
  if (::setsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, name.data(), static_cast<socklen_t>(name.size())) == 0) return;
  static std::atomic<bool> reported{false};
  if (configured && !reported.exchange(true)) {
    const int e = errno;
    HOOP_WARN("tcp: HOOP_TCP_CONGESTION={}: the kernel refuses it ({}{}); the links keep the system's congestion control",
              name, std::strerror(e),
              e == EPERM ? ", not in net.ipv4.tcp_allowed_congestion_control" : e == ENOENT ? ", not available" : "");
  }
}

void cap_link_buffers(size_t bytes) noexcept {
  if (buffer_cap.exchange(bytes, std::memory_order_relaxed) != bytes)
    cap_generation.fetch_add(1, std::memory_order_release);
}

uint32_t buffer_cap_generation() noexcept { return cap_generation.load(std::memory_order_acquire); }

void apply_buffer_cap(int fd) noexcept { set_buffer_sizes(fd, capped_buffer_bytes()); }

}  // namespace hoop::transport::tcp
