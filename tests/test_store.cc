// The rendezvous store: the wire protocol, the TCP server and client across real processes,
// hostile input, the prefix store and the file store.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "bootstrap/store_protocol.h"
#include "hoop/error.h"
#include "hoop/store.h"
#include "support/spawn.h"
#include "support/test_scale.h"

namespace hoop {
namespace {

using namespace std::chrono_literals;
using bootstrap::ParseStatus;
using bootstrap::StoreCmd;
using bootstrap::StoreRequest;
using bootstrap::StoreResponse;
using bootstrap::StoreStatus;
using Clock = std::chrono::steady_clock;
using test::wall_bound;

Bytes bytes(const std::string& s) { return Bytes(s.begin(), s.end()); }

double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

// Runs f, expecting a hoop::Error with the given code; returns it.
template <typename F>
Error expect_error(ErrorCode code, F&& f) {
  try {
    f();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), code) << e.what();
    return e;
  }
  ADD_FAILURE() << "no hoop::Error raised";
  return Error(ErrorCode::internal, "none");
}

// A port on which nothing listens (bound, read, released).
uint16_t unused_port() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  EXPECT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  socklen_t len = sizeof a;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  ::close(fd);
  return ntohs(a.sin_port);
}

int raw_connect(uint16_t port) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(port);
  EXPECT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0) << std::strerror(errno);
  return fd;
}

void write_all(int fd, const std::vector<uint8_t>& data) {
  size_t off = 0;
  while (off < data.size()) {
    ssize_t n = ::send(fd, data.data() + off, data.size() - off, MSG_NOSIGNAL);
    if (n <= 0) return;  // the server may close before we are done: that is the point
    off += static_cast<size_t>(n);
  }
}

// True when the server closed the socket (EOF or reset) within the limit.
bool closed_by_peer(int fd, std::chrono::milliseconds limit) {
  auto deadline = Clock::now() + limit;
  while (Clock::now() < deadline) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 50) <= 0) continue;
    char buf[256];
    ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n == 0 || (n < 0 && errno == ECONNRESET)) return true;
  }
  return false;
}

bool wait_for_rejections(const TcpStoreServer& server, uint64_t n) {
  auto deadline = Clock::now() + 5s;
  while (server.rejected_connections() < n && Clock::now() < deadline) {
    std::this_thread::sleep_for(5ms);
  }
  return server.rejected_connections() >= n;
}

std::vector<uint8_t> le32(uint32_t v) {
  return {static_cast<uint8_t>(v), static_cast<uint8_t>(v >> 8), static_cast<uint8_t>(v >> 16),
          static_cast<uint8_t>(v >> 24)};
}

void append(std::vector<uint8_t>* out, const std::vector<uint8_t>& more) {
  out->insert(out->end(), more.begin(), more.end());
}

// ---------------------------------------------------------------------------------------------
// Protocol

StoreRequest make_request(StoreCmd cmd, std::string key, std::vector<Bytes> values,
                          int64_t timeout_ms = 0) {
  StoreRequest r;
  r.cmd = cmd;
  r.key = std::move(key);
  r.values = std::move(values);
  r.timeout_ms = timeout_ms;
  return r;
}

TEST(StoreProtocol, RoundTripsEveryCommandAndNeedsEveryByte) {
  const std::vector<StoreRequest> requests = {
      make_request(StoreCmd::set, "k", {bytes("value")}),
      make_request(StoreCmd::get, "key/with/slashes", {}, 1234),
      make_request(StoreCmd::add, "counter", {bytes("-17")}),
      make_request(StoreCmd::compare_set, "c", {Bytes{}, bytes("new")}),
      make_request(StoreCmd::wait, "", {bytes("a"), bytes("b"), bytes("c")}, 99),
      make_request(StoreCmd::check, "x", {}),
      make_request(StoreCmd::remove, "y", {}),
      make_request(StoreCmd::hello, "", {bootstrap::encode_secret_key(0x0123456789abcdefull)}),
  };
  for (const auto& req : requests) {
    std::vector<uint8_t> wire = bootstrap::encode_store_request(req);
    // Every proper prefix is incomplete, never malformed.
    for (size_t n = 0; n < wire.size(); ++n) {
      StoreRequest out;
      size_t consumed = 0;
      std::string error;
      ASSERT_EQ(bootstrap::parse_store_request(wire.data(), n, &out, &consumed, &error),
                ParseStatus::need_more)
          << to_string(req.cmd) << " prefix " << n << ": " << error;
    }
    // Followed by the start of another request, exactly one request is consumed.
    std::vector<uint8_t> two = wire;
    append(&two, wire);
    StoreRequest out;
    size_t consumed = 0;
    std::string error;
    ASSERT_EQ(bootstrap::parse_store_request(two.data(), two.size(), &out, &consumed, &error),
              ParseStatus::complete)
        << error;
    EXPECT_EQ(consumed, wire.size());
    EXPECT_EQ(out.cmd, req.cmd);
    EXPECT_EQ(out.key, req.key);
    EXPECT_EQ(out.values, req.values);
    EXPECT_EQ(out.timeout_ms, req.timeout_ms);
  }
}

