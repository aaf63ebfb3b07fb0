// The TCP transport: handshake codec, address and interface selection, and real links between
// forked processes over loopback (IPv4 and IPv6), including hostile clients and killed peers.
#include <gtest/gtest.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <iostream>
#include <random>
#include <sstream>
#include <thread>

#include "core/clock.h"
#include "hoop/error.h"
#include "support/scoped_env.h"
#include "support/test_scale.h"
#include "transport/tcp/handshake.h"
#include "transport/tcp/socket_options.h"
#include "transport/tcp/interfaces.h"
#include "core/socket_address.h"
#include "transport/tcp/tcp_link.h"
#include "transport/tcp/tcp_transport.h"
#include "transport/tcp/unique_fd.h"
#include "transport/waiter.h"

namespace hoop::transport {
namespace {

using namespace std::chrono_literals;
using tcp::HelloStatus;
using hoop::SocketAddress;

// ---------------------------------------------------------------------------------------------
// Test helpers

using test::ScopedEnv;
using test::wall_bound;

std::string unique_job() {
  static int counter = 0;
  return "tcp-test-" + std::to_string(::getpid()) + "-" + std::to_string(counter++);
}

bool write_all(int fd, const std::string& s) {
  size_t done = 0;
  while (done < s.size()) {
    ssize_t n = ::write(fd, s.data() + done, s.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    done += static_cast<size_t>(n);
  }
  return true;
}

// What a forked rank sees: its rank, and an all-gather of text lines through the parent (used
// to swap listener addresses).
struct ProcessContext {
  int rank = 0;
  int size = 0;
  int up_fd = -1;    // to the parent
  int down_fd = -1;  // from the parent
  std::string inbox;

  // Every rank's `line` (no newlines), indexed by rank. Also a barrier.
  std::vector<std::string> all_gather(const std::string& line) {
    if (!write_all(up_fd, line + "\n")) throw std::runtime_error("all_gather: parent gone");
    std::vector<std::string> out;
    while (static_cast<int>(out.size()) < size) {
      size_t nl;
      while ((nl = inbox.find('\n')) == std::string::npos) {
        char buf[4096];
        ssize_t n = ::read(down_fd, buf, sizeof buf);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) throw std::runtime_error("all_gather: parent gone");
        inbox.append(buf, static_cast<size_t>(n));
      }
      out.push_back(inbox.substr(0, nl));
      inbox.erase(0, nl + 1);
    }
    return out;
  }

  std::vector<std::vector<std::string>> exchange_addresses(const TcpListener& listener) {
    std::string line;
    for (const auto& a : listener.addresses()) line += a + " ";
    std::vector<std::vector<std::string>> out;
    for (const auto& l : all_gather(line)) {
      std::istringstream in(l);
      std::vector<std::string> addrs;
      for (std::string a; in >> a;) addrs.push_back(a);
      out.push_back(addrs);
    }
    return out;
  }
};

struct ProcessResult {
  int exit_code = -1;  // -1: killed
  int signal = 0;
};

// Runs body in n forked processes and serves their all_gather calls. A rank that exits non-zero
// gets the others killed (they may be waiting for it); every rank is killed at the timeout.
std::vector<ProcessResult> run_processes(int n, const std::function<void(ProcessContext&)>& body,
                                         std::chrono::seconds timeout = 60s) {
  std::cout.flush();
  std::cerr.flush();
  std::vector<pid_t> pids(n);
  std::vector<int> ups(n), downs(n);
  for (int r = 0; r < n; ++r) {
    int up[2], down[2];
    if (::pipe2(up, O_CLOEXEC) != 0 || ::pipe2(down, O_CLOEXEC) != 0) throw std::runtime_error("pipe");
    pid_t pid = ::fork();
    if (pid == 0) {
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      ::close(up[0]);
      ::close(down[1]);
      for (int q = 0; q < r; ++q) {
        ::close(ups[q]);
        ::close(downs[q]);
      }
      ProcessContext ctx;
      ctx.rank = r;
      ctx.size = n;
      ctx.up_fd = up[1];
      ctx.down_fd = down[0];
      int code = 0;
      try {
        body(ctx);
        if (::testing::Test::HasFailure()) code = 1;
      } catch (const std::exception& e) {
        std::cerr << "rank " << r << " failed: " << e.what() << std::endl;
        code = 2;
      }
      std::cout.flush();
      std::cerr.flush();
      ::_exit(code);
    }
    ::close(up[1]);
    ::close(down[0]);
    pids[r] = pid;
    ups[r] = up[0];
    downs[r] = down[1];
  }

  std::vector<ProcessResult> results(n);
  std::vector<std::string> partial(n);
  std::vector<std::vector<std::string>> lines(n);
  std::vector<bool> done(n, false), eof(n, false);
  int remaining = n;
  const auto deadline = Clock::now() + timeout;
  auto kill_all = [&] {
    for (int r = 0; r < n; ++r) if (!done[r]) ::kill(pids[r], SIGKILL);
  };
  while (remaining > 0) {
    std::vector<pollfd> pfds;
    std::vector<int> who;
    for (int r = 0; r < n; ++r) {
      if (!eof[r]) {
        pfds.push_back({ups[r], POLLIN, 0});
        who.push_back(r);
      }
    }
    ::poll(pfds.data(), pfds.size(), 10);
    for (size_t i = 0; i < pfds.size(); ++i) {
      if (!pfds[i].revents) continue;
      const int r = who[i];
      char buf[4096];
      ssize_t got = ::read(ups[r], buf, sizeof buf);
      if (got <= 0) {
        eof[r] = true;
        continue;
      }
      partial[r].append(buf, static_cast<size_t>(got));
      size_t nl;
      while ((nl = partial[r].find('\n')) != std::string::npos) {
        lines[r].push_back(partial[r].substr(0, nl));
        partial[r].erase(0, nl + 1);
      }
    }
    // A round of all_gather is complete when every rank has a line queued.
    while (std::all_of(lines.begin(), lines.end(), [](auto& l) { return !l.empty(); })) {
      std::string block;
      for (int r = 0; r < n; ++r) {
        block += lines[r].front() + "\n";
        lines[r].erase(lines[r].begin());
      }
      for (int r = 0; r < n; ++r) write_all(downs[r], block);
    }
    for (int r = 0; r < n; ++r) {
      if (done[r]) continue;
      int status = 0;
      if (::waitpid(pids[r], &status, WNOHANG) != pids[r]) continue;
      done[r] = true;
      --remaining;
      if (WIFEXITED(status)) results[r].exit_code = WEXITSTATUS(status);
      if (WIFSIGNALED(status)) results[r].signal = WTERMSIG(status);
      if (results[r].exit_code > 0) kill_all();
    }
    if (remaining > 0 && Clock::now() > deadline) {
      std::cerr << "run_processes: timeout, killing the ranks\n";
      kill_all();
    }
  }
  for (int r = 0; r < n; ++r) {
    ::close(ups[r]);
    ::close(downs[r]);
  }
  return results;
}

::testing::AssertionResult all_exited_ok(const std::vector<ProcessResult>& results) {
  std::string failures;
  for (size_t r = 0; r < results.size(); ++r) {
    if (results[r].exit_code == 0) continue;
    failures += "rank " + std::to_string(r) +
                (results[r].signal ? " killed by signal " + std::to_string(results[r].signal)
                                   : " exit code " + std::to_string(results[r].exit_code)) + "\n";
  }
  if (failures.empty()) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << failures;
}

TcpLinkParams params_for(uint64_t comm, int me, int peer, std::vector<std::string> peer_addrs,
                         int channel = 0) {
  TcpLinkParams p;
  p.comm_id = comm;
  p.my_rank = me;
  p.peer_rank = peer;
  p.channel = channel;
  p.peer_addresses = std::move(peer_addrs);
  p.same_host = true;
  return p;
}

uint64_t mix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

uint64_t pattern_word(uint64_t seed, uint64_t index) {
  return mix64(seed ^ (index * 0xd6e8feb86659fd93ull));
}

// The bytes [offset, offset + len) of the pseudo-random stream `seed` (word i of the stream is
// pattern_word(seed, i), so a skipped, repeated or reordered piece never matches).
void fill_pattern(uint64_t seed, uint64_t offset, std::byte* out, size_t len) {
  uint64_t word = offset / 8;
  size_t skip = offset % 8;
  while (len > 0) {
    const uint64_t v = pattern_word(seed, word++);
    if (skip == 0 && len >= 8) {
      std::memcpy(out, &v, 8);
      out += 8;
      len -= 8;
      continue;
    }
    const size_t take = std::min(8 - skip, len);
    std::memcpy(out, reinterpret_cast<const std::byte*>(&v) + skip, take);
    out += take;
    len -= take;
    skip = 0;
  }
}

// Sanitizers slow the byte checks down ten-fold or more: stream less there.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr uint64_t kStreamMiB = 32;
#else
constexpr uint64_t kStreamMiB = 256;
#endif

struct StreamResult {
  double seconds = 0;
  uint64_t aligned_checks = 0;
  uint64_t sleeps = 0;
};

// Sends `total` bytes of stream send_seed while receiving and checking `total` bytes of stream
// recv_seed, in random-sized pieces; sleeps on a Waiter whenever neither direction moves.
StreamResult stream_both_ways(Link& link, uint64_t total, uint64_t send_seed, uint64_t recv_seed,
                              uint64_t rng_seed) {
  constexpr size_t kMaxPiece = size_t{1} << 20;
  std::mt19937_64 rng(rng_seed);
  auto piece_size = [&](size_t limit) -> size_t {
    const size_t n = (rng() % 4 == 0) ? 1 + rng() % 100 : 1 + rng() % kMaxPiece;
    return std::min(n, limit);
  };
  std::vector<std::byte> out(kMaxPiece), expected(kMaxPiece);
  uint64_t sent = 0, received = 0;
  size_t out_pos = 0, out_len = 0;
  StreamResult result;
  Waiter waiter;
  const auto start = Clock::now();
  auto last_progress = start;
  while (sent < total || received < total) {
    bool progress = false;
    if (sent < total) {
      if (out_pos == out_len) {
        out_len = piece_size(total - sent);
        out_pos = 0;
        fill_pattern(send_seed, sent, out.data(), out_len);
      }
      const size_t n = link.write_some(out.data() + out_pos, out_len - out_pos);
      out_pos += n;
      sent += n;
      progress |= n > 0;
    }
    if (received < total) {
      auto span = link.readable();
      if (!span.empty()) {
        if (link.bytes_read() % 8 == 0) {
          ++result.aligned_checks;
          EXPECT_EQ(reinterpret_cast<uintptr_t>(span.data()) % 8, 0u)
              << "span at stream offset " << link.bytes_read() << " is not 8-byte aligned";
        }
        if (rng() % 8 == 0) {
          // A second look before consuming: the first span stays valid, more may follow it.
          auto again = link.readable();
          EXPECT_EQ(again.data(), span.data());
          EXPECT_GE(again.size(), span.size());
        }
        // What follows this stream (the peer's next message) stays for the caller.
        const size_t avail = std::min<uint64_t>(span.size(), total - received);
        size_t take = (rng() % 2) ? avail : 1 + rng() % avail;
        take = std::min(take, kMaxPiece);
        fill_pattern(recv_seed, received, expected.data(), take);
        if (std::memcmp(span.data(), expected.data(), take) != 0) {
          size_t i = 0;
          while (span[i] == expected[i]) ++i;
          ADD_FAILURE() << "byte " << received + i << " of the stream is wrong";
          return result;
        }
        link.consume(take);
        received += take;
        progress = true;
      }
    }
    const auto now = Clock::now();
    if (progress) {
      last_progress = now;
      continue;
    }
    if (now - last_progress > 20s) {
      ADD_FAILURE() << "no progress for 20 s (sent " << sent << ", received " << received << ")";
      return result;
    }
    waiter.reset();
    if (link.arm(waiter, received < total, sent < total)) {
      ++result.sleeps;
      waiter.wait(1s);
      link.disarm();
      link.check_peer_alive();
    } else {
      link.disarm();
    }
  }
  result.seconds = seconds_between(start, Clock::now());
  EXPECT_EQ(link.bytes_written(), total);
  EXPECT_EQ(link.bytes_read(), total);  // counts consumed bytes
  return result;
}

// Connects rank 0 and rank 1 of one communicator (each in its own process).
std::unique_ptr<Link> connect_pair(ProcessContext& ctx, TcpListener& listener, uint64_t comm,
                                   TimePoint deadline = Clock::now() + 20s) {
  auto addrs = ctx.exchange_addresses(listener);
  const int peer = 1 - ctx.rank;
  return tcp_connect(listener, params_for(comm, ctx.rank, peer, addrs[peer]), deadline);
}

uint64_t env_mib(const char* name, uint64_t fallback) {
  const char* v = std::getenv(name);
  return (v && *v) ? std::strtoull(v, nullptr, 10) : fallback;
}

// ---------------------------------------------------------------------------------------------
// Handshake codec

tcp::Hello sample_hello() {
  tcp::Hello h;
  h.job_key = tcp::fnv1a64("job-a");
  h.secret_key = tcp::fnv1a64("s3cret");
  h.comm_id = 0xfeedface12345678ull;
  h.from_rank = 3;
  h.to_rank = 7;
  h.channel = 2;
  return h;
}

TEST(TcpHandshake, Fnv1aKnownValues) {
  EXPECT_EQ(tcp::fnv1a64(""), 0xcbf29ce484222325ull);
  EXPECT_EQ(tcp::fnv1a64("a"), 0xaf63dc4c8601ec8cull);
  EXPECT_EQ(tcp::fnv1a64("foobar"), 0x85944171f73967e8ull);
}

TEST(TcpHandshake, HelloRoundTripAndLayout) {
  const auto h = sample_hello();
  const auto bytes = tcp::encode_hello(h);
  ASSERT_EQ(bytes.size(), 48u);
  EXPECT_EQ(std::memcmp(bytes.data(), "HTCP", 4), 0);
  EXPECT_EQ(std::to_integer<int>(bytes[4]), 1);  // version 1, little-endian
  EXPECT_EQ(std::to_integer<int>(bytes[32]), 3);  // from_rank
  EXPECT_EQ(std::to_integer<int>(bytes[36]), 7);  // to_rank
  EXPECT_EQ(std::to_integer<int>(bytes[40]), 2);  // channel
  const auto v = tcp::check_hello(bytes, h.job_key, h.secret_key);
  ASSERT_EQ(v.status, HelloStatus::ok) << v.reason;
  EXPECT_EQ(v.hello.comm_id, h.comm_id);
  EXPECT_EQ(v.hello.from_rank, 3);
  EXPECT_EQ(v.hello.to_rank, 7);
  EXPECT_EQ(v.hello.channel, 2);
}

TEST(TcpHandshake, VerdictsForForeignHellos) {
  const auto h = sample_hello();
  auto bytes = tcp::encode_hello(h);
  EXPECT_EQ(tcp::check_hello(bytes, h.job_key + 1, h.secret_key).status, HelloStatus::wrong_job);
  EXPECT_EQ(tcp::check_hello(bytes, h.job_key, 0).status, HelloStatus::wrong_secret);
  // Truncated, too long, empty.
  EXPECT_EQ(tcp::check_hello(std::span(bytes).first(47), h.job_key, h.secret_key).status,
            HelloStatus::malformed);
  std::vector<std::byte> longer(bytes.begin(), bytes.end());
  longer.push_back(std::byte{0});
  EXPECT_EQ(tcp::check_hello(longer, h.job_key, h.secret_key).status, HelloStatus::malformed);
  EXPECT_EQ(tcp::check_hello({}, h.job_key, h.secret_key).status, HelloStatus::malformed);
  // Bad magic, bad version.
  auto bad = bytes;
  bad[0] = std::byte{'X'};
  auto v = tcp::check_hello(bad, h.job_key, h.secret_key);
  EXPECT_EQ(v.status, HelloStatus::malformed);
  EXPECT_NE(v.reason.find("magic"), std::string::npos) << v.reason;
  bad = bytes;
  bad[4] = std::byte{2};
  v = tcp::check_hello(bad, h.job_key, h.secret_key);
  EXPECT_EQ(v.status, HelloStatus::malformed);
  EXPECT_NE(v.reason.find("version 2"), std::string::npos) << v.reason;
  // Negative rank.
  auto neg = h;
  neg.from_rank = -1;
  EXPECT_EQ(tcp::check_hello(tcp::encode_hello(neg), h.job_key, h.secret_key).status,
            HelloStatus::malformed);
}

TEST(TcpHandshake, Replies) {
  for (auto s : {HelloStatus::ok, HelloStatus::wrong_job, HelloStatus::wrong_secret,
                 HelloStatus::malformed}) {
    EXPECT_EQ(tcp::parse_reply(tcp::encode_reply(s)), s);
  }
  auto r = tcp::encode_reply(HelloStatus::ok);
  r[4] = std::byte{9};  // unknown status
  EXPECT_EQ(tcp::parse_reply(r), std::nullopt);
  r = tcp::encode_reply(HelloStatus::ok);
  r[1] = std::byte{0};  // bad magic
  EXPECT_EQ(tcp::parse_reply(r), std::nullopt);
  EXPECT_EQ(tcp::parse_reply(std::span(r).first(7)), std::nullopt);
}

// ---------------------------------------------------------------------------------------------
// Addresses and interfaces

TEST(TcpAddress, ParseAndFormat) {
  auto a = SocketAddress::parse("127.0.0.1:5000");
  ASSERT_TRUE(a);
  EXPECT_EQ(a->family(), AF_INET);
  EXPECT_EQ(a->port(), 5000);
  EXPECT_TRUE(a->is_loopback());
  EXPECT_EQ(a->to_string(), "127.0.0.1:5000");
  auto b = SocketAddress::parse("[::1]:65535");
  ASSERT_TRUE(b);
  EXPECT_EQ(b->family(), AF_INET6);
  EXPECT_EQ(b->port(), 65535);
  EXPECT_TRUE(b->is_loopback());
  EXPECT_EQ(b->to_string(), "[::1]:65535");
  auto c = SocketAddress::parse("[fe80::1]:1");
  ASSERT_TRUE(c);
  EXPECT_TRUE(c->is_link_local());
  EXPECT_FALSE(c->is_loopback());
  auto mapped = SocketAddress::parse("[::ffff:10.1.2.3]:80");
  ASSERT_TRUE(mapped);
  EXPECT_EQ(mapped->to_string(), "10.1.2.3:80");
  EXPECT_TRUE(SocketAddress::parse("[::ffff:127.0.0.2]:80")->is_loopback());
  EXPECT_FALSE(SocketAddress::parse("192.0.2.1:80")->is_loopback());
  for (const char* bad : {"", "127.0.0.1", "127.0.0.1:", "127.0.0.1:65536", "127.0.0.1:x",
                          "localhost:80", "[::1]5000", "[::1]:", "::1:80", "[nonsense]:1",
                          "1.2.3.4:-1", "1.2.3.4:80 "}) {
    EXPECT_FALSE(SocketAddress::parse(bad)) << bad;
  }
}

TEST(TcpInterfaces, FilterSyntax) {
  auto prefix = tcp::InterfaceFilter::parse("eth,ib");
  EXPECT_TRUE(prefix.selects("eth0"));
  EXPECT_TRUE(prefix.selects("ib1"));
  EXPECT_FALSE(prefix.selects("lo"));
  EXPECT_FALSE(prefix.selects("veth0"));
  auto exclude = tcp::InterfaceFilter::parse("^docker,lo");
  EXPECT_FALSE(exclude.selects("docker0"));
  EXPECT_FALSE(exclude.selects("lo"));
  EXPECT_TRUE(exclude.selects("eth0"));
  auto exact = tcp::InterfaceFilter::parse("=eth0");
  EXPECT_TRUE(exact.selects("eth0"));
  EXPECT_FALSE(exact.selects("eth01"));
  EXPECT_FALSE(exact.selects("eth"));
  auto exclude_exact = tcp::InterfaceFilter::parse("^=eth0, eth1");
  EXPECT_FALSE(exclude_exact.selects("eth0"));
  EXPECT_FALSE(exclude_exact.selects("eth1"));
  EXPECT_TRUE(exclude_exact.selects("eth10"));
}

std::vector<std::string> non_loopback_part(const std::vector<std::string>& addrs) {
  return std::vector<std::string>(addrs.begin(), addrs.end() - std::min<size_t>(2, addrs.size()));
}

TEST(TcpListener, AddressesEndWithLoopback) {
  ScopedEnv ifname("HOOP_SOCKET_IFNAME", nullptr);
  ScopedEnv family("HOOP_SOCKET_FAMILY", nullptr);
  TcpListener l(unique_job());
  ASSERT_NE(l.port(), 0);
  const auto addrs = l.addresses();
  ASSERT_GE(addrs.size(), 2u);
  const std::string p = std::to_string(l.port());
  EXPECT_EQ(addrs[addrs.size() - 2], "127.0.0.1:" + p);
  EXPECT_EQ(addrs.back(), "[::1]:" + p);
  for (const auto& a : non_loopback_part(addrs)) {
    auto parsed = SocketAddress::parse(a);
    ASSERT_TRUE(parsed) << a;
    EXPECT_FALSE(parsed->is_loopback()) << a;
    EXPECT_FALSE(parsed->is_link_local()) << a;
    EXPECT_EQ(parsed->port(), l.port()) << a;
  }
  // The default publishes exactly the up, non-loopback interfaces.
  std::vector<std::string> expected;
  for (auto& ia : tcp::selected_interface_addresses(std::nullopt, AF_UNSPEC)) {
    ia.address.set_port(l.port());
    expected.push_back(ia.address.to_string());
  }
  EXPECT_EQ(non_loopback_part(addrs), expected);
}

TEST(TcpListener, IfnameLoSelectsLoopbackOnly) {
  ScopedEnv ifname("HOOP_SOCKET_IFNAME", "lo");
  TcpListener l(unique_job());
  const std::string p = std::to_string(l.port());
  EXPECT_EQ(l.addresses(), (std::vector<std::string>{"127.0.0.1:" + p, "[::1]:" + p}));
}

TEST(TcpListener, IfnameExcludeLo) {
  std::vector<std::string> by_default;
  {
    ScopedEnv ifname("HOOP_SOCKET_IFNAME", nullptr);
    TcpListener l(unique_job());
    for (auto& a : non_loopback_part(l.addresses())) by_default.push_back(a.substr(0, a.rfind(':')));
  }
  ScopedEnv ifname("HOOP_SOCKET_IFNAME", "^lo");
  TcpListener l(unique_job());
  std::vector<std::string> excluded;
  for (auto& a : non_loopback_part(l.addresses())) excluded.push_back(a.substr(0, a.rfind(':')));
  EXPECT_EQ(excluded, by_default);
  // An exact name selects that interface's addresses alone.
  auto all = tcp::selected_interface_addresses(std::nullopt, AF_UNSPEC);
  if (all.empty()) GTEST_SKIP() << "no non-loopback interface on this machine";
  const std::string name = all.front().ifname;
  ScopedEnv exact("HOOP_SOCKET_IFNAME", ("=" + name).c_str());
  TcpListener one(unique_job());
  std::vector<std::string> expected;
  for (auto& ia : all) {
    if (ia.ifname != name) continue;
    ia.address.set_port(one.port());
    expected.push_back(ia.address.to_string());
  }
  EXPECT_EQ(non_loopback_part(one.addresses()), expected);
}

TEST(TcpListener, FamilyRestriction) {
  ScopedEnv ifname("HOOP_SOCKET_IFNAME", nullptr);
  for (const char* fam : {"AF_INET", "AF_INET6"}) {
    ScopedEnv family("HOOP_SOCKET_FAMILY", fam);
    TcpListener l(unique_job());
    for (const auto& a : non_loopback_part(l.addresses())) {
      EXPECT_EQ(SocketAddress::parse(a)->family(),
                std::string(fam) == "AF_INET" ? AF_INET : AF_INET6) << a;
    }
  }
  ScopedEnv family("HOOP_SOCKET_FAMILY", "AF_UNIX");
  EXPECT_THROW(TcpListener{unique_job()}, Error);
}

TEST(TcpListener, Keys) {
  const std::string job = unique_job();
  {
    ScopedEnv secret("HOOP_SECRET", nullptr);
    TcpListener l(job);
    EXPECT_EQ(l.job_key(), tcp::fnv1a64(job));
    EXPECT_EQ(l.secret_key(), 0u);
    EXPECT_EQ(l.rejected(), 0u);
  }
  ScopedEnv secret("HOOP_SECRET", "open sesame");
  TcpListener l(job);
  EXPECT_EQ(l.secret_key(), tcp::fnv1a64("open sesame"));
}

TEST(TcpListener, AcceptFromTimesOut) {
  TcpListener l(unique_job());
  const auto start = Clock::now();
  try {
    l.accept_from(77, 5, 6, 1, start + 300ms);
    FAIL() << "accept_from returned without a connection";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::timeout);
    EXPECT_EQ(e.peer(), 5);
    EXPECT_NE(e.detail().find("no connection from rank 5 within 0.3 s"), std::string::npos)
        << e.what();
  }
  const double took = seconds_between(start, Clock::now());
  EXPECT_GE(took, 0.3);
  EXPECT_LT(took, wall_bound(2.0));
}

TEST(TcpConnect, RetriesUntilDeadlineWhenNobodyListens) {
  uint16_t dead_port;
  {
    TcpListener gone(unique_job());
    dead_port = gone.port();
  }
  TcpListener l(unique_job());
  const auto start = Clock::now();
  try {
    tcp_connect(l, params_for(1, 0, 1, {"127.0.0.1:" + std::to_string(dead_port)}),
                start + 500ms);
    FAIL() << "connected to a closed port";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::timeout) << e.what();
    EXPECT_EQ(e.peer(), 1);
    EXPECT_NE(e.detail().find("cannot connect to rank 1"), std::string::npos) << e.what();
    EXPECT_NE(e.detail().find("refused"), std::string::npos) << e.what();
  }
  const double took = seconds_between(start, Clock::now());
  EXPECT_GE(took, 0.5);
  EXPECT_LT(took, wall_bound(2.0));
}


