// What goes wrong, and what every rank is told: a rank killed in the middle of a collective, a
// rank that never calls it, calls that disagree between ranks, garbage on the listening ports
// and the store, invalid arguments. No shared-memory segment of the job may be left behind.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <functional>
#include <iostream>
#include <limits>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "hoop/communicator.h"
#include "hoop/error.h"
#include "hoop/store.h"
#include "hoop/types.h"
#include "support/loopback_client.h"
#include "support/spawn.h"
#include "support/store_sync.h"
#include "support/test_scale.h"
#include "transport/shm/shm_transport.h"
#include "transport/tcp/handshake.h"

namespace hoop::test {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

// The lines a rank reported that start with `key `, without the key.
std::vector<std::string> reported(const RankResult& r, const std::string& key) {
  std::vector<std::string> out;
  for (const auto& line : r.reports) {
    if (line.rfind(key + " ", 0) == 0) out.push_back(line.substr(key.size() + 1));
  }
  return out;
}

std::string job_of(const std::vector<RankResult>& results) {
  for (const auto& r : results) {
    auto jobs = reported(r, "JOB");
    if (!jobs.empty()) return jobs.front();
  }
  return {};
}

void print_reports(const std::vector<RankResult>& results) {
  for (const auto& r : results) {
    for (const auto& line : r.reports) std::cout << "  rank " << r.rank << ": " << line << "\n";
  }
}

void expect_no_leftover_segments(const std::vector<RankResult>& results) {
  const std::string job = job_of(results);
  ASSERT_FALSE(job.empty()) << "no rank reported its job id";
  EXPECT_EQ(job_segments(job), std::vector<std::string>{}) << "left in /dev/shm by job " << job;
  // Whatever the verdict, leave the machine clean (as the launcher would).
  transport::shm_remove_job_segments(job);
}

// Does `text` name rank `r` ("rank 2", "peer 2", "(peer 2)")?
bool names_rank(const std::string& text, int r) {
  const std::string number = std::to_string(r);
  for (const char* word : {"rank ", "peer "}) {
    const std::string needle = word + number;
    for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) {
      const size_t end = at + needle.size();
      const auto byte = [&](size_t i) { return static_cast<unsigned char>(text[i]); };
      const bool starts_word = at == 0 || !std::isalnum(byte(at - 1));
      const bool ends_word = end == text.size() || !std::isdigit(byte(end));
      if (starts_word && ends_word) return true;
    }
  }
  return false;
}

std::string lowercase(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s;
}

std::string transport_name(const ::testing::TestParamInfo<const char*>& p) {
  return std::string(p.param);
}

SpawnOptions with_transport(const char* transport, std::chrono::seconds timeout) {
  SpawnOptions opts;
  opts.timeout = timeout;
  if (std::string(transport) == "tcp") opts.env.emplace_back("HOOP_TRANSPORT", "tcp");
  return opts;
}

// ---------------------------------------------------------------------------------------------
// A rank killed with SIGKILL in the middle of large AllReduces.

class RankKilledTest : public ::testing::TestWithParam<const char*> {};