ParseStatus parse(const std::vector<uint8_t>& wire, std::string* error) {
  StoreRequest out;
  size_t consumed = 0;
  return bootstrap::parse_store_request(wire.data(), wire.size(), &out, &consumed, error);
}

TEST(StoreProtocol, RefusesMalformedRequestsEarly) {
  std::string error;
  // Wrong magic, refused from the first byte.
  EXPECT_EQ(parse({'X'}, &error), ParseStatus::malformed);
  EXPECT_NE(error.find("magic"), std::string::npos) << error;
  EXPECT_EQ(parse({'H', 'S', 'T', 'X'}, &error), ParseStatus::malformed);

  std::vector<uint8_t> header = le32(bootstrap::kStoreMagic);
  // Unknown command.
  auto bad_cmd = header;
  bad_cmd.push_back(42);
  EXPECT_EQ(parse(bad_cmd, &error), ParseStatus::malformed);
  EXPECT_NE(error.find("42"), std::string::npos) << error;

  // A key longer than the limit, refused before its bytes arrive.
  auto long_key = header;
  long_key.push_back(static_cast<uint8_t>(StoreCmd::set));
  append(&long_key, le32(bootstrap::kMaxStoreKey + 1));
  EXPECT_EQ(parse(long_key, &error), ParseStatus::malformed);

  // A value announced at 4 GB, refused from its length alone.
  auto huge = header;
  huge.push_back(static_cast<uint8_t>(StoreCmd::set));
  append(&huge, le32(1));
  huge.push_back('k');
  append(&huge, le32(1));
  append(&huge, le32(0xFFFFFFFFu));
  EXPECT_EQ(parse(huge, &error), ParseStatus::malformed);
  EXPECT_NE(error.find("4294967295"), std::string::npos) << error;

  // Wrong number of values for the command, an empty key, a key on WAIT, a negative timeout.
  auto v = bootstrap::encode_store_request(make_request(StoreCmd::set, "k", {}));
  EXPECT_EQ(parse(v, &error), ParseStatus::malformed);
  v = bootstrap::encode_store_request(make_request(StoreCmd::get, "", {}, 5));
  EXPECT_EQ(parse(v, &error), ParseStatus::malformed);
  v = bootstrap::encode_store_request(make_request(StoreCmd::wait, "k", {bytes("a")}, 5));
  EXPECT_EQ(parse(v, &error), ParseStatus::malformed);
  v = bootstrap::encode_store_request(make_request(StoreCmd::wait, "", {Bytes{}}, 5));
  EXPECT_EQ(parse(v, &error), ParseStatus::malformed);
  v = bootstrap::encode_store_request(make_request(StoreCmd::get, "k", {}, -1));
  EXPECT_EQ(parse(v, &error), ParseStatus::malformed);
  EXPECT_NE(error.find("negative"), std::string::npos) << error;
}

TEST(StoreProtocol, ResponsesRoundTrip) {
  StoreResponse resp{StoreStatus::timeout, {bytes("x"), Bytes{}, bytes("yz")}};
  std::vector<uint8_t> wire;
  bootstrap::encode_store_response(resp, &wire);
  for (size_t n = 0; n < wire.size(); ++n) {
    StoreResponse out;
    size_t consumed = 0;
    std::string error;
    ASSERT_EQ(bootstrap::parse_store_response(wire.data(), n, &out, &consumed, &error),
              ParseStatus::need_more);
  }
  StoreResponse out;
  size_t consumed = 0;
  std::string error;
  ASSERT_EQ(bootstrap::parse_store_response(wire.data(), wire.size(), &out, &consumed, &error),
            ParseStatus::complete);
  EXPECT_EQ(consumed, wire.size());
  EXPECT_EQ(out.status, StoreStatus::timeout);
  EXPECT_EQ(out.values, resp.values);
  wire[4] = 7;  // unknown status
  EXPECT_EQ(bootstrap::parse_store_response(wire.data(), wire.size(), &out, &consumed, &error),
            ParseStatus::malformed);
}