// A peer that went on to recover after a failure elsewhere takes no more connections: its
// listener holds the Hello unanswered. The connecting side stops waiting once its communicator
// says it failed elsewhere, not at the deadline; without that word it waits to the deadline.
TEST(TcpConnect, AnUnansweredHandshakeEndsWhenTheCommunicatorFailedElsewhere) {
  TcpListener mine(unique_job());
  TcpListener silent(unique_job());  // nobody drives its accept loop
  std::atomic<bool> failed_elsewhere{false};
  auto p = params_for(7, 0, 1, {"127.0.0.1:" + std::to_string(silent.port())});
  p.gave_up = [&] { return failed_elsewhere.load(); };
  auto start = Clock::now();
  try {
    tcp_connect(mine, p, start + 700ms);
    FAIL() << "a handshake nobody answered succeeded";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::timeout) << e.what();
    EXPECT_NE(e.detail().find("did not answer the handshake"), std::string::npos) << e.what();
  }
  EXPECT_GE(seconds_between(start, Clock::now()), 0.7);

  failed_elsewhere = true;
  start = Clock::now();
  try {
    tcp_connect(mine, p, start + 30s);
    FAIL() << "a handshake nobody answered succeeded";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::peer_failure) << e.what();
    EXPECT_EQ(e.peer(), 1);
    EXPECT_NE(e.detail().find("the communicator failed elsewhere"), std::string::npos) << e.what();
  }
  EXPECT_LT(seconds_between(start, Clock::now()), wall_bound(10.0));
}
TEST(TcpConnect, RejectsBadParameters) {
  TcpListener l(unique_job());
  EXPECT_THROW(tcp_connect(l, params_for(1, 0, 0, l.addresses()), Clock::now() + 1s), Error);
  EXPECT_THROW(tcp_connect(l, params_for(1, 0, 1, {"nonsense"}), Clock::now() + 1s), Error);
  auto remote_only = params_for(1, 0, 1, {"127.0.0.1:1", "[::1]:1"});
  remote_only.same_host = false;  // a peer elsewhere that published only loopback addresses
  EXPECT_THROW(tcp_connect(l, remote_only, Clock::now() + 1s), Error);
}