TEST_P(RankKilledTest, EverySurvivorGetsAnErrorNamingTheDeadRankWithinTheTimeout) {
  constexpr int kRanks = 4;
  constexpr int kVictim = 2;
  // The first op connects every link within this stall timeout too: 3 s, stretched under a
  // sanitizer (under TSan a connection once missed it).
  constexpr auto kTimeout = wall_bound(3s);
  auto results = run_ranks(kRanks, [&](RankContext& ctx) {
    CommOptions copts;
    copts.timeout = kTimeout;
    auto comm = ctx.make_comm(copts);
    ctx.report("JOB " + comm->job_id());
    const size_t count = size_t{4} << 20;  // 16 MiB of f32 per rank
    std::vector<float> in(count, 1.0f), out(count);
    // A first op connects every link the later ones use: the victim dies after both sides of
    // its shared-memory segments attached, so nothing of it may stay in /dev/shm.
    comm->allreduce(in.data(), out.data(), count, DataType::f32, RedOp::sum);
    if (ctx.rank == kVictim) {
      std::thread([&ctx] {
        std::this_thread::sleep_for(400ms);
        ctx.report("DYING " + std::to_string(now_ns()));
        ::kill(::getpid(), SIGKILL);
      }).detach();
    }
    Clock::time_point op_start;
    try {
      for (int k = 0; k < 2000; ++k) {
        op_start = Clock::now();
        comm->allreduce(in.data(), out.data(), count, DataType::f32, RedOp::sum);
      }
      ADD_FAILURE() << "2000 allreduces succeeded with rank " << kVictim << " dead";
    } catch (const Error& e) {
      const int64_t at = now_ns();
      ctx.report("ERROR " + std::to_string(at) + " " + std::string(to_string(e.code())) +
                 " after " + std::to_string(seconds_since(op_start)) + " s in the op: " + e.what());
      EXPECT_TRUE(names_rank(e.what(), kVictim)) << "does not name rank " << kVictim << ": "
                                                 << e.what();
      EXPECT_NE(e.code(), ErrorCode::invalid_argument) << e.what();
    }
  }, with_transport(GetParam(), 60s));
  print_reports(results);

  int64_t died_at = 0;
  for (const auto& line : reported(results[kVictim], "DYING")) died_at = std::stoll(line);
  EXPECT_EQ(results[kVictim].signal, SIGKILL);
  ASSERT_NE(died_at, 0) << "the victim did not report its death";
  for (const auto& r : results) {
    if (r.rank == kVictim) continue;
    EXPECT_TRUE(r.ok()) << "survivor " << r.rank << " exit " << r.exit_code << " signal "
                        << r.signal;
    auto errors = reported(r, "ERROR");
    ASSERT_EQ(errors.size(), 1u) << "survivor " << r.rank << " got no error";
    const double latency = (std::stoll(errors[0]) - died_at) / 1e9;
    std::cout << "  survivor " << r.rank << " told " << latency << " s after the death\n";
    EXPECT_LE(latency, std::chrono::duration<double>(kTimeout).count() + wall_bound(1.0))
        << "survivor " << r.rank;
  }
  expect_no_leftover_segments(results);
}

INSTANTIATE_TEST_SUITE_P(CommErrors, RankKilledTest, ::testing::Values("shm", "tcp"),
                         transport_name);

// ---------------------------------------------------------------------------------------------
// A rank that never calls the collective: the others time out, naming op, sequence and peer.

class NeverCallsTest : public ::testing::TestWithParam<const char*> {};

TEST_P(NeverCallsTest, SurvivorsTimeOutNamingOpSequenceAndPeer) {
  constexpr int kRanks = 3;
  constexpr int kAbsent = 2;
  constexpr auto kTimeout = 2s;
  auto results = run_ranks(kRanks, [&](RankContext& ctx) {
    CommOptions copts;
    copts.timeout = kTimeout;
    auto comm = ctx.make_comm(copts);
    auto store = ctx.store();
    ctx.report("JOB " + comm->job_id());
    std::vector<double> v(50000, 1.0);
    for (int k = 0; k < 3; ++k) {
      comm->allreduce(v.data(), v.data(), v.size(), DataType::f64, RedOp::max);
    }
    if (ctx.rank == kAbsent) {
      await(*store, "survivors-done", kRanks - 1);  // alive, but never calls the next op
      return;
    }
    Work w = comm->allreduce_async(v.data(), v.data(), v.size(), DataType::f64, RedOp::max);
    const uint64_t seq = w.seq();
    const auto start = Clock::now();
    try {
      w.wait();
      ADD_FAILURE() << "the allreduce finished without rank " << kAbsent;
    } catch (const Error& e) {
      const double waited = seconds_since(start);
      ctx.report("ERROR " + std::string(to_string(e.code())) + " " + std::to_string(e.peer()) +
                 " after " + std::to_string(waited) + " s: " + e.what());
      const std::string what = e.what();
      EXPECT_TRUE(e.code() == ErrorCode::timeout || e.code() == ErrorCode::peer_failure) << what;
      EXPECT_EQ(e.op(), "allreduce") << what;
      EXPECT_NE(what.find("allreduce"), std::string::npos) << what;
      EXPECT_EQ(e.seq(), seq) << what;
      EXPECT_NE(what.find(std::to_string(seq)), std::string::npos) << "no sequence: " << what;
      EXPECT_GE(e.peer(), 0) << what;
      EXPECT_NE(e.peer(), ctx.rank) << what;
      EXPECT_TRUE(names_rank(what, e.peer())) << what;
      const double limit = std::chrono::duration<double>(kTimeout).count();
      EXPECT_GE(waited, limit * 0.9) << what;
      EXPECT_LE(waited, limit + wall_bound(2.0)) << what;
    }
    store->add("survivors-done", 1);
  }, with_transport(GetParam(), 60s));
  print_reports(results);
  EXPECT_TRUE(all_ok(results));
  // Someone waited on the absent rank itself and said so.
  bool named = false;
  for (const auto& r : results) {
    for (const auto& e : reported(r, "ERROR")) {
      named |= e.rfind("timeout " + std::to_string(kAbsent) + " ", 0) == 0;
    }
  }
  EXPECT_TRUE(named) << "no survivor timed out waiting on rank " << kAbsent;
  expect_no_leftover_segments(results);
}

