// Client of the TCP store. One request in flight per connection; a client used from one thread
// has one connection, and a thread that calls while another is parked in get or wait borrows
// another connection (opened on demand, kept for reuse), so a blocking get never stalls the
// other threads' sets. Every socket wait is bounded: a dead or hung server becomes an error
// rather than a hang.
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <memory>
#include <mutex>
#include <thread>

#include "core/socket_address.h"
#include "bootstrap/job_secret.h"
#include "bootstrap/store_errors.h"
#include "bootstrap/store_protocol.h"
#include "bootstrap/store_values.h"
#include "bootstrap/timed_store.h"
#include "core/clock.h"
#include "core/errors.h"
#include "core/open_files.h"
#include "core/log.h"
#include "hoop/store.h"

namespace hoop {

namespace {

using bootstrap::ParseStatus;
using bootstrap::StoreCmd;
using bootstrap::StoreRequest;
using bootstrap::StoreResponse;
using bootstrap::StoreStatus;

constexpr milliseconds kFirstBackoff{10};
constexpr milliseconds kMaxBackoff{1000};
// How much longer than the request's own timeout the client waits for the server's answer
// before it declares the server dead.
constexpr milliseconds kAnswerGrace{5000};

int remaining_ms(TimePoint deadline) {
  auto left = std::chrono::ceil<milliseconds>(deadline - Clock::now()).count();
  return static_cast<int>(std::clamp<int64_t>(left, 0, 1'000'000'000));
}

// One non-blocking connect attempt to one address, bounded by the deadline. Returns the
// connected socket or -1 with *err set.
int try_connect(const addrinfo* ai, TimePoint deadline, int* err) {
  int fd = ::socket(ai->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, ai->ai_protocol);
  if (fd < 0 && errno == EMFILE && raise_open_file_limit())
    fd = ::socket(ai->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, ai->ai_protocol);
  if (fd < 0) {
    *err = errno;
    return -1;
  }
  int rc;
  do {
    rc = ::connect(fd, ai->ai_addr, ai->ai_addrlen);
  } while (rc != 0 && errno == EINTR);
  if (rc != 0 && errno == EINPROGRESS) {
    pollfd p{fd, POLLOUT, 0};
    int n;
    do {
      n = ::poll(&p, 1, std::max(remaining_ms(deadline), 1));
    } while (n < 0 && errno == EINTR);
    if (n == 0) {
      errno = ETIMEDOUT;
    } else if (n > 0) {
      int so_error = 0;
      socklen_t len = sizeof so_error;
      ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &so_error, &len);
      errno = so_error;
      rc = so_error == 0 ? 0 : -1;
    }
  }
  if (rc != 0) {
    *err = errno;
    ::close(fd);
    return -1;
  }
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  return fd;
}

// Resolves and connects, retrying with exponential backoff (the server may not be up yet).
int connect_with_retry(const std::string& host, uint16_t port, milliseconds timeout) {
  const std::string where = join_host_port(host, port);
  const TimePoint start = Clock::now();
  const TimePoint deadline = start + timeout;
  milliseconds backoff = kFirstBackoff;
  std::string last_error = "no attempt";
  int attempts = 0;
  for (;;) {
    ++attempts;
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_NUMERICSERV;
    addrinfo* res = nullptr;
    const std::string port_text = std::to_string(port);
    int rc = ::getaddrinfo(host.c_str(), port_text.c_str(), &hints, &res);
    if (rc != 0) {
      last_error = fmt::format("cannot resolve {}: {}", host,
                               rc == EAI_SYSTEM ? std::strerror(errno) : ::gai_strerror(rc));
    } else {
      for (const addrinfo* ai = res; ai; ai = ai->ai_next) {
        int err = 0;
        int fd = try_connect(ai, deadline, &err);
        if (fd >= 0) {
          ::freeaddrinfo(res);
          HOOP_TRACE("store client: connected to {} after {} attempt(s)", where, attempts);
          return fd;
        }
        last_error = fmt::format("connect to {}: {} (errno {}){}",
                                 SocketAddress::from(ai->ai_addr, ai->ai_addrlen).to_string(),
                                 std::strerror(err), err, out_of_descriptors_note(err));
        if (err == EMFILE) {
          // At the hard limit: no later attempt gets a descriptor either.
          ::freeaddrinfo(res);
          throw_error(ErrorCode::init, fmt::format("cannot connect to the store at {}: {}", where, last_error),
                      {.op = "store.connect"});
        }
      }
      ::freeaddrinfo(res);
    }
    const TimePoint now = Clock::now();
    if (now >= deadline) break;
    std::this_thread::sleep_for(std::min<nanoseconds>(backoff, deadline - now));
    backoff = std::min(backoff * 2, kMaxBackoff);
  }
  throw_error(ErrorCode::init,
              fmt::format("cannot connect to the store at {} within {:.1f} s ({} attempts); "
                          "last error: {}",
                          where, seconds_between(start, Clock::now()), attempts, last_error),
              {.op = "store.connect"});
}

std::string quoted_keys(const std::vector<std::string>& keys) {
  std::string out;
  const size_t shown = std::min<size_t>(keys.size(), 8);
  for (size_t i = 0; i < shown; ++i) out += (i ? ", '" : "'") + keys[i] + "'";
  if (keys.size() > shown) out += fmt::format(" and {} more", keys.size() - shown);
  return out;
}

struct Connection {
  explicit Connection(int socket) : fd(socket) {}
  ~Connection() { ::close(fd); }
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  int fd;
  std::vector<uint8_t> in;  // bytes received and not yet parsed
};

class TcpStoreClient final : public bootstrap::TimedStore {
 public:
  TcpStoreClient(std::string host, uint16_t port, milliseconds connect_timeout)
      : host_(std::move(host)), port_(port), connect_timeout_(connect_timeout),
        where_(join_host_port(host_, port_)), secret_key_(bootstrap::job_secret_key()) {
    idle_.push_back(open_connection());
  }

  void set(const std::string& key, const Bytes& value) override {
    check_key(key, "store.set");
    check_value(value, key, "store.set");
    call(request(StoreCmd::set, key, {value}), "store.set", key);
  }

  Bytes get_within(const std::string& key, milliseconds limit) override {
    check_key(key, "store.get");
    StoreRequest req = request(StoreCmd::get, key, {});
    req.timeout_ms = std::max<int64_t>(limit.count(), 0);
    StoreResponse resp = call(req, "store.get", key);
    if (resp.status == StoreStatus::timeout) {
      throw_error(ErrorCode::timeout,
                  fmt::format("key '{}' was not set within {:.3g} s (store {})", key,
                              limit.count() / 1000.0, where_),
                  {.op = "store.get"});
    }
    expect_values(resp, 1, "store.get", key);
    return std::move(resp.values[0]);
  }

  int64_t add(const std::string& key, int64_t delta) override {
    check_key(key, "store.add");
    StoreResponse resp = call(request(StoreCmd::add, key, {bootstrap::to_bytes(std::to_string(delta))}),
                              "store.add", key);
    expect_values(resp, 1, "store.add", key);
    const Bytes& v = resp.values[0];
    auto value = bootstrap::parse_decimal(std::string_view(reinterpret_cast<const char*>(v.data()),
                                                           v.size()));
    if (!value) protocol_error("store.add", key, "the answer is not a decimal integer");
    return *value;
  }

  Bytes compare_set(const std::string& key, const Bytes& expected, const Bytes& desired) override {
    check_key(key, "store.compare_set");
    check_value(expected, key, "store.compare_set");
    check_value(desired, key, "store.compare_set");
    StoreResponse resp = call(request(StoreCmd::compare_set, key, {expected, desired}),
                              "store.compare_set", key);
    expect_values(resp, 1, "store.compare_set", key);
    return std::move(resp.values[0]);
  }

  void wait_within(const std::vector<std::string>& keys, milliseconds limit) override {
    for (const auto& k : keys) check_key(k, "store.wait");
    const TimePoint deadline = Clock::now() + limit;
    // One request carries at most kMaxStoreValues keys; more wait batch after batch under
    // one deadline.
    for (size_t first = 0; first < keys.size(); first += bootstrap::kMaxStoreValues) {
      const size_t last = std::min(keys.size(), first + bootstrap::kMaxStoreValues);
      StoreRequest req = request(StoreCmd::wait, "", {});
      for (size_t i = first; i < last; ++i) req.values.push_back(bootstrap::to_bytes(keys[i]));
      req.timeout_ms = std::chrono::duration_cast<milliseconds>(
                           std::max<nanoseconds>(deadline - Clock::now(), nanoseconds(0)))
                           .count();
      StoreResponse resp = call(req, "store.wait", keys[first]);
      if (resp.status == StoreStatus::timeout) {
        throw_error(ErrorCode::timeout,
                    fmt::format("keys {} were not all set within {:.3g} s (store {})",
                                quoted_keys(keys), limit.count() / 1000.0, where_),
                    {.op = "store.wait"});
      }
    }
  }

  bool parks_waits() const override { return true; }

  bool check(const std::string& key) override {
    check_key(key, "store.check");
    StoreResponse resp = call(request(StoreCmd::check, key, {}), "store.check", key);
    return flag_value(resp, "store.check", key);
  }

  bool remove(const std::string& key) override {
    check_key(key, "store.remove");
    StoreResponse resp = call(request(StoreCmd::remove, key, {}), "store.remove", key);
    return flag_value(resp, "store.remove", key);
  }

 private:
  static StoreRequest request(StoreCmd cmd, const std::string& key, std::vector<Bytes> values) {
    StoreRequest req;
    req.cmd = cmd;
    req.key = key;
    req.values = std::move(values);
    return req;
  }

  static void check_key(const std::string& key, const char* op) {
    HOOP_CHECK_ARG(!key.empty(), ErrorContext{.op = op}, "empty store key");
    HOOP_CHECK_ARG(key.size() <= bootstrap::kMaxStoreKey, ErrorContext{.op = op},
                   "store key of {} bytes exceeds the limit of {}", key.size(),
                   bootstrap::kMaxStoreKey);
  }

  static void check_value(const Bytes& value, const std::string& key, const char* op) {
    HOOP_CHECK_ARG(value.size() <= bootstrap::kMaxStoreValue, ErrorContext{.op = op},
                   "value of {} bytes for key '{}' exceeds the store limit of {}", value.size(),
                   key, bootstrap::kMaxStoreValue);
  }

  [[noreturn]] void protocol_error(const char* op, const std::string& key,
                                   const std::string& what) {
    throw_error(ErrorCode::protocol,
                fmt::format("key '{}': bad answer from the store at {}: {}", key, where_, what),
                {.op = op});
  }

  void expect_values(const StoreResponse& resp, size_t n, const char* op, const std::string& key) {
    if (resp.status != StoreStatus::ok || resp.values.size() != n) {
      protocol_error(op, key, fmt::format("status {} with {} values", static_cast<int>(resp.status),
                                          resp.values.size()));
    }
  }

  bool flag_value(const StoreResponse& resp, const char* op, const std::string& key) {
    expect_values(resp, 1, op, key);
    const Bytes& v = resp.values[0];
    if (v.size() != 1 || (v[0] != '0' && v[0] != '1')) protocol_error(op, key, "not a flag");
    return v[0] == '1';
  }

  // A connection nobody uses, or a new one.
  std::unique_ptr<Connection> borrow() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (!idle_.empty()) {
        auto c = std::move(idle_.back());
        idle_.pop_back();
        return c;
      }
    }
    return open_connection();
  }

