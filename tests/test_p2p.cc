// Point-to-point with MPI's and NCCL's semantics, over shared memory and over TCP: patterns
// that deadlock when sends and receives run in issue order (receives posted before sends around
// a ring, everyone sending large messages first, all-to-all, a random permutation), with and
// without group calls; tags, any source, any tag and the order of messages; short receives;
// and the failures: a longer message, a receive that never matches, a dead peer, abort().
#include <gtest/gtest.h>
#include <signal.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <numeric>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "hoop/communicator.h"
#include "hoop/error.h"
#include "support/spawn.h"
#include "support/test_scale.h"
#include "transport/shm/shm_transport.h"

namespace hoop::test {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

// Larger than a shared-memory ring (4 MiB) and than the socket buffers.
constexpr size_t kLarge = (size_t{9} << 20) / sizeof(int32_t);

int32_t value(size_t i, int from, int to) { return static_cast<int32_t>(i * 31 + from * 7 + to); }

std::vector<int32_t> message(size_t count, int from, int to) {
  std::vector<int32_t> v(count);
  for (size_t i = 0; i < count; ++i) v[i] = value(i, from, to);
  return v;
}

void expect_message(const std::vector<int32_t>& got, size_t count, int from, int to) {
  ASSERT_GE(got.size(), count);
  for (size_t i = 0; i < count; ++i) {
    if (got[i] != value(i, from, to)) {
      ADD_FAILURE() << "element " << i << " of " << count << " from rank " << from << " to " << to
                    << ": " << got[i];
      return;
    }
  }
}

class P2pTest : public ::testing::TestWithParam<const char*> {
 protected:
  // Runs body on n ranks over the transport of the test's parameter; checks /dev/shm after.
  void run(int n, const std::function<void(RankContext&, Communicator&)>& body) {
    SpawnOptions opts;
    opts.timeout = 60s;
    if (std::string(GetParam()) == "tcp") opts.env.emplace_back("HOOP_TRANSPORT", "tcp");
    auto results = run_ranks(n, [&](RankContext& ctx) {
      CommOptions copts;
      copts.timeout = wall_bound(10s);  // a deadlock fails in 10 s
      auto comm = ctx.make_comm(copts);
      ctx.report(comm->job_id());
      body(ctx, *comm);
    }, opts);
    EXPECT_TRUE(all_ok(results));
    ASSERT_FALSE(results.empty() || results[0].reports.empty());
    const std::string job = results[0].reports[0];
    EXPECT_EQ(job_segments(job), std::vector<std::string>{}) << "left in /dev/shm";
    transport::shm_remove_job_segments(job);
  }
};

TEST_P(P2pTest, RingWithReceivesPostedBeforeSends) {
  run(4, [](RankContext&, Communicator& comm) {
    const int r = comm.rank(), n = comm.size(), next = (r + 1) % n, prev = (r + n - 1) % n;
    const auto out = message(kLarge, r, next);
    std::vector<int32_t> in(kLarge, -1);
    Work got = comm.recv_async(in.data(), kLarge, DataType::i32, prev);
    Work put = comm.send_async(out.data(), kLarge, DataType::i32, next);
    got.wait();
    put.wait();
    expect_message(in, kLarge, prev, r);
    EXPECT_EQ(got.status().source, prev);
    EXPECT_EQ(got.status().count, kLarge);
  });
}

TEST_P(P2pTest, PairsBothSendLargeMessagesFirst) {
  // Both blocking sends complete: each rank's engine buffers what its peer sends meanwhile.
  run(4, [](RankContext&, Communicator& comm) {
    const int r = comm.rank(), partner = r ^ 1;
    const auto out = message(kLarge, r, partner);
    std::vector<int32_t> in(kLarge, -1);
    comm.send(out.data(), kLarge, DataType::i32, partner);
    const RecvStatus st = comm.recv(in.data(), kLarge, DataType::i32, partner);
    expect_message(in, kLarge, partner, r);
    EXPECT_EQ(st.source, partner);
    EXPECT_EQ(st.count, kLarge);
  });
}

// Every rank sends a block to every other one: with handles, or as one group of blocking calls.
void all_to_all(Communicator& comm, bool grouped) {
  const int r = comm.rank(), n = comm.size();
  const size_t count = (size_t{5} << 20) / sizeof(int32_t);
  std::vector<std::vector<int32_t>> out(static_cast<size_t>(n)), in(static_cast<size_t>(n));
  std::vector<Work> works;
  if (grouped) comm.group_start();
  for (int q = 0; q < n; ++q) {
    if (q == r) continue;
    out[static_cast<size_t>(q)] = message(count, r, q);
    in[static_cast<size_t>(q)].assign(count, -1);
    if (grouped) {
      comm.send(out[static_cast<size_t>(q)].data(), count, DataType::i32, q);
      comm.recv(in[static_cast<size_t>(q)].data(), count, DataType::i32, q);
    } else {
      works.push_back(comm.send_async(out[static_cast<size_t>(q)].data(), count, DataType::i32, q));
      works.push_back(comm.recv_async(in[static_cast<size_t>(q)].data(), count, DataType::i32, q));
    }
  }
  if (grouped) comm.group_end();
  for (auto& w : works) w.wait();
  for (int q = 0; q < n; ++q) {
    if (q != r) expect_message(in[static_cast<size_t>(q)], count, q, r);
  }
}

TEST_P(P2pTest, AllToAllWithHandles) {
  run(4, [](RankContext&, Communicator& comm) { all_to_all(comm, false); });
}

TEST_P(P2pTest, AllToAllInAGroup) {
  run(4, [](RankContext&, Communicator& comm) { all_to_all(comm, true); });
}

// Over a link the calibration found shaped, the TCP links take small buffers
// (tuner::shaped_link_window): a sender's last megabytes are still on their way when its
// sends have returned and it has exited, closing the socket its peers send to it on. Their
// receives of its data must go on regardless. The model is a calibration's, read from its
// cache after editing it to say the link sustains 100 MB/s.
TEST(P2pOverAShapedLink, ASenderThatExitedStillDeliversWhatItSent) {
  char folder[] = "/tmp/hoop-p2p-shaped-XXXXXX";
  ASSERT_NE(::mkdtemp(folder), nullptr);
  const std::filesystem::path cache(folder);
  SpawnOptions opts;
  opts.timeout = 60s;
  opts.env = {{"HOOP_TRANSPORT", "tcp"}, {"XDG_CACHE_HOME", cache.string()}, {"HOOP_CALIBRATE", "force"}};
  ASSERT_TRUE(all_ok(run_ranks(4, [](RankContext& ctx) { ctx.make_comm(); }, opts)));
  int edited = 0;
  for (const auto& entry : std::filesystem::directory_iterator(cache / "hoop")) {
    std::ifstream in(entry.path());
    nlohmann::json model = nlohmann::json::parse(in);
    in.close();
    model["model"]["tcp"]["sustained_Bps"] = 100e6;
    std::ofstream(entry.path()) << model.dump();
    ++edited;
  }
  ASSERT_GT(edited, 0);
  opts.env.back().second = "1";  // the cached model, as edited
  auto results = run_ranks(4, [](RankContext& ctx) {
    CommOptions copts;
    copts.timeout = wall_bound(10s);
    auto comm = ctx.make_comm(copts);
    ctx.report(comm->job_id());
    all_to_all(*comm, false);
  }, opts);
  EXPECT_TRUE(all_ok(results));
  if (!results.empty() && !results[0].reports.empty()) transport::shm_remove_job_segments(results[0].reports[0]);
  std::filesystem::remove_all(cache);
}

TEST_P(P2pTest, RandomPermutationsInGroupsAndWithout) {
  run(4, [](RankContext&, Communicator& comm) {
    const int r = comm.rank(), n = comm.size();
    std::mt19937 rng(1234);  // the same permutations on every rank
    std::vector<int> perm(static_cast<size_t>(n));
    for (int round = 0; round < 6; ++round) {
      std::iota(perm.begin(), perm.end(), 0);
      std::shuffle(perm.begin(), perm.end(), rng);
      const int to = perm[static_cast<size_t>(r)];
      const int from = static_cast<int>(std::find(perm.begin(), perm.end(), r) - perm.begin());
      if (to == r) continue;  // a fixed point exchanges nothing
      const size_t count = round % 2 ? kLarge : 1000 + static_cast<size_t>(round);
      const auto out = message(count, r, to);
      std::vector<int32_t> in(count, -1);
      if (round < 3) {
        GroupScope group(comm);
        comm.recv(in.data(), count, DataType::i32, from);
        comm.send(out.data(), count, DataType::i32, to);
        group.end();
      } else {
        Work put = comm.send_async(out.data(), count, DataType::i32, to);
        comm.recv(in.data(), count, DataType::i32, from);
        put.wait();
      }
      expect_message(in, count, from, r);
    }
  });
}

TEST_P(P2pTest, TagsReceivedOutOfOrder) {
  // Tag 1 (larger than the link) then tag 2; the receiver takes tag 2 first, so the first
  // message waits in its buffer.
  run(2, [](RankContext&, Communicator& comm) {
    if (comm.rank() == 0) {
      const auto one = message(kLarge, 0, 1), two = message(100, 0, 2);
      comm.send(one.data(), kLarge, DataType::i32, 1, /*tag=*/1);
      comm.send(two.data(), 100, DataType::i32, 1, /*tag=*/2);
    } else {
      std::vector<int32_t> one(kLarge, -1), two(100, -1);
      const RecvStatus st2 = comm.recv(two.data(), 100, DataType::i32, 0, /*tag=*/2);
      const RecvStatus st1 = comm.recv(one.data(), kLarge, DataType::i32, 0, /*tag=*/1);
      EXPECT_EQ(st2.tag, 2);
      EXPECT_EQ(st1.tag, 1);
      expect_message(two, 100, 0, 2);
      expect_message(one, kLarge, 0, 1);
    }
  });
}

TEST_P(P2pTest, AnySourceReturnsTheSender) {
  run(4, [](RankContext&, Communicator& comm) {
    const int r = comm.rank(), n = comm.size();
    if (r != 0) {
      const size_t count = 10 * static_cast<size_t>(r);
      const auto out = message(count, r, 0);
      comm.send(out.data(), count, DataType::i32, 0, /*tag=*/r + 100);
      return;
    }
    std::vector<bool> seen(static_cast<size_t>(n), false);
    for (int k = 1; k < n; ++k) {
      std::vector<int32_t> in(100, -1);
      const RecvStatus st = comm.recv(in.data(), in.size(), DataType::i32, kAnySource, kAnyTag);
      ASSERT_GT(st.source, 0);
      ASSERT_LT(st.source, n);
      EXPECT_FALSE(seen[static_cast<size_t>(st.source)]) << "rank " << st.source << " twice";
      seen[static_cast<size_t>(st.source)] = true;
      EXPECT_EQ(st.tag, st.source + 100);
      EXPECT_EQ(st.count, 10 * static_cast<size_t>(st.source));
      expect_message(in, st.count, st.source, 0);
    }
  });
}

TEST_P(P2pTest, MessagesOfOneSenderAndTagDoNotOvertake) {
  run(2, [](RankContext&, Communicator& comm) {
    constexpr int kMessages = 30;
    if (comm.rank() == 0) {
      for (int i = 0; i < kMessages; ++i) {
        const int32_t v = i;
        comm.send(&v, 1, DataType::i32, 1, /*tag=*/i % 3);
      }
      return;
    }
    // Tag 2 first, in order; then the rest with any tag, still in send order.
    for (int i = 2; i < kMessages; i += 3) {
      int32_t v = -1;
      comm.recv(&v, 1, DataType::i32, 0, 2);
      EXPECT_EQ(v, i);
    }
    for (int i = 0; i < kMessages; ++i) {
      if (i % 3 == 2) continue;
      int32_t v = -1;
      const RecvStatus st = comm.recv(&v, 1, DataType::i32, kAnySource, kAnyTag);
      EXPECT_EQ(v, i);
      EXPECT_EQ(st.tag, i % 3);
    }
  });
}

TEST_P(P2pTest, AShorterMessageIsReceivedWithItsCount) {
  run(2, [](RankContext&, Communicator& comm) {
    if (comm.rank() == 0) {
      const auto out = message(100, 0, 1);
      comm.send(out.data(), 100, DataType::i32, 1);
      Work sent = comm.send_async(out.data(), 100, DataType::i32, 1, 5);
      sent.wait();
      EXPECT_THROW(sent.status(), Error);  // a send has no status
    } else {
      std::vector<int32_t> in(500, -1);
      EXPECT_EQ(comm.recv(in.data(), 500, DataType::i32, 0).count, 100u);
      expect_message(in, 100, 0, 1);
      EXPECT_EQ(in[100], -1);
      Work w = comm.recv_async(in.data(), 500, DataType::i32, 0, 5);
      w.wait();
      EXPECT_EQ(w.status().count, 100u);
      EXPECT_EQ(w.status().tag, 5);
    }
  });
}

// A receive that nothing matches, a send that nobody takes (its receiver busy elsewhere):
// timeouts naming op, sequence, peer and tag; collectives go on working.
TEST_P(P2pTest, UnmatchedCallsTimeOut) {
  run(2, [](RankContext& ctx, Communicator& comm) {
    OpOptions quick;
    quick.timeout = 500ms;
    const auto expect_timeout = [&](const std::function<void()>& call, const char* op, const char* tag) {
      const auto start = Clock::now();
      try {
        call();
        ADD_FAILURE() << "an unmatched " << op << " finished";
      } catch (const Error& e) {
        EXPECT_EQ(e.code(), ErrorCode::timeout) << e.what();
        EXPECT_EQ(e.op(), op) << e.what();
        EXPECT_EQ(e.peer(), 1 - ctx.rank) << e.what();
        EXPECT_GE(e.seq(), 1u) << e.what();
        EXPECT_NE(std::string(e.what()).find(tag), std::string::npos) << e.what();
      }
      EXPECT_LT(seconds_since(start), wall_bound(5.0));
    };
    if (ctx.rank == 0) {
      std::vector<int32_t> in(10);
      expect_timeout([&] { comm.recv(in.data(), 10, DataType::i32, 1, /*tag=*/7, quick); }, "recv", "tag 7");
    }
    comm.barrier();
    if (ctx.rank == 1) {
      const auto out = message(kLarge, 1, 0);  // more than the link holds
      expect_timeout([&] { comm.send(out.data(), kLarge, DataType::i32, 0, /*tag=*/8, quick); }, "send", "tag 8");
    }
    comm.barrier();
  });
}

TEST_P(P2pTest, AbortUnblocksAPendingReceive) {
  run(2, [](RankContext& ctx, Communicator& comm) {
    if (ctx.rank == 1) {
      std::this_thread::sleep_for(1s);
      return;
    }
    std::thread aborter([&] {
      std::this_thread::sleep_for(200ms);
      comm.abort("the test gives up");
    });
    std::vector<int32_t> in(10);
    Work pending = comm.recv_async(in.data(), 10, DataType::i32, 1);
    try {
      comm.recv(in.data(), 10, DataType::i32, kAnySource);
      ADD_FAILURE() << "the receive finished";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::aborted) << e.what();
    }
    EXPECT_THROW(pending.wait(), Error);
    aborter.join();
    EXPECT_THROW(comm.send(in.data(), 10, DataType::i32, 1), Error);
    EXPECT_THROW(comm.barrier(), Error);
  });
}