// ---------------------------------------------------------------------------------------------
// The staging buffer, driven in one process over a socket pair (TcpLink only needs a stream
// socket), so each step is deterministic.

struct SocketPair {
  tcp::UniqueFd ours, theirs;
  SocketPair() {
    int fds[2];
    if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, fds) != 0) {
      throw std::runtime_error("socketpair");
    }
    ours.reset(fds[0]);
    theirs.reset(fds[1]);
  }
};

void send_pattern(int fd, uint64_t seed, uint64_t offset, size_t len) {
  std::vector<std::byte> bytes(len);
  fill_pattern(seed, offset, bytes.data(), len);
  ASSERT_EQ(::send(fd, bytes.data(), len, MSG_NOSIGNAL), static_cast<ssize_t>(len));
}

TEST(TcpLinkStaging, CompactsKeepingEightByteAlignment) {
  SocketPair sp;
  const int other = sp.theirs.get();
  tcp::TcpLink link(std::move(sp.ours), 0, 1, 4096);
  ASSERT_EQ(link.staging_capacity(), 4096u);
  std::mt19937_64 rng(5);
  uint64_t sent = 0, got = 0;
  std::vector<std::byte> expected(4096);
  int aligned = 0;
  while (got < (1 << 20)) {
    const size_t n = 1 + rng() % 3000;
    send_pattern(other, 9, sent, n);
    sent += n;
    for (;;) {
      auto span = link.readable();
      if (span.empty()) break;
      ASSERT_LE(span.size(), 4096u);
      if (link.bytes_read() % 8 == 0) {
        ++aligned;
        ASSERT_EQ(reinterpret_cast<uintptr_t>(span.data()) % 8, 0u) << "at " << link.bytes_read();
      }
      // Consume odd amounts, sometimes everything, sometimes a single byte.
      const size_t take = rng() % 3 == 0 ? span.size() : 1 + rng() % span.size();
      fill_pattern(9, got, expected.data(), take);
      ASSERT_EQ(std::memcmp(span.data(), expected.data(), take), 0) << "at " << got;
      link.consume(take);
      got += take;
      if (got == sent) break;
    }
  }
  EXPECT_GT(aligned, 100);
  EXPECT_EQ(link.bytes_read(), got);
}

