// The communicator beyond single blocking collectives: asynchronous handles, split, point to
// point, barrier, several communicators from several threads, timeouts, abort() and
// initialisation from a torchrun-style environment.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <functional>
#include <iostream>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "hoop/communicator.h"
#include "hoop/error.h"
#include "hoop/store.h"
#include "hoop/types.h"
#include "support/spawn.h"
#include "support/store_sync.h"
#include "support/test_scale.h"
#include "transport/shm/shm_transport.h"

namespace hoop::test {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

void expect_no_leftover_segments(const std::string& job_id) {
  ASSERT_FALSE(job_id.empty()) << "no rank reported its job id";
  EXPECT_EQ(job_segments(job_id), std::vector<std::string>{}) << "left in /dev/shm by job "
                                                              << job_id;
  // Whatever the verdict, leave the machine clean (as the launcher would).
  transport::shm_remove_job_segments(job_id);
}

std::string reported_value(const std::vector<RankResult>& results, const std::string& key) {
  for (const auto& r : results) {
    for (const auto& line : r.reports) {
      if (line.rfind(key + " ", 0) == 0) return line.substr(key.size() + 1);
    }
  }
  return {};
}

// ---------------------------------------------------------------------------------------------

TEST(CommFeatures, AsyncOpsCompleteInIssueOrder) {
  auto results = run_ranks(3, [](RankContext& ctx) {
    auto comm = ctx.make_comm();
    const int n = comm->size();
    const int r = comm->rank();
    constexpr int kOps = 8;
    std::vector<std::vector<float>> in(kOps), out(kOps);
    std::vector<Work> works;
    for (int k = 0; k < kOps; ++k) {
      const size_t count = k % 2 == 0 ? (size_t{1} << 19) + k : size_t(k);
      in[k].assign(count, static_cast<float>(r + k));
      out[k].assign(count, -1.0f);
      works.push_back(comm->allreduce_async(in[k].data(), out[k].data(), count, DataType::f32,
                                            RedOp::sum));
      ASSERT_TRUE(works.back().valid());
    }
    for (int k = 1; k < kOps; ++k) EXPECT_GT(works[k].seq(), works[k - 1].seq());
    // Poll from the last to the first: when a later op is seen finished, every earlier one
    // must be finished too.
    std::vector<bool> finished(kOps, false);
    const auto deadline = Clock::now() + 60s;
    while (!finished[kOps - 1] && Clock::now() < deadline) {
      bool later_done = false;
      for (int k = kOps - 1; k >= 0; --k) {
        const bool done = works[k].test();
        if (later_done) {
          EXPECT_TRUE(done) << "op " << k << " unfinished after a later one";
        }
        later_done |= done;
        finished[k] = done;
      }
      std::this_thread::sleep_for(1ms);
    }
    for (int k = 0; k < kOps; ++k) {
      works[k].wait();
      EXPECT_TRUE(works[k].test());
      const float want = static_cast<float>(n * k + n * (n - 1) / 2);
      EXPECT_EQ(out[k].front(), want) << "op " << k;
      EXPECT_EQ(out[k].back(), want) << "op " << k;
    }

    // test() is false while a peer has not joined, true once it did.
    if (r != 0) std::this_thread::sleep_for(600ms);
    int64_t v = r + 1, sum = 0;
    Work w = comm->allreduce_async(&v, &sum, 1, DataType::i64, RedOp::sum);
    if (r == 0) {
      EXPECT_FALSE(w.test());
      EXPECT_FALSE(w.wait_for(50ms));
    }
    EXPECT_TRUE(w.wait_for(30s));
    EXPECT_TRUE(w.test());
    EXPECT_EQ(sum, n * (n + 1) / 2);
  });
  EXPECT_TRUE(all_ok(results));
}

TEST(CommFeatures, SplitRunsConcurrentlyWithTheParent) {
  // 6 ranks: evens {0, 2, 4} and odds {1, 3}, ordered by key = -rank; rank 5 stays out.
  auto results = run_ranks(6, [](RankContext& ctx) {
    auto world = ctx.make_comm();
    const int r = world->rank();
    const int color = r == 5 ? -1 : r % 2;
    auto sub = world->split(color, -r);
    if (color < 0) {
      EXPECT_EQ(sub, nullptr);
    } else {
      ASSERT_NE(sub, nullptr);
      const std::vector<int> members = color == 0 ? std::vector<int>{4, 2, 0}
                                                  : std::vector<int>{3, 1};
      ASSERT_EQ(sub->size(), static_cast<int>(members.size()));
      const int want_rank =
          static_cast<int>(std::find(members.begin(), members.end(), r) - members.begin());
      EXPECT_EQ(sub->rank(), want_rank);
      std::vector<int32_t> order(members.size(), -1);
      int32_t me = r;
      sub->allgather(&me, order.data(), 1, DataType::i32);
      EXPECT_EQ(order, std::vector<int32_t>(members.begin(), members.end()));
    }

    // The sub-communicator and the world run at the same time, from two threads.
    constexpr int kRounds = 20;
    std::thread on_sub;
    if (sub) {
      on_sub = std::thread([&] {
        const int64_t group_sum = color == 0 ? 0 + 2 + 4 : 1 + 3;
        for (int k = 0; k < kRounds; ++k) {
          std::vector<int64_t> v(1000 + k, r + int64_t{100} * k);
          sub->allreduce(v.data(), v.data(), v.size(), DataType::i64, RedOp::sum);
          EXPECT_EQ(v.front(), group_sum + 100 * k * sub->size());
          EXPECT_EQ(v.back(), group_sum + 100 * k * sub->size());
        }
      });
    }
    for (int k = 0; k < kRounds; ++k) {
      std::vector<double> v(5000 + k, r * 0.5 + k);
      world->allreduce(v.data(), v.data(), v.size(), DataType::f64, RedOp::max);
      EXPECT_EQ(v.front(), 2.5 + k);
      EXPECT_EQ(v.back(), 2.5 + k);
    }
    if (on_sub.joinable()) on_sub.join();

    // Asynchronous ops interleaved on both.
    if (sub) {
      int32_t a = 1, b = 0;
      double x = r, y = -1;
      Work on_world = world->allreduce_async(&x, &y, 1, DataType::f64, RedOp::sum);
      Work on_split = sub->allreduce_async(&a, &b, 1, DataType::i32, RedOp::sum);
      on_split.wait();
      on_world.wait();
      EXPECT_EQ(b, sub->size());
      EXPECT_EQ(y, 15.0);
    } else {
      double x = r, y = -1;
      world->allreduce(&x, &y, 1, DataType::f64, RedOp::sum);
      EXPECT_EQ(y, 15.0);
    }
  });
  EXPECT_TRUE(all_ok(results));
}

class SendRecvTest : public ::testing::TestWithParam<const char*> {
 protected:
  // Runs body on 4 ranks over the transport of the test's parameter.
  void run(const std::function<void(RankContext&, Communicator&)>& body) {
    SpawnOptions opts;
    opts.timeout = 90s;
    if (std::string(GetParam()) == "tcp") opts.env.emplace_back("HOOP_TRANSPORT", "tcp");
    auto results = run_ranks(4, [&](RankContext& ctx) {
      CommOptions copts;
      copts.timeout = wall_bound(10s);  // a deadlock fails in 10 s; the largest exchange takes about 1 s
      auto comm = ctx.make_comm(copts);
      ctx.report("JOB " + comm->job_id());
      body(ctx, *comm);
    }, opts);
    EXPECT_TRUE(all_ok(results));
    expect_no_leftover_segments(reported_value(results, "JOB"));
  }
};

int32_t ring_value(size_t i, int rank) { return static_cast<int32_t>(i * 31) + rank; }

void expect_ring_data(const std::vector<int32_t>& in, int from) {
  for (size_t i = 0; i < in.size(); ++i) {
    if (in[i] != ring_value(i, from)) {
      ADD_FAILURE() << "element " << i << " of " << in.size() << " from rank " << from << ": "
                    << in[i];
      return;
    }
  }
}

TEST_P(SendRecvTest, PairsExchangeBothWays) {
  run([](RankContext& ctx, Communicator& comm) {
    const int r = comm.rank();
    // Pairs (0,1) and (2,3): the even rank sends, then the odd one answers.
    const int partner = r ^ 1;
    for (size_t count : {size_t{0}, size_t{1}, size_t{4099}, size_t{300000}}) {
      ctx.report("pair exchange of " + std::to_string(count));
      std::vector<uint8_t> bytes(count);
      std::vector<double> reals(count);
      if (r % 2 == 0) {
        for (size_t i = 0; i < count; ++i) bytes[i] = static_cast<uint8_t>(i * 7 + r);
        comm.send(bytes.data(), count, DataType::u8, partner);
        comm.recv(reals.data(), count, DataType::f64, partner);
        for (size_t i = 0; i < count; ++i) {
          if (reals[i] != i * 0.25 + partner) {
            ADD_FAILURE() << "f64 element " << i << " of " << count << ": " << reals[i];
            break;
          }
        }
      } else {
        comm.recv(bytes.data(), count, DataType::u8, partner);
        for (size_t i = 0; i < count; ++i) {
          if (bytes[i] != static_cast<uint8_t>(i * 7 + partner)) {
            ADD_FAILURE() << "u8 element " << i << " of " << count;
            break;
          }
        }
        for (size_t i = 0; i < count; ++i) reals[i] = i * 0.25 + r;
        comm.send(reals.data(), count, DataType::f64, partner);
      }
    }
  });
}

TEST_P(SendRecvTest, RingOfBlockingCallsOrderedByParity) {
  // 12 MiB around the ring: even ranks send first, odd ranks receive first.
  run([](RankContext&, Communicator& comm) {
    const int r = comm.rank(), n = comm.size();
    const size_t count = (size_t{12} << 20) / sizeof(int32_t);
    std::vector<int32_t> out(count), in(count, -1);
    for (size_t i = 0; i < count; ++i) out[i] = ring_value(i, r);
    if (r % 2 == 0) {
      comm.send(out.data(), count, DataType::i32, (r + 1) % n);
      comm.recv(in.data(), count, DataType::i32, (r + n - 1) % n);
    } else {
      comm.recv(in.data(), count, DataType::i32, (r + n - 1) % n);
      comm.send(out.data(), count, DataType::i32, (r + 1) % n);
    }
    expect_ring_data(in, (r + n - 1) % n);
  });
}

TEST_P(SendRecvTest, RingOfAsyncSendsOfSmallMessages) {
  // Everyone sends to its successor, then receives from its predecessor: the send is
  // asynchronous, and small enough for the transport to buffer it.
  run([](RankContext&, Communicator& comm) {
    const int r = comm.rank(), n = comm.size();
    const size_t count = 1000;
    std::vector<int32_t> out(count), in(count, -1);
    for (size_t i = 0; i < count; ++i) out[i] = ring_value(i, r);
    Work sent = comm.send_async(out.data(), count, DataType::i32, (r + 1) % n);
    comm.recv(in.data(), count, DataType::i32, (r + n - 1) % n);
    sent.wait();
    expect_ring_data(in, (r + n - 1) % n);
  });
}

TEST_P(SendRecvTest, RingWithTheAsyncReceivePostedBeforeTheAsyncSend) {
  // recv_async from the predecessor, then send_async to the successor, then wait for both
  // (the MPI_Irecv, MPI_Isend, MPI_Waitall pattern): the send must not wait for the receive
  // to complete, else every rank waits for its predecessor's send, queued behind its receive.
  run([](RankContext&, Communicator& comm) {
    const int r = comm.rank(), n = comm.size();
    const size_t count = 1000;
    std::vector<int32_t> out(count), in(count, -1);
    for (size_t i = 0; i < count; ++i) out[i] = ring_value(i, r);
    Work got = comm.recv_async(in.data(), count, DataType::i32, (r + n - 1) % n);
    Work put = comm.send_async(out.data(), count, DataType::i32, (r + 1) % n);
    got.wait();
    put.wait();
    expect_ring_data(in, (r + n - 1) % n);
  });
}

TEST_P(SendRecvTest, RingOfAsyncSendsLargerThanTheTransportBuffers) {
  // As above with 12 MiB, more than a link buffers: an asynchronous send must not keep the
  // receive issued after it from running (as MPI_Isend then MPI_Recv), else every rank waits
  // for its successor to take data and the ring deadlocks.
  run([](RankContext&, Communicator& comm) {
    const int r = comm.rank(), n = comm.size();
    const size_t count = (size_t{12} << 20) / sizeof(int32_t);
    std::vector<int32_t> out(count), in(count, -1);
    for (size_t i = 0; i < count; ++i) out[i] = ring_value(i, r);
    Work sent = comm.send_async(out.data(), count, DataType::i32, (r + 1) % n);
    comm.recv(in.data(), count, DataType::i32, (r + n - 1) % n);
    sent.wait();
    expect_ring_data(in, (r + n - 1) % n);
  });
}

// A send that leaves the link full, then a barrier: the barrier's message is empty but must
// still wait for room for its header. (Sent too early, counted as done with its header still
// unsent, it was lost, and the peer met the next call's header: "mismatched calls".) Over shm
// the ring is sized so that the send fills it exactly; over TCP the send is larger than the
// socket buffers, which are near full when it completes.
TEST_P(SendRecvTest, BarrierAfterASendThatFillsTheLink) {
  constexpr size_t kRingBytes = 64 * 1024;
  const bool tcp = std::string(GetParam()) == "tcp";
  SpawnOptions opts;
  opts.timeout = 90s;
  opts.env.emplace_back("HOOP_SHM_RING_BYTES", std::to_string(kRingBytes));
  if (tcp) opts.env.emplace_back("HOOP_TRANSPORT", "tcp");
  auto results = run_ranks(4, [&](RankContext& ctx) {
    CommOptions copts;
    copts.timeout = 20s;
    auto comm = ctx.make_comm(copts);
    ctx.report("JOB " + comm->job_id());
    const size_t count = tcp ? (size_t{16} << 20) / sizeof(int32_t) : (kRingBytes - 64) / sizeof(int32_t);
    for (int round = 0; round < 3; ++round) {
      if (comm->rank() == 0) {
        std::vector<int32_t> out(count);
        for (size_t i = 0; i < count; ++i) out[i] = ring_value(i, 0);
        comm->send(out.data(), count, DataType::i32, 1);
      } else if (comm->rank() == 1) {
        std::this_thread::sleep_for(300ms);  // rank 0 finds the link full when it reaches the barrier
        std::vector<int32_t> in(count, -1);
        comm->recv(in.data(), count, DataType::i32, 0);
        expect_ring_data(in, 0);
      }
      // Over the links (not shm-direct's shared region), where the empty message travels.
      OpOptions over_links;
      over_links.algo = "dissemination";
      comm->barrier(over_links);
      over_links.algo = "ring";
      int32_t one = 1, total = 0;
      comm->allreduce(&one, &total, 1, DataType::i32, RedOp::sum, over_links);
      EXPECT_EQ(total, comm->size());
    }
  }, opts);
  EXPECT_TRUE(all_ok(results));
  expect_no_leftover_segments(reported_value(results, "JOB"));
}

INSTANTIATE_TEST_SUITE_P(CommFeatures, SendRecvTest, ::testing::Values("shm", "tcp"),
                         [](const ::testing::TestParamInfo<const char*>& p) {
                           return std::string(p.param);
                         });

TEST(CommFeatures, BarrierHoldsEveryRankUntilAllArrive) {
  auto results = run_ranks(4, [](RankContext& ctx) {
    auto comm = ctx.make_comm();
    for (int round = 0; round < 2; ++round) {
      std::this_thread::sleep_for(std::chrono::milliseconds(150 * ((ctx.rank + round) % 4)));
      const int64_t enter = now_ns();
      comm->barrier();
      const int64_t leave = now_ns();
      std::ostringstream line;
      line << 'R' << round << ' ' << enter << ' ' << leave;
      ctx.report(line.str());
    }
    Work w = comm->barrier_async();
    w.wait();
  });
  ASSERT_TRUE(all_ok(results));
  for (int round = 0; round < 2; ++round) {
    int64_t last_enter = 0, first_leave = INT64_MAX;
    for (const auto& r : results) {
      for (const auto& line : r.reports) {
        std::ostringstream tag;
        tag << 'R' << round << ' ';
        if (line.rfind(tag.str(), 0) != 0) continue;
        std::istringstream is(line.substr(3));
        int64_t enter, leave;
        is >> enter >> leave;
        last_enter = std::max(last_enter, enter);
        first_leave = std::min(first_leave, leave);
      }
    }
    EXPECT_GE(first_leave, last_enter) << "round " << round << ": a rank left the barrier "
                                       << (last_enter - first_leave) / 1e6
                                       << " ms before the last one entered";
  }
}

TEST(CommFeatures, SeveralCommunicatorsFromSeveralThreads) {
  auto results = run_ranks(3, [](RankContext& ctx) {
    auto world = ctx.make_comm();
    // Two more communicators over the same ranks: split with one color duplicates the group.
    std::vector<std::shared_ptr<Communicator>> comms = {world, world->split(0, ctx.rank),
                                                        world->split(7, -ctx.rank)};
    ASSERT_NE(comms[1], nullptr);
    ASSERT_NE(comms[2], nullptr);
    EXPECT_EQ(comms[1]->rank(), ctx.rank);
    EXPECT_EQ(comms[2]->rank(), 2 - ctx.rank);
    std::vector<std::thread> threads;
    for (size_t t = 0; t < comms.size(); ++t) {
      threads.emplace_back([&, t] {
        Communicator& c = *comms[t];
        for (int k = 0; k < 25; ++k) {
          const size_t count = 1 + (k * 7919 + t * 104729) % 200000;
          std::vector<int32_t> v(count, c.rank() * 10 + static_cast<int>(t) + k);
          c.allreduce(v.data(), v.data(), count, DataType::i32, RedOp::sum);
          const int32_t want = 30 + 3 * (static_cast<int>(t) + k);
          if (v.front() != want || v.back() != want) {
            ADD_FAILURE() << "communicator " << t << " round " << k << ": " << v.front();
          }
          std::vector<int32_t> all(3 * 5);
          std::vector<int32_t> mine(5, c.rank());
          c.allgather(mine.data(), all.data(), 5, DataType::i32);
          EXPECT_EQ(all[0] + all[5] + all[10], 3);
        }
      });
    }
    for (auto& th : threads) th.join();
  });
  EXPECT_TRUE(all_ok(results));
}

// ---------------------------------------------------------------------------------------------
// Timeouts: rank 1 never calls the collective rank 0 waits in.

struct TimeoutScenario {
  std::vector<std::pair<std::string, std::string>> env;
  std::optional<std::chrono::milliseconds> comm_timeout;  // CommOptions
  std::optional<std::chrono::milliseconds> op_timeout;    // OpOptions
  std::chrono::milliseconds expected_comm_timeout{0};     // comm->timeout()
  std::chrono::milliseconds expected_wait{0};             // when rank 0's op should fail
};

void run_timeout_scenario(const TimeoutScenario& s) {
  SpawnOptions opts;
  opts.timeout = 60s;
  opts.env = s.env;
  auto results = run_ranks(2, [&](RankContext& ctx) {
    CommOptions copts;
    copts.timeout = s.comm_timeout;
    auto comm = ctx.make_comm(copts);
    auto store = ctx.store();
    EXPECT_EQ(comm->timeout(), s.expected_comm_timeout);
    int32_t v = 1;
    comm->allreduce(&v, &v, 1, DataType::i32, RedOp::sum);  // connected and working
    EXPECT_EQ(v, 2);
    if (ctx.rank == 1) {
      await(*store, "rank0-done", 1);  // stays alive, never calls the next collective
      return;
    }
    OpOptions o;
    o.timeout = s.op_timeout;
    const auto start = Clock::now();
    try {
      comm->allreduce(&v, &v, 1, DataType::i32, RedOp::sum, o);
      ADD_FAILURE() << "the allreduce returned although rank 1 never called it";
    } catch (const Error& e) {
      const double waited = seconds_since(start);
      ctx.report("waited " + std::to_string(waited) + " s: " + e.what());
      EXPECT_EQ(e.code(), ErrorCode::timeout) << e.what();
      const double expected = std::chrono::duration<double>(s.expected_wait).count();
      EXPECT_GE(waited, expected * 0.9) << e.what();
      EXPECT_LE(waited, expected + wall_bound(2.0)) << e.what();
    }
    arrive(*store, "rank0-done");
  }, opts);
  EXPECT_TRUE(all_ok(results));
}

TEST(CommFeatures, TimeoutPerCommunicator) {
  TimeoutScenario s;
  s.comm_timeout = 500ms;
  s.expected_comm_timeout = 500ms;
  s.expected_wait = 500ms;
  run_timeout_scenario(s);
  // set_timeout changes it afterwards.
  auto results = run_ranks(1, [](RankContext& ctx) {
    auto comm = ctx.make_comm();
    comm->set_timeout(1234ms);
    EXPECT_EQ(comm->timeout(), 1234ms);
  });
  EXPECT_TRUE(all_ok(results));
}

TEST(CommFeatures, TimeoutPerOperation) {
  TimeoutScenario s;
  s.env = {{"HOOP_TIMEOUT", "300"}};
  s.op_timeout = 400ms;
  s.expected_comm_timeout = 300s;
  s.expected_wait = 400ms;
  run_timeout_scenario(s);
}

TEST(CommFeatures, TimeoutFromEnvironment) {
  TimeoutScenario s;
  s.env = {{"HOOP_TIMEOUT", "0.6"}};
  s.expected_comm_timeout = 600ms;
  s.expected_wait = 600ms;
  run_timeout_scenario(s);
}

// A framework's own timeout (CommOptions::fallback_timeout, torch's init_process_group) holds
// unless HOOP_TIMEOUT or CommOptions::timeout says otherwise.
TEST(CommFeatures, FallbackTimeoutYieldsToTheEnvironmentAndTheOption) {
  auto results = run_ranks(1, [](RankContext& ctx) {
    CommOptions copts;
    copts.fallback_timeout = 700ms;
    ::unsetenv("HOOP_TIMEOUT");
    EXPECT_EQ(ctx.make_comm(copts)->timeout(), 700ms);
    ::setenv("HOOP_TIMEOUT", "0.6", 1);
    EXPECT_EQ(ctx.make_comm(copts)->timeout(), 600ms);
    copts.timeout = 500ms;
    EXPECT_EQ(ctx.make_comm(copts)->timeout(), 500ms);
  });
  EXPECT_TRUE(all_ok(results));
}

// ---------------------------------------------------------------------------------------------

TEST(CommFeatures, AbortFromAnotherThreadUnblocksAWaitingRank) {
  SpawnOptions opts;
  opts.timeout = 90s;
  auto results = run_ranks(2, [](RankContext& ctx) {
    CommOptions copts;
    copts.timeout = 60s;
    auto comm = ctx.make_comm(copts);
    auto store = ctx.store();
    ctx.report("JOB " + comm->job_id());
    std::vector<float> v(1000, 1.0f);
    comm->allreduce(v.data(), v.data(), v.size(), DataType::f32, RedOp::sum);
    if (ctx.rank == 1) {
      // Never joins rank 0's second allreduce. Once rank 0 aborted, a new op here must fail
      // quickly: abort() tells the peers.
      await(*store, "aborted", 1);
      const auto start = Clock::now();
      OpOptions o;
      o.timeout = 20s;
      try {
        comm->allreduce(v.data(), v.data(), v.size(), DataType::f32, RedOp::sum, o);
        ADD_FAILURE() << "an allreduce with an aborted peer succeeded";
      } catch (const Error& e) {
        ctx.report("peer of the aborted rank: " + std::string(e.what()));
        EXPECT_TRUE(e.code() == ErrorCode::peer_failure || e.code() == ErrorCode::aborted)
            << e.what();
        EXPECT_LT(seconds_since(start), wall_bound(10.0)) << "the abort was not told to the peer";
      }
      return;
    }
    EXPECT_FALSE(comm->aborted());
    std::thread aborter([&] {
      std::this_thread::sleep_for(300ms);
      comm->abort("stopped by the test");
    });
    const auto start = Clock::now();
    try {
      comm->allreduce(v.data(), v.data(), v.size(), DataType::f32, RedOp::sum);
      ADD_FAILURE() << "the allreduce returned although rank 1 never called it";
    } catch (const Error& e) {
      ctx.report("aborted after " + std::to_string(seconds_since(start)) + " s: " + e.what());
      EXPECT_EQ(e.code(), ErrorCode::aborted) << e.what();
      EXPECT_LT(seconds_since(start), wall_bound(5.0));
    }
    aborter.join();
    EXPECT_TRUE(comm->aborted());
    // Later operations fail at once.
    try {
      comm->barrier();
      ADD_FAILURE() << "a barrier on an aborted communicator succeeded";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::aborted) << e.what();
    }
    arrive(*store, "aborted");
  }, opts);
  EXPECT_TRUE(all_ok(results));
  for (const auto& r : results) {
    for (const auto& line : r.reports) std::cout << "  rank " << r.rank << ": " << line << "\n";
  }
  expect_no_leftover_segments(reported_value(results, "JOB"));
}

