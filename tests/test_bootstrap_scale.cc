// Start-up at scale: the store requests a rank makes do not grow with N (counted by the real
// store server in hoop-run), links and shared-memory pair segments exist only for the pairs
// that talk, and the store server under 65,536 simulated ranks' start-up requests.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <iostream>
#include <regex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "hoop/communicator.h"
#include "hoop/store.h"
#include "support/spawn.h"
#include "support/test_scale.h"
#include "support/tool_process.h"

namespace hoop::test {
namespace {

using namespace std::chrono_literals;

const std::string kHoopRun = HOOP_BIN_DIR "/hoop-run";
const std::string kHoopStartup = HOOP_BIN_DIR "/hoop-startup";
const std::string kHoopBench = HOOP_BIN_DIR "/hoop-bench";

// The store's request count hoop-run prints with --store-stats.
uint64_t served_requests(const std::string& err) {
  std::smatch m;
  static const std::regex re("store served ([0-9]+) requests");
  if (!std::regex_search(err, m, re)) return 0;
  return std::stoull(m[1]);
}

TEST(BootstrapScale, StoreRequestsPerRankDoNotGrowWithN) {
  std::vector<std::pair<int, uint64_t>> counts;
  for (const int n : {2, 8, 32}) {
    ToolProcess run({kHoopRun, "-n", std::to_string(n), "--store-stats", "--", kHoopStartup, "--init-only"});
    const ToolResult r = run.finish(240s);
    ASSERT_EQ(r.exit_code, 0) << "n=" << n << "\n" << r.out << r.err;
    const uint64_t requests = served_requests(r.err);
    ASSERT_GT(requests, 0u) << r.err;
    counts.emplace_back(n, requests);
    std::cout << "STORE-REQUESTS n=" << n << ": " << requests << " in all, "
              << static_cast<double>(requests) / n << " per rank\n";
  }
  // Each rank: its HELLO, its record, the arrival count and the wait for the last arrival, its
  // two neighbours' records, the calibration's creation count, plan and model; a constant few
  // more for rank 0 and the last to arrive. The old path read all N records: 3 + N per rank.
  constexpr uint64_t kPerRank = 10, kPerJob = 4;
  for (const auto& [n, requests] : counts) {
    EXPECT_LE(requests, kPerRank * static_cast<uint64_t>(n) + kPerJob) << "n=" << n;
  }
  // Not growing: each rank added from 8 to 32 costs no more than the 8-rank job's ranks did
  // on average (with 2 ranks the two neighbours are one: a request fewer each).
  const auto [n8, r8] = counts[1];
  const auto [n32, r32] = counts[2];
  const double marginal = static_cast<double>(r32 - r8) / (n32 - n8);
  std::cout << "STORE-REQUESTS per added rank (8 to 32): " << marginal << "\n";
  EXPECT_LE(marginal, static_cast<double>(r8) / n8) << "store requests per rank grew with N";
  EXPECT_LE(static_cast<double>(r32) / n32, static_cast<double>(r8) / n8) << "store requests per rank grew with N";
}

// hoop-startup under hoop-run on `ranks` ranks of this machine, with `env`; the job's output
// (printed) once it finished verified.
ToolResult startup_job(int ranks, const std::vector<std::string>& env) {
  ToolProcess run({kHoopRun, "-n", std::to_string(ranks), "--store-stats", "--timeout", "500", "--", kHoopStartup}, env);
  ToolResult r = run.finish(540s);
  std::cout << r.out << r.err.substr(r.err.size() > 2000 ? r.err.size() - 2000 : 0);
  EXPECT_EQ(r.exit_code, 0) << r.err.substr(r.err.size() > 4000 ? r.err.size() - 4000 : 0);
  EXPECT_NE(r.out.find(fmt::format("{} ranks up in", ranks)), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("correct on every rank"), std::string::npos) << r.out;
  return r;
}

// A verified AllToAllv of hoop-bench under hoop-run on `ranks` ranks of this machine with the
// defaults: pairwise, its only algorithm, links every pair of ranks.
void alltoallv_job(int ranks) {
  ToolProcess run({kHoopRun, "-n", std::to_string(ranks), "--timeout", "500", "--", kHoopBench, "alltoallv", "-b",
                   "64K", "-e", "64K", "-n", "2", "-w", "1"});
  const ToolResult r = run.finish(540s);
  std::cout << r.out.substr(r.out.size() > 2000 ? r.out.size() - 2000 : 0);
  EXPECT_EQ(r.exit_code, 0) << r.out.substr(r.out.size() > 2000 ? r.out.size() - 2000 : 0)
                            << r.err.substr(r.err.size() > 4000 ? r.err.size() - 4000 : 0);
  EXPECT_NE(r.out.find("pairwise"), std::string::npos) << r.out;
}

// 512 ranks on this machine start, run a verified AllReduce, Barrier and Broadcast and stop,
// with a constant number of store requests each. The algorithms are schedules over lazy links
// (a tree and the dissemination barrier: O(log N) links per rank), whose shared-memory rings
// on a host of 512 ranks are 16 KiB by default (transport::ring_bytes_for_host), so that the
// ranks' memory stays bounded (shm-direct's region has room for every rank and every rank maps
// all of it: docs/BENCHMARKS.md, "Start-up at scale").
//
// Then the same job with every default: the tuner's own choices (on this machine recursive
// doubling for the AllReduce, nine links per rank, and shm-direct), whatever they are, fit the
// machine. With 4 MiB rings on every link, as before the default shrank on hosts of many ranks,
// that AllReduce's rings alone took 18 GiB and the job was killed for want of memory. Then an
// AllToAllv on 256 ranks: every pair linked, 256 x 255 rings within 4 GiB (512 KiB rings, the
// default before they shrank with every pair in mind, would have taken 32 GiB). One test for
// the three jobs, so that they never run at once.
//
// The sanitizer runs (HOOP_TEST_SCALE=small, set by `make test-asan`) start 128, 64 and 32
// ranks, still more than the other suites run: an ASan rank takes about 3.5 times a release
// rank's memory (55 against 13-16 MiB resident; 84 MiB with shm-direct's region mapped), and 512
// of them use up a 24 GiB machine; with 256, 128 and 48 the test took 108-180 s of the ASan
// stage's 750-890.
TEST(BootstrapScale, FiveHundredTwelveRanksStartAndRun) {
  const int ranks = test::small_scale() ? 128 : 512;
  const ToolResult r = startup_job(ranks, {"HOOP_ALGO=allreduce:tree,barrier:dissemination,broadcast:tree"});
  const uint64_t requests = served_requests(r.err);
  EXPECT_GT(requests, 0u) << r.err;
  // 10 per rank as above (--init-only), and 3 more once a communicator runs an operation: its
  // revoke watch's connection (HELLO), parked wait, and the set that ends it.
  EXPECT_LE(requests, 13u * static_cast<uint64_t>(ranks) + 4) << "store requests per rank grew with N";

  startup_job(test::small_scale() ? 64 : 512, {});
  alltoallv_job(test::small_scale() ? 32 : 256);
}

// The peers a rank's links lead to, from its statistics.
std::set<int> linked_peers(Communicator& comm) {
  std::set<int> peers;
  for (const auto& l : comm.stats().links) peers.insert(l.peer);
  return peers;
}

std::string peers_text(const std::set<int>& s) { return fmt::format("{}", fmt::join(s, " ")); }

// A ring AllReduce on 8 ranks touches only each rank's two ring neighbours; a send from rank 0
// to rank 4 adds that one pair. Over shared memory (a segment per pair) and over TCP.
void expect_links_only_where_used(const char* transport) {
  constexpr int kRanks = 8;
  SpawnOptions opts;
  opts.env.emplace_back("HOOP_TRANSPORT", transport);
  auto results = run_ranks(kRanks, [&](RankContext& ctx) {
    auto comm = ctx.make_comm();
    if (ctx.rank == 0) ctx.report("JOB " + comm->job_id());
    const int r = ctx.rank, n = ctx.size;
    OpOptions ring;
    ring.algo = "ring";
    std::vector<int64_t> v(1031, r), out(v.size());
    comm->allreduce(v.data(), out.data(), v.size(), DataType::i64, RedOp::sum, ring);
    for (int64_t x : out) ASSERT_EQ(x, int64_t{n} * (n - 1) / 2);
    const std::set<int> ring_peers = {(r + 1) % n, (r + n - 1) % n};
    EXPECT_EQ(linked_peers(*comm), ring_peers) << "rank " << r << " connected " << peers_text(linked_peers(*comm));
    int32_t token = 42;
    if (r == 0) comm->send(&token, 1, DataType::i32, 4, 7);
    if (r == 4) {
      token = 0;
      comm->recv(&token, 1, DataType::i32, 0, 7);
      EXPECT_EQ(token, 42);
    }
    std::set<int> expected = ring_peers;
    if (r == 0) expected.insert(4);
    if (r == 4) expected.insert(0);
    const auto linked = linked_peers(*comm);
    EXPECT_EQ(linked, expected) << "rank " << r << " connected " << peers_text(linked);
    ctx.report(fmt::format("links to {}", peers_text(linked)));
    // Nobody leaves while a peer still reads from it (over the same ring links).
    int64_t one = 1, all = 0;
    comm->allreduce(&one, &all, 1, DataType::i64, RedOp::sum, ring);
    EXPECT_EQ(all, n);
  }, opts);
  for (const auto& r : results) {
    for (const auto& line : r.reports) std::cout << "  " << transport << " rank " << r.rank << ": " << line << "\n";
  }
  EXPECT_TRUE(all_ok(results));
  ASSERT_FALSE(results.empty() || results[0].reports.empty());
  const std::string job = results[0].reports[0].substr(4);
  EXPECT_TRUE(job_segments(job).empty()) << "segments of job " << job << " left in /dev/shm";
}

TEST(LazyLinks, OnlyThePairsThatTalkAreConnectedOverShm) { expect_links_only_where_used("shm"); }
TEST(LazyLinks, OnlyThePairsThatTalkAreConnectedOverTcp) { expect_links_only_where_used("tcp"); }

// 65,536 ranks' start-up requests (init.cc's: record, arrival, wait, two neighbours' records)
// against the real store server, played by client threads of this process over real sockets
// (8,192 under HOOP_TEST_SCALE=small: the count per rank is the claim, and it does not depend
// on N).
TEST(StoreLoad, SixtyFiveThousandRanksStartWithConstantRequestsEach) {
  const int ranks = test::small_scale() ? 8192 : 65536;
  constexpr int kThreads = 64;  // one connection each, ranks / 64 ranks each
  TcpStoreServer server("127.0.0.1", 0);
  const uint64_t before = server.requests();
  const auto busy_before = server.busy_time();
  const std::string record_text =
      R"({"host_id":"node-0042-7f3a9c1e-4026531992","machine_id":"7f3a9c1e","pid":123456,)"
      R"("tcp":["10.1.2.3:45678","[fd00::1:2:3]:45678","127.0.0.1:45678","[::1]:45678"]})";
  std::atomic<int> failures{0};
  const auto start = std::chrono::steady_clock::now();
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      try {
        auto store = connect_tcp_store("127.0.0.1", server.port(), 30s);
        const int first = t * (ranks / kThreads), last = first + ranks / kThreads;
        for (int r = first; r < last; ++r) {
          store->set_string(fmt::format("hoop/c0/peer/{}", r), record_text);
          if (store->add("hoop/c0/arrived", 1) >= ranks) store->set_string("hoop/c0/all_arrived", "1");
        }
        for (int r = first; r < last; ++r) {
          store->wait({"hoop/c0/all_arrived"});
          const std::string next = store->get_string(fmt::format("hoop/c0/peer/{}", (r + 1) % ranks));
          const std::string prev = store->get_string(fmt::format("hoop/c0/peer/{}", (r + ranks - 1) % ranks));
          if (next != record_text || prev != record_text) failures.fetch_add(1);
        }
      } catch (const std::exception& e) {
        std::cerr << "thread " << t << ": " << e.what() << "\n";
        failures.fetch_add(1);
      }
    });
  }
  for (auto& th : threads) th.join();
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const uint64_t requests = server.requests() - before;
  const double busy = std::chrono::duration<double>(server.busy_time() - busy_before).count();
  EXPECT_EQ(failures.load(), 0);
  // 5 per rank, the one that opens the gate, and at most a HELLO per connection.
  EXPECT_GE(requests, 5u * ranks + 1);
  EXPECT_LE(requests, 5u * ranks + 1 + kThreads);
  std::cout << fmt::format(
      "STORE-LOAD {} simulated ranks on {} connections: {} requests ({:.2f} per rank) in {:.2f} s wall, "
      "{:.2f} s of the server thread's CPU ({:.1f} us per request); reading every record would be "
      "{:.3g} requests\n",
      ranks, kThreads, requests, static_cast<double>(requests) / ranks, wall, busy, busy * 1e6 / static_cast<double>(requests),
      static_cast<double>(ranks) * ranks);
}

}  // namespace
}  // namespace hoop::test