TEST(TcpLinkStaging, FullBufferStillShowsEnoughContiguousBytes) {
  SocketPair sp;
  const int other = sp.theirs.get();
  tcp::TcpLink link(std::move(sp.ours), 0, 1, 4096);
  send_pattern(other, 3, 0, 8192);
  // Fill the buffer, then consume all but 64 bytes in steps: the last 64 bytes plus what
  // follows must become visible together (a header split at the buffer's end is joined).
  size_t got = 0;
  while (got < 4096 - 64) {
    auto span = link.readable();
    ASSERT_FALSE(span.empty());
    const size_t take = std::min<size_t>(span.size(), 4096 - 64 - got);
    link.consume(std::min<size_t>(take, 1000));
    got += std::min<size_t>(take, 1000);
  }
  auto span = link.readable();
  ASSERT_GE(span.size(), 128u);
  std::vector<std::byte> expected(128);
  fill_pattern(3, got, expected.data(), 128);
  EXPECT_EQ(std::memcmp(span.data(), expected.data(), 128), 0);
}

TEST(TcpLinkStaging, ConsumingMoreThanReadableIsAnError) {
  SocketPair sp;
  const int other = sp.theirs.get();
  tcp::TcpLink link(std::move(sp.ours), 0, 1, 4096);
  send_pattern(other, 1, 0, 10);
  ASSERT_EQ(link.readable().size(), 10u);
  try {
    link.consume(11);
    FAIL() << "consume past the readable bytes";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::internal);
  }
  link.consume(10);
  EXPECT_TRUE(link.readable().empty());
  Waiter w;
  EXPECT_TRUE(link.arm(w, true, true));
  EXPECT_NO_THROW(link.check_peer_alive());
}