// ---------------------------------------------------------------------------------------------
// TCP store, one process

TEST(TcpStore, SetGetCheckRemoveAddCompareSet) {
  TcpStoreServer server("127.0.0.1", 0);
  ASSERT_NE(server.port(), 0);
  auto store = connect_tcp_store("127.0.0.1", server.port());
  store->set_string("greeting", "hello");
  EXPECT_EQ(store->get_string("greeting"), "hello");
  store->set("empty", Bytes{});
  EXPECT_EQ(store->get("empty"), Bytes{});
  EXPECT_TRUE(store->check("greeting"));
  EXPECT_FALSE(store->check("nope"));
  EXPECT_TRUE(store->remove("greeting"));
  EXPECT_FALSE(store->remove("greeting"));
  EXPECT_FALSE(store->check("greeting"));

  EXPECT_EQ(store->add("n", 5), 5);
  EXPECT_EQ(store->add("n", -7), -2);
  EXPECT_EQ(store->get_string("n"), "-2");
  // add on a value that is not an integer: refused, and the connection stays usable.
  store->set_string("text", "abc");
  Error e = expect_error(ErrorCode::invalid_argument, [&] { store->add("text", 1); });
  EXPECT_NE(std::string(e.what()).find("text"), std::string::npos) << e.what();
  EXPECT_EQ(store->add("n", 2), 0);

  // compare_set: absent + empty expected sets; a mismatch returns the current value.
  EXPECT_EQ(store->compare_set("cs", Bytes{}, bytes("one")), bytes("one"));
  EXPECT_EQ(store->compare_set("cs", bytes("zzz"), bytes("two")), bytes("one"));
  EXPECT_EQ(store->compare_set("cs", bytes("one"), bytes("two")), bytes("two"));
  EXPECT_EQ(store->compare_set("absent", bytes("x"), bytes("y")), Bytes{});
  EXPECT_FALSE(store->check("absent"));
  EXPECT_EQ(server.rejected_connections(), 0u);
}

TEST(TcpStore, LargeValuesArriveWhole) {
  TcpStoreServer server("127.0.0.1", 0);
  auto store = connect_tcp_store("127.0.0.1", server.port());
  // Larger than the socket buffers, so both sides see partial reads and writes.
  Bytes big(2 << 20);
  for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<uint8_t>(i * 131 ^ (i >> 9));
  store->set("big", big);
  EXPECT_EQ(store->get("big"), big);
  // Over the protocol limit: refused by the client before anything is sent.
  expect_error(ErrorCode::invalid_argument,
               [&] { store->set("huge", Bytes(bootstrap::kMaxStoreValue + 1)); });
  expect_error(ErrorCode::invalid_argument,
               [&] { store->set(std::string(bootstrap::kMaxStoreKey + 1, 'k'), Bytes{}); });
  EXPECT_EQ(store->get("big").size(), big.size());
}

TEST(TcpStore, TimeoutsRaiseQuicklyAndNameTheKeys) {
  TcpStoreServer server("127.0.0.1", 0);
  auto store = connect_tcp_store("127.0.0.1", server.port());
  store->set_timeout(200ms);
  store->set_string("present", "1");
  auto t0 = Clock::now();
  Error e = expect_error(ErrorCode::timeout, [&] { store->get("missing-key"); });
  EXPECT_GE(seconds_since(t0), 0.15);
  EXPECT_LT(seconds_since(t0), wall_bound(3.0));
  EXPECT_NE(std::string(e.what()).find("missing-key"), std::string::npos) << e.what();
  EXPECT_NE(std::string(e.what()).find("0.2 s"), std::string::npos) << e.what();
  EXPECT_EQ(e.op(), "store.get");

  t0 = Clock::now();
  e = expect_error(ErrorCode::timeout, [&] { store->wait({"present", "absent-1", "absent-2"}); });
  EXPECT_LT(seconds_since(t0), wall_bound(3.0));
  EXPECT_NE(std::string(e.what()).find("absent-1"), std::string::npos) << e.what();
  EXPECT_NE(std::string(e.what()).find("absent-2"), std::string::npos) << e.what();
  EXPECT_EQ(e.op(), "store.wait");
  // The connection is still in step after the timeouts.
  EXPECT_EQ(store->get_string("present"), "1");
  store->wait({});
  store->wait({"present"});
}

