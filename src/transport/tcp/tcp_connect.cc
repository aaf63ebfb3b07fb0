// Establishing a TCP link: the lower rank connects (with retries), the higher one accepts
// through the process's listener; both ends then agree through the handshake.
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <thread>

#include <fmt/ranges.h>

#include "core/errors.h"
#include "core/log.h"
#include "transport/tcp/connect_targets.h"
#include "transport/shm/process_liveness.h"
#include "transport/tcp/handshake.h"
#include "transport/tcp/interfaces.h"
#include "core/socket_address.h"
#include "transport/tcp/socket_options.h"
#include "transport/tcp/tcp_link.h"
#include "transport/tcp/tcp_transport.h"
#include "transport/tcp/unique_fd.h"

namespace hoop::transport {

using hoop::SocketAddress;
using tcp::context_of;
using tcp::kFirstBackoff;
using tcp::kGiveUpAfter;
using tcp::kMaxBackoff;
using tcp::Target;
using tcp::targets_for;
using tcp::UniqueFd;
using tcp::worth_retrying;

namespace {

// A connect attempt that neither succeeds nor fails (SYN lost, a firewall dropping it) is
// abandoned after this long, so the next address gets its turn.
constexpr milliseconds kConnectAttemptTimeout{3000};

int wait_for(int fd, short events, TimePoint until) {
  pollfd pfd{fd, events, 0};
  for (;;) {
    const auto left = std::chrono::ceil<milliseconds>(until - Clock::now()).count();
    const int rc = ::poll(&pfd, 1, static_cast<int>(std::max<int64_t>(left, 0)));
    if (rc < 0 && errno == EINTR) continue;
    return rc < 0 ? -1 : pfd.revents;
  }
}

// Slices of the wait for the peer's answer, between looks at the peer and the communicator.
constexpr milliseconds kAnswerSlice{100};

// Ends a wait for the peer that began at `start` once the communicator failed elsewhere: a
// peer that went on to recover makes no link and answers no handshake.
void check_not_given_up(const TcpLinkParams& p, TimePoint start, const char* waiting_for) {
  if (p.gave_up && Clock::now() - start >= kGiveUpAfter && p.gave_up()) {
    throw_error(ErrorCode::peer_failure,
                fmt::format("gave up waiting for {} of rank {}: the communicator failed elsewhere "
                            "(communicator {:#x}, channel {})",
                            waiting_for, p.peer_rank, p.comm_id, p.channel),
                context_of(p));
  }
}

// One non-blocking connect; returns the connected socket or an empty one with *err set.
UniqueFd try_connect(const SocketAddress& addr, TimePoint until, int* err) {
  UniqueFd fd(tcp::open_stream_socket(addr.family()));
  if (!fd) {
    *err = errno;
    return {};
  }
  // Before connect, so the window scale offered in the SYN fits the large receive buffer.
  tcp::set_buffer_sizes(fd.get(), tcp::socket_buffer_bytes());
  if (::connect(fd.get(), addr.get(), addr.length) == 0) return fd;
  if (errno != EINPROGRESS && errno != EINTR) {
    *err = errno;
    return {};
  }
  if (wait_for(fd.get(), POLLOUT, until) <= 0) {
    *err = ETIMEDOUT;
    return {};
  }
  int so_error = 0;
  socklen_t len = sizeof so_error;
  if (::getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &so_error, &len) != 0) so_error = errno;
  if (so_error != 0) {
    *err = so_error;
    return {};
  }
  return fd;
}

UniqueFd connect_with_retry(const TcpLinkParams& p, const std::vector<Target>& targets,
                            TimePoint deadline, std::string* connected_to) {
  const TimePoint start = Clock::now();
  milliseconds backoff = kFirstBackoff;
  std::string last_failure;
  int attempts = 0;
  shm::ProcessLiveness liveness;
  for (;;) {
    bool retry = false;
    for (const auto& t : targets) {
      const TimePoint until = std::min(deadline, Clock::now() + kConnectAttemptTimeout);
      int err = 0;
      ++attempts;
      UniqueFd fd = try_connect(t.address, until, &err);
      if (fd) {
        *connected_to = t.text;
        return fd;
      }
      retry |= worth_retrying(err);
      last_failure = fmt::format("{}: {}{}", t.text, std::strerror(err), out_of_descriptors_note(err));
      HOOP_TRACE("tcp: connect to rank {} at {} failed", p.peer_rank, last_failure);
      if (Clock::now() >= deadline) break;
    }
    if (!retry) {
      throw_error(ErrorCode::transport,
                  fmt::format("cannot connect to rank {} at any of its addresses (last: {})",
                              p.peer_rank, last_failure),
                  context_of(p));
    }
    if (p.peer_pid > 0 && !liveness.alive(static_cast<pid_t>(p.peer_pid))) {
      throw_error(ErrorCode::peer_failure,
                  fmt::format("rank {} (pid {}) exited before its connection was made (last: {})", p.peer_rank,
                              p.peer_pid, last_failure),
                  context_of(p));
    }
    check_not_given_up(p, start, "a connection");
    const TimePoint now = Clock::now();
    if (now >= deadline) {
      throw_error(ErrorCode::timeout,
                  fmt::format("cannot connect to rank {} within {:.1f} s ({} attempts; last: {})",
                              p.peer_rank, seconds_between(start, deadline), attempts, last_failure),
                  context_of(p));
    }
    std::this_thread::sleep_for(std::min<nanoseconds>(backoff, deadline - now));
    backoff = std::min(backoff * 2, kMaxBackoff);
  }
}

void send_all(int fd, std::span<const std::byte> bytes, TimePoint deadline, const TcpLinkParams& p) {
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::send(fd, bytes.data() + done, bytes.size() - done, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) {
      done += static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK) {
      throw_system_error(ErrorCode::peer_failure,
                         fmt::format("sending the handshake to rank {} failed", p.peer_rank), errno,
                         context_of(p));
    }
    if (wait_for(fd, POLLOUT, deadline) <= 0) {
      throw_error(ErrorCode::timeout,
                  fmt::format("rank {} did not take the handshake before the deadline", p.peer_rank),
                  context_of(p));
    }
  }
}