TEST_P(P2pTest, ADeadPeerFailsAPendingReceiveWithinTheTimeout) {
  SpawnOptions opts;
  opts.timeout = 60s;
  if (std::string(GetParam()) == "tcp") opts.env.emplace_back("HOOP_TRANSPORT", "tcp");
  auto results = run_ranks(2, [](RankContext& ctx) {
    CommOptions copts;
    copts.timeout = 5s;
    auto comm = ctx.make_comm(copts);
    ctx.report(comm->job_id());
    int32_t v = 1;
    if (ctx.rank == 1) {
      comm->send(&v, 1, DataType::i32, 0);  // connected
      std::this_thread::sleep_for(200ms);
      ::raise(SIGKILL);
    }
    comm->recv(&v, 1, DataType::i32, 1);
    const auto start = Clock::now();
    try {
      comm->recv(&v, 1, DataType::i32, 1);
      ADD_FAILURE() << "received from a dead rank";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::peer_failure) << e.what();
      EXPECT_EQ(e.op(), "recv") << e.what();
      EXPECT_EQ(e.peer(), 1) << e.what();
    }
    EXPECT_LT(seconds_since(start), wall_bound(4.0));
  }, opts);
  ASSERT_EQ(results.size(), 2u);
  EXPECT_TRUE(results[0].ok());
  EXPECT_EQ(results[1].signal, SIGKILL);
  if (!results[0].reports.empty()) transport::shm_remove_job_segments(results[0].reports[0]);
}