// ---------------------------------------------------------------------------------------------

// A port p such that p and p + 1 are both free on loopback now.
uint16_t free_port_pair() {
  for (int attempt = 0; attempt < 100; ++attempt) {
    int a = ::socket(AF_INET, SOCK_STREAM, 0);
    int b = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = 0;
    uint16_t port = 0;
    if (::bind(a, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0) {
      socklen_t len = sizeof addr;
      ::getsockname(a, reinterpret_cast<sockaddr*>(&addr), &len);
      port = ntohs(addr.sin_port);
      addr.sin_port = htons(static_cast<uint16_t>(port + 1));
      if (port == 65535 || ::bind(b, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
        port = 0;
      }
    }
    ::close(a);
    ::close(b);
    if (port != 0) return port;
  }
  return 0;
}

TEST(CommFeatures, FromEnvUnderTorchrun) {
  const uint16_t port = free_port_pair();
  ASSERT_NE(port, 0);
  SpawnOptions opts;
  opts.timeout = 90s;
  opts.env = {{"WORLD_SIZE", "3"},
              {"LOCAL_WORLD_SIZE", "3"},
              {"MASTER_ADDR", "127.0.0.1"},
              {"MASTER_PORT", std::to_string(port)}};
  auto results = run_ranks(3, [](RankContext& ctx) {
    // torchrun's variables only: no hoop-run ones, and no store process (rank 0 serves it).
    for (const char* var : {"HOOP_RANK", "HOOP_WORLD_SIZE", "HOOP_LOCAL_RANK", "HOOP_LOCAL_SIZE",
                            "HOOP_STORE_ADDR", "HOOP_STORE_PORT", "HOOP_JOB_ID", "SLURM_PROCID",
                            "OMPI_COMM_WORLD_RANK", "PMI_RANK"}) {
      ::unsetenv(var);
    }
    ::setenv("RANK", std::to_string(ctx.rank).c_str(), 1);
    ::setenv("LOCAL_RANK", std::to_string(ctx.rank).c_str(), 1);
    auto comm = Communicator::from_env();
    ASSERT_NE(comm, nullptr);
    EXPECT_EQ(comm->rank(), ctx.rank);
    EXPECT_EQ(comm->size(), 3);
    EXPECT_EQ(comm->local_rank(), ctx.rank);
    EXPECT_EQ(comm->local_size(), 3);
    EXPECT_FALSE(comm->job_id().empty());
    ctx.report("JOB " + comm->job_id());
    std::vector<int64_t> v(100, ctx.rank + 1);
    comm->allreduce(v.data(), v.data(), v.size(), DataType::i64, RedOp::sum);
    EXPECT_EQ(v[0], 6);
    EXPECT_EQ(v[99], 6);
    comm->barrier();  // rank 0 serves the store: keep it up until everyone is done
  }, opts);
  EXPECT_TRUE(all_ok(results));
  // Every rank agreed on one job id.
  std::vector<std::string> ids;
  for (const auto& r : results) {
    for (const auto& line : r.reports) {
      if (line.rfind("JOB ", 0) == 0) ids.push_back(line.substr(4));
    }
  }
  ASSERT_EQ(ids.size(), 3u);
  EXPECT_EQ(ids[0], ids[1]);
  EXPECT_EQ(ids[0], ids[2]);
  expect_no_leftover_segments(ids[0]);
}

}  // namespace
}  // namespace hoop::test