INSTANTIATE_TEST_SUITE_P(CommErrors, NeverCallsTest, ::testing::Values("shm", "tcp"),
                         transport_name);

// ---------------------------------------------------------------------------------------------
// Calls that disagree between the two ranks.

struct MismatchCase {
  const char* name;
  // Runs rank r's side of the call.
  std::function<void(Communicator&, int r)> call;
  std::vector<std::string> both_values;  // every one must appear in the mismatch message
  // A root mismatch between two roots moves no byte from one to the other: only the full
  // signature check (HOOP_CHECK=1) can see it at the call itself.
  bool signature_check = false;
  int nranks = 2;
};

void PrintTo(const MismatchCase& c, std::ostream* os) { *os << c.name; }

class MismatchTest : public ::testing::TestWithParam<MismatchCase> {};

TEST_P(MismatchTest, IsReportedWithBothSidesValues) {
  const MismatchCase& mc = GetParam();
  SpawnOptions opts;
  opts.timeout = 60s;
  if (mc.signature_check) opts.env.emplace_back("HOOP_CHECK", "1");
  auto results = run_ranks(mc.nranks, [&](RankContext& ctx) {
    CommOptions copts;
    copts.timeout = 5s;
    auto comm = ctx.make_comm(copts);
    ctx.report("JOB " + comm->job_id());
    int32_t one = 1;
    comm->allreduce(&one, &one, 1, DataType::i32, RedOp::sum);  // connected
    auto report = [&](const Error& e) {
      if (e.code() == ErrorCode::mismatch) {
        ctx.report("MISMATCH " + std::string(e.what()));
      } else {
        ctx.report("OTHER " + std::string(to_string(e.code())) + ": " + e.what());
      }
      EXPECT_TRUE(e.code() == ErrorCode::mismatch || e.code() == ErrorCode::peer_failure)
          << e.what();
    };
    try {
      mc.call(*comm, ctx.rank);
    } catch (const Error& e) {
      report(e);
      return;
    }
    // A rank whose own part of the call was consistent may finish it; it must learn at its
    // next operation at the latest, and never read the other call's data as its own.
    ctx.report("NEXT the mismatched call returned here");
    try {
      comm->barrier();
      ADD_FAILURE() << mc.name << ": neither the mismatched call nor the next one failed";
    } catch (const Error& e) {
      report(e);
    }
  }, opts);
  print_reports(results);
  EXPECT_TRUE(all_ok(results));
  bool shown = false;
  for (const auto& r : results) {
    for (const auto& e : reported(r, "MISMATCH")) {
      bool all = true;
      for (const auto& v : mc.both_values) all &= e.find(v) != std::string::npos;
      shown |= all;
    }
  }
  EXPECT_TRUE(shown) << mc.name << ": no rank got a mismatch error showing both values";
  // A rank that fails before a peer attached to their segment leaves the creator's segment
  // (hoop-run sweeps the job's segments at exit): clean up without judging.
  transport::shm_remove_job_segments(job_of(results));
}

std::vector<float> buffer_of(size_t n) { return std::vector<float>(n, 1.0f); }