TEST_P(P2pTest, NestedGroupsRethrowTheFirstError) {
  run(2, [](RankContext& ctx, Communicator& comm) {
    const int peer = 1 - ctx.rank;
    const auto out = message(kLarge, ctx.rank, peer);
    std::vector<int32_t> in(kLarge, -1);
    comm.group_start();
    comm.group_start();
    comm.send(out.data(), kLarge, DataType::i32, peer);  // both send first: returns at once
    comm.group_end();                                   // inner: nothing waits yet
    comm.recv(in.data(), kLarge, DataType::i32, peer);
    comm.group_end();
    expect_message(in, kLarge, peer, ctx.rank);

    // A group whose receive never matches fails as a whole, with that receive's error.
    OpOptions quick;
    quick.timeout = 300ms;
    comm.group_start();
    comm.send(out.data(), 10, DataType::i32, peer, 1);
    comm.recv(in.data(), 10, DataType::i32, peer, 1);
    comm.recv(in.data(), 10, DataType::i32, peer, 2, quick);  // nobody sends tag 2
    Work group = comm.group_end_async();
    try {
      group.wait();
      ADD_FAILURE() << "the group finished";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::timeout) << e.what();
      EXPECT_NE(std::string(e.what()).find("tag 2"), std::string::npos) << e.what();
    }
    comm.barrier();
  });
}