  // A new connection; with HOOP_SECRET it first shows the secret's key (HELLO), which a store
  // with a secret requires.
  std::unique_ptr<Connection> open_connection() {
    auto c = std::make_unique<Connection>(connect_with_retry(host_, port_, connect_timeout_));
    if (secret_key_ == 0) return c;
    const TimePoint deadline = Clock::now() + timeout() + kAnswerGrace;
    send_all(*c, bootstrap::encode_store_request(
                     request(StoreCmd::hello, "", {bootstrap::encode_secret_key(secret_key_)})),
             deadline, "store.connect", "");
    const StoreResponse resp = receive(*c, deadline, "store.connect", "");
    if (resp.status != StoreStatus::ok) {
      const std::string why = resp.values.empty()
                                  ? std::string("status ") + std::to_string(static_cast<int>(resp.status))
                                  : std::string(resp.values[0].begin(), resp.values[0].end());
      throw_error(ErrorCode::init, fmt::format("the store at {} refused this client: {}", where_, why),
                  {.op = "store.connect"});
    }
    return c;
  }

  void give_back(std::unique_ptr<Connection> c) {
    std::lock_guard<std::mutex> lock(mu_);
    idle_.push_back(std::move(c));
  }

  // Sends one request and reads its answer. A connection left in an unknown state (an I/O
  // error or no answer in time) is closed, not reused.
  StoreResponse call(const StoreRequest& req, const char* op, const std::string& key) {
    std::unique_ptr<Connection> c = borrow();
    // The server answers within the request's timeout (GET/WAIT) or at once; allow the store
    // timeout plus a grace period before declaring it dead.
    const TimePoint deadline =
        Clock::now() + std::max(milliseconds(req.timeout_ms), timeout()) + kAnswerGrace;
    send_all(*c, bootstrap::encode_store_request(req), deadline, op, key);
    StoreResponse resp = receive(*c, deadline, op, key);
    give_back(std::move(c));
    if (resp.status == StoreStatus::bad_request) {
      std::string why = resp.values.empty()
                            ? std::string("bad request")
                            : std::string(resp.values[0].begin(), resp.values[0].end());
      throw_error(ErrorCode::invalid_argument, fmt::format("store {}: {}", where_, why),
                  {.op = op});
    }
    return resp;
  }