int socket_buffer(int fd, int which) {
  int value = 0;
  socklen_t len = sizeof value;
  EXPECT_EQ(::getsockopt(fd, SOL_SOCKET, which, &value, &len), 0);
  return value;
}
int receive_buffer(int fd) { return socket_buffer(fd, SO_RCVBUF); }
int send_buffer(int fd) { return socket_buffer(fd, SO_SNDBUF); }

// The cap a shaped link's calibration sets reaches a link opened before it at its next
// receive, and lifting it gives the configured buffers back.
TEST(TcpLinkBuffers, ACapReachesAnOpenLinkAtItsNextReceive) {
  // Below net.core.rmem_max's default (212992), so that the kernel takes it as given.
  ScopedEnv buffer("HOOP_SOCKET_BUFFER", "192K");
  SocketPair sp;
  const int fd = sp.ours.get();
  tcp::set_buffer_sizes(fd, tcp::socket_buffer_bytes());  // as configure_link_socket does
  tcp::TcpLink link(std::move(sp.ours), 0, 1, 4096);
  const int configured = receive_buffer(fd);
  const int configured_send = send_buffer(fd);
  EXPECT_GE(configured, 192 * 1024);  // the kernel doubles what it is given
  EXPECT_GE(configured_send, 192 * 1024);
  tcp::cap_link_buffers(64 * 1024);
  EXPECT_EQ(receive_buffer(fd), configured) << "nothing changes before the link receives";
  EXPECT_EQ(send_buffer(fd), configured_send);
  (void)link.readable();
  for (const int now : {receive_buffer(fd), send_buffer(fd)}) {
    EXPECT_LE(now, 2 * 64 * 1024);
    EXPECT_GE(now, 64 * 1024);
  }
  tcp::cap_link_buffers(0);
  (void)link.readable();
  EXPECT_EQ(receive_buffer(fd), configured);
  EXPECT_EQ(send_buffer(fd), configured_send);
}

// A link that only sends (a chain's last rank on a host) takes the cap at its next send.
TEST(TcpLinkBuffers, ACapReachesAnOpenLinkAtItsNextSend) {
  ScopedEnv buffer("HOOP_SOCKET_BUFFER", "192K");
  SocketPair sp;
  const int fd = sp.ours.get();
  tcp::set_buffer_sizes(fd, tcp::socket_buffer_bytes());
  tcp::TcpLink link(std::move(sp.ours), 0, 1, 4096);
  const int configured_send = send_buffer(fd);
  tcp::cap_link_buffers(64 * 1024);
  EXPECT_EQ(send_buffer(fd), configured_send) << "nothing changes before the link sends";
  const char byte = 'x';
  EXPECT_EQ(link.write_some(&byte, 1), 1u);
  EXPECT_LE(send_buffer(fd), 2 * 64 * 1024);
  EXPECT_GE(send_buffer(fd), 64 * 1024);
  const WritePart parts[] = {{&byte, 1}, {&byte, 1}};
  tcp::cap_link_buffers(0);
  EXPECT_EQ(link.write_parts(parts), 2u);
  EXPECT_EQ(send_buffer(fd), configured_send);
}

std::string congestion_control(int fd) {
  char name[32] = {};
  socklen_t len = sizeof name;
  EXPECT_EQ(::getsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, name, &len), 0);
  return std::string(name, ::strnlen(name, sizeof name));
}

std::string system_congestion_control() {
  std::ifstream in("/proc/sys/net/ipv4/tcp_congestion_control");
  std::string name;
  in >> name;
  return name;
}

// What HOOP_TCP_CONGESTION does to a TCP socket: unset, cubic where this process may choose it
// (checked on a socket of its own); `system` and a name the kernel refuses leave the system's.
TEST(TcpLinkCongestion, CubicUnlessTheUserSaysOtherwise) {
  const std::string system = system_congestion_control();
  ASSERT_FALSE(system.empty());
  auto fresh = [] {
    tcp::UniqueFd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    EXPECT_GE(fd.get(), 0);
    return fd;
  };
  const bool may_choose_cubic = [&] {
    auto probe = fresh();
    return ::setsockopt(probe.get(), IPPROTO_TCP, TCP_CONGESTION, "cubic", 5) == 0;
  }();
  {
    ScopedEnv unset("HOOP_TCP_CONGESTION", nullptr);
    auto fd = fresh();
    tcp::set_congestion_control(fd.get());
    EXPECT_EQ(congestion_control(fd.get()), may_choose_cubic ? "cubic" : system);
  }
  {
    ScopedEnv reno("HOOP_TCP_CONGESTION", "reno");  // the kernel always allows reno
    auto fd = fresh();
    tcp::set_congestion_control(fd.get());
    EXPECT_EQ(congestion_control(fd.get()), "reno");
  }
  for (const char* value : {"system", "no-such-algorithm"}) {
    ScopedEnv env("HOOP_TCP_CONGESTION", value);
    auto fd = fresh();
    EXPECT_NO_THROW(tcp::set_congestion_control(fd.get()));
    EXPECT_EQ(congestion_control(fd.get()), system) << value;
  }
}

