// Hostile input: foreign processes that connect to a rank's port or to the store and send
// random bytes, valid-looking headers with huge lengths, a wrong job id or a wrong secret.
// They are rejected and logged; the job carries on and its results stay correct. The job (its
// ranks and its store) runs with a random per-job secret, as hoop-run gives each job. Without
// HOOP_SECRET, whoever knows the job id can pass the handshake: the worst it can then do is
// make the job fail with a clear error (never a crash, a hang or a huge allocation).
#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <fstream>
#include <iostream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "bootstrap/job_secret.h"
#include "bootstrap/store_protocol.h"
#include "hoop/communicator.h"
#include "hoop/error.h"
#include "hoop/store.h"
#include "support/random_ops.h"
#include "support/loopback_client.h"
#include "support/spawn.h"
#include "transport/frame.h"
#include "transport/shm/shm_transport.h"
#include "transport/tcp/handshake.h"

namespace hoop::test {
namespace {

using namespace std::chrono_literals;
namespace tcp = transport::tcp;


// The loopback TCP port each rank published.
std::vector<uint16_t> rank_ports(Store& store, int nranks) {
  std::vector<uint16_t> ports;
  for (int r = 0; r < nranks; ++r) {
    const auto info = nlohmann::json::parse(store.get_string("hoop/c0/peer/" + std::to_string(r)));
    for (const auto& a : info["tcp"]) {
      const std::string addr = a.get<std::string>();
      if (addr.rfind("127.0.0.1:", 0) == 0) ports.push_back(static_cast<uint16_t>(std::stoi(addr.substr(10))));
    }
  }
  return ports;
}

// A message header that looks right for the first allreduce but announces 2^62 bytes.
transport::FrameHeader huge_frame(int from_rank) {
  transport::FrameHeader h;
  h.op = static_cast<uint8_t>(OpType::allreduce);
  h.dtype = static_cast<uint8_t>(DataType::f32);
  h.src_rank = from_rank;
  h.seq = 1;
  h.count = 1000;
  h.payload_bytes = uint64_t{1} << 62;
  return h;
}

struct Counts {
  int wrong_secret = 0, wrong_job = 0, random = 0, huge_store = 0, store_without_secret = 0;
};

// One round of everything a stranger can send to a rank's port or the store.
void vandal_round(uint16_t port, bool is_store, const std::string& job_id, std::mt19937_64& rng,
                  Counts& counts) {
  std::vector<uint8_t> noise(1 + rng() % 2048);
  for (auto& b : noise) b = static_cast<uint8_t>(rng());
  if (int fd = connect_loopback(port); fd >= 0) {  // random bytes
    send_all(fd, noise.data(), noise.size());
    ::close(fd);
    ++counts.random;
  }
  if (is_store) {
    // A well-formed request header claiming a 60 MiB value (under the limit), then silence:
    // the server must not reserve what is only announced.
    bootstrap::StoreRequest req;
    req.cmd = bootstrap::StoreCmd::set;
    req.key = "hostile";
    req.values = {std::vector<uint8_t>(16)};
    auto bytes = bootstrap::encode_store_request(req);
    const uint32_t claimed = 60u << 20;
    std::memcpy(bytes.data() + 4 + 1 + 4 + req.key.size() + 4, &claimed, 4);
    if (int fd = connect_loopback(port); fd >= 0) {
      send_all(fd, bytes.data(), bytes.size());
      ::close(fd);
      ++counts.huge_store;
    }
    // A whole SET without the job's secret first: refused, nothing stored.
    req.key = "stranger";
    req.values = {std::vector<uint8_t>{'e', 'v', 'i', 'l'}};
    bytes = bootstrap::encode_store_request(req);
    if (int fd = connect_loopback(port); fd >= 0) {
      send_all(fd, bytes.data(), bytes.size());
      ::close(fd);
      ++counts.store_without_secret;
    }
    return;
  }
  // Hellos from another job and from this job without the secret, each followed by a
  // header announcing an absurd payload.
  for (int which = 0; which < 2; ++which) {
    tcp::Hello h;
    h.job_key = which == 0 ? tcp::fnv1a64("another-job") : tcp::fnv1a64(job_id);
    h.secret_key = tcp::fnv1a64("not-the-secret");
    h.comm_id = 0;
    h.from_rank = 0;
    h.to_rank = 1;
    if (int fd = connect_loopback(port); fd >= 0) {
      const auto hello = tcp::encode_hello(h);
      send_all(fd, hello.data(), hello.size());
      const auto frame = huge_frame(0);
      send_all(fd, &frame, sizeof frame);
      ::close(fd);
      ++(which == 0 ? counts.wrong_job : counts.wrong_secret);
    }
  }
}

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

int count_of(const std::string& text, const std::string& needle) {
  int n = 0;
  for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) ++n;
  return n;
}

TEST(HostileInput, StrangersWithoutTheSecretAreRejectedAndLoggedAndResultsStayCorrect) {
  constexpr int kRanks = 3;
  const std::string log_base = "/tmp/hoop-hostile-" + std::to_string(::getpid()) + "-";
  SpawnOptions opts;
  opts.timeout = 120s;
  opts.env = {{"HOOP_TRANSPORT", "tcp"},
              {"HOOP_SECRET", bootstrap::random_job_secret()},
              {"HOOP_DEBUG", "WARN"}};
  auto results = run_ranks(kRanks, [&](RankContext& ctx) {
    // This rank's log goes to a file the test reads afterwards.
    const int log = ::open((log_base + std::to_string(ctx.rank)).c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    ASSERT_GE(log, 0);
    ::dup2(log, STDERR_FILENO);
    CommOptions copts;
    copts.timeout = 30s;
    auto comm = ctx.make_comm(copts);
    auto store = ctx.store();
    ctx.report("JOB " + comm->job_id());
    std::atomic<bool> stop{false};
    std::thread vandal;
    if (ctx.rank == 0) {
      auto ports = rank_ports(*store, kRanks);
      ASSERT_EQ(ports.size(), static_cast<size_t>(kRanks));
      vandal = std::thread([&, ports] {
        std::mt19937_64 rng(std::random_device{}());
        Counts counts;
        auto helper = ctx.store();
        for (int round = 0; !stop.load(); ++round) {
          for (uint16_t p : ports) vandal_round(p, false, comm->job_id(), rng, counts);
          vandal_round(ctx.store_port, true, comm->job_id(), rng, counts);
          if (round == 0) helper->add("vandal-started", 1);
          std::this_thread::sleep_for(10ms);
        }
        ctx.report("SENT random " + std::to_string(counts.random) + " wrong_job " +
                   std::to_string(counts.wrong_job) + " wrong_secret " +
                   std::to_string(counts.wrong_secret) + " huge_store " + std::to_string(counts.huge_store) +
                   " store_without_secret " + std::to_string(counts.store_without_secret));
      });
    }
    while (store->add("vandal-started", 0) < 1) std::this_thread::sleep_for(5ms);
    // Collectives that connect their links while the strangers keep coming (each new
    // communicator's links go through the listeners again).
    std::mt19937_64 rng(12345);
    size_t checked = 0;
    for (int round = 0; round < 4; ++round) {
      auto c = round == 0 ? comm : comm->split(0, (ctx.rank + round) % kRanks);
      for (int k = 0; k < 15; ++k) {
        const RandomOp op = draw_op(rng, 2, 1 << 14);  // drawn for 2, run on 3: no avg
        RandomOp safe = op;
        if (safe.redop == RedOp::avg) safe.redop = RedOp::sum;
        OpBuffers bufs(safe, static_cast<uint64_t>(round * 100 + k), c->rank(), c->size());
        bufs.run(*c);
        const std::string bad = bufs.verify();
        ASSERT_EQ(bad, "");
        ++checked;
      }
    }
    comm->barrier();
    if (vandal.joinable()) {
      stop = true;
      vandal.join();
    }
    EXPECT_FALSE(store->check("stranger")) << "the store took a stranger's SET";
    store->set_string("after/" + std::to_string(ctx.rank), "ok");
    EXPECT_EQ(store->get_string("after/" + std::to_string((ctx.rank + 1) % kRanks)), "ok");
    ctx.report("CHECKED " + std::to_string(checked));
    comm->barrier();
  }, opts);
  int wrong_secret = 0, wrong_job = 0, malformed = 0;
  for (const auto& r : results) {
    for (const auto& line : r.reports) std::cout << "  rank " << r.rank << ": " << line << "\n";
    const std::string log = read_file(log_base + std::to_string(r.rank));
    std::remove((log_base + std::to_string(r.rank)).c_str());
    wrong_secret += count_of(log, "secret key does not match");
    wrong_job += count_of(log, "is not this job's");
    malformed += count_of(log, "rejected connection");
  }
  std::cout << "HOSTILE rejections logged: wrong secret " << wrong_secret << ", wrong job " << wrong_job
            << ", all " << malformed << "\n";
  EXPECT_TRUE(all_ok(results));
  EXPECT_GT(wrong_secret, 0) << "no rejected secret was logged";
  EXPECT_GT(wrong_job, 0) << "no rejected job id was logged";
  for (const auto& r : results) {
    for (const auto& line : r.reports) {
      if (line.rfind("JOB ", 0) == 0) {
        EXPECT_EQ(job_segments(line.substr(4)), std::vector<std::string>{});
      }
    }
  }
}

TEST(HostileInput, AnImpostorKnowingTheJobIdGetsACleanErrorNotACrash) {
  // Without HOOP_SECRET: a stranger who knows the job id claims to be rank 0 on rank 1's port
  // before rank 0 connects, and announces a 2^62-byte message. Rank 1 must refuse it with an
  // error naming the size (no allocation, no crash), and rank 0 must learn of the failure.
  auto results = run_ranks(2, [](RankContext& ctx) {
    CommOptions copts;
    copts.timeout = 5s;
    copts.transport = "tcp";
    auto comm = ctx.make_comm(copts);
    auto store = ctx.store();
    if (ctx.rank == 0) {
      const auto ports = rank_ports(*store, 2);
      const int fd = connect_loopback(ports.at(1));
      ASSERT_GE(fd, 0);
      tcp::Hello h;
      h.job_key = tcp::fnv1a64(comm->job_id());
      h.comm_id = 0;
      h.from_rank = 0;
      h.to_rank = 1;
      const auto hello = tcp::encode_hello(h);
      send_all(fd, hello.data(), hello.size());
      // Rank 1 reads the handshake only when it connects its links, so no reply is awaited:
      // the connection waits in its backlog, ahead of rank 0's real one.
      const auto frame = huge_frame(0);
      send_all(fd, &frame, sizeof frame);
      store->add("impostor-in", 1);
    }
    while (store->add("impostor-in", 0) < 1) std::this_thread::sleep_for(5ms);
    std::vector<float> v(1000, 1.0f);
    try {
      comm->allreduce(v.data(), v.data(), 1000, DataType::f32, RedOp::sum);
      ADD_FAILURE() << "the allreduce read the impostor's stream without complaint";
    } catch (const Error& e) {
      ctx.report(std::string(to_string(e.code())) + ": " + e.what());
      if (ctx.rank == 1) {
        EXPECT_NE(std::string(e.what()).find(std::to_string(uint64_t{1} << 62)), std::string::npos) << e.what();
      }
    }
  }, SpawnOptions{.timeout = 60s});
  for (const auto& r : results) {
    for (const auto& line : r.reports) std::cout << "  rank " << r.rank << ": " << line << "\n";
  }
  EXPECT_TRUE(all_ok(results));
}

// The store's memory stays small under many connections announcing huge values they never send.
TEST(HostileInput, StoreDoesNotReserveWhatIsOnlyAnnounced) {
  int listen_fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  ASSERT_EQ(::bind(listen_fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  ASSERT_EQ(::listen(listen_fd, 512), 0);
  ::getsockname(listen_fd, reinterpret_cast<sockaddr*>(&addr), &len);
  const uint16_t port = ntohs(addr.sin_port);
  const pid_t server = ::fork();
  if (server == 0) {
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    auto s = TcpStoreServer::from_listening_fd(listen_fd);
    for (;;) ::pause();
  }
  ::close(listen_fd);
  std::vector<int> held;
  std::mt19937_64 rng(7);
  Counts counts;
  for (int i = 0; i < 64; ++i) {
    bootstrap::StoreRequest req;
    req.cmd = bootstrap::StoreCmd::set;
    req.key = "k" + std::to_string(i);
    req.values = {std::vector<uint8_t>(8)};
    auto bytes = bootstrap::encode_store_request(req);
    const uint32_t claimed = 60u << 20;  // 64 connections x 60 MiB = 3.75 GiB if reserved
    std::memcpy(bytes.data() + 4 + 1 + 4 + req.key.size() + 4, &claimed, 4);
    const int fd = connect_loopback(port);
    ASSERT_GE(fd, 0);
    send_all(fd, bytes.data(), bytes.size());
    held.push_back(fd);
    vandal_round(port, true, "", rng, counts);
  }
  auto client = connect_tcp_store("127.0.0.1", port, 10s);
  client->set_string("real", "value");
  EXPECT_EQ(client->get_string("real"), "value");
  EXPECT_EQ(client->add("n", 5), 5);
  std::ifstream status("/proc/" + std::to_string(server) + "/status");
  long rss_kib = -1;
  for (std::string line; std::getline(status, line);) {
    if (line.rfind("VmRSS:", 0) == 0) rss_kib = std::stol(line.substr(6));
  }
  std::cout << "store server RSS with 64 half-sent 60 MiB values: " << rss_kib << " KiB\n";
  EXPECT_GT(rss_kib, 0);
  EXPECT_LT(rss_kib, 256 * 1024);
  for (int fd : held) ::close(fd);
  ::kill(server, SIGKILL);
  ::waitpid(server, nullptr, 0);
}

}  // namespace
}  // namespace hoop::test