  [[noreturn]] void connection_broken(const char* op, const std::string& key,
                                      const std::string& what) {
    throw bootstrap::StoreConnectionBroken(
        ErrorCode::peer_failure, fmt::format("key '{}': the store server at {} {}", key, where_, what),
        {.op = op});
  }

  [[noreturn]] void connection_lost(const char* op, const std::string& key,
                                    const std::string& what) {
    throw_error(ErrorCode::peer_failure,
                fmt::format("key '{}': the store server at {} {}", key, where_, what), {.op = op});
  }

  // Waits until the connection is ready for `events` or the deadline passes.
  void wait_ready(Connection& c, short events, TimePoint deadline, const char* op,
                  const std::string& key) {
    for (;;) {
      const int left = remaining_ms(deadline);
      if (left == 0) connection_lost(op, key, "did not answer in time");
      pollfd p{c.fd, events, 0};
      int n = ::poll(&p, 1, left);
      if (n > 0) return;
      if (n < 0 && errno != EINTR) {
        connection_lost(op, key, fmt::format("cannot be polled: {}", std::strerror(errno)));
      }
    }
  }

  void send_all(Connection& c, const std::vector<uint8_t>& wire, TimePoint deadline,
                const char* op, const std::string& key) {
    size_t sent = 0;
    while (sent < wire.size()) {
      ssize_t n = ::send(c.fd, wire.data() + sent, wire.size() - sent, MSG_NOSIGNAL);
      if (n >= 0) {
        sent += static_cast<size_t>(n);
      } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
        wait_ready(c, POLLOUT, deadline, op, key);
      } else if (errno != EINTR) {
        connection_broken(op, key, fmt::format("connection failed: {}", std::strerror(errno)));
      }
    }
  }