TEST(TcpStore, OneClientSharedByThreads) {
  TcpStoreServer server("127.0.0.1", 0);
  auto store = connect_tcp_store("127.0.0.1", server.port());
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 200; ++i) store->add("count", t + 1);
      store->set_string("thread/" + std::to_string(t), "done");
    });
  }
  // A get from yet another thread blocks until the last thread is done.
  std::thread getter([&] { store->wait({"thread/0", "thread/1", "thread/2", "thread/3"}); });
  for (auto& th : threads) th.join();
  getter.join();
  EXPECT_EQ(store->add("count", 0), 200 * (1 + 2 + 3 + 4));
}

TEST(TcpStore, ServesBothAddressFamiliesOnTheWildcard) {
  TcpStoreServer server("", 0);
  auto v4 = connect_tcp_store("127.0.0.1", server.port(), 5s);
  v4->set_string("family", "v4");
  // ::1 exists only where IPv6 is enabled on loopback.
  int probe = ::socket(AF_INET6, SOCK_STREAM, 0);
  sockaddr_in6 a{};
  a.sin6_family = AF_INET6;
  a.sin6_addr = in6addr_loopback;
  const bool has_v6 = probe >= 0 && ::bind(probe, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
  if (probe >= 0) ::close(probe);
  if (!has_v6) GTEST_SKIP() << "no IPv6 loopback here";
  auto v6 = connect_tcp_store("::1", server.port(), 5s);
  EXPECT_EQ(v6->get_string("family"), "v4");
  TcpStoreServer only_v6("::1", 0);
  auto c = connect_tcp_store("::1", only_v6.port(), 5s);
  c->set_string("k", "v");
  EXPECT_EQ(c->get_string("k"), "v");
}

TEST(TcpStore, ClientConnectingBeforeTheServerSucceedsWhenItStarts) {
  const uint16_t port = unused_port();
  std::unique_ptr<TcpStoreServer> server;
  std::thread starter([&] {
    std::this_thread::sleep_for(300ms);
    server = std::make_unique<TcpStoreServer>("127.0.0.1", port);
  });
  auto t0 = Clock::now();
  std::shared_ptr<Store> store;
  EXPECT_NO_THROW(store = connect_tcp_store("127.0.0.1", port, 20s));
  EXPECT_GE(seconds_since(t0), 0.25);
  starter.join();
  ASSERT_TRUE(store);
  store->set_string("late", "ok");
  EXPECT_EQ(store->get_string("late"), "ok");
}

TEST(TcpStore, ClientOfADeadServerFailsWithinItsConnectTimeout) {
  const uint16_t port = unused_port();
  auto t0 = Clock::now();
  Error e = expect_error(ErrorCode::init, [&] { connect_tcp_store("127.0.0.1", port, 500ms); });
  const double took = seconds_since(t0);
  EXPECT_GE(took, 0.4);
  EXPECT_LT(took, wall_bound(3.0));
  const std::string what = e.what();
  EXPECT_NE(what.find("127.0.0.1:" + std::to_string(port)), std::string::npos) << what;
  EXPECT_NE(what.find("refused"), std::string::npos) << what;
}

// A store process that dies (kill -9) while a client waits in get: the client fails at once,
// it does not wait for its timeout.
TEST(TcpStore, ServerKilledDuringGetIsAPeerFailure) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  ASSERT_EQ(::listen(fd, 16), 0);
  socklen_t len = sizeof a;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  pid_t pid = ::fork();
  if (pid == 0) {
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    auto server = TcpStoreServer::from_listening_fd(fd);
    for (;;) ::pause();
  }
  ::close(fd);
  auto store = connect_tcp_store("127.0.0.1", ntohs(a.sin_port), 10s);
  store->set_timeout(30s);
  store->set_string("alive", "yes");
  EXPECT_EQ(store->get_string("alive"), "yes");
  std::thread killer([pid] {
    std::this_thread::sleep_for(200ms);
    ::kill(pid, SIGKILL);
  });
  auto t0 = Clock::now();
  Error e = expect_error(ErrorCode::peer_failure, [&] { store->get("never"); });
  EXPECT_LT(seconds_since(t0), wall_bound(5.0));
  EXPECT_NE(std::string(e.what()).find("never"), std::string::npos) << e.what();
  killer.join();
  ::waitpid(pid, nullptr, 0);
}