INSTANTIATE_TEST_SUITE_P(
    CommErrors, MismatchTest,
    ::testing::Values(
        MismatchCase{"count",
                     [](Communicator& c, int r) {
                       const size_t count = r == 0 ? 1000 : 2000;
                       auto v = buffer_of(count);
                       c.allreduce(v.data(), v.data(), count, DataType::f32, RedOp::sum);
                     },
                     {"1000", "2000"}},
        MismatchCase{"dtype_same_size",
                     [](Communicator& c, int r) {
                       auto v = buffer_of(1000);
                       c.allreduce(v.data(), v.data(), 1000, r == 0 ? DataType::f32 : DataType::i32,
                                   RedOp::sum);
                     },
                     {"f32", "i32"}},
        MismatchCase{"dtype_other_size",
                     [](Communicator& c, int r) {
                       std::vector<double> v(1000, 1.0);
                       c.allreduce(v.data(), v.data(), 1000, r == 0 ? DataType::f32 : DataType::f64,
                                   RedOp::sum);
                     },
                     {"f32", "f64"}},
        MismatchCase{"root",
                     [](Communicator& c, int r) {
                       auto v = buffer_of(1000);
                       c.broadcast(v.data(), v.data(), 1000, DataType::f32, r == 0 ? 0 : 1);
                     },
                     {"root 0", "root 1"},
                     true},
        MismatchCase{"root_seen_in_transit",
                     [](Communicator& c, int r) {
                       // Ranks 0 and 1 say root 0, rank 2 says root 1: along the ring's
                       // chain, data reaches rank 2 from a broadcast rooted elsewhere than it
                       // expects (other algorithms see it as a different call order).
                       auto v = buffer_of(1000);
                       OpOptions o;
                       o.algo = "ring";
                       c.broadcast(v.data(), v.data(), 1000, DataType::f32, r == 2 ? 1 : 0, o);
                     },
                     {"root 0", "root 1"},
                     false,
                     3},
        MismatchCase{"op",
                     [](Communicator& c, int r) {
                       auto v = buffer_of(1000);
                       if (r == 0) {
                         c.allreduce(v.data(), v.data(), 1000, DataType::f32, RedOp::sum);
                       } else {
                         c.broadcast(v.data(), v.data(), 1000, DataType::f32, 0);
                       }
                     },
                     {"allreduce", "broadcast"}}),
    [](const ::testing::TestParamInfo<MismatchCase>& p) { return std::string(p.param.name); });

// ---------------------------------------------------------------------------------------------
// Garbage on every rank's listening port and on the store while the job runs collectives.


// Sends one round of assorted garbage to `port`; idle connections go to `held`.
void garbage_round(uint16_t port, uint64_t round, const std::string& job_id,
                   std::vector<int>& held) {
  std::vector<uint8_t> noise(4096);
  uint64_t x = round * 0x9E3779B97F4A7C15ull + port;
  for (auto& b : noise) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    b = static_cast<uint8_t>(x);
  }
  // Random bytes, then close.
  if (int fd = connect_loopback(port); fd >= 0) {
    send_all(fd, noise.data(), noise.size());
    ::close(fd);
  }
  // Connect and hang up at once.
  if (int fd = connect_loopback(port); fd >= 0) ::close(fd);
  // A few bytes, then silence: must not hold up the real handshakes.
  if (held.size() < 16) {
    if (int fd = connect_loopback(port); fd >= 0) {
      send_all(fd, "HTC", 3);
      held.push_back(fd);
    }
  }
  // A well-formed hello from another job, and one of this job for a communicator that does
  // not exist, from a rank that does not exist.
  transport::tcp::Hello foreign;
  foreign.job_key = 0x1234567887654321ull;
  foreign.comm_id = 0;
  foreign.from_rank = 1;
  foreign.to_rank = 0;
  transport::tcp::Hello stray;
  stray.job_key = transport::tcp::fnv1a64(job_id);
  stray.comm_id = 0xDEAD0000 + round;
  stray.from_rank = 77;
  stray.to_rank = 0;
  for (const auto& hello : {foreign, stray}) {
    if (int fd = connect_loopback(port); fd >= 0) {
      auto bytes = transport::tcp::encode_hello(hello);
      send_all(fd, bytes.data(), bytes.size());
      send_all(fd, noise.data(), 256);
      ::close(fd);
    }
  }
  // Something that looks like the start of a store request with an absurd key length.
  if (int fd = connect_loopback(port); fd >= 0) {
    const uint8_t req[] = {'H', 'S', 'T', 'R', 1, 0xFF, 0xFF, 0xFF, 0x7F};
    send_all(fd, req, sizeof req);
    ::close(fd);
  }
}