void receive_all(int fd, std::span<std::byte> bytes, TimePoint deadline, const TcpLinkParams& p,
                 const std::string& where) {
  const TimePoint start = Clock::now();
  shm::ProcessLiveness liveness;
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::recv(fd, bytes.data() + done, bytes.size() - done, MSG_DONTWAIT);
    if (n > 0) {
      done += static_cast<size_t>(n);
      continue;
    }
    if (n == 0) {
      throw_error(ErrorCode::protocol,
                  fmt::format("{} closed the connection during the handshake (is it rank {}'s "
                              "hoop listener?)", where, p.peer_rank),
                  context_of(p));
    }
    if (errno == EINTR) continue;
    if (errno != EAGAIN && errno != EWOULDBLOCK) {
      throw_system_error(ErrorCode::peer_failure,
                         fmt::format("handshake with rank {} at {} failed", p.peer_rank, where),
                         errno, context_of(p));
    }
    const int ready = wait_for(fd, POLLIN, std::min(deadline, Clock::now() + kAnswerSlice));
    if (ready > 0) continue;
    if (ready < 0 || Clock::now() >= deadline) {
      throw_error(ErrorCode::timeout,
                  fmt::format("rank {} at {} did not answer the handshake before the deadline",
                              p.peer_rank, where),
                  context_of(p));
    }
    if (p.peer_pid > 0 && !liveness.alive(static_cast<pid_t>(p.peer_pid))) {
      throw_error(ErrorCode::peer_failure,
                  fmt::format("rank {} (pid {}) exited before it answered the handshake", p.peer_rank, p.peer_pid),
                  context_of(p));
    }
    check_not_given_up(p, start, "the answer to the handshake");
  }
}

UniqueFd connect_actively(TcpListener& listener, const TcpLinkParams& p, TimePoint deadline,
                          std::string* where) {
  UniqueFd fd = connect_with_retry(p, targets_for(p), deadline, where);
  send_all(fd.get(), tcp::encode_hello(tcp::hello_for(listener, p)), deadline, p);
  std::array<std::byte, tcp::kReplyBytes> reply{};
  receive_all(fd.get(), reply, deadline, p, *where);
  const auto status = tcp::parse_reply(reply);
  if (!status) {
    throw_error(ErrorCode::protocol,
                fmt::format("{} answered the handshake with bytes that are not hoop's (is it rank "
                            "{}'s hoop listener?)", *where, p.peer_rank),
                context_of(p));
  }
  if (*status != tcp::HelloStatus::ok) {
    throw_error(ErrorCode::protocol,
                fmt::format("rank {} at {} refused the connection: {}", p.peer_rank, *where,
                            tcp::to_string(*status)),
                context_of(p));
  }
  return fd;
}

}  // namespace

std::unique_ptr<Link> tcp_connect(TcpListener& listener, const TcpLinkParams& p,
                                  TimePoint deadline) {
  if (p.my_rank < 0 || p.peer_rank < 0 || p.my_rank == p.peer_rank || p.channel < 0) {
    throw_error(ErrorCode::invalid_argument,
                fmt::format("tcp_connect between ranks {} and {} on channel {}", p.my_rank,
                            p.peer_rank, p.channel),
                context_of(p));
  }
  UniqueFd fd;
  std::string where;
  if (p.my_rank < p.peer_rank) {
    fd = connect_actively(listener, p, deadline, &where);
  } else {
    fd.reset(listener.accept_from(p.comm_id, p.peer_rank, p.my_rank, p.channel, deadline, p.peer_pid, p.gave_up));
    auto remote = hoop::remote_address(fd.get());
    where = remote ? remote->to_string() : "?";
  }
  tcp::configure_link_socket(fd.get());
  if (log::enabled(log::Level::info)) {
    auto local = hoop::local_address(fd.get());
    HOOP_INFO("tcp: link to rank {} (communicator {:#x}, channel {}) {} {} via interface {}",
              p.peer_rank, p.comm_id, p.channel, p.my_rank < p.peer_rank ? "connected to" : "accepted from",
              where, local ? tcp::interface_of(*local) : "?");
  }
  return std::make_unique<tcp::TcpLink>(std::move(fd), p.my_rank, p.peer_rank, p.staging_bytes);
}

}  // namespace hoop::transport