// ---------------------------------------------------------------------------------------------
// Hostile input

TEST(TcpStoreHostile, MalformedConnectionsAreRejectedWhileOthersKeepWorking) {
  TcpStoreServer server("127.0.0.1", 0);
  auto good = connect_tcp_store("127.0.0.1", server.port());
  good->set_string("k", "v");

  // A slow client holding half a request blocks nobody and is not rejected.
  int slow = raw_connect(server.port());
  auto half = bootstrap::encode_store_request(make_request(StoreCmd::set, "slow", {bytes("x")}));
  half.resize(half.size() / 2);
  write_all(slow, half);

  // Random bytes (not starting like the magic).
  int noise = raw_connect(server.port());
  std::vector<uint8_t> garbage(4096);
  std::mt19937 rng(1234);
  for (auto& b : garbage) b = static_cast<uint8_t>(rng());
  if (garbage[0] == 'H') garbage[0] = 'h';
  write_all(noise, garbage);
  EXPECT_TRUE(closed_by_peer(noise, 5s));
  EXPECT_TRUE(wait_for_rejections(server, 1));
  EXPECT_EQ(good->get_string("k"), "v");

  // A valid-looking SET whose value claims 4 GB.
  int huge = raw_connect(server.port());
  std::vector<uint8_t> msg = le32(bootstrap::kStoreMagic);
  msg.push_back(static_cast<uint8_t>(StoreCmd::set));
  append(&msg, le32(3));
  msg.insert(msg.end(), {'a', 'b', 'c'});
  append(&msg, le32(1));
  append(&msg, le32(0xFFFFFFFFu));
  write_all(huge, msg);
  EXPECT_TRUE(closed_by_peer(huge, 5s));
  EXPECT_TRUE(wait_for_rejections(server, 2));
  EXPECT_FALSE(good->check("abc"));

  // A wrong magic on an otherwise valid request.
  int foreign = raw_connect(server.port());
  msg = bootstrap::encode_store_request(make_request(StoreCmd::set, "f", {bytes("x")}));
  msg[0] = 'G';
  write_all(foreign, msg);
  EXPECT_TRUE(closed_by_peer(foreign, 5s));
  EXPECT_TRUE(wait_for_rejections(server, 3));
  EXPECT_FALSE(good->check("f"));

  // The slow client finishes its request and is served.
  auto whole = bootstrap::encode_store_request(make_request(StoreCmd::set, "slow", {bytes("x")}));
  write_all(slow, std::vector<uint8_t>(whole.begin() + static_cast<long>(half.size()), whole.end()));
  EXPECT_EQ(good->get_string("slow"), "x");
  EXPECT_EQ(server.rejected_connections(), 3u);

  good->set_string("k2", "v2");
  EXPECT_EQ(good->get_string("k2"), "v2");
  for (int fd : {slow, noise, huge, foreign}) ::close(fd);
}

// A store started with HOOP_SECRET serves only clients that show its key first: a client with
// another secret cannot connect, one without a secret has its first request refused, and so
// has a stranger's raw request; each says why, and nothing they sent is stored.
TEST(TcpStoreHostile, AStoreWithASecretServesOnlyClientsWithIt) {
  ::setenv("HOOP_SECRET", "the job's secret", 1);
  TcpStoreServer server("127.0.0.1", 0);
  auto member = connect_tcp_store("127.0.0.1", server.port(), 5s);
  ::setenv("HOOP_SECRET", "another secret", 1);
  const Error wrong = expect_error(ErrorCode::init, [&] { connect_tcp_store("127.0.0.1", server.port(), 5s); });
  EXPECT_NE(std::string(wrong.what()).find("wrong secret key"), std::string::npos) << wrong.what();
  ::unsetenv("HOOP_SECRET");
  auto outsider = connect_tcp_store("127.0.0.1", server.port(), 5s);
  const Error none = expect_error(ErrorCode::invalid_argument, [&] { outsider->set_string("k", "x"); });
  EXPECT_NE(std::string(none.what()).find("requires HOOP_SECRET"), std::string::npos) << none.what();

  int stranger = raw_connect(server.port());
  write_all(stranger, bootstrap::encode_store_request(make_request(StoreCmd::set, "k", {bytes("evil")})));
  EXPECT_TRUE(closed_by_peer(stranger, 5s));
  ::close(stranger);
  EXPECT_TRUE(wait_for_rejections(server, 3));

  member->set_string("k", "v");
  EXPECT_EQ(member->get_string("k"), "v");
  EXPECT_EQ(server.rejected_connections(), 3u);
}