// Ranks 0 and 1 on one (fake) host, rank 2 on another. Rank 0 sleeps on a receive from rank 1
// (shared memory) while rank 2's blocking send to it waits for rank 0 to take its connection;
// rank 1 sends only once rank 2 has sent to it, after that send. Rank 0 takes connections it
// waits for no receive on while it sleeps on shared memory, or nobody would finish.
TEST(P2pMixedHosts, ATcpSendersFirstMessageReachesARankAsleepOnSharedMemory) {
  SpawnOptions opts;
  opts.timeout = 60s;
  auto results = run_ranks(3, [](RankContext& ctx) {
    ::setenv("HOOP_HOST_ID", ctx.rank < 2 ? "fake-host-a" : "fake-host-b", 1);
    CommOptions copts;
    copts.timeout = wall_bound(10s);  // a deadlock fails in 10 s
    auto comm = ctx.make_comm(copts);
    ctx.report(comm->job_id());
    constexpr size_t kCount = 1000;
    std::vector<int32_t> in(kCount, -1);
    switch (ctx.rank) {
      case 0:
        comm->recv(in.data(), kCount, DataType::i32, 1, 3);
        expect_message(in, kCount, 1, 0);
        comm->recv(in.data(), kCount, DataType::i32, 2, 1);
        expect_message(in, kCount, 2, 0);
        break;
      case 1:
        comm->recv(in.data(), kCount, DataType::i32, 2, 2);
        expect_message(in, kCount, 2, 1);
        comm->send(message(kCount, 1, 0).data(), kCount, DataType::i32, 0, 3);
        break;
      default:
        std::this_thread::sleep_for(50ms);  // rank 0 is asleep by now
        comm->send(message(kCount, 2, 0).data(), kCount, DataType::i32, 0, 1);
        comm->send(message(kCount, 2, 1).data(), kCount, DataType::i32, 1, 2);
        break;
    }
    comm->barrier();
  }, opts);
  EXPECT_TRUE(all_ok(results));
  if (!results.empty() && !results[0].reports.empty()) transport::shm_remove_job_segments(results[0].reports[0]);
}

INSTANTIATE_TEST_SUITE_P(P2p, P2pTest, ::testing::Values("shm", "tcp"),
                         [](const ::testing::TestParamInfo<const char*>& p) { return std::string(p.param); });

}  // namespace
}  // namespace hoop::test