  StoreResponse receive(Connection& c, TimePoint deadline, const char* op,
                        const std::string& key) {
    constexpr size_t kChunk = 16384;
    for (;;) {
      StoreResponse resp;
      size_t consumed = 0;
      std::string error;
      ParseStatus st =
          bootstrap::parse_store_response(c.in.data(), c.in.size(), &resp, &consumed, &error);
      if (st == ParseStatus::complete) {
        c.in.erase(c.in.begin(), c.in.begin() + static_cast<std::ptrdiff_t>(consumed));
        return resp;
      }
      if (st == ParseStatus::malformed) protocol_error(op, key, error);
      // Through a buffer on the stack: growing c.in by the chunk for each read would zero-fill
      // it every time.
      uint8_t chunk[kChunk];
      ssize_t n = ::recv(c.fd, chunk, kChunk, 0);
      if (n > 0) {
        c.in.insert(c.in.end(), chunk, chunk + n);
        continue;
      }
      if (n == 0) connection_broken(op, key, "closed the connection");
      if (errno == EAGAIN || errno == EWOULDBLOCK) {
        wait_ready(c, POLLIN, deadline, op, key);
      } else if (errno != EINTR) {
        connection_broken(op, key, fmt::format("connection failed: {}", std::strerror(errno)));
      }
    }
  }

  const std::string host_;
  const uint16_t port_;
  const milliseconds connect_timeout_;
  const std::string where_;
  const uint64_t secret_key_;  // HOOP_SECRET's key, shown on every new connection; 0: none
  std::mutex mu_;
  std::vector<std::unique_ptr<Connection>> idle_;  // guarded by mu_
};

}  // namespace

std::shared_ptr<Store> connect_tcp_store(const std::string& host, uint16_t port,
                                         milliseconds connect_timeout) {
  HOOP_CHECK_ARG(port != 0, ErrorContext{.op = "store.connect"}, "store port 0 for host '{}'",
                 host);
  return std::make_shared<TcpStoreClient>(host.empty() ? "localhost" : host, port, connect_timeout);
}

}  // namespace hoop