TEST(TcpStoreHostile, PipelinedRequestsAreAnsweredInOrder) {
  TcpStoreServer server("127.0.0.1", 0);
  int fd = raw_connect(server.port());
  // GET parks until the SET from another client; the SET behind it on the same connection
  // must wait its turn (answers come in request order).
  std::vector<uint8_t> wire = bootstrap::encode_store_request(
      make_request(StoreCmd::get, "later", {}, 10'000));
  append(&wire, bootstrap::encode_store_request(make_request(StoreCmd::set, "after", {bytes("2")})));
  write_all(fd, wire);
  auto other = connect_tcp_store("127.0.0.1", server.port());
  std::this_thread::sleep_for(100ms);
  EXPECT_FALSE(other->check("after"));
  other->set_string("later", "1");
  other->wait({"after"});

  std::vector<uint8_t> in;
  StoreResponse first, second;
  size_t consumed = 0;
  std::string error;
  auto deadline = Clock::now() + 5s;
  while (Clock::now() < deadline) {
    uint8_t buf[256];
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 50) <= 0) continue;
    ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n <= 0) break;
    in.insert(in.end(), buf, buf + n);
    if (bootstrap::parse_store_response(in.data(), in.size(), &first, &consumed, &error) ==
            ParseStatus::complete &&
        consumed < in.size()) {
      size_t c2 = 0;
      if (bootstrap::parse_store_response(in.data() + consumed, in.size() - consumed, &second,
                                          &c2, &error) == ParseStatus::complete)
        break;
    }
  }
  ASSERT_EQ(first.values, std::vector<Bytes>{bytes("1")});
  EXPECT_EQ(second.status, StoreStatus::ok);
  EXPECT_TRUE(second.values.empty());
  ::close(fd);
}

