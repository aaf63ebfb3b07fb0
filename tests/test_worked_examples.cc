// The worked examples of the design brief (1.1), kept as tests: small collectives with known
// answers, the ring's chunk ownership shown on its schedule without any network, and the ring
// AllReduce's traffic of exactly 2(N-1)/N * M bytes per rank measured on real links.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <deque>
#include <iostream>
#include <map>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "hoop/communicator.h"
#include "hoop/error.h"
#include "hoop/types.h"
#include "schedule/schedule.h"
#include "support/spawn.h"

namespace hoop::test {
namespace {

using schedule::Action;
using schedule::ActionKind;
using schedule::Buf;
using schedule::CollectiveDesc;
using schedule::RankSchedule;

// ---------------------------------------------------------------------------------------------
// Small collectives with known answers.

TEST(WorkedExamples, TwoRanksAllGatherAllReduceReduceScatter) {
  auto results = run_ranks(2, [](RankContext& ctx) {
    auto comm = ctx.make_comm();
    const std::vector<float> mine = ctx.rank == 0 ? std::vector<float>{1, 2, 3, 4}
                                                  : std::vector<float>{5, 6, 7, 8};

    std::vector<float> gathered(8, -1);
    comm->allgather(mine.data(), gathered.data(), 4, DataType::f32);
    EXPECT_EQ(gathered, (std::vector<float>{1, 2, 3, 4, 5, 6, 7, 8}));

    std::vector<float> summed(4, -1);
    comm->allreduce(mine.data(), summed.data(), 4, DataType::f32, RedOp::sum);
    EXPECT_EQ(summed, (std::vector<float>{6, 8, 10, 12}));

    std::vector<float> scattered(2, -1);
    comm->reducescatter(mine.data(), scattered.data(), 2, DataType::f32, RedOp::sum);
    EXPECT_EQ(scattered, ctx.rank == 0 ? (std::vector<float>{6, 8})
                                       : (std::vector<float>{10, 12}));

    // The same on integers, in place.
    std::vector<int32_t> ints = ctx.rank == 0 ? std::vector<int32_t>{1, 2, 3, 4}
                                              : std::vector<int32_t>{5, 6, 7, 8};
    comm->allreduce(ints.data(), ints.data(), 4, DataType::i32, RedOp::sum);
    EXPECT_EQ(ints, (std::vector<int32_t>{6, 8, 10, 12}));
  });
  EXPECT_TRUE(all_ok(results));
}

TEST(WorkedExamples, ThreeRanksAllReduceSumIsSix) {
  auto results = run_ranks(3, [](RankContext& ctx) {
    auto comm = ctx.make_comm();
    const float mine = static_cast<float>(ctx.rank + 1);
    float out = 0;
    comm->allreduce(&mine, &out, 1, DataType::f32, RedOp::sum);
    EXPECT_EQ(out, 6.0f);
    int64_t v = ctx.rank + 1;
    comm->allreduce(&v, &v, 1, DataType::i64, RedOp::sum);
    EXPECT_EQ(v, 6);
  });
  EXPECT_TRUE(all_ok(results));
}

// ---------------------------------------------------------------------------------------------
// A symbolic run of schedules: every element carries the set of ranks whose input it holds
// (a bit mask). Sends carry sets, receive-reduces unite them (and flag an input counted twice).

using RankSet = uint32_t;

struct SimRank {
  const RankSchedule* schedule = nullptr;
  std::vector<RankSet> send, recv, scratch;
  size_t step = 0;
  std::vector<bool> done;  // actions of the current step

  std::vector<RankSet>& buffer(Buf b) {
    return b == Buf::send ? send : b == Buf::recv ? recv : scratch;
  }
};

bool is_receive(ActionKind k) {
  return k == ActionKind::recv_copy || k == ActionKind::recv_reduce;
}

// 1: to a peer, 2: from a peer, 0: local.
int direction(ActionKind k) { return k == ActionKind::send ? 1 : is_receive(k) ? 2 : 0; }

struct Simulation {
  std::vector<SimRank> ranks;
  std::map<std::pair<int, int>, std::deque<std::vector<RankSet>>> in_flight;  // (from, to)
  std::vector<std::string> errors;