TEST(CommErrors, GarbageOnListeningPortsAndStoreLeavesResultsCorrect) {
  constexpr int kRanks = 3;
  SpawnOptions opts;
  opts.timeout = 120s;
  opts.env.emplace_back("HOOP_TRANSPORT", "tcp");
  auto results = run_ranks(kRanks, [&](RankContext& ctx) {
    CommOptions copts;
    copts.timeout = 30s;
    auto comm = ctx.make_comm(copts);
    auto store = ctx.store();
    store->set_timeout(10s);
    ctx.report("JOB " + comm->job_id());

    std::atomic<bool> stop{false};
    std::thread vandal;
    if (ctx.rank == 0) {
      // The ports every rank published, loopback only.
      std::vector<uint16_t> ports;
      for (int r = 0; r < kRanks; ++r) {
        const std::string key = "hoop/c0/peer/" + std::to_string(r);
        ASSERT_TRUE(store->check(key)) << key << " is not in the store";
        const auto info = nlohmann::json::parse(store->get_string(key));
        ASSERT_TRUE(info.contains("tcp")) << info.dump();
        for (const auto& a : info["tcp"]) {
          const std::string addr = a.get<std::string>();
          if (addr.rfind("127.0.0.1:", 0) == 0) {
            ports.push_back(static_cast<uint16_t>(std::stoi(addr.substr(10))));
          }
        }
      }
      ASSERT_EQ(ports.size(), static_cast<size_t>(kRanks)) << "one loopback address per rank";
      ports.push_back(ctx.store_port);
      ctx.report("targets " + std::to_string(ports.size()));
      vandal = std::thread([&, ports] {
        std::vector<int> held;
        auto helper = ctx.store();
        for (uint64_t round = 0; !stop.load(); ++round) {
          for (uint16_t port : ports) garbage_round(port, round, ctx.job_id, held);
          if (round == 0) helper->add("garbage-started", 1);
          std::this_thread::sleep_for(20ms);
        }
        for (int fd : held) ::close(fd);
      });
    }
    await(*store, "garbage-started", 1);

    auto check_allreduce = [&](Communicator& c, int k) {
      const size_t count = 100000 + k;
      std::vector<float> v(count);
      for (size_t i = 0; i < count; ++i) v[i] = static_cast<float>((i + c.rank() + k) % 16);
      c.allreduce(v.data(), v.data(), count, DataType::f32, RedOp::sum);
      for (size_t i = 0; i < count; i += 997) {
        float want = 0;
        for (int r = 0; r < c.size(); ++r) want += static_cast<float>((i + r + k) % 16);
        if (v[i] != want) {
          ADD_FAILURE() << "round " << k << " element " << i << ": " << v[i] << " != " << want;
          return;
        }
      }
    };
    for (int k = 0; k < 10; ++k) check_allreduce(*comm, k);
    // New connections go through the listeners while the garbage keeps coming.
    auto dup = comm->split(0, ctx.rank);
    ASSERT_NE(dup, nullptr);
    for (int k = 0; k < 10; ++k) {
      check_allreduce(*dup, k);
      check_allreduce(*comm, k + 100);
    }
    comm->barrier();
    if (vandal.joinable()) {
      stop = true;
      vandal.join();
    }
    // The store still serves.
    store->set_string("after/" + std::to_string(ctx.rank), "ok");
    EXPECT_EQ(store->get_string("after/" + std::to_string((ctx.rank + 1) % kRanks)), "ok");
    comm->barrier();
  }, opts);
  print_reports(results);
  EXPECT_TRUE(all_ok(results));
  expect_no_leftover_segments(results);
}

// ---------------------------------------------------------------------------------------------
// Invalid arguments are refused, naming the argument, and leave the communicator working.