// Half an element buffered and already seen: arm() lets the caller sleep on the socket instead
// of spinning, and the rest of the element wakes it.
TEST(TcpLinkStaging, ArmSleepsOnBytesTheCallerSawAndLeft) {
  SocketPair sp;
  const int other = sp.theirs.get();
  tcp::TcpLink link(std::move(sp.ours), 0, 1, 4096);
  send_pattern(other, 4, 0, 11);
  ASSERT_EQ(link.readable().size(), 11u);
  link.consume(8);  // one 8-byte element; 3 bytes of the next remain
  Waiter w;
  EXPECT_FALSE(link.arm(w, true, false)) << "bytes left after a consume are not seen yet";
  ASSERT_EQ(link.readable().size(), 3u);
  w.reset();
  ASSERT_TRUE(link.arm(w, true, false));  // seen and left: sleep until the socket has more
  auto start = Clock::now();
  w.wait(100ms);
  link.disarm();
  EXPECT_GE(Clock::now() - start, 90ms) << "woke without new data";
  std::thread late([&] {
    std::this_thread::sleep_for(20ms);
    send_pattern(other, 4, 11, 5);
  });
  w.reset();
  ASSERT_TRUE(link.arm(w, true, false));
  start = Clock::now();
  w.wait(5s);
  link.disarm();
  late.join();
  EXPECT_LT(seconds_between(start, Clock::now()), wall_bound(2.0)) << "the new bytes did not wake the sleeper";
  auto span = link.readable();
  ASSERT_EQ(span.size(), 8u);
  std::vector<std::byte> expected(8);
  fill_pattern(4, 8, expected.data(), 8);
  EXPECT_EQ(std::memcmp(span.data(), expected.data(), 8), 0);
}

TEST(TcpLinkStaging, PeerCloseAfterDataDeliversDataThenFails) {
  SocketPair sp;
  tcp::TcpLink link(std::move(sp.ours), 0, 1, 4096);
  send_pattern(sp.theirs.get(), 2, 0, 100);
  sp.theirs.reset();
  EXPECT_NO_THROW(link.check_peer_alive());  // data still to deliver
  auto span = link.readable();
  ASSERT_EQ(span.size(), 100u);
  link.consume(60);
  EXPECT_EQ(link.readable().size(), 40u);  // now the close is known, the rest is delivered
  EXPECT_EQ(link.readable().size(), 40u);  // and may be looked at again
  EXPECT_NO_THROW(link.check_peer_alive());
  Waiter w;
  EXPECT_FALSE(link.arm(w, true, false));  // wanting more than the last 40 bytes...
  EXPECT_THROW(link.check_peer_alive(), Error);  // ...can never be satisfied
  EXPECT_THROW(link.readable(), Error);
  link.consume(40);
  try {
    link.readable();
    FAIL() << "readable() after the peer closed";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::peer_failure);
    EXPECT_EQ(e.peer(), 1);
    EXPECT_EQ(e.detail(), "rank 1 closed the connection");
  }
  EXPECT_THROW(link.check_peer_alive(), Error);
}

// ---------------------------------------------------------------------------------------------
// Links between processes

TEST(TcpLink, StreamsBothWaysAtOnce) {
  const uint64_t total = env_mib("HOOP_TEST_TCP_MIB", kStreamMiB) << 20;
  const std::string job = unique_job();
  auto results = run_processes(2, [&](ProcessContext& ctx) {
    TcpListener listener(job);
    auto link = connect_pair(ctx, listener, 0xabc);
    EXPECT_EQ(link->kind(), "tcp");
    EXPECT_EQ(link->peer(), 1 - ctx.rank);
    auto r = stream_both_ways(*link, total, 100 + ctx.rank, 101 - ctx.rank, ctx.rank);
    EXPECT_GT(r.aligned_checks, 0u);
    ctx.all_gather("done");  // nobody closes before both have everything
    if (ctx.rank == 0) {
      std::printf("tcp loopback: %.0f MiB each way in %.2f s: %.2f GB/s per direction, "
                  "%.2f GB/s both (with verification; %llu sleeps)\n",
                  static_cast<double>(total) / (1 << 20), r.seconds, total / r.seconds / 1e9,
                  2 * total / r.seconds / 1e9, static_cast<unsigned long long>(r.sleeps));
    }
  });
  EXPECT_TRUE(all_exited_ok(results));
}

// A staging buffer barely larger than a page forces the compaction path constantly.
TEST(TcpLink, SmallStagingBufferKeepsAlignmentAndOrder) {
  const std::string job = unique_job();
  auto results = run_processes(2, [&](ProcessContext& ctx) {
    ::setenv("HOOP_TCP_STAGING_BYTES", "5000", 1);
    ::setenv("HOOP_SOCKET_BUFFER", "64K", 1);
    TcpListener listener(job);
    auto link = connect_pair(ctx, listener, 0xdef);
    auto* tcp_link = dynamic_cast<tcp::TcpLink*>(link.get());
    ASSERT_NE(tcp_link, nullptr);
    EXPECT_LT(tcp_link->staging_capacity(), 8192u);
    auto r = stream_both_ways(*link, 16 << 20, 7 + ctx.rank, 8 - ctx.rank, 50 + ctx.rank);
    EXPECT_GT(r.aligned_checks, 100u);
    ctx.all_gather("done");
  });
  EXPECT_TRUE(all_exited_ok(results));
}

// The connecting side uses only the given loopback address; the accepting side sees the
// connection arrive from that family.
void connect_over(const std::string& loopback_host, int expected_family) {
  const std::string job = unique_job();
  auto results = run_processes(2, [&](ProcessContext& ctx) {
    TcpListener listener(job);
    auto addrs = ctx.exchange_addresses(listener);
    std::vector<std::string> only;
    for (const auto& a : addrs[1 - ctx.rank]) {
      if (a.rfind(loopback_host, 0) == 0) only.push_back(a);
    }
    ASSERT_EQ(only.size(), 1u);
    auto link = tcp_connect(listener, params_for(5, ctx.rank, 1 - ctx.rank, only), Clock::now() + 20s);
    auto* tcp_link = dynamic_cast<tcp::TcpLink*>(link.get());
    ASSERT_NE(tcp_link, nullptr);
    auto remote = hoop::remote_address(tcp_link->fd());
    ASSERT_TRUE(remote);
    EXPECT_EQ(remote->unmapped().family(), expected_family) << remote->to_string();
    EXPECT_TRUE(remote->is_loopback());
    stream_both_ways(*link, 4 << 20, 1 + ctx.rank, 2 - ctx.rank, ctx.rank);
    ctx.all_gather("done");
  });
  EXPECT_TRUE(all_exited_ok(results));
}

TEST(TcpLink, OverIPv4Loopback) { connect_over("127.0.0.1:", AF_INET); }
TEST(TcpLink, OverIPv6Loopback) { connect_over("[::1]:", AF_INET6); }

// A raw client socket to a listener's loopback port, for the hostile cases.
int raw_connect(uint16_t port) {
  auto addr = SocketAddress::parse("127.0.0.1:" + std::to_string(port));
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0 || ::connect(fd, addr->get(), addr->length) != 0) {
    ADD_FAILURE() << "raw connect to port " << port << ": " << std::strerror(errno);
  }
  timeval tv{5, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  return fd;
}