  // Runs until every rank finished its steps or nothing can move (a deadlock: reported).
  void run() {
    for (bool progress = true; progress;) {
      progress = false;
      for (int r = 0; r < static_cast<int>(ranks.size()); ++r) progress |= advance(r);
    }
    for (int r = 0; r < static_cast<int>(ranks.size()); ++r) {
      if (ranks[r].step < ranks[r].schedule->steps.size()) {
        errors.push_back("rank " + std::to_string(r) + " blocked in step " +
                         std::to_string(ranks[r].step) + " (deadlock)");
      }
    }
  }

  std::vector<RankSet> read(SimRank& s, const schedule::Range& range, int rank) {
    auto& b = s.buffer(range.buf);
    if (range.offset + range.count > b.size()) {
      errors.push_back("rank " + std::to_string(rank) + " reads past a buffer");
      return std::vector<RankSet>(range.count, 0);
    }
    return std::vector<RankSet>(b.begin() + range.offset, b.begin() + range.offset + range.count);
  }

  void write(SimRank& s, const schedule::Range& range, const std::vector<RankSet>& v, int rank) {
    auto& b = s.buffer(range.buf);
    if (range.offset + range.count > b.size() || v.size() != range.count) {
      errors.push_back("rank " + std::to_string(rank) + " writes past a buffer or a message of " +
                       std::to_string(v.size()) + " elements into " +
                       std::to_string(range.count));
      return;
    }
    std::copy(v.begin(), v.end(), b.begin() + range.offset);
  }

  bool try_action(int r, const Action& a) {
    SimRank& s = ranks[r];
    switch (a.kind) {
      case ActionKind::send:
        in_flight[{r, a.peer}].push_back(read(s, a.src, r));
        return true;
      case ActionKind::recv_copy:
      case ActionKind::recv_reduce: {
        auto& q = in_flight[{a.peer, r}];
        if (q.empty()) return false;
        std::vector<RankSet> msg = std::move(q.front());
        q.pop_front();
        if (a.kind == ActionKind::recv_reduce) {
          const std::vector<RankSet> base = read(s, a.src, r);
          for (size_t j = 0; j < msg.size() && j < base.size(); ++j) {
            if (msg[j] & base[j]) {
              errors.push_back("rank " + std::to_string(r) + " counts an input twice");
            }
            msg[j] |= base[j];
          }
        }
        write(s, a.dst, msg, r);
        return true;
      }
      case ActionKind::copy:
        write(s, a.dst, read(s, a.src, r), r);
        return true;
      case ActionKind::finish_avg: return true;
      default: break;  // shared-region actions: not in the ring simulated here
    }
    return false;
  }

