// Surviving a dead rank without a restart: revoke, shrink and agree on N = 2..8 ranks over
// shared memory and TCP, with ranks killed (SIGKILL) before, during and between operations.
// Every surviving rank checks its results exactly; the killed rank's exit is checked too.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <ostream>
#include <numeric>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "hoop/communicator.h"
#include "hoop/error.h"
#include "support/spawn.h"
#include "support/store_sync.h"
#include "support/test_scale.h"

namespace hoop::test {
namespace {

using namespace std::chrono_literals;

struct SurviveParam {
  int nranks;
  const char* transport;
};

void PrintTo(const SurviveParam& p, std::ostream* os) { *os << p.nranks << " ranks over " << p.transport; }

std::string param_name(const ::testing::TestParamInfo<SurviveParam>& info) {
  return std::string(info.param.transport) + "_" + std::to_string(info.param.nranks) + "ranks";
}

CommOptions options(const SurviveParam& p) {
  CommOptions o;
  o.timeout = 8s;
  o.transport = p.transport;
  return o;
}

[[noreturn]] void die() {
  ::kill(::getpid(), SIGKILL);
  for (;;) ::pause();
}

// An exact AllReduce on `comm`: every rank contributes (its rank + 1) * (i + 1).
void expect_exact_allreduce(Communicator& comm, size_t count) {
  std::vector<int64_t> v(count);
  for (size_t i = 0; i < count; ++i) v[i] = (comm.rank() + 1) * static_cast<int64_t>(i + 1);
  comm.allreduce(v.data(), v.data(), count, DataType::i64, RedOp::sum);
  const int64_t n = comm.size();
  for (size_t i = 0; i < count; ++i) {
    ASSERT_EQ(v[i], n * (n + 1) / 2 * static_cast<int64_t>(i + 1)) << "element " << i << " on rank " << comm.rank();
  }
}

void expect_victim_killed(const std::vector<RankResult>& results, int victim) {
  for (const auto& r : results) {
    if (r.rank == victim) {
      EXPECT_EQ(r.signal, SIGKILL) << "rank " << victim << " was to be killed";
    } else {
      EXPECT_TRUE(r.ok()) << "survivor rank " << r.rank << " exited " << r.exit_code << " (signal " << r.signal << ")";
    }
  }
}

class Survive : public ::testing::TestWithParam<SurviveParam> {};

// A revoke by one rank fails the others' pending operation (they wait for the revoker, which
// never joins) and every later one with `revoked`, within a second; shrink then keeps them all.
TEST_P(Survive, RevokeFailsPendingAndLaterOperationsThenShrinkKeepsEveryone) {
  const SurviveParam p = GetParam();
  auto results = run_ranks(p.nranks, [&](RankContext& ctx) {
    auto comm = ctx.make_comm(options(p));
    auto store = ctx.store();
    expect_exact_allreduce(*comm, 1000);
    const int revoker = comm->size() - 1;
    if (comm->rank() == revoker) {
      await(*store, "waiting", comm->size() - 1);
      std::this_thread::sleep_for(200ms);  // the others are inside their allreduce
      comm->revoke("the test says so");
      EXPECT_TRUE(comm->revoked());
    } else {
      arrive(*store, "waiting");
      std::vector<float> v(1 << 16, 1.0f);
      try {
        comm->allreduce(v.data(), v.data(), v.size(), DataType::f32, RedOp::sum);
        ADD_FAILURE() << "an allreduce the revoker never joined succeeded";
      } catch (const Error& e) {
        EXPECT_EQ(e.code(), ErrorCode::revoked) << e.what();
        EXPECT_NE(std::string(e.what()).find("rank " + std::to_string(revoker) + " revoked the communicator: the test says so"),
                  std::string::npos)
            << e.what();
      }
      EXPECT_TRUE(comm->revoked());
    }
    // Later operations, collective and point-to-point, fail at once.
    const auto start = std::chrono::steady_clock::now();
    try {
      comm->barrier();
      ADD_FAILURE() << "a barrier on a revoked communicator succeeded";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::revoked) << e.what();
    }
    if (comm->size() > 1) {
      int x = 0;
      try {
        if (comm->rank() == 0) comm->send(&x, 1, DataType::i32, 1);
        else comm->recv(&x, 1, DataType::i32, 0);
        ADD_FAILURE() << "point-to-point on a revoked communicator succeeded";
      } catch (const Error& e) {
        EXPECT_EQ(e.code(), ErrorCode::revoked) << e.what();
      }
    }
    EXPECT_LT(seconds_since(start), wall_bound(1.0));
    auto next = comm->shrink();
    ASSERT_TRUE(next);
    EXPECT_EQ(next->size(), comm->size());
    EXPECT_EQ(next->rank(), comm->rank());
    expect_exact_allreduce(*next, 1001);
  }, launcher_cleanup());
  EXPECT_TRUE(all_ok(results));
}

// The revoke reaches members that are not waiting on the revoker at all, within a second.
TEST_P(Survive, RevokeReachesIdleMembersWithinASecond) {
  const SurviveParam p = GetParam();
  auto results = run_ranks(p.nranks, [&](RankContext& ctx) {
    auto comm = ctx.make_comm(options(p));
    auto store = ctx.store();
    expect_exact_allreduce(*comm, 7);
    arrive(*store, "ready");
    await(*store, "ready", comm->size());
    if (comm->rank() == 0) {
      store->set("revoke-at", std::vector<uint8_t>{});
      comm->revoke("idle test");
    } else {
      store->wait({"revoke-at"});
      const auto start = std::chrono::steady_clock::now();
      while (!comm->revoked() && seconds_since(start) < 5.0) std::this_thread::sleep_for(5ms);
      EXPECT_TRUE(comm->revoked());
      EXPECT_LT(seconds_since(start), wall_bound(1.0)) << "the revoke took too long to arrive";
    }
  }, launcher_cleanup());
  EXPECT_TRUE(all_ok(results));
}

// A rank killed between two operations: the survivors' next AllReduce fails naming it, shrink
// gives them a communicator of the others, numbered in order, and it computes exactly.
TEST_P(Survive, ShrinkAfterAKilledRank) {
  const SurviveParam p = GetParam();
  const int victim = p.nranks / 2;
  auto results = run_ranks(p.nranks, [&](RankContext& ctx) {
    auto comm = ctx.make_comm(options(p));
    expect_exact_allreduce(*comm, 64);
    if (comm->rank() == victim) die();
    std::vector<int64_t> v(1 << 14, 1);
    try {
      comm->allreduce(v.data(), v.data(), v.size(), DataType::i64, RedOp::sum);
      ADD_FAILURE() << "an allreduce with a dead member succeeded";
    } catch (const Error& e) {
      EXPECT_TRUE(e.code() == ErrorCode::peer_failure || e.code() == ErrorCode::timeout) << e.what();
      EXPECT_EQ(e.failed_ranks(), std::vector<int>{victim}) << e.what();
    }
    const auto start = std::chrono::steady_clock::now();
    auto next = comm->shrink();
    ctx.report("shrink took " + std::to_string(seconds_since(start)) + " s");
    ASSERT_TRUE(next);
    EXPECT_EQ(next->size(), comm->size() - 1);
    EXPECT_EQ(next->rank(), comm->rank() < victim ? comm->rank() : comm->rank() - 1);
    EXPECT_LT(seconds_since(start), wall_bound(2.0));
    expect_exact_allreduce(*next, 1 << 12);
  }, launcher_cleanup());
  expect_victim_killed(results, victim);
  for (const auto& r : results) {
    for (const auto& line : r.reports) std::cout << "  rank " << r.rank << ": " << line << "\n";
  }
}

// A rank dies while the others are in a large ring AllReduce: no survivor reports a result as
// done unless it is exact; after shrink the survivors go on.
TEST_P(Survive, RankDyingDuringALargeAllReduce) {
  const SurviveParam p = GetParam();
  const int victim = 0;
  auto results = run_ranks(p.nranks, [&](RankContext& ctx) {
    auto comm = ctx.make_comm(options(p));
    constexpr size_t kCount = size_t{1} << 20;  // 8 MiB of i64
    std::vector<int64_t> v(kCount);
    if (comm->rank() == victim) {
      std::thread([] {
        std::this_thread::sleep_for(30ms);
        die();
      }).detach();
    }
    OpOptions o;
    o.algo = "ring";
    for (int iter = 0;; ++iter) {
      std::fill(v.begin(), v.end(), comm->rank() + 1);
      try {
        comm->allreduce(v.data(), v.data(), kCount, DataType::i64, RedOp::sum, o);
      } catch (const Error& e) {
        ctx.report("failed at iteration " + std::to_string(iter) + ": " + e.what());
        break;
      }
      const int64_t want = int64_t{comm->size()} * (comm->size() + 1) / 2;
      ASSERT_TRUE(std::all_of(v.begin(), v.end(), [&](int64_t x) { return x == want; }))
          << "an allreduce reported done with a partial result at iteration " << iter;
      ASSERT_LT(iter, 10000) << "the victim never died";
    }
    auto next = comm->shrink();
    ASSERT_TRUE(next);
    EXPECT_EQ(next->size(), comm->size() - 1);
    expect_exact_allreduce(*next, 4097);
  }, launcher_cleanup());
  expect_victim_killed(results, victim);
}

// Repeated shrinks, one death per round, down to one rank.
TEST_P(Survive, RepeatedShrinksDownToOneRank) {
  const SurviveParam p = GetParam();
  auto results = run_ranks(p.nranks, [&](RankContext& ctx) {
    std::shared_ptr<Communicator> comm = ctx.make_comm(options(p));
    while (comm->size() > 1) {
      expect_exact_allreduce(*comm, 333);
      // The last rank of each round dies: world ranks p.nranks-1, p.nranks-2, ...
      if (comm->rank() == comm->size() - 1) die();
      try {
        comm->barrier();
        std::vector<int> x(100, 1);
        comm->allreduce(x.data(), x.data(), x.size(), DataType::i32, RedOp::sum);
        ADD_FAILURE() << "operations with a dead member succeeded";
      } catch (const Error& e) {
        EXPECT_NE(e.code(), ErrorCode::invalid_argument) << e.what();
      }
      const int before = comm->size();
      comm = comm->shrink();
      ASSERT_EQ(comm->size(), before - 1);
    }
    EXPECT_EQ(comm->rank(), 0);
    expect_exact_allreduce(*comm, 5);
  }, launcher_cleanup());
  for (const auto& r : results) {
    if (r.rank == 0) EXPECT_TRUE(r.ok()) << "rank 0 exited " << r.exit_code;
    else EXPECT_EQ(r.signal, SIGKILL) << "rank " << r.rank;
  }
}

// agree: the AND of the votes, the same on every member; a dead member is named and takes no
// part, and the live members still agree.
TEST_P(Survive, AgreeIsTheSameOnEveryMemberAndNamesTheDead) {
  const SurviveParam p = GetParam();
  const int victim = p.nranks - 1;
  auto results = run_ranks(p.nranks, [&](RankContext& ctx) {
    auto comm = ctx.make_comm(options(p));
    Agreement all_yes = comm->agree(true);
    EXPECT_TRUE(all_yes.value);
    EXPECT_TRUE(all_yes.failed_ranks.empty());
    Agreement one_no = comm->agree(comm->rank() != 0);
    EXPECT_FALSE(one_no.value);
    EXPECT_TRUE(one_no.failed_ranks.empty());
    if (comm->rank() == victim) die();
    const auto start = std::chrono::steady_clock::now();
    Agreement with_dead = comm->agree(true);
    EXPECT_TRUE(with_dead.value);
    EXPECT_EQ(with_dead.failed_ranks, std::vector<int>{victim});
    EXPECT_LT(seconds_since(start), wall_bound(2.0));
  }, launcher_cleanup());
  expect_victim_killed(results, victim);
}

// A member that dies half-way through its arrival in agree (counted in, its arrival not
// announced) when it is the last but one: the others still decide at once, without it.
TEST_P(Survive, AgreeDecidesWhenAMemberDiesHalfWayThroughArriving) {
  const SurviveParam p = GetParam();
  const int victim = p.nranks - 2, last = p.nranks - 1;
  auto results = run_ranks(p.nranks, [&](RankContext& ctx) {
    auto comm = ctx.make_comm(options(p));
    auto store = ctx.store();
    const std::string prefix = "hoop/c0/agree1";  // the world communicator's first agreement
    const auto arrivals_reach = [&](int64_t n) {
      while (store->add(prefix + "/n", 0) < n) std::this_thread::sleep_for(2ms);
    };
    if (comm->rank() == victim) {
      arrivals_reach(victim);
      store->set(prefix + "/v/" + std::to_string(victim), std::vector<uint8_t>{'1'});
      store->add(prefix + "/n", 1);
      die();
    }
    if (comm->rank() == last) arrivals_reach(victim + 1);
    const auto start = std::chrono::steady_clock::now();
    const Agreement a = comm->agree(true);
    // Its vote counts if it was still alive when the others decided, else it is named dead.
    EXPECT_TRUE(a.value);
    EXPECT_TRUE(a.failed_ranks.empty() || a.failed_ranks == std::vector<int>{victim});
    EXPECT_LT(seconds_since(start), wall_bound(2.0));
  }, launcher_cleanup());
  expect_victim_killed(results, p.nranks - 2);
}

// A member that dies while the others shrink: they wait for it (it is alive when they start),
// see it die, and settle without it.
TEST_P(Survive, RankDyingDuringShrink) {
  const SurviveParam p = GetParam();
  const int victim = 0;
  auto results = run_ranks(p.nranks, [&](RankContext& ctx) {
    auto comm = ctx.make_comm(options(p));
    auto store = ctx.store();
    expect_exact_allreduce(*comm, 10);
    arrive(*store, "allreduce-done");
    await(*store, "allreduce-done", comm->size());
    if (comm->rank() == victim) {
      await(*store, "in-shrink", comm->size() - 1);
      std::this_thread::sleep_for(300ms);
      die();
    }
    comm->revoke("a member is about to die");
    arrive(*store, "in-shrink");
    const auto start = std::chrono::steady_clock::now();
    auto next = comm->shrink();
    ASSERT_TRUE(next);
    EXPECT_EQ(next->size(), comm->size() - 1);
    EXPECT_EQ(next->rank(), comm->rank() - 1);
    EXPECT_LT(seconds_since(start), wall_bound(3.0));
    expect_exact_allreduce(*next, 77);
  }, launcher_cleanup());
  expect_victim_killed(results, victim);
}

// The first `members` ranks form a communicator; the others join it through grow().
std::shared_ptr<Communicator> member_comm(const RankContext& ctx, int members, const SurviveParam& p) {
  InitParams ip = ctx.init_params();
  ip.size = members;
  return Communicator::create(ip, options(p));
}

std::shared_ptr<Communicator> join(const RankContext& ctx, const SurviveParam& p) {
  JoinParams jp;
  jp.store = ctx.store();
  jp.job_id = ctx.job_id;
  CommOptions o = options(p);
  // A newcomer waits from its start for the members to start, compute and grow: under a
  // sanitizer, 8 members on 2 cores take most of the 8 s to get there.
  o.timeout = std::chrono::duration_cast<std::chrono::milliseconds>(*o.timeout * kSanitizerTimeFactor);
  return Communicator::join(jp, o);
}

// Grow by two newcomers: everyone gets the same communicator of N + 2 ranks, the members in
// their old places, and it computes exactly.
TEST_P(Survive, GrowAddsNewcomersAfterTheMembers) {
  const SurviveParam p = GetParam();
  const int members = p.nranks;
  auto results = run_ranks(members + 2, [&](RankContext& ctx) {
    std::shared_ptr<Communicator> comm;
    if (ctx.rank < members) {
      auto mine = member_comm(ctx, members, p);
      expect_exact_allreduce(*mine, 100);
      comm = mine->grow(2);
      EXPECT_EQ(comm->rank(), mine->rank());
    } else {
      comm = join(ctx, p);
      EXPECT_GE(comm->rank(), members);
    }
    ASSERT_EQ(comm->size(), members + 2);
    expect_exact_allreduce(*comm, 1 << 12);
    std::vector<int> token(1, comm->rank() == 0 ? 42 : 0);
    comm->broadcast(token.data(), token.data(), 1, DataType::i32, 0);
    EXPECT_EQ(token[0], 42);
  }, launcher_cleanup());
  EXPECT_TRUE(all_ok(results));
}

// A member dies, the others shrink, and a replacement joins: the group is back to N.
TEST_P(Survive, AReplacementJoinsAfterAShrink) {
  const SurviveParam p = GetParam();
  const int members = p.nranks;
  const int victim = members - 1;
  auto results = run_ranks(members + 1, [&](RankContext& ctx) {
    auto store = ctx.store();
    std::shared_ptr<Communicator> comm;
    if (ctx.rank < members) {
      auto first = member_comm(ctx, members, p);
      expect_exact_allreduce(*first, 10);
      if (ctx.rank == victim) die();
      try {
        expect_exact_allreduce(*first, 1000);
        ADD_FAILURE() << "an allreduce with a dead member succeeded";
      } catch (const Error& e) {
        EXPECT_EQ(e.failed_ranks(), std::vector<int>{victim}) << e.what();
      }
      auto survivors = first->shrink();
      ASSERT_EQ(survivors->size(), members - 1);
      if (survivors->rank() == 0) store->set("shrunk", std::vector<uint8_t>{});
      comm = survivors->grow(1);
    } else {
      store->wait({"shrunk"});  // the replacement starts once the death is dealt with
      comm = join(ctx, p);
      EXPECT_EQ(comm->rank(), members - 1);
    }
    ASSERT_EQ(comm->size(), members);
    expect_exact_allreduce(*comm, 4099);
  }, launcher_cleanup());
  for (const auto& r : results) {
    if (r.rank == victim) {
      EXPECT_EQ(r.signal, SIGKILL);
    } else {
      EXPECT_TRUE(r.ok()) << "rank " << r.rank << " exited " << r.exit_code;
    }
  }
}

// A newcomer that dies as soon as it has joined: the grown communicator's first operation fails
// on every member, naming it, and a shrink brings them back to the old size.
TEST_P(Survive, ANewcomerDyingDuringGrowIsShrunkAway) {
  const SurviveParam p = GetParam();
  const int members = p.nranks;
  auto results = run_ranks(members + 1, [&](RankContext& ctx) {
    if (ctx.rank == members) {
      join(ctx, p);
      die();
    }
    auto mine = member_comm(ctx, members, p);
    auto grown = mine->grow(1);
    ASSERT_EQ(grown->size(), members + 1);
    try {
      expect_exact_allreduce(*grown, 1 << 12);
      ADD_FAILURE() << "an allreduce with the dead newcomer succeeded";
    } catch (const Error& e) {
      EXPECT_EQ(e.failed_ranks(), std::vector<int>{members}) << e.what();
    }
    auto back = grown->shrink();
    ASSERT_EQ(back->size(), members);
    EXPECT_EQ(back->rank(), mine->rank());
    expect_exact_allreduce(*back, 555);
  }, launcher_cleanup());
  for (const auto& r : results) {
    if (r.rank == members) {
      EXPECT_EQ(r.signal, SIGKILL);
    } else {
      EXPECT_TRUE(r.ok()) << "member " << r.rank << " exited " << r.exit_code;
    }
  }
}

// A grow whose newcomer never comes is a timeout naming the tickets, not a hang; the members'
// communicator is still usable.
TEST_P(Survive, GrowWithoutNewcomersTimesOut) {
  const SurviveParam p = GetParam();
  auto results = run_ranks(p.nranks, [&](RankContext& ctx) {
    CommOptions o = options(p);
    // Long enough for 8 ranks to connect lazily on 2 cores: the grow's own broadcast must not
    // be what times out.
    const double timeout_s = 1.5 * kSanitizerTimeFactor;
    o.timeout = std::chrono::milliseconds(static_cast<int64_t>(timeout_s * 1000));
    auto comm = ctx.make_comm(o);
    const auto start = std::chrono::steady_clock::now();
    try {
      comm->grow(1);
      ADD_FAILURE() << "grow returned without a newcomer";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::timeout) << e.what();
      EXPECT_NE(std::string(e.what()).find("did not all arrive"), std::string::npos) << e.what();
    }
    EXPECT_LT(seconds_since(start), timeout_s + wall_bound(3.5));
    expect_exact_allreduce(*comm, 17);
  }, launcher_cleanup());
  EXPECT_TRUE(all_ok(results));
}