void raw_send(int fd, const void* p, size_t n) {
  ASSERT_EQ(::send(fd, p, n, MSG_NOSIGNAL), static_cast<ssize_t>(n)) << std::strerror(errno);
}

std::optional<HelloStatus> raw_reply(int fd) {
  std::array<std::byte, tcp::kReplyBytes> reply{};
  size_t got = 0;
  while (got < reply.size()) {
    ssize_t n = ::recv(fd, reply.data() + got, reply.size() - got, 0);
    if (n <= 0) return std::nullopt;
    got += static_cast<size_t>(n);
  }
  return tcp::parse_reply(reply);
}

TEST(TcpLink, HostileConnectionsAreRejectedWhileARealLinkWorks) {
  const std::string job = unique_job() + "-hostile";
  auto results = run_processes(2, [&](ProcessContext& ctx) {
    ::setenv("HOOP_SECRET", "the real secret", 1);
    ::setenv("HOOP_TCP_HANDSHAKE_TIMEOUT", "0.5", 1);
    TcpListener listener(job);
    auto addrs = ctx.exchange_addresses(listener);
    const uint16_t port1 = SocketAddress::parse(addrs[1].back())->port();
    if (ctx.rank == 0) {
      // Five foreign clients on rank 1's port, before the real connection.
      std::mt19937_64 rng(3);
      std::array<std::byte, 64> garbage;
      for (auto& b : garbage) b = static_cast<std::byte>(rng());
      int random_bytes = raw_connect(port1);
      raw_send(random_bytes, garbage.data(), garbage.size());

      tcp::Hello hello;
      hello.job_key = tcp::fnv1a64("some other job");
      hello.secret_key = listener.secret_key();
      hello.comm_id = 9;
      hello.from_rank = 0;
      hello.to_rank = 1;
      int wrong_job = raw_connect(port1);
      raw_send(wrong_job, tcp::encode_hello(hello).data(), tcp::kHelloBytes);

      hello.job_key = listener.job_key();
      hello.secret_key = tcp::fnv1a64("a guess");
      int wrong_secret = raw_connect(port1);
      raw_send(wrong_secret, tcp::encode_hello(hello).data(), tcp::kHelloBytes);

      int silent = raw_connect(port1);

      hello.secret_key = listener.secret_key();
      int truncated = raw_connect(port1);
      raw_send(truncated, tcp::encode_hello(hello).data(), 20);
      ::close(truncated);

      auto link = tcp_connect(listener, params_for(9, 0, 1, addrs[1]), Clock::now() + 20s);
      EXPECT_EQ(raw_reply(random_bytes), HelloStatus::malformed);
      EXPECT_EQ(raw_reply(wrong_job), HelloStatus::wrong_job);
      EXPECT_EQ(raw_reply(wrong_secret), HelloStatus::wrong_secret);
      stream_both_ways(*link, 8 << 20, 11, 12, 13);
      ctx.all_gather("streamed");
      ctx.all_gather("counted");  // rank 1 has seen the silent client time out
      for (int fd : {random_bytes, wrong_job, wrong_secret, silent}) ::close(fd);
    } else {
      auto link = tcp_connect(listener, params_for(9, 1, 0, addrs[0]), Clock::now() + 20s);
      stream_both_ways(*link, 8 << 20, 12, 11, 14);
      ctx.all_gather("streamed");
      // Keep the accept loop going until the silent client's handshake times out.
      const auto until = Clock::now() + 5s;
      while (listener.rejected() < 5 && Clock::now() < until) {
        EXPECT_THROW(listener.accept_from(1234, 0, 1, 0, Clock::now() + 100ms), Error);
      }
      EXPECT_EQ(listener.rejected(), 5u);
      ctx.all_gather("counted");
    }
  });
  EXPECT_TRUE(all_exited_ok(results));
}

// A client with the right job but another secret is refused with a protocol error naming why.
TEST(TcpLink, WrongSecretFailsTheConnectingRank) {
  const std::string job = unique_job() + "-secret";
  auto results = run_processes(2, [&](ProcessContext& ctx) {
    ::setenv("HOOP_SECRET", ctx.rank == 0 ? "mine" : "theirs", 1);
    TcpListener listener(job);
    auto addrs = ctx.exchange_addresses(listener);
    if (ctx.rank == 0) {
      try {
        tcp_connect(listener, params_for(3, 0, 1, addrs[1]), Clock::now() + 10s);
        ADD_FAILURE() << "connected with the wrong secret";
      } catch (const Error& e) {
        EXPECT_EQ(e.code(), ErrorCode::protocol) << e.what();
        EXPECT_NE(e.detail().find("secret"), std::string::npos) << e.what();
      }
      ctx.all_gather("tried");
    } else {
      const auto until = Clock::now() + 5s;
      while (listener.rejected() == 0 && Clock::now() < until) {
        EXPECT_THROW(listener.accept_from(3, 0, 1, 0, Clock::now() + 100ms), Error);
      }
      EXPECT_EQ(listener.rejected(), 1u);
      ctx.all_gather("tried");
    }
  });
  EXPECT_TRUE(all_exited_ok(results));
}

TEST(TcpLink, KilledPeerIsReportedWithinASecond) {
  const std::string job = unique_job();
  auto results = run_processes(2, [&](ProcessContext& ctx) {
    TcpListener listener(job);
    auto link = connect_pair(ctx, listener, 0x99);
    stream_both_ways(*link, 1 << 20, 21 + ctx.rank, 22 - ctx.rank, ctx.rank);
    if (ctx.rank == 1) {
      const char last = 'k';
      while (link->write_some(&last, 1) == 0) {
      }
      ::raise(SIGKILL);  // like kill -9: the kernel closes the socket, nobody says goodbye
    }
    // Wait for the announcement; the peer dies right after it.
    Waiter w;
    std::span<const std::byte> last;
    while ((last = link->readable()).empty()) {
      w.reset();
      if (link->arm(w, true, false)) w.wait(1s);
      link->disarm();
    }
    ASSERT_EQ(last.size(), 1u);
    EXPECT_EQ(std::to_integer<char>(last[0]), 'k');
    link->consume(1);
    const auto start = Clock::now();
    // The engine's way: sleep until the socket says something, then ask whether the peer lives.
    bool noticed = false;
    while (!noticed && Clock::now() - start < 2s) {
      w.reset();
      if (link->arm(w, true, false)) w.wait(100ms);  // false: the close is already known
      link->disarm();
      try {
        link->check_peer_alive();
      } catch (const Error& e) {
        EXPECT_EQ(e.code(), ErrorCode::peer_failure) << e.what();
        EXPECT_EQ(e.peer(), 1);
        noticed = true;
      }
    }
    EXPECT_TRUE(noticed);
    EXPECT_LT(seconds_between(start, Clock::now()), wall_bound(1.0));
    try {
      link->readable();
      ADD_FAILURE() << "readable() on a dead peer's link returned";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::peer_failure);
      EXPECT_NE(e.detail().find("rank 1 closed the connection"), std::string::npos) << e.what();
    }
    // Writes fail too once the peer's kernel has answered with a reset.
    std::vector<char> junk(1 << 16);
    bool write_failed = false;
    while (!write_failed && Clock::now() - start < 2s) {
      try {
        if (link->write_some(junk.data(), junk.size()) == 0) std::this_thread::sleep_for(1ms);
      } catch (const Error& e) {
        EXPECT_EQ(e.code(), ErrorCode::peer_failure) << e.what();
        write_failed = true;
      }
    }
    EXPECT_TRUE(write_failed);
    EXPECT_LT(seconds_between(start, Clock::now()), wall_bound(1.0));
  });
  EXPECT_EQ(results[0].exit_code, 0);
  EXPECT_EQ(results[1].signal, SIGKILL);
}

