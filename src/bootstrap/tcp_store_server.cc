// The TCP store server: one thread, epoll over non-blocking sockets. Each connection has an
// input buffer parsed with parse_store_request, so a slow or partial client never holds up
// the others. A GET or WAIT whose keys are missing parks its connection (no further requests
// are read from it) until a write creates the keys or the request's timeout passes.
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <memory>
#include <optional>
#include <set>
#include <ctime>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/socket_address.h"
#include "bootstrap/job_secret.h"
#include "bootstrap/store_protocol.h"
#include "bootstrap/store_values.h"
#include "core/clock.h"
#include "core/errors.h"
#include "core/log.h"
#include "hoop/store.h"

namespace hoop {

namespace {

using bootstrap::ParseStatus;
using bootstrap::StoreCmd;
using bootstrap::StoreRequest;
using bootstrap::StoreResponse;
using bootstrap::StoreStatus;

constexpr uint64_t kListenId = 0;
constexpr uint64_t kWakeId = 1;
constexpr size_t kReadChunk = 256 << 10;
// Longest wait honoured; keeps deadline arithmetic far from overflow.
constexpr int64_t kMaxWaitMs = int64_t{365} * 24 * 3600 * 1000;
// After accept() runs out of file descriptors, stop accepting for this long.
constexpr milliseconds kAcceptPause{100};

struct Connection {
  uint64_t id = 0;
  int fd = -1;
  std::string remote;
  std::vector<uint8_t> in;
  size_t in_start = 0;
  std::vector<uint8_t> out;
  size_t out_start = 0;
  bool admitted = false;               // sent the server's secret key (or it has none)
  std::optional<StoreRequest> parked;  // a GET or WAIT waiting for its keys
  TimePoint deadline{};
  std::string parked_on;               // the key whose waiter list holds this connection
  uint32_t interest = 0;               // current epoll event mask

  bool output_pending() const { return out_start < out.size(); }
};

void close_fd(int fd) {
  if (fd >= 0) ::close(fd);
}

int make_listen_socket(int family, const sockaddr* addr, socklen_t len, bool dual_stack,
                       int* err) {
  int fd = ::socket(family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    *err = errno;
    return -1;
  }
  int one = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (family == AF_INET6) {
    int v6only = dual_stack ? 0 : 1;
    ::setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &v6only, sizeof v6only);
  }
  if (::bind(fd, addr, len) != 0 || ::listen(fd, SOMAXCONN) != 0) {
    *err = errno;
    ::close(fd);
    return -1;
  }
  return fd;
}

// host "": dual-stack [::] (IPv6 and IPv4), else 0.0.0.0 when IPv6 is unavailable.
int bind_listen_socket(const std::string& host, uint16_t port) {
  int err = 0;
  if (host.empty()) {
    sockaddr_in6 a6{};
    a6.sin6_family = AF_INET6;
    a6.sin6_addr = in6addr_any;
    a6.sin6_port = htons(port);
    int fd = make_listen_socket(AF_INET6, reinterpret_cast<sockaddr*>(&a6), sizeof a6, true, &err);
    if (fd >= 0) return fd;
    HOOP_INFO("store server: cannot listen on [::]:{} ({}), trying 0.0.0.0", port,
              std::strerror(err));
    sockaddr_in a4{};
    a4.sin_family = AF_INET;
    a4.sin_addr.s_addr = htonl(INADDR_ANY);
    a4.sin_port = htons(port);
    fd = make_listen_socket(AF_INET, reinterpret_cast<sockaddr*>(&a4), sizeof a4, false, &err);
    if (fd >= 0) return fd;
    throw_system_error(ErrorCode::init, fmt::format("store server: cannot listen on port {}", port),
                       err, {.op = "store.listen"});
  }
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* res = nullptr;
  const std::string port_text = std::to_string(port);
  if (int rc = ::getaddrinfo(host.c_str(), port_text.c_str(), &hints, &res); rc != 0) {
    throw_error(ErrorCode::init,
                fmt::format("store server: cannot resolve {}: {}", host, ::gai_strerror(rc)),
                {.op = "store.listen"});
  }
  int fd = -1;
  for (addrinfo* ai = res; ai && fd < 0; ai = ai->ai_next) {
    fd = make_listen_socket(ai->ai_family, ai->ai_addr, ai->ai_addrlen, false, &err);
  }
  ::freeaddrinfo(res);
  if (fd < 0) {
    throw_system_error(ErrorCode::init,
                       fmt::format("store server: cannot listen on {}",
                                   join_host_port(host, port)),
                       err, {.op = "store.listen"});
  }
  return fd;
}

uint16_t local_port(int fd) {
  sockaddr_storage ss{};
  socklen_t len = sizeof ss;
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len) != 0) return 0;
  if (ss.ss_family == AF_INET) return ntohs(reinterpret_cast<sockaddr_in*>(&ss)->sin_port);
  if (ss.ss_family == AF_INET6) return ntohs(reinterpret_cast<sockaddr_in6*>(&ss)->sin6_port);
  return 0;
}

