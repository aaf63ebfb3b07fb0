// The listening side of hoop's TCP transport: one port per process, sorting incoming
// connections by their handshake so that each communicator thread gets its own.
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <deque>
#include <map>
#include <mutex>
#include <tuple>

#include "core/params.h"
#include "core/errors.h"
#include "core/log.h"
#include "core/open_files.h"
#include "transport/tcp/connect_targets.h"
#include "transport/shm/process_liveness.h"
#include "transport/tcp/handshake.h"
#include "transport/tcp/interfaces.h"
#include "core/socket_address.h"
#include "transport/tcp/socket_options.h"
#include "transport/tcp/tcp_transport.h"
#include "transport/tcp/unique_fd.h"
#include "transport/waiter.h"

namespace hoop::transport {

using tcp::HelloStatus;
using tcp::kGiveUpAfter;
using hoop::SocketAddress;
using tcp::UniqueFd;

namespace {

constexpr int kListenBacklog = 1024;

// accept4's errors that concern the one connection it was taking (accept(2): the pending
// network errors of the new socket are passed on), after which the next may be taken.
bool accept_may_retry(int err) {
  return err == EINTR || err == ECONNABORTED || err == EPROTO || err == ENETDOWN || err == ENOPROTOOPT ||
         err == EHOSTDOWN || err == ENONET || err == EHOSTUNREACH || err == EOPNOTSUPP || err == ENETUNREACH;
}
// Longest sleep of the thread driving the accept loop before it looks at the clock again.
constexpr milliseconds kDriveSlice{100};

struct ConnKey {
  uint64_t comm_id;
  int from;
  int to;
  int channel;
  auto operator<=>(const ConnKey&) const = default;
};

// A connection accepted but not yet through its handshake.
struct PendingConn {
  UniqueFd fd;
  std::string remote;
  TimePoint expires;
  std::array<std::byte, tcp::kHelloBytes> hello{};
  size_t got = 0;
};

UniqueFd open_listening_socket(bool* ipv6) {
  const int one = 1;
  UniqueFd fd(::socket(AF_INET6, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (fd) {
    const int zero = 0;
    sockaddr_in6 any{};
    any.sin6_family = AF_INET6;
    any.sin6_addr = in6addr_any;
    ::setsockopt(fd.get(), IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof zero);
    ::setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    tcp::set_buffer_sizes(fd.get(), tcp::socket_buffer_bytes());
    if (::bind(fd.get(), reinterpret_cast<sockaddr*>(&any), sizeof any) == 0) {
      *ipv6 = true;
      return fd;
    }
    HOOP_INFO("tcp: cannot bind [::]:0 ({}), listening on IPv4 only", std::strerror(errno));
    fd.reset();
  }
  fd.reset(::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!fd) throw_system_error(ErrorCode::transport, "cannot create a TCP socket", errno);
  sockaddr_in any{};
  any.sin_family = AF_INET;
  any.sin_addr.s_addr = htonl(INADDR_ANY);
  ::setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  tcp::set_buffer_sizes(fd.get(), tcp::socket_buffer_bytes());
  if (::bind(fd.get(), reinterpret_cast<sockaddr*>(&any), sizeof any) != 0) {
    throw_system_error(ErrorCode::transport, "cannot bind a TCP listener to 0.0.0.0:0", errno);
  }
  *ipv6 = false;
  return fd;
}

// Best effort: a fresh socket always has room for 8 bytes; a peer that is gone loses nothing.
void send_reply(int fd, HelloStatus status) noexcept {
  const auto reply = tcp::encode_reply(status);
  ssize_t ignored = ::send(fd, reply.data(), reply.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
  (void)ignored;
}

}  // namespace

struct TcpListener::Impl {
  UniqueFd fd;
  bool ipv6 = false;
  uint16_t port = 0;
  uint64_t job_key = 0;
  uint64_t secret_key = 0;
  std::vector<std::string> addresses;
  milliseconds handshake_timeout{5000};
  std::atomic<uint64_t> rejected{0};

  std::mutex mu;
  std::condition_variable cv;
  bool driving = false;                            // guarded by mu: one thread drives the loop
  std::map<ConnKey, std::deque<UniqueFd>> ready;   // guarded by mu: handshaken, unclaimed
  std::vector<PendingConn> pending;                // touched only by the driving thread

  void publish_addresses();
  // With mu held by `lock` and nobody driving: drives one round of the loop (mu released
  // meanwhile) and files what arrived in `ready`.
  void drive_round(std::unique_lock<std::mutex>& lock, TimePoint until);
  // Takes the handshaken connection for `key` out of `ready` (mu held); -1 when not there.
  int claim(const ConnKey& key);
  // One round of the accept loop (sleeping until `until` at most); appends the connections
  // whose handshake completed to `arrived`.
  void drive_once(TimePoint until, std::vector<std::pair<ConnKey, UniqueFd>>& arrived);
  void accept_new_connections();
  // Reads what the connection has sent; true when it is finished with (accepted into
  // `arrived` or rejected).
  bool advance(PendingConn& c, TimePoint now, std::vector<std::pair<ConnKey, UniqueFd>>& arrived);
  void reject(PendingConn& c, const std::string& reason);
};

void TcpListener::Impl::publish_addresses() {
  const int family = tcp::socket_family_from_env();
  std::optional<tcp::InterfaceFilter> filter;
  const auto ifname = params::text(params::Id::socket_ifname);
  if (ifname) filter = tcp::InterfaceFilter::parse(*ifname);
  const int usable = ipv6 ? family : (family == AF_INET6 ? -1 : AF_INET);
  if (usable != -1) {
    for (auto& ia : tcp::selected_interface_addresses(filter, usable)) {
      ia.address.set_port(port);
      addresses.push_back(ia.address.to_string());
      HOOP_INFO("tcp: publishing {} ({})", addresses.back(), ia.ifname);
    }
  }
  if (addresses.empty() && ifname) {
    // "lo" asks for loopback on purpose (one host); anything else probably names a wrong device.
    if (filter->selects("lo")) {
      HOOP_INFO("tcp: HOOP_SOCKET_IFNAME='{}': loopback only", *ifname);
    } else {
      HOOP_WARN("tcp: HOOP_SOCKET_IFNAME='{}' selects no usable interface address; peers on "
                "other hosts cannot reach this rank (loopback only)", *ifname);
    }
  }
  addresses.push_back(fmt::format("127.0.0.1:{}", port));
  if (ipv6) addresses.push_back(fmt::format("[::1]:{}", port));
}

int TcpListener::Impl::claim(const ConnKey& key) {
  auto it = ready.find(key);
  if (it == ready.end()) return -1;
  UniqueFd conn = std::move(it->second.front());
  it->second.pop_front();
  if (it->second.empty()) ready.erase(it);
  return conn.release();
}

void TcpListener::Impl::drive_round(std::unique_lock<std::mutex>& lock, TimePoint until) {
  driving = true;
  lock.unlock();
  std::vector<std::pair<ConnKey, UniqueFd>> arrived;
  try {
    drive_once(until, arrived);
  } catch (...) {
    lock.lock();
    driving = false;
    cv.notify_all();
    throw;
  }
  lock.lock();
  driving = false;
  for (auto& [k, conn] : arrived) ready[k].push_back(std::move(conn));
  cv.notify_all();
}

void TcpListener::Impl::reject(PendingConn& c, const std::string& reason) {
  HOOP_WARN("tcp: rejected connection from {} to port {}: {}", c.remote, port, reason);
  c.fd.reset();
  rejected.fetch_add(1, std::memory_order_relaxed);
}

void TcpListener::Impl::accept_new_connections() {
  for (;;) {
    sockaddr_storage addr{};
    socklen_t len = sizeof addr;
    int conn = ::accept4(fd.get(), reinterpret_cast<sockaddr*>(&addr), &len, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (conn < 0) {
      const int err = errno;
      if (err == EAGAIN || err == EWOULDBLOCK) return;
      // The connection went away before it was taken, or its network did: try the next one.
      if (accept_may_retry(err)) continue;
    }
    bool retry = false;
    conn = keep_link_descriptor(conn, &retry);
    if (retry) continue;
    if (conn < 0) {
      // Out of descriptors (or memory): a connection left in the backlog keeps the socket
      // readable, so waiting for a later round would only spin. Every rank waiting for a
      // connection gets this error.
      const int err = errno;
      throw_error(ErrorCode::transport, fmt::format("cannot accept a connection on port {}: {}{}", port,
                                                    std::strerror(err), out_of_descriptors_note(err)),
                  ErrorContext{.op = "tcp.accept"});
    }
    PendingConn c;
    c.fd.reset(conn);
    c.remote = SocketAddress::from(reinterpret_cast<sockaddr*>(&addr), len).to_string();
    c.expires = Clock::now() + handshake_timeout;
    pending.push_back(std::move(c));
  }
}

bool TcpListener::Impl::advance(PendingConn& c, TimePoint now,
                                std::vector<std::pair<ConnKey, UniqueFd>>& arrived) {
  while (c.got < c.hello.size()) {
    const ssize_t n = ::recv(c.fd.get(), c.hello.data() + c.got, c.hello.size() - c.got, 0);
    if (n > 0) {
      c.got += static_cast<size_t>(n);
      continue;
    }
    if (n == 0) {
      reject(c, fmt::format("closed after {} of {} handshake bytes", c.got, c.hello.size()));
      return true;
    }
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) {
      if (now < c.expires) return false;
      reject(c, fmt::format("sent {} of {} handshake bytes within {} ms", c.got, c.hello.size(),
                            handshake_timeout.count()));
      return true;
    }
    reject(c, fmt::format("receive failed during the handshake: {}", std::strerror(errno)));
    return true;
  }
  const auto verdict = tcp::check_hello(c.hello, job_key, secret_key);
  send_reply(c.fd.get(), verdict.status);
  if (verdict.status != HelloStatus::ok) {
    reject(c, verdict.reason);
    return true;
  }
  const auto& h = verdict.hello;
  HOOP_TRACE("tcp: handshake from {}: communicator {:#x}, rank {} -> {}, channel {}", c.remote,
             h.comm_id, h.from_rank, h.to_rank, h.channel);
  arrived.emplace_back(ConnKey{h.comm_id, h.from_rank, h.to_rank, h.channel}, std::move(c.fd));
  return true;
}

void TcpListener::Impl::drive_once(TimePoint until,
                                   std::vector<std::pair<ConnKey, UniqueFd>>& arrived) {
  std::vector<pollfd> pfds;
  pfds.push_back({fd.get(), POLLIN, 0});
  for (auto& c : pending) {
    pfds.push_back({c.fd.get(), POLLIN, 0});
    until = std::min(until, c.expires);
  }
  const auto wait = std::chrono::ceil<milliseconds>(until - Clock::now());
  const int rc = ::poll(pfds.data(), pfds.size(), static_cast<int>(std::max<int64_t>(wait.count(), 0)));
  if (rc < 0 && errno != EINTR) {
    HOOP_WARN("tcp: poll on the listener failed: {}", std::strerror(errno));
  }
  if (pfds[0].revents & POLLIN) accept_new_connections();
  // Connections just accepted are read at once: their Hello is often there already.
  const TimePoint now = Clock::now();
  std::erase_if(pending, [&](PendingConn& c) { return advance(c, now, arrived); });
}

TcpListener::TcpListener(const std::string& job_id) : impl_(std::make_unique<Impl>()) {
  Impl& s = *impl_;
  s.fd = open_listening_socket(&s.ipv6);
  if (::listen(s.fd.get(), kListenBacklog) != 0) {
    throw_system_error(ErrorCode::transport, "cannot listen on the TCP socket", errno);
  }
  auto local = hoop::local_address(s.fd.get());
  if (!local) throw_system_error(ErrorCode::transport, "getsockname on the TCP listener", errno);
  s.port = local->port();
  s.job_key = tcp::fnv1a64(job_id);
  if (auto secret = params::text(params::Id::secret)) s.secret_key = tcp::fnv1a64(*secret);
  s.handshake_timeout = params::seconds(params::Id::tcp_handshake_timeout);
  s.publish_addresses();
  HOOP_INFO("tcp: listening on port {} ({})", s.port, s.ipv6 ? "IPv6 and IPv4" : "IPv4 only");
}

TcpListener::~TcpListener() = default;

std::vector<std::string> TcpListener::addresses() const { return impl_->addresses; }
uint16_t TcpListener::port() const { return impl_->port; }
uint64_t TcpListener::job_key() const { return impl_->job_key; }
uint64_t TcpListener::secret_key() const { return impl_->secret_key; }
uint64_t TcpListener::rejected() const { return impl_->rejected.load(std::memory_order_relaxed); }

namespace {

// A round of the accept loop driven for `my_rank`, waiting for `peer`: the listener's own
// errors (it serves every communicator of the process) take that rank's context.
void drive_for(TcpListener::Impl& s, std::unique_lock<std::mutex>& lock, TimePoint until, int my_rank, int peer) {
  try {
    s.drive_round(lock, until);
  } catch (const Error& e) {
    if (e.rank() >= 0) throw;
    throw_error(e.code(), e.detail(), ErrorContext{.rank = my_rank, .op = e.op(), .seq = 0, .peer = peer});
  }
}

}  // namespace

int TcpListener::accept_from(uint64_t comm_id, int peer, int my_rank, int channel,
                             TimePoint deadline, int peer_pid, const std::function<bool()>& gave_up) {
  Impl& s = *impl_;
  const TimePoint start = Clock::now();
  const ConnKey key{comm_id, peer, my_rank, channel};
  shm::ProcessLiveness liveness;
  std::unique_lock lock(s.mu);
  for (;;) {
    if (const int conn = s.claim(key); conn >= 0) return conn;
    const TimePoint now = Clock::now();
    if (gave_up && now - start >= kGiveUpAfter && gave_up()) {
      throw_error(ErrorCode::peer_failure,
                  fmt::format("gave up waiting for a connection from rank {}: the communicator failed elsewhere "
                              "(communicator {:#x}, channel {})",
                              peer, comm_id, channel),
                  ErrorContext{.rank = my_rank, .op = "tcp.accept", .seq = 0, .peer = peer});
    }
    if (peer_pid > 0 && !liveness.alive(static_cast<pid_t>(peer_pid))) {
      throw_error(ErrorCode::peer_failure,
                  fmt::format("rank {} (pid {}) exited before connecting (communicator {:#x}, channel {})",
                              peer, peer_pid, comm_id, channel),
                  ErrorContext{.rank = my_rank, .op = "tcp.accept", .seq = 0, .peer = peer});
    }
    if (now >= deadline) {
      throw_error(ErrorCode::timeout,
                  fmt::format("no connection from rank {} within {:.1f} s (communicator {:#x}, "
                              "channel {}, port {})",
                              peer, seconds_between(start, deadline), comm_id, channel, s.port),
                  ErrorContext{.rank = my_rank, .op = "tcp.accept", .seq = 0, .peer = peer});
    }
    if (s.driving) {
      s.cv.wait_until(lock, std::min(deadline, now + kDriveSlice));
      continue;
    }
    // This thread drives the accept loop for everyone; the others wait to be notified.
    drive_for(s, lock, std::min(deadline, now + kDriveSlice), my_rank, peer);
  }
}

int TcpListener::try_accept(uint64_t comm_id, int peer, int my_rank, int channel, bool drive) {
  Impl& s = *impl_;
  const ConnKey key{comm_id, peer, my_rank, channel};
  std::unique_lock lock(s.mu);
  if (const int conn = s.claim(key); conn >= 0 || s.driving || !drive) return conn;
  drive_for(s, lock, Clock::now(), my_rank, peer);
  return s.claim(key);
}

void TcpListener::arm(Waiter& w) {
  Impl& s = *impl_;
  w.add_fd(s.fd.get(), true, false);
  std::lock_guard lock(s.mu);
  if (s.driving) return;  // the driving thread reads them; what it accepts shows up in `ready`
  for (const auto& c : s.pending) w.add_fd(c.fd.get(), true, false);
}

}  // namespace hoop::transport