// Data sent just before a clean close is still delivered; asking for more then fails.
TEST(TcpLink, CloseAfterSendDeliversThenFails) {
  const std::string job = unique_job();
  auto results = run_processes(2, [&](ProcessContext& ctx) {
    TcpListener listener(job);
    auto link = connect_pair(ctx, listener, 0x77);
    if (ctx.rank == 1) {
      const char msg[] = "goodbye";
      size_t done = 0;
      while (done < sizeof msg) done += link->write_some(msg + done, sizeof msg - done);
      link.reset();  // close right after the write
      ctx.all_gather("closed");
      return;
    }
    ctx.all_gather("closed");
    std::this_thread::sleep_for(50ms);  // the FIN has arrived behind the data
    // The data comes first. A caller that keeps asking for more (arming for reading) than the
    // peer sent before closing is told, at the latest on its second try.
    Waiter w;
    int looks = 0;
    bool failed = false;
    while (!failed && looks < 4) {
      try {
        auto span = link->readable();
        ++looks;
        ASSERT_EQ(span.size(), 8u);
        EXPECT_EQ(std::memcmp(span.data(), "goodbye", 8), 0);
        EXPECT_EQ(link->readable().data(), span.data());  // a second look is no request for more
        w.reset();
        if (link->arm(w, true, false)) w.wait(1s);  // wants more than the 8 bytes
        link->disarm();
      } catch (const Error& e) {
        EXPECT_EQ(e.code(), ErrorCode::peer_failure);
        failed = true;
      }
    }
    EXPECT_TRUE(failed);
    EXPECT_GE(looks, 1);
    EXPECT_LE(looks, 3);
    link->consume(8);
    EXPECT_THROW(link->readable(), Error);
    w.reset();
    EXPECT_FALSE(link->arm(w, true, false));  // nothing to sleep for: the next call reports
    EXPECT_THROW(link->check_peer_alive(), Error);
  });
  EXPECT_TRUE(all_exited_ok(results));
}

TEST(TcpLink, PoisonMakesThePeerFail) {
  const std::string job = unique_job();
  auto results = run_processes(2, [&](ProcessContext& ctx) {
    TcpListener listener(job);
    auto link = connect_pair(ctx, listener, 0x55);
    if (ctx.rank == 0) {
      link->poison("rank 0 aborted");
      EXPECT_THROW(link->write_some("x", 1), Error);
      ctx.all_gather("poisoned");
      return;
    }
    ctx.all_gather("poisoned");
    Waiter w;
    const auto start = Clock::now();
    bool failed = false;
    while (!failed && Clock::now() - start < 2s) {
      try {
        if (link->readable().empty()) {
          w.reset();
          if (link->arm(w, true, false)) w.wait(100ms);
          link->disarm();
        }
      } catch (const Error& e) {
        EXPECT_EQ(e.code(), ErrorCode::peer_failure);
        failed = true;
      }
    }
    EXPECT_TRUE(failed);
  });
  EXPECT_TRUE(all_exited_ok(results));
}

// Every pair of three ranks connected, each rank in its own random order, two channels per
// pair: the lower rank connects, so no order deadlocks; each link reaches the right peer.
TEST(TcpLink, ThreeRanksConnectAllPairsInAnyOrder) {
  const std::string job = unique_job();
  auto results = run_processes(3, [&](ProcessContext& ctx) {
    ::setenv("HOOP_TCP_STAGING_BYTES", "64K", 1);  // 48 links: spare the page faults
    TcpListener listener(job);
    auto addrs = ctx.exchange_addresses(listener);
    for (int round = 0; round < 4; ++round) {
      struct Want { int peer; int channel; };
      std::vector<Want> order;
      for (int peer = 0; peer < 3; ++peer) {
        if (peer == ctx.rank) continue;
        for (int ch = 0; ch < 2; ++ch) order.push_back({peer, ch});
      }
      std::mt19937 rng(round * 10 + ctx.rank);
      std::shuffle(order.begin(), order.end(), rng);
      std::vector<std::pair<Want, std::unique_ptr<Link>>> links;
      for (auto& w : order) {
        links.emplace_back(w, tcp_connect(listener,
                                          params_for(1000 + round, ctx.rank, w.peer, addrs[w.peer], w.channel),
                                          Clock::now() + 20s));
      }
      // Each link carries (sender, receiver, channel, round); check what arrives.
      for (auto& [w, link] : links) {
        const int64_t msg[4] = {ctx.rank, w.peer, w.channel, round};
        size_t done = 0;
        while (done < sizeof msg) {
          done += link->write_some(reinterpret_cast<const char*>(msg) + done, sizeof msg - done);
        }
      }
      for (auto& [w, link] : links) {
        Waiter waiter;
        std::span<const std::byte> span;
        while ((span = link->readable()).size() < 32) {
          waiter.reset();
          if (link->arm(waiter, true, false)) waiter.wait(1s);
          link->disarm();
        }
        int64_t got[4];
        std::memcpy(got, span.data(), sizeof got);
        EXPECT_EQ(got[0], w.peer);
        EXPECT_EQ(got[1], ctx.rank);
        EXPECT_EQ(got[2], w.channel);
        EXPECT_EQ(got[3], round);
        link->consume(32);
      }
      ctx.all_gather("round done");
    }
  });
  EXPECT_TRUE(all_exited_ok(results));
}

// Several communicator threads of one process wait on the listener at once; the connections
// arrive in another order than the threads asked, and each thread gets its own.
TEST(TcpLink, ConcurrentAcceptorsEachGetTheirOwnConnection) {
  constexpr int kThreads = 4;
  const std::string job = unique_job();
  auto results = run_processes(2, [&](ProcessContext& ctx) {
    TcpListener listener(job);
    auto addrs = ctx.exchange_addresses(listener);
    if (ctx.rank == 0) {
      // Connect the threads' communicators in reverse order, a little apart.
      std::vector<std::unique_ptr<Link>> links;
      for (int t = kThreads - 1; t >= 0; --t) {
        std::this_thread::sleep_for(20ms);
        links.push_back(tcp_connect(listener, params_for(500 + t, 0, 1, addrs[1], t % 2),
                                    Clock::now() + 20s));
        const int64_t tag = 500 + t;
        ASSERT_EQ(links.back()->write_some(&tag, sizeof tag), sizeof tag);
      }
      ctx.all_gather("done");
      return;
    }
    std::atomic<int> ok{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([&, t] {
        try {
          auto link = tcp_connect(listener, params_for(500 + t, 1, 0, addrs[0], t % 2),
                                  Clock::now() + 20s);
          Waiter waiter;
          std::span<const std::byte> span;
          while ((span = link->readable()).size() < 8) {
            waiter.reset();
            if (link->arm(waiter, true, false)) waiter.wait(1s);
            link->disarm();
          }
          int64_t tag;
          std::memcpy(&tag, span.data(), sizeof tag);
          if (tag == 500 + t) ok.fetch_add(1);
        } catch (const std::exception& e) {
          std::cerr << "acceptor thread " << t << ": " << e.what() << "\n";
        }
      });
    }
    for (auto& th : threads) th.join();
    EXPECT_EQ(ok.load(), kThreads);
    EXPECT_EQ(listener.rejected(), 0u);
    ctx.all_gather("done");
  });
  EXPECT_TRUE(all_exited_ok(results));
}

}  // namespace
}  // namespace hoop::transport