TEST(CommErrors, InvalidArgumentsAreRefusedAndTheCommunicatorStillWorks) {
  auto results = run_ranks(2, [](RankContext& ctx) {
    CommOptions copts;
    copts.timeout = 20s;
    auto comm = ctx.make_comm(copts);
    ctx.report("JOB " + comm->job_id());
    const int me = comm->rank();
    std::vector<float> a(64, 1.0f), b(64, 0.0f);
    constexpr size_t kHuge = std::numeric_limits<size_t>::max() / 2 + 1;  // * 4 overflows
    constexpr size_t kHugeRow = std::numeric_limits<size_t>::max() / 8;   // * 8 fits, * 8 * 2 not

    auto refused = [&](const char* what, std::vector<std::string> names,
                       const std::function<void()>& call) {
      try {
        call();
        ADD_FAILURE() << what << ": accepted";
      } catch (const Error& e) {
        EXPECT_EQ(e.code(), ErrorCode::invalid_argument) << what << ": " << e.what();
        const std::string msg = lowercase(e.what());
        bool named = false;
        for (const auto& n : names) named |= msg.find(n) != std::string::npos;
        EXPECT_TRUE(named) << what << ": the message does not name the argument ("
                           << names.front() << "): " << e.what();
      } catch (const std::exception& e) {
        ADD_FAILURE() << what << ": not a hoop::Error: " << e.what();
      }
    };
    refused("null send", {"send"},
            [&] { comm->allreduce(nullptr, b.data(), 10, DataType::f32, RedOp::sum); });
    refused("null recv", {"recv"},
            [&] { comm->allreduce(a.data(), nullptr, 10, DataType::f32, RedOp::sum); });
    refused("null recv of allgather", {"recv"},
            [&] { comm->allgather(a.data(), nullptr, 10, DataType::f32); });
    refused("null buffer of send", {"buf"},
            [&] { comm->send(nullptr, 10, DataType::f32, 1 - me); });
    refused("root 2 of 2 ranks", {"root"},
            [&] { comm->broadcast(a.data(), a.data(), 10, DataType::f32, 2); });
    refused("root -1", {"root"},
            [&] { comm->reduce(a.data(), b.data(), 10, DataType::f32, RedOp::sum, -1); });
    refused("send to self", {"peer"}, [&] { comm->send(a.data(), 10, DataType::f32, me); });
    refused("recv from self", {"peer"}, [&] { comm->recv(b.data(), 10, DataType::f32, me); });
    refused("send to rank 5 of 2", {"peer"}, [&] { comm->send(a.data(), 10, DataType::f32, 5); });
    refused("unknown dtype 99", {"dtype", "data type", "datatype"}, [&] {
      comm->allreduce(a.data(), b.data(), 10, static_cast<DataType>(99), RedOp::sum);
    });
    refused("unknown op 99", {"op"}, [&] {
      comm->allreduce(a.data(), b.data(), 10, DataType::f32, static_cast<RedOp>(99));
    });
    refused("count * 4 overflows", {"count"},
            [&] { comm->allreduce(a.data(), b.data(), kHuge, DataType::f32, RedOp::sum); });
    refused("recvcount * 8 * ranks overflows", {"count"}, [&] {
      comm->reducescatter(a.data(), b.data(), kHugeRow, DataType::f64, RedOp::sum);
    });
    refused("sendcount * 8 * ranks overflows", {"count"},
            [&] { comm->allgather(a.data(), b.data(), kHugeRow, DataType::f64); });
    refused("async with a null send", {"send"}, [&] {
      comm->allreduce_async(nullptr, b.data(), 10, DataType::f32, RedOp::sum).wait();
    });

    // Null buffers with nothing to move are fine.
    comm->allreduce(nullptr, nullptr, 0, DataType::f32, RedOp::sum);

    // Still working, with the same sequence on both ranks.
    std::vector<float> v(1000, static_cast<float>(me + 1));
    comm->allreduce(v.data(), v.data(), v.size(), DataType::f32, RedOp::sum);
    EXPECT_EQ(v.front(), 3.0f);
    EXPECT_EQ(v.back(), 3.0f);
    comm->barrier();
  });
  print_reports(results);
  EXPECT_TRUE(all_ok(results));
  expect_no_leftover_segments(results);
}

}  // namespace
}  // namespace hoop::test