StoreResponse reply(StoreStatus status, std::vector<Bytes> values = {}) {
  return StoreResponse{status, std::move(values)};
}

Bytes flag(bool b) { return Bytes{static_cast<uint8_t>(b ? '1' : '0')}; }

}  // namespace

struct TcpStoreServer::Impl {
  int listen_fd = -1;
  int epoll_fd = -1;
  int wake_fd = -1;
  uint16_t port = 0;
  uint64_t secret_key = 0;  // HOOP_SECRET's key when the server started; 0: open to all
  std::atomic<uint64_t> rejected{0};
  std::atomic<uint64_t> requests{0};  // parsed and admitted, HELLO included
  std::thread thread;

  // Owned by the server thread.
  std::unordered_map<std::string, Bytes> data;
  std::unordered_map<uint64_t, std::unique_ptr<Connection>> conns;
  std::unordered_map<std::string, std::vector<uint64_t>> waiters;  // key -> parked connections
  std::set<std::pair<TimePoint, uint64_t>> deadlines;              // of parked connections
  std::vector<uint64_t> ready;  // connections to pump again (a parked request was answered)
  uint64_t next_id = 2;
  std::optional<TimePoint> accept_paused_until;
  std::vector<uint8_t> read_buffer = std::vector<uint8_t>(kReadChunk);  // read_some's

  explicit Impl(int fd);
  ~Impl();
  void stop();

  void run();
  void loop();
  int epoll_timeout_ms(TimePoint now) const;
  void accept_all();
  void on_event(uint64_t id, uint32_t events);
  bool read_some(Connection& c);
  bool flush(Connection& c);
  void pump(Connection& c);
  bool admit(Connection& c, const StoreRequest& req);
  void execute(Connection& c, StoreRequest req);
  void send(Connection& c, const StoreResponse& resp);
  std::optional<StoreResponse> answer_if_ready(const StoreRequest& req) const;
  std::optional<std::string> first_missing(const StoreRequest& req) const;
  void park(Connection& c, StoreRequest req);
  void unpark(Connection& c);
  void notify(const std::string& key);
  void expire(TimePoint now);
  void update_interest(Connection& c);
  void close_conn(uint64_t id);
  void reject(Connection& c, const std::string& why);
  Connection* find(uint64_t id);
};

TcpStoreServer::Impl::Impl(int fd) : listen_fd(fd), secret_key(bootstrap::job_secret_key()) {
  port = local_port(fd);
  int flags = ::fcntl(fd, F_GETFL);
  if (flags < 0 || ::fcntl(fd, F_SETFL, flags | O_NONBLOCK) != 0 ||
      ::fcntl(fd, F_SETFD, FD_CLOEXEC) != 0) {
    int err = errno;
    throw_system_error(ErrorCode::init, "store server: bad listening socket", err,
                       {.op = "store.listen"});
  }
  epoll_fd = ::epoll_create1(EPOLL_CLOEXEC);
  wake_fd = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (epoll_fd < 0 || wake_fd < 0) {
    int err = errno;
    close_fd(epoll_fd);
    close_fd(wake_fd);
    throw_system_error(ErrorCode::init, "store server: epoll/eventfd", err, {.op = "store.listen"});
  }
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.u64 = kListenId;
  ::epoll_ctl(epoll_fd, EPOLL_CTL_ADD, listen_fd, &ev);
  ev.data.u64 = kWakeId;
  ::epoll_ctl(epoll_fd, EPOLL_CTL_ADD, wake_fd, &ev);
  thread = std::thread([this] { run(); });
  HOOP_INFO("store server listening on port {}", port);
}