TEST(TcpStoreHostile, ClientVanishingWhileParkedLeavesTheServerHealthy) {
  TcpStoreServer server("127.0.0.1", 0);
  for (int i = 0; i < 20; ++i) {
    int fd = raw_connect(server.port());
    write_all(fd, bootstrap::encode_store_request(make_request(StoreCmd::wait, "",
                                                               {bytes("gone"), bytes("x")}, 60'000)));
    ::close(fd);
  }
  auto store = connect_tcp_store("127.0.0.1", server.port());
  store->set_string("gone", "1");
  store->set_string("x", "1");
  store->wait({"gone", "x"});
  EXPECT_EQ(server.rejected_connections(), 0u);
}

// ---------------------------------------------------------------------------------------------
// TCP store across processes

TEST(TcpStoreProcesses, SetInOneProcessGetInAnother) {
  auto results = test::run_ranks(2, [](test::RankContext& ctx) {
    auto store = ctx.store();
    if (ctx.rank == 0) {
      store->set_string("from-0", "payload-0");
    } else {
      EXPECT_EQ(store->get_string("from-0"), "payload-0");
    }
  });
  EXPECT_TRUE(test::all_ok(results));
}

TEST(TcpStoreProcesses, GetBlocksUntilAnotherProcessSets) {
  auto results = test::run_ranks(2, [](test::RankContext& ctx) {
    auto store = ctx.store();
    if (ctx.rank == 0) {
      store->wait({"getter-ready"});
      std::this_thread::sleep_for(300ms);
      store->set_string("late-key", "arrived");
    } else {
      store->set_string("getter-ready", "1");
      auto t0 = Clock::now();
      EXPECT_EQ(store->get_string("late-key"), "arrived");
      ctx.report("waited " + std::to_string(seconds_since(t0)));
      EXPECT_GE(seconds_since(t0), 0.25);
    }
  });
  EXPECT_TRUE(test::all_ok(results));
}

TEST(TcpStoreProcesses, AddFromEightProcessesReachesTheExactTotal) {
  static constexpr int kRanks = 8;
  static constexpr int kAdds = 100;
  auto results = test::run_ranks(kRanks, [](test::RankContext& ctx) {
    auto store = ctx.store();
    for (int i = 0; i < kAdds; ++i) store->add("total", ctx.rank + 1);
    store->add("finished", 1);
    // The last one to finish sees the whole sum.
    store->set_string("done/" + std::to_string(ctx.rank), "1");
    std::vector<std::string> keys;
    for (int r = 0; r < ctx.size; ++r) keys.push_back("done/" + std::to_string(r));
    store->wait(keys);
    EXPECT_EQ(store->add("total", 0), int64_t{kAdds} * kRanks * (kRanks + 1) / 2);
    EXPECT_EQ(store->add("finished", 0), kRanks);
  });
  EXPECT_TRUE(test::all_ok(results));
}

TEST(TcpStoreProcesses, CompareSetRaceHasExactlyOneWinner) {
  static constexpr int kRanks = 8;
  auto results = test::run_ranks(kRanks, [](test::RankContext& ctx) {
    auto store = ctx.store();
    // Start together so that the compare_sets really race.
    store->add("arrived", 1);
    store->set_string("go/" + std::to_string(ctx.rank), "1");
    std::vector<std::string> keys;
    for (int r = 0; r < ctx.size; ++r) keys.push_back("go/" + std::to_string(r));
    store->wait(keys);
    const std::string mine = "rank-" + std::to_string(ctx.rank);
    Bytes now = store->compare_set("leader", Bytes{}, bytes(mine));
    ctx.report(std::string(now.begin(), now.end()));
  });
  ASSERT_TRUE(test::all_ok(results));
  std::set<std::string> seen;
  int winners = 0;
  for (const auto& r : results) {
    ASSERT_EQ(r.reports.size(), 1u);
    seen.insert(r.reports[0]);
    if (r.reports[0] == "rank-" + std::to_string(r.rank)) ++winners;
  }
  EXPECT_EQ(winners, 1);
  EXPECT_EQ(seen.size(), 1u) << "every rank must see the one winner: " << ::testing::PrintToString(seen);
}

TEST(TcpStoreProcesses, WaitOnSeveralKeysSetByOthers) {
  auto results = test::run_ranks(4, [](test::RankContext& ctx) {
    auto store = ctx.store();
    if (ctx.rank == 0) {
      store->wait({"key-1", "key-2", "key-3"});
      EXPECT_EQ(store->get_string("key-3"), "3");
    } else {
      std::this_thread::sleep_for(std::chrono::milliseconds(50 * ctx.rank));
      store->set_string("key-" + std::to_string(ctx.rank), std::to_string(ctx.rank));
    }
  });
  EXPECT_TRUE(test::all_ok(results));
}

// ---------------------------------------------------------------------------------------------
// Prefix store

TEST(PrefixStore, ScopesKeysAndAppliesItsOwnTimeout) {
  TcpStoreServer server("127.0.0.1", 0);
  auto base = connect_tcp_store("127.0.0.1", server.port());
  auto a = prefix_store(base, "comm-a");
  auto b = prefix_store(base, "comm-b");
  a->set_string("x", "in a");
  b->set_string("x", "in b");
  EXPECT_EQ(base->get_string("comm-a/x"), "in a");
  EXPECT_EQ(a->get_string("x"), "in a");
  EXPECT_EQ(b->get_string("x"), "in b");
  auto nested = prefix_store(a, "sub");
  nested->set_string("y", "deep");
  EXPECT_EQ(base->get_string("comm-a/sub/y"), "deep");
  EXPECT_EQ(a->add("n", 3), 3);
  EXPECT_EQ(base->add("comm-a/n", 1), 4);
  EXPECT_TRUE(a->check("n"));
  EXPECT_FALSE(b->check("n"));
  EXPECT_EQ(a->compare_set("n", bytes("4"), bytes("5")), bytes("5"));
  EXPECT_TRUE(a->remove("n"));
  EXPECT_FALSE(base->check("comm-a/n"));
  a->wait({"x", "sub/y"});

  // The base keeps its 300 s; the prefix store's own timeout bounds its waits.
  nested->set_timeout(150ms);
  auto t0 = Clock::now();
  Error e = expect_error(ErrorCode::timeout, [&] { nested->get("absent"); });
  EXPECT_LT(seconds_since(t0), wall_bound(3.0));
  EXPECT_NE(std::string(e.what()).find("comm-a/sub/absent"), std::string::npos) << e.what();
  expect_error(ErrorCode::timeout, [&] { nested->wait({"y", "absent"}); });
  EXPECT_EQ(base->timeout(), std::chrono::milliseconds(300'000));
}

// ---------------------------------------------------------------------------------------------
// File store

class FileStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/hoop-file-store-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string dir_;
};

TEST_F(FileStoreTest, Basics) {
  auto store = open_file_store(dir_ + "/nested/dir");
  store->set_string("a", "1");
  EXPECT_EQ(store->get_string("a"), "1");
  store->set_string("a", "2");
  EXPECT_EQ(store->get_string("a"), "2");
  EXPECT_TRUE(store->check("a"));
  EXPECT_FALSE(store->check("b"));
  EXPECT_TRUE(store->remove("a"));
  EXPECT_FALSE(store->remove("a"));
  EXPECT_EQ(store->add("n", 10), 10);
  EXPECT_EQ(store->add("n", -3), 7);
  EXPECT_EQ(store->compare_set("cs", Bytes{}, bytes("first")), bytes("first"));
  EXPECT_EQ(store->compare_set("cs", bytes("nope"), bytes("second")), bytes("first"));
  EXPECT_EQ(store->compare_set("cs", bytes("first"), bytes("second")), bytes("second"));
  store->set_string("text", "abc");
  expect_error(ErrorCode::invalid_argument, [&] { store->add("text", 1); });

  // Keys that are not plain file names stay distinct and round-trip.
  const std::vector<std::string> odd = {"a/b", "a%2Fb", "..", ".", ".lock", "sp ace", "\n",
                                        std::string(1000, 'k'), std::string(1000, 'k') + "2"};
  for (size_t i = 0; i < odd.size(); ++i) store->set_string(odd[i], std::to_string(i));
  for (size_t i = 0; i < odd.size(); ++i) EXPECT_EQ(store->get_string(odd[i]), std::to_string(i));
  store->wait({"a/b", ".."});

  // A second store object on the same directory sees the same keys.
  auto again = open_file_store(dir_ + "/nested/dir");
  EXPECT_EQ(again->get_string("a/b"), "0");
}

TEST_F(FileStoreTest, TimeoutsNameTheKey) {
  auto store = open_file_store(dir_);
  store->set_timeout(100ms);
  auto t0 = Clock::now();
  Error e = expect_error(ErrorCode::timeout, [&] { store->get("missing"); });
  EXPECT_GE(seconds_since(t0), 0.09);
  EXPECT_LT(seconds_since(t0), wall_bound(3.0));
  EXPECT_NE(std::string(e.what()).find("missing"), std::string::npos) << e.what();
  store->set_string("here", "1");
  e = expect_error(ErrorCode::timeout, [&] { store->wait({"here", "not-here"}); });
  EXPECT_NE(std::string(e.what()).find("not-here"), std::string::npos) << e.what();
}

TEST_F(FileStoreTest, ProcessesAddConcurrentlyAndGetBlocks) {
  const std::string dir = dir_;
  auto results = test::run_ranks(4, [dir](test::RankContext& ctx) {
    auto store = open_file_store(dir);
    store->set_timeout(30s);
    for (int i = 0; i < 50; ++i) store->add("sum", 1);
    Bytes seen = store->compare_set("first", Bytes{}, bytes(std::to_string(ctx.rank)));
    ctx.report(std::string(seen.begin(), seen.end()));
    store->set_string("done/" + std::to_string(ctx.rank), "1");
    store->wait({"done/0", "done/1", "done/2", "done/3"});
    EXPECT_EQ(store->add("sum", 0), 200);
  });
  ASSERT_TRUE(test::all_ok(results));
  std::set<std::string> winners;
  for (const auto& r : results) winners.insert(r.reports.at(0));
  EXPECT_EQ(winners.size(), 1u);
}

}  // namespace
}  // namespace hoop