  bool advance(int r) {
    SimRank& s = ranks[r];
    bool progress = false;
    while (s.step < s.schedule->steps.size()) {
      const auto& actions = s.schedule->steps[s.step].actions;
      if (s.done.size() != actions.size()) s.done.assign(actions.size(), false);
      for (size_t i = 0; i < actions.size(); ++i) {
        if (s.done[i]) continue;
        const Action& a = actions[i];
        bool blocked = false;  // an earlier action on the same peer and direction comes first
        for (size_t k = 0; k < i && !blocked; ++k) {
          blocked = !s.done[k] && direction(a.kind) != 0 &&
                    direction(actions[k].kind) == direction(a.kind) && actions[k].peer == a.peer;
        }
        if (a.kind == ActionKind::send && a.after >= 0 &&
            (a.after >= static_cast<int>(actions.size()) || !s.done[a.after])) {
          blocked = true;
        }
        if (blocked || !try_action(r, a)) continue;
        s.done[i] = true;
        progress = true;
      }
      if (std::find(s.done.begin(), s.done.end(), false) != s.done.end()) break;
      ++s.step;
      s.done.clear();
    }
    return progress;
  }
};

// Symbolic run of an AllReduce-shaped schedule (send and recv of `count` elements) on n ranks.
Simulation simulate_allreduce(const std::vector<RankSchedule>& schedules, size_t count) {
  Simulation sim;
  const int n = static_cast<int>(schedules.size());
  sim.ranks.resize(n);
  for (int r = 0; r < n; ++r) {
    SimRank& s = sim.ranks[r];
    s.schedule = &schedules[r];
    s.send.assign(count, RankSet{1} << r);
    s.recv.assign(count, 0);
    s.scratch.assign(schedules[r].scratch_count, 0);
  }
  sim.run();
  return sim;
}

std::string set_to_string(RankSet set) {
  std::ostringstream os;
  os << '{';
  const char* separator = "";
  for (int r = 0; r < 32; ++r) {
    if (set & (RankSet{1} << r)) {
      os << separator << r;
      separator = ",";
    }
  }
  os << '}';
  return os.str();
}

TEST(WorkedExamples, FourRankRingReduceScatterOwnership) {
  constexpr int n = 4;
  constexpr size_t count = 12;  // chunks of 3 elements: a_i..d_i
  CollectiveDesc desc;
  desc.op = OpType::allreduce;
  desc.count = count;
  desc.nranks = n;
  std::vector<RankSchedule> schedules;
  for (int r = 0; r < n; ++r) {
    schedules.push_back(
        schedule::ring_allreduce(desc, r, schedule::RingPhases::reduce_scatter_only));
  }
  Simulation sim = simulate_allreduce(schedules, count);
  for (const auto& e : sim.errors) ADD_FAILURE() << e;
  // The N-1 = 3 steps of the ring ReduceScatter.
  for (int r = 0; r < n; ++r) {
    EXPECT_EQ(schedules[r].steps.size(), 3u) << schedule::to_string(schedules[r]);
  }

  schedule::Chunking chunks{count, n};
  std::ostringstream table;
  table << "after the ring ReduceScatter, inputs summed in each chunk of recv:\n";
  for (int r = 0; r < n; ++r) {
    table << "  rank " << r << ":";
    for (int c = 0; c < n; ++c) {
      const RankSet first = sim.ranks[r].recv[chunks.offset(c)];
      for (size_t j = chunks.offset(c); j < chunks.offset(c + 1); ++j) {
        EXPECT_EQ(sim.ranks[r].recv[j], first) << "chunk " << c << " of rank " << r
                                               << " is not uniform";
      }
      table << "  chunk " << c << " " << set_to_string(first);
    }
    table << "\n";
  }
  std::cout << table.str();

  const RankSet everyone = (RankSet{1} << n) - 1;
  for (int r = 0; r < n; ++r) {
    // Rank 0 owns chunk 1, rank 1 chunk 2, rank 2 chunk 3, rank 3 chunk 0.
    const int owned = (r + 1) % n;
    EXPECT_EQ(schedule::ring_allreduce_owned_chunk(r, n), owned);
    for (size_t j = chunks.offset(owned); j < chunks.offset(owned + 1); ++j) {
      EXPECT_EQ(sim.ranks[r].recv[j], everyone)
          << "rank " << r << " element " << j << " holds " << set_to_string(sim.ranks[r].recv[j])
          << "\n" << schedule::to_string(schedules[r]);
    }
    // No other chunk is complete yet.
    for (int c = 0; c < n; ++c) {
      if (c != owned) {
        EXPECT_NE(sim.ranks[r].recv[chunks.offset(c)], everyone);
      }
    }
  }
}

TEST(WorkedExamples, RingAllReduceGivesEveryRankEveryInputOnce) {
  for (int n : {1, 2, 3, 4, 5, 8}) {
    for (size_t count : {size_t{0}, size_t{1}, size_t{7}, size_t{37}, size_t{1000}}) {
      CollectiveDesc desc;
      desc.op = OpType::allreduce;
      desc.count = count;
      desc.nranks = n;
      std::vector<RankSchedule> schedules;
      for (int r = 0; r < n; ++r) schedules.push_back(schedule::ring_allreduce(desc, r));
      Simulation sim = simulate_allreduce(schedules, count);
      SCOPED_TRACE("n=" + std::to_string(n) + " count=" + std::to_string(count));
      for (const auto& e : sim.errors) ADD_FAILURE() << e;
      const RankSet everyone = n == 32 ? ~RankSet{0} : (RankSet{1} << n) - 1;
      for (int r = 0; r < n; ++r) {
        for (size_t j = 0; j < count; ++j) {
          if (sim.ranks[r].recv[j] != everyone) {
            ADD_FAILURE() << "rank " << r << " element " << j << " holds "
                          << set_to_string(sim.ranks[r].recv[j]);
            break;
          }
        }
      }
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Bytes on the wire: the ring AllReduce sends 2(N-1)/N * M bytes per rank, all to its ring
// successor, and receives as much, all from its predecessor.

// Runs one f32 sum AllReduce of `count` elements with the ring forced, after reset_stats, and
// checks the counters against the schedule (and against 2(N-1)/N * M when N divides M).
void check_ring_bytes(int n, size_t count) {
  auto results = run_ranks(n, [&](RankContext& ctx) {
    auto comm = ctx.make_comm();
    const int r = comm->rank();
    std::vector<float> data(count);
    for (size_t i = 0; i < count; ++i) data[i] = static_cast<float>((i + r) % 8);
    std::vector<float> out(count, -1);
    OpOptions ring;
    ring.algo = "ring";
    // A first call connects the links; the measured one follows.
    comm->allreduce(data.data(), out.data(), count, DataType::f32, RedOp::sum, ring);
    comm->reset_stats();
    comm->allreduce(data.data(), out.data(), count, DataType::f32, RedOp::sum, ring);
    const CommStats stats = comm->stats();
    EXPECT_EQ(comm->last_algorithm(), "ring");

    // Spot-check the result: element i sums (i + k) % 8 over ranks k.
    for (size_t i = 0; i < count; i += 9973) {
      float want = 0;
      for (int k = 0; k < n; ++k) want += static_cast<float>((i + k) % 8);
      ASSERT_EQ(out[i], want) << "element " << i;
    }

    CollectiveDesc desc;
    desc.op = OpType::allreduce;
    desc.count = count;
    desc.nranks = n;
    const RankSchedule sched = schedule::ring_allreduce(desc, r);
    const uint64_t m = count * sizeof(float);
    const uint64_t want_sent = schedule::elements_sent(sched) * sizeof(float);
    const uint64_t want_received = schedule::elements_received(sched) * sizeof(float);
    if (m % n == 0) {
      EXPECT_EQ(want_sent, 2 * (n - 1) * m / n) << "the schedule's own count";
      EXPECT_EQ(want_received, 2 * (n - 1) * m / n);
    }
    EXPECT_EQ(stats.ops, 1u);
    EXPECT_EQ(stats.bytes_sent, want_sent);
    EXPECT_EQ(stats.bytes_received, want_received);

    const int next = (r + 1) % n;
    const int prev = (r + n - 1) % n;
    uint64_t links_sent = 0, links_received = 0;
    for (const LinkStats& link : stats.links) {
      links_sent += link.bytes_sent;
      links_received += link.bytes_received;
      if (link.peer == next && link.peer == prev) continue;  // n == 2: one link both ways
      if (link.peer == next) {
        EXPECT_EQ(link.bytes_sent, want_sent) << "to the ring successor " << next;
        EXPECT_EQ(link.bytes_received, 0u) << "from the ring successor " << next;
      } else if (link.peer == prev) {
        EXPECT_EQ(link.bytes_received, want_received) << "from the ring predecessor " << prev;
        EXPECT_EQ(link.bytes_sent, 0u) << "to the ring predecessor " << prev;
      } else {
        EXPECT_EQ(link.bytes_sent, 0u) << "to peer " << link.peer << ", not a ring neighbour";
        EXPECT_EQ(link.bytes_received, 0u) << "from peer " << link.peer;
      }
    }
    EXPECT_EQ(links_sent, stats.bytes_sent);
    EXPECT_EQ(links_received, stats.bytes_received);
    ctx.report("rank " + std::to_string(r) + " sent " + std::to_string(stats.bytes_sent) +
               " received " + std::to_string(stats.bytes_received) + " of M=" +
               std::to_string(m));
  });
  EXPECT_TRUE(all_ok(results));
  for (const auto& r : results) {
    for (const auto& line : r.reports) std::cout << "  " << line << "\n";
  }
}

TEST(WorkedExamples, RingAllReduceOf4MiBOn4RanksSends6MiBPerRank) {
  // 4 ranks, M = 4 MiB of f32: each rank sends and receives 2 * 3/4 * 4 MiB = 6 MiB.
  check_ring_bytes(4, (size_t{4} << 20) / sizeof(float));
}

TEST(WorkedExamples, RingAllReduceBytesFollowTheScheduleOnUnevenChunks) {
  // M = 4000012 bytes: divisible by neither 3 nor 5.
  check_ring_bytes(3, 1000003);
  check_ring_bytes(5, 1000003);
}

}  // namespace
}  // namespace hoop::test