void TcpStoreServer::Impl::stop() {
  uint64_t one = 1;
  while (::write(wake_fd, &one, sizeof one) < 0 && errno == EINTR) {
  }
  if (thread.joinable()) thread.join();
}

TcpStoreServer::Impl::~Impl() {
  stop();
  close_fd(listen_fd);
  close_fd(epoll_fd);
  close_fd(wake_fd);
}

void TcpStoreServer::Impl::run() {
  try {
    loop();
  } catch (const std::exception& e) {
    // The clients see their connections close (peer_failure) rather than hang.
    HOOP_WARN("store server stopped: {}", e.what());
  }
  std::vector<uint64_t> ids;
  for (auto& [id, c] : conns) ids.push_back(id);
  for (uint64_t id : ids) close_conn(id);
}

void TcpStoreServer::Impl::loop() {
  std::vector<epoll_event> events(64);
  for (;;) {
    const int timeout = epoll_timeout_ms(Clock::now());
    int n = ::epoll_wait(epoll_fd, events.data(), static_cast<int>(events.size()), timeout);
    if (n < 0) {
      if (errno == EINTR) continue;
      int err = errno;
      throw_system_error(ErrorCode::internal, "store server: epoll_wait", err);
    }
    for (int i = 0; i < n; ++i) {
      const uint64_t id = events[i].data.u64;
      if (id == kWakeId) return;
      if (id == kListenId) {
        accept_all();
      } else {
        on_event(id, events[i].events);
      }
    }
    const TimePoint now = Clock::now();
    expire(now);
    while (!ready.empty()) {
      std::vector<uint64_t> batch;
      batch.swap(ready);
      for (uint64_t id : batch) {
        if (Connection* c = find(id)) pump(*c);
      }
    }
    if (accept_paused_until && now >= *accept_paused_until) {
      accept_paused_until.reset();
      epoll_event ev{};
      ev.events = EPOLLIN;
      ev.data.u64 = kListenId;
      ::epoll_ctl(epoll_fd, EPOLL_CTL_MOD, listen_fd, &ev);
    }
  }
}