std::vector<SurviveParam> survive_params() {
  std::vector<SurviveParam> out;
  for (const char* t : {"shm", "tcp"}) {
    for (int n : {2, 3, 5, 8}) out.push_back({n, t});
  }
  return out;
}

// A rank that fails before it ever linked to a peer cannot poison that link: the peer, stalled,
// finds the failure recorded in the store and gives up within a second, not at its timeout.
// Rank 1 waits in a broadcast from rank 0, which never comes, and times out after 200 ms;
// rank 2 waits in a ring AllReduce for rank 1, which never joins it.
TEST(SurviveStalled, AFailureRecordedElsewhereEndsAStalledStep) {
  for (const char* transport : {"shm", "tcp"}) {
    SCOPED_TRACE(transport);
    auto results = run_ranks(3, [&](RankContext& ctx) {
      auto comm = ctx.make_comm(options(SurviveParam{3, transport}));
      auto store = ctx.store();
      std::vector<int64_t> v(1000, comm->rank());
      if (comm->rank() == 0) {
        await(*store, "done", 1);  // joins nothing until rank 2 has given up
        return;
      }
      OpOptions o;
      const auto start = std::chrono::steady_clock::now();
      try {
        if (comm->rank() == 1) {
          o.algo = "naive";
          o.timeout = 200ms;
          comm->broadcast(v.data(), v.data(), v.size(), DataType::i64, 0, o);
        } else {
          o.algo = "ring";
          comm->allreduce(v.data(), v.data(), v.size(), DataType::i64, RedOp::sum, o);
        }
        ADD_FAILURE() << "an operation rank " << (comm->rank() == 1 ? 0 : 1) << " never joined succeeded";
      } catch (const Error& e) {
        if (comm->rank() == 1) {
          EXPECT_EQ(e.code(), ErrorCode::timeout) << e.what();
        } else {
          EXPECT_EQ(e.code(), ErrorCode::peer_failure) << e.what();
          // The rank it waits on: 1 in the step, or 0 whose connection a TCP link waits for first.
          EXPECT_TRUE(e.peer() == 1 || e.peer() == 0) << e.what();
          EXPECT_NE(std::string(e.what()).find("first failure in this communicator: hoop rank 1: broadcast"),
                    std::string::npos)
              << e.what();
          EXPECT_LT(seconds_since(start), wall_bound(2.0)) << e.what();
          arrive(*store, "done");
        }
      }
    }, launcher_cleanup());
    EXPECT_TRUE(all_ok(results));
  }
}

INSTANTIATE_TEST_SUITE_P(Ranks, Survive, ::testing::ValuesIn(survive_params()), param_name);

}  // namespace
}  // namespace hoop::test