int TcpStoreServer::Impl::epoll_timeout_ms(TimePoint now) const {
  std::optional<TimePoint> next;
  if (!deadlines.empty()) next = deadlines.begin()->first;
  if (accept_paused_until && (!next || *accept_paused_until < *next)) next = accept_paused_until;
  if (!next) return -1;
  if (*next <= now) return 0;
  // Round up so that a wake-up never comes just before the deadline (a busy loop).
  auto ms = std::chrono::ceil<milliseconds>(*next - now).count();
  return static_cast<int>(std::min<int64_t>(ms, 60'000));
}

void TcpStoreServer::Impl::accept_all() {
  for (;;) {
    sockaddr_storage ss{};
    socklen_t len = sizeof ss;
    int fd = ::accept4(listen_fd, reinterpret_cast<sockaddr*>(&ss), &len,
                       SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return;
      HOOP_WARN("store server: accept failed: {}; pausing new connections for {} ms",
                std::strerror(errno), kAcceptPause.count());
      accept_paused_until = Clock::now() + kAcceptPause;
      epoll_event ev{};
      ev.events = 0;
      ev.data.u64 = kListenId;
      ::epoll_ctl(epoll_fd, EPOLL_CTL_MOD, listen_fd, &ev);
      return;
    }
    int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    auto c = std::make_unique<Connection>();
    c->id = next_id++;
    c->fd = fd;
    c->remote = SocketAddress::from(reinterpret_cast<sockaddr*>(&ss), len).to_string();
    c->interest = EPOLLIN | EPOLLRDHUP;
    epoll_event ev{};
    ev.events = c->interest;
    ev.data.u64 = c->id;
    if (::epoll_ctl(epoll_fd, EPOLL_CTL_ADD, fd, &ev) != 0) {
      HOOP_WARN("store server: cannot watch connection from {}: {}", c->remote,
                std::strerror(errno));
      ::close(fd);
      continue;
    }
    HOOP_TRACE("store server: connection from {}", c->remote);
    conns.emplace(c->id, std::move(c));
  }
}

Connection* TcpStoreServer::Impl::find(uint64_t id) {
  auto it = conns.find(id);
  return it == conns.end() ? nullptr : it->second.get();
}

void TcpStoreServer::Impl::on_event(uint64_t id, uint32_t events) {
  Connection* c = find(id);
  if (!c) return;  // closed earlier in this batch
  if (events & EPOLLIN) {
    if (!read_some(*c)) return;
  } else if (events & (EPOLLHUP | EPOLLERR | EPOLLRDHUP)) {
    // Not reading (parked or output pending) and the client went away.
    HOOP_TRACE("store server: {} hung up", c->remote);
    close_conn(id);
    return;
  }
  if ((events & EPOLLOUT) && !flush(*c)) return;
  pump(*c);
}

// False when the connection was closed.
bool TcpStoreServer::Impl::read_some(Connection& c) {
  if (c.in_start > 0 && c.in_start == c.in.size()) {
    c.in.clear();
    c.in_start = 0;
  }
  // Into the server's one read buffer, then onto the connection's what came: growing c.in by
  // the whole chunk for each read zero-filled 256 KiB per request (under 65,536 simulated
  // ranks' start-up the server took 20.6 us of CPU a request so, 12.0 this way).
  ssize_t n;
  do {
    n = ::recv(c.fd, read_buffer.data(), read_buffer.size(), 0);
  } while (n < 0 && errno == EINTR);
  if (n > 0) {
    c.in.insert(c.in.end(), read_buffer.begin(), read_buffer.begin() + n);
    return true;
  }
  if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return true;
  if (n < 0) {
    HOOP_INFO("store server: connection from {} failed: {}", c.remote, std::strerror(errno));
  } else if (c.in.size() > c.in_start) {
    HOOP_INFO("store server: {} closed its connection in the middle of a request", c.remote);
  } else {
    HOOP_TRACE("store server: {} closed its connection", c.remote);
  }
  close_conn(c.id);
  return false;
}

// Writes what it can of the pending output. False when the connection was closed.
bool TcpStoreServer::Impl::flush(Connection& c) {
  while (c.output_pending()) {
    ssize_t n = ::send(c.fd, c.out.data() + c.out_start, c.out.size() - c.out_start,
                       MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) break;
      HOOP_INFO("store server: cannot answer {}: {}", c.remote, std::strerror(errno));
      close_conn(c.id);
      return false;
    }
    c.out_start += static_cast<size_t>(n);
  }
  if (!c.output_pending()) {
    c.out.clear();
    c.out_start = 0;
  }
  return true;
}

// Serves the connection's buffered requests in order, until one parks, output backs up (the
// client is not reading its answers) or the buffer holds no complete request.
void TcpStoreServer::Impl::pump(Connection& c) {
  const uint64_t id = c.id;
  while (!c.parked && !c.output_pending()) {
    StoreRequest req;
    size_t consumed = 0;
    std::string error;
    ParseStatus st = bootstrap::parse_store_request(c.in.data() + c.in_start,
                                                    c.in.size() - c.in_start, &req, &consumed,
                                                    &error);
    if (st == ParseStatus::need_more) break;
    if (st == ParseStatus::malformed) {
      reject(c, error);
      return;
    }
    c.in_start += consumed;
    if (!admit(c, req)) return;
    execute(c, std::move(req));
    if (!flush(c)) return;
  }
  if (!find(id)) return;
  if (c.in_start > 0 && c.in_start * 2 >= c.in.size()) {
    c.in.erase(c.in.begin(), c.in.begin() + static_cast<std::ptrdiff_t>(c.in_start));
    c.in_start = 0;
  }
  update_interest(c);
}

void TcpStoreServer::Impl::send(Connection& c, const StoreResponse& resp) {
  bootstrap::encode_store_response(resp, &c.out);
}

std::optional<std::string> TcpStoreServer::Impl::first_missing(const StoreRequest& req) const {
  if (req.cmd == StoreCmd::get) {
    if (data.count(req.key)) return std::nullopt;
    return req.key;
  }
  for (const auto& k : req.values) {  // WAIT: the keys travel as values
    std::string key(k.begin(), k.end());
    if (!data.count(key)) return key;
  }
  return std::nullopt;
}

// The answer to a GET or WAIT if its keys exist, else nullopt.
std::optional<StoreResponse> TcpStoreServer::Impl::answer_if_ready(const StoreRequest& req) const {
  if (first_missing(req)) return std::nullopt;
  if (req.cmd == StoreCmd::get) return reply(StoreStatus::ok, {data.at(req.key)});
  return reply(StoreStatus::ok);
}

// With a secret, a connection's first request must be a HELLO with its key: anything else is
// answered with a bad request and the connection closed (false).
bool TcpStoreServer::Impl::admit(Connection& c, const StoreRequest& req) {
  if (c.admitted || secret_key == 0) return true;
  std::string why;
  if (req.cmd != StoreCmd::hello) {
    why = fmt::format("{} before the job's secret (this store requires HOOP_SECRET)",
                      bootstrap::to_string(req.cmd));
  } else if (bootstrap::parse_secret_key(req.values[0]) != secret_key) {
    why = "wrong secret key (HOOP_SECRET differs)";
  } else {
    c.admitted = true;
    return true;
  }
  send(c, reply(StoreStatus::bad_request, {bootstrap::to_bytes(why)}));
  if (flush(c)) reject(c, why);
  return false;
}

void TcpStoreServer::Impl::execute(Connection& c, StoreRequest req) {
  requests.fetch_add(1, std::memory_order_relaxed);
  switch (req.cmd) {
    case StoreCmd::hello:  // admitted: a server without a secret takes any key
      send(c, reply(StoreStatus::ok));
      return;
    case StoreCmd::set: {
      data[req.key] = std::move(req.values[0]);
      send(c, reply(StoreStatus::ok));
      notify(req.key);
      return;
    }
    case StoreCmd::get:
    case StoreCmd::wait: {
      if (auto resp = answer_if_ready(req)) {
        send(c, *resp);
      } else if (req.timeout_ms == 0) {
        send(c, reply(StoreStatus::timeout));
      } else {
        park(c, std::move(req));
      }
      return;
    }
    case StoreCmd::add: {
      const Bytes& text = req.values[0];
      auto delta = bootstrap::parse_decimal(std::string_view(
          reinterpret_cast<const char*>(text.data()), text.size()));
      auto it = data.find(req.key);
      int64_t result = 0;
      std::string error;
      if (!delta) {
        error = "the delta is not a decimal integer";
      } else if (bootstrap::apply_add(it == data.end() ? nullptr : &it->second, *delta, &result,
                                      &error)) {
        const bool created = it == data.end();
        Bytes value = bootstrap::to_bytes(std::to_string(result));
        data[req.key] = value;
        send(c, reply(StoreStatus::ok, {std::move(value)}));
        if (created) notify(req.key);
        return;
      }
      send(c, reply(StoreStatus::bad_request,
                    {bootstrap::to_bytes(fmt::format("add to key '{}': {}", req.key, error))}));
      return;
    }
    case StoreCmd::compare_set: {
      auto it = data.find(req.key);
      const Bytes* current = it == data.end() ? nullptr : &it->second;
      if (bootstrap::compare_set_matches(current, req.values[0])) {
        data[req.key] = req.values[1];
        send(c, reply(StoreStatus::ok, {std::move(req.values[1])}));
        notify(req.key);
      } else {
        send(c, reply(StoreStatus::ok, {current ? *current : Bytes{}}));
      }
      return;
    }
    case StoreCmd::check:
      send(c, reply(StoreStatus::ok, {flag(data.count(req.key) > 0)}));
      return;
    case StoreCmd::remove:
      send(c, reply(StoreStatus::ok, {flag(data.erase(req.key) > 0)}));
      return;
  }
}

void TcpStoreServer::Impl::park(Connection& c, StoreRequest req) {
  const int64_t ms = std::min(req.timeout_ms, kMaxWaitMs);
  c.deadline = Clock::now() + milliseconds(ms);
  c.parked_on = *first_missing(req);
  c.parked = std::move(req);
  deadlines.emplace(c.deadline, c.id);
  waiters[c.parked_on].push_back(c.id);
}

void TcpStoreServer::Impl::unpark(Connection& c) {
  if (!c.parked) return;
  deadlines.erase({c.deadline, c.id});
  if (auto it = waiters.find(c.parked_on); it != waiters.end()) {
    auto& ids = it->second;
    ids.erase(std::remove(ids.begin(), ids.end(), c.id), ids.end());
    if (ids.empty()) waiters.erase(it);
  }
  c.parked.reset();
  c.parked_on.clear();
}

// A key was created: answer the requests parked on it whose keys now all exist; the others
// (WAITs on several keys) move to their next missing key.
void TcpStoreServer::Impl::notify(const std::string& key) {
  auto it = waiters.find(key);
  if (it == waiters.end()) return;
  std::vector<uint64_t> ids = std::move(it->second);
  waiters.erase(it);
  for (uint64_t id : ids) {
    Connection* c = find(id);
    if (!c || !c->parked || c->parked_on != key) continue;
    if (auto resp = answer_if_ready(*c->parked)) {
      unpark(*c);
      send(*c, *resp);
      if (flush(*c)) ready.push_back(id);
    } else {
      c->parked_on = *first_missing(*c->parked);
      waiters[c->parked_on].push_back(id);
    }
  }
}

void TcpStoreServer::Impl::expire(TimePoint now) {
  while (!deadlines.empty() && deadlines.begin()->first <= now) {
    const uint64_t id = deadlines.begin()->second;
    Connection* c = find(id);
    if (!c) {
      deadlines.erase(deadlines.begin());
      continue;
    }
    unpark(*c);
    send(*c, reply(StoreStatus::timeout));
    if (flush(*c)) ready.push_back(id);
  }
}

void TcpStoreServer::Impl::update_interest(Connection& c) {
  uint32_t want = EPOLLRDHUP;
  if (c.output_pending()) {
    want |= EPOLLOUT;
  } else if (!c.parked) {
    want |= EPOLLIN;
  }
  if (want == c.interest) return;
  epoll_event ev{};
  ev.events = want;
  ev.data.u64 = c.id;
  if (::epoll_ctl(epoll_fd, EPOLL_CTL_MOD, c.fd, &ev) == 0) c.interest = want;
}

void TcpStoreServer::Impl::close_conn(uint64_t id) {
  auto it = conns.find(id);
  if (it == conns.end()) return;
  Connection& c = *it->second;
  unpark(c);
  ::epoll_ctl(epoll_fd, EPOLL_CTL_DEL, c.fd, nullptr);
  ::close(c.fd);
  conns.erase(it);
}

void TcpStoreServer::Impl::reject(Connection& c, const std::string& why) {
  HOOP_WARN("store server: rejected connection from {}: {}", c.remote, why);
  rejected.fetch_add(1, std::memory_order_relaxed);
  close_conn(c.id);
}

TcpStoreServer::TcpStoreServer(const std::string& host, uint16_t port) {
  int fd = bind_listen_socket(host, port);
  try {
    impl_ = std::make_unique<Impl>(fd);
  } catch (...) {
    ::close(fd);
    throw;
  }
}

TcpStoreServer::TcpStoreServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

std::unique_ptr<TcpStoreServer> TcpStoreServer::from_listening_fd(int fd) {
  return std::unique_ptr<TcpStoreServer>(new TcpStoreServer(std::make_unique<Impl>(fd)));
}

TcpStoreServer::~TcpStoreServer() = default;

uint16_t TcpStoreServer::port() const { return impl_->port; }

uint64_t TcpStoreServer::rejected_connections() const {
  return impl_->rejected.load(std::memory_order_relaxed);
}

uint64_t TcpStoreServer::requests() const { return impl_->requests.load(std::memory_order_relaxed); }

std::chrono::nanoseconds TcpStoreServer::busy_time() const {
  clockid_t cid;
  timespec ts{};
  if (::pthread_getcpuclockid(impl_->thread.native_handle(), &cid) != 0 || ::clock_gettime(cid, &ts) != 0) {
    return std::chrono::nanoseconds{0};
  }
  return std::chrono::seconds(ts.tv_sec) + std::chrono::nanoseconds(ts.tv_nsec);
}

}  // namespace hoop
