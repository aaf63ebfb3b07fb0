// The halving-doubling, recursive-doubling, hierarchical and multi-channel schedules, without
// processes: their shape (steps, elements sent per rank against the cost formulas in their
// header comments) and their result, by running every rank's schedule in a small simulator
// that follows the engine's rules (steps in order; sends and receives on one (peer, channel)
// matched in order with equal sizes; a forwarding send only passes what its receive has) and
// flags a step that sends or receives into memory another transfer of the same step writes.
#include <gtest/gtest.h>

#include <algorithm>
#include <deque>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "hoop/error.h"
#include "schedule/schedule.h"

namespace hoop::schedule {
namespace {

// An element of the simulation: the sum of the inputs reduced into it, and how many times it
// was divided by nranks (must be exactly once for an average, never before a reduction).
struct Elem {
  uint64_t sum = 0;
  int divided = 0;
  bool operator==(const Elem&) const = default;
};

// Input element i of rank r: distinct bits per rank (a rank counted twice shows) plus the index.
uint64_t input(int r, size_t i) { return (uint64_t{1} << r) + (static_cast<uint64_t>(i + 1) << 24); }
uint64_t reduced(int n, size_t i) {
  uint64_t s = 0;
  for (int r = 0; r < n; ++r) s += input(r, i);
  return s;
}

struct Sim {
  CollectiveDesc d;
  std::vector<RankSchedule> sched;
  // Per rank one memory: [send region][recv region][scratch], send and recv aliased in place.
  std::vector<std::vector<Elem>> mem;
  std::vector<size_t> send_base, recv_base, scratch_base;
  std::string error;

  size_t send_elems() const {
    return d.op == OpType::reducescatter || d.op == OpType::alltoall ? d.count * d.nranks : d.count;
  }
  size_t recv_elems() const {
    return d.op == OpType::allgather || d.op == OpType::alltoall ? d.count * d.nranks : d.count;
  }

  size_t addr(int r, const Range& rg) const {
    switch (rg.buf) {
      case Buf::send: return send_base[r] + rg.offset;
      case Buf::recv: return recv_base[r] + rg.offset;
      case Buf::scratch: return scratch_base[r] + rg.offset;
      case Buf::region: break;  // not used by these algorithms
    }
    return 0;
  }
  size_t limit(int r, Buf b) const {
    switch (b) {
      case Buf::send: return send_elems();
      case Buf::recv: return recv_elems();
      case Buf::scratch: return sched[r].scratch_count;
      case Buf::region: break;  // not used by these algorithms
    }
    return 0;
  }
  bool in_bounds(int r, const Range& rg) const { return rg.offset + rg.count <= limit(r, rg.buf); }

  void setup(const std::function<RankSchedule(const CollectiveDesc&, int)>& build) {
    const int n = d.nranks;
    for (int r = 0; r < n; ++r) sched.push_back(build(d, r));
    for (int r = 0; r < n; ++r) {
      const size_t s = send_elems(), v = recv_elems(), c = d.count;
      size_t sb = 0, rb = s;
      if (d.in_place) {
        if (d.op == OpType::reducescatter) rb = sb + r * c;        // recv = send + r*count
        else if (d.op == OpType::allgather) { rb = 0; sb = r * c; }  // send = recv + r*count
        else rb = sb;
      }
      const size_t user = d.in_place ? std::max(s, v) : s + v;
      send_base.push_back(sb);
      recv_base.push_back(rb);
      scratch_base.push_back(user);
      std::vector<Elem> m(user + sched[r].scratch_count, Elem{~uint64_t{0}, 0});
      const bool has_input = d.op != OpType::broadcast || r == d.root;
      if (has_input) {
        for (size_t i = 0; i < s; ++i) m[sb + i] = Elem{input(r, i), 0};
      }
      mem.push_back(std::move(m));
    }
  }

  struct Msg {
    std::vector<Elem> data;
  };

  // Runs every rank to the end; false (and `error`) on a mismatch, bad range or deadlock.
  bool run() {
    const int n = d.nranks;
    std::map<std::tuple<int, int, int>, std::deque<Msg>> wire;  // (from, to, channel)
    std::vector<size_t> step(n, 0);
    // Per rank and action of the current step: done?
    std::vector<std::vector<bool>> done(n);
    std::vector<bool> started(n, false);
    for (;;) {
      bool progress = false, all_done = true;
      for (int r = 0; r < n; ++r) {
        const auto& steps = sched[r].steps;
        if (step[r] >= steps.size()) continue;
        all_done = false;
        const Step& st = steps[step[r]];
        if (!started[r]) {
          if (!check_step(r, st)) return false;
          done[r].assign(st.actions.size(), false);
          started[r] = true;
          for (size_t i = 0; i < st.actions.size(); ++i) {
            const Action& a = st.actions[i];
            if (a.kind == ActionKind::copy) {
              std::vector<Elem> tmp(mem[r].begin() + addr(r, a.src), mem[r].begin() + addr(r, a.src) + a.src.count);
              std::copy(tmp.begin(), tmp.end(), mem[r].begin() + addr(r, a.dst));
              done[r][i] = true;
            } else if (a.kind == ActionKind::finish_avg) {
              for (size_t j = 0; j < a.dst.count; ++j) mem[r][addr(r, a.dst) + j].divided++;
              done[r][i] = true;
            }
          }
          progress = true;
        }
        // Transfers in order per (peer, direction, channel); a forwarding send after its receive.
        std::map<std::tuple<int, int, int>, bool> busy;
        for (size_t i = 0; i < st.actions.size(); ++i) {
          const Action& a = st.actions[i];
          if (done[r][i]) continue;
          const bool is_send = a.kind == ActionKind::send;
          auto key = std::make_tuple(a.peer, is_send ? 1 : 0, a.channel);
          if (busy[key]) continue;
          busy[key] = true;
          if (is_send) {
            if (a.after >= 0 && !done[r][static_cast<size_t>(a.after)]) continue;
            Msg m;
            m.data.assign(mem[r].begin() + addr(r, a.src), mem[r].begin() + addr(r, a.src) + a.src.count);
            wire[{r, a.peer, a.channel}].push_back(std::move(m));
          } else {
            auto& q = wire[{a.peer, r, a.channel}];
            if (q.empty()) continue;
            Msg m = std::move(q.front());
            q.pop_front();
            if (m.data.size() != a.dst.count) {
              return fail(r, "receives " + std::to_string(a.dst.count) + " elements from rank " +
                                 std::to_string(a.peer) + " which sent " + std::to_string(m.data.size()));
            }
            for (size_t j = 0; j < a.dst.count; ++j) {
              Elem out = m.data[j];
              if (a.kind == ActionKind::recv_reduce) {
                const Elem local = mem[r][addr(r, a.src) + j];
                if (local.divided || out.divided) return fail(r, "reduces data already averaged");
                out.sum = local.sum + out.sum;
              }
              mem[r][addr(r, a.dst) + j] = out;
            }
          }
          done[r][i] = true;
          progress = true;
        }
        if (std::all_of(done[r].begin(), done[r].end(), [](bool b) { return b; })) {
          ++step[r];
          started[r] = false;
          progress = true;
        }
      }
      if (all_done) break;
      if (!progress) return fail(-1, "deadlock");
    }
    for (const auto& [key, q] : wire) {
      if (!q.empty()) return fail(std::get<1>(key), "did not receive a message from rank " + std::to_string(std::get<0>(key)));
    }
    return true;
  }

  // Ranges in bounds; no transfer reads or writes memory another transfer of the step writes
  // (a forwarding send reading its own receive's range is the allowed exception).
  bool check_step(int r, const Step& st) {
    for (const Action& a : st.actions) {
      if (a.kind != ActionKind::recv_copy && a.kind != ActionKind::finish_avg && !in_bounds(r, a.src)) {
        return fail(r, "source range out of bounds");
      }
      if (a.kind != ActionKind::send && !in_bounds(r, a.dst)) return fail(r, "destination out of bounds");
    }
    auto overlap = [&](const Range& x, const Range& y) {
      const size_t a0 = addr(r, x), b0 = addr(r, y);
      return x.count > 0 && y.count > 0 && a0 < b0 + y.count && b0 < a0 + x.count;
    };
    for (size_t i = 0; i < st.actions.size(); ++i) {
      const Action& w = st.actions[i];
      if (w.kind != ActionKind::recv_copy && w.kind != ActionKind::recv_reduce) continue;
      for (size_t j = 0; j < st.actions.size(); ++j) {
        if (i == j) continue;
        const Action& o = st.actions[j];
        if (o.kind == ActionKind::send && o.after == static_cast<int>(i)) continue;
        const bool reads = o.kind == ActionKind::send || o.kind == ActionKind::recv_reduce;
        const bool writes = o.kind == ActionKind::recv_copy || o.kind == ActionKind::recv_reduce;
        if ((reads && overlap(w.dst, o.src)) || (writes && overlap(w.dst, o.dst))) {
          return fail(r, "step writes memory another transfer of the same step uses:\n" + to_string(sched[r]));
        }
      }
    }
    return true;
  }

  bool fail(int r, const std::string& what) {
    error = "rank " + std::to_string(r) + ": " + what;
    return false;
  }

  Elem out(int r, size_t i) const { return mem[r][recv_base[r] + i]; }
};

std::string describe(const CollectiveDesc& d, const std::string& algo) {
  std::ostringstream os;
  os << algo << " " << to_string(d.op) << " n=" << d.nranks << " count=" << d.count
     << (d.in_place ? " in-place" : "") << " redop=" << to_string(d.redop) << " channels=" << d.nchannels;
  if (d.topology) {
    os << " hosts=";
    for (int h : d.topology->host_of_rank) os << h;
  }
  return os.str();
}

// Runs `algo` for d on every rank and checks every rank's output.
void expect_correct(const CollectiveDesc& d, const std::string& algo) {
  SCOPED_TRACE(describe(d, algo));
  Sim sim;
  sim.d = d;
  sim.setup([&](const CollectiveDesc& dd, int r) { return build(algo, dd, r); });
  ASSERT_TRUE(sim.run()) << sim.error;
  const int n = d.nranks;
  const int divided = d.redop == RedOp::avg && n > 1 ? 1 : 0;  // dividing by 1: skipped
  for (int r = 0; r < n; ++r) {
    switch (d.op) {
      case OpType::allreduce:
        for (size_t i = 0; i < d.count; ++i) {
          ASSERT_EQ(sim.out(r, i), (Elem{reduced(n, i), divided})) << "rank " << r << " element " << i;
        }
        break;
      case OpType::reducescatter:
        for (size_t i = 0; i < d.count; ++i) {
          ASSERT_EQ(sim.out(r, i), (Elem{reduced(n, r * d.count + i), divided})) << "rank " << r << " element " << i;
        }
        break;
      case OpType::allgather:
        for (size_t i = 0; i < d.count * n; ++i) {
          ASSERT_EQ(sim.out(r, i), (Elem{input(static_cast<int>(i / d.count), i % d.count), 0}))
              << "rank " << r << " element " << i;
        }
        break;
      case OpType::alltoall:  // block q: rank q's block for this rank
        for (size_t i = 0; i < d.count * n; ++i) {
          const int q = static_cast<int>(i / d.count);
          ASSERT_EQ(sim.out(r, i), (Elem{input(q, r * d.count + i % d.count), 0})) << "rank " << r << " element " << i;
        }
        break;
      case OpType::broadcast:
        for (size_t i = 0; i < d.count; ++i) ASSERT_EQ(sim.out(r, i), (Elem{input(d.root, i), 0}));
        break;
      case OpType::reduce:
        if (r != d.root) break;
        for (size_t i = 0; i < d.count; ++i) ASSERT_EQ(sim.out(r, i), (Elem{reduced(n, i), divided}));
        break;
      default: FAIL();
    }
  }
}

CollectiveDesc desc(OpType op, int n, size_t count, bool in_place, RedOp redop = RedOp::sum) {
  CollectiveDesc d;
  d.op = op;
  d.nranks = n;
  d.count = count;
  d.in_place = in_place;
  d.redop = redop;
  return d;
}

const size_t kCounts[] = {0, 1, 2, 3, 5, 7, 8, 13, 64, 101};

TEST(ScheduleHalvingDoubling, EveryRankCountAndSize) {
  for (OpType op : {OpType::allreduce, OpType::reducescatter, OpType::allgather}) {
    for (int n = 1; n <= 13; ++n) {
      for (size_t count : kCounts) {
        for (bool in_place : {false, true}) {
          for (RedOp redop : {RedOp::sum, RedOp::avg}) {
            if (op == OpType::allgather && redop != RedOp::sum) continue;
            expect_correct(desc(op, n, count, in_place, redop), "halving-doubling");
            if (HasFatalFailure()) return;
          }
        }
      }
    }
  }
}

TEST(ScheduleRecursiveDoubling, EveryRankCountAndSize) {
  for (OpType op : {OpType::allreduce, OpType::allgather}) {
    for (int n = 1; n <= 13; ++n) {
      for (size_t count : kCounts) {
        for (bool in_place : {false, true}) {
          for (RedOp redop : {RedOp::sum, RedOp::avg}) {
            if (op == OpType::allgather && redop != RedOp::sum) continue;
            expect_correct(desc(op, n, count, in_place, redop), "recursive-doubling");
            if (HasFatalFailure()) return;
          }
        }
      }
    }
  }
}

// Both sides of every recursive-doubling exchange reduce with the lower virtual rank's partial
// first: the higher rank's receive puts the received data first.
TEST(ScheduleRecursiveDoubling, CanonicalOperandOrder) {
  for (int n : {2, 4, 8}) {
    for (int r = 0; r < n; ++r) {
      const RankSchedule s = build("recursive-doubling", desc(OpType::allreduce, n, 10, false), r);
      for (const Step& st : s.steps) {
        for (const Action& a : st.actions) {
          if (a.kind == ActionKind::recv_reduce) {
            EXPECT_EQ(a.received_first, a.peer < r) << to_string(s);
          }
        }
      }
    }
  }
}

Topology hosts_of(std::vector<int> h) {
  Topology t;
  t.host_of_rank = std::move(h);
  return t;
}

TEST(ScheduleHierarchical, EveryTopology) {
  const std::vector<std::vector<int>> topologies = {
      {0},          {0, 0},       {0, 1},          {0, 0, 1, 1},    {0, 1, 0, 1},
      {0, 0, 0, 1}, {0, 1, 1, 1}, {0, 1, 2},       {0, 0, 0, 1, 1, 1}, {0, 0, 1, 1, 2, 2},
      {0, 0, 0, 0, 0}, {0, 0, 0, 0, 0, 1, 1}, {0, 1, 1, 2, 2, 2}, {0, 0, 0, 1, 1, 1, 1, 1}};
  for (const auto& hosts : topologies) {
    const Topology topo = hosts_of(hosts);
    for (size_t count : kCounts) {
      for (bool in_place : {false, true}) {
        for (RedOp redop : {RedOp::sum, RedOp::avg}) {
          CollectiveDesc d = desc(OpType::allreduce, static_cast<int>(hosts.size()), count, in_place, redop);
          d.topology = &topo;
          for (const char* algo : {"hierarchical", "leaders"}) {
            expect_correct(d, algo);
            if (HasFatalFailure()) return;
          }
          // The ReduceScatter, AllGather and AllToAll through the leaders.
          for (OpType op : {OpType::reducescatter, OpType::allgather, OpType::alltoall}) {
            if (op != OpType::reducescatter && redop == RedOp::avg) continue;
            d.op = op;
            expect_correct(d, "leaders");
            if (HasFatalFailure()) return;
          }
        }
      }
    }
  }
  // No topology: one host.
  for (int n = 1; n <= 6; ++n) {
    expect_correct(desc(OpType::allreduce, n, 23, false), "hierarchical");
    for (OpType op : {OpType::allreduce, OpType::reducescatter, OpType::allgather, OpType::alltoall}) {
      expect_correct(desc(op, n, 23, false), "leaders");
    }
  }
}

TEST(ScheduleChannels, RingAlgorithmsSplitOverChannels) {
  const size_t big = 3 * kMinElementsPerChannel + 7;  // 3 parts of uneven sizes
  for (OpType op : {OpType::allreduce, OpType::reducescatter, OpType::allgather, OpType::broadcast,
                    OpType::reduce}) {
    for (int n : {1, 2, 3, 5}) {
      for (int channels : {2, 4}) {
        for (size_t count : {size_t{0}, size_t{5}, big}) {
          if (count == big && channels == 4 && n > 3) continue;  // simulator time
          for (bool in_place : {false, true}) {
            CollectiveDesc d = desc(op, n, count, in_place, op == OpType::allgather || op == OpType::broadcast ? RedOp::sum : RedOp::avg);
            d.nchannels = channels;
            d.root = n - 1;
            expect_correct(d, "ring");
            if (HasFatalFailure()) return;
          }
        }
      }
    }
  }
}

TEST(ScheduleChannels, PartsAreNeverEmpty) {
  EXPECT_EQ(channel_parts(0, 4), 1);
  EXPECT_EQ(channel_parts(100, 4), 1);
  EXPECT_EQ(channel_parts(kMinElementsPerChannel * 2, 4), 2);
  EXPECT_EQ(channel_parts(kMinElementsPerChannel * 100, 4), 4);
  EXPECT_EQ(channel_parts(kMinElementsPerChannel * 100, 1), 1);
  // Every action of part p names channel p; the step count is the base algorithm's.
  CollectiveDesc d = desc(OpType::allreduce, 4, kMinElementsPerChannel * 3, false);
  d.nchannels = 3;
  const RankSchedule multi = build("ring", d, 1);
  d.nchannels = 1;
  const RankSchedule single = build("ring", d, 1);
  ASSERT_EQ(multi.steps.size(), single.steps.size());
  for (size_t k = 0; k < multi.steps.size(); ++k) {
    ASSERT_EQ(multi.steps[k].actions.size(), 3 * single.steps[k].actions.size());
    std::vector<int> per_channel(3, 0);
    for (const Action& a : multi.steps[k].actions) {
      if (a.kind != ActionKind::send && a.kind != ActionKind::recv_copy && a.kind != ActionKind::recv_reduce) continue;
      ASSERT_GE(a.channel, 0);
      ASSERT_LT(a.channel, 3);
      per_channel[static_cast<size_t>(a.channel)]++;
      EXPECT_GT(a.kind == ActionKind::send ? a.src.count : a.dst.count, 0u);
    }
    EXPECT_EQ(per_channel[0], per_channel[1]);
    EXPECT_EQ(per_channel[1], per_channel[2]);
  }
  EXPECT_EQ(elements_sent(multi), elements_sent(single));
}

int log2_exact(int n) {
  int k = 0;
  while ((1 << k) < n) ++k;
  return k;
}

// Steps and elements sent against the formulas of the header comments.
TEST(ScheduleShapes, HalvingDoublingPowerOfTwo) {
  for (int n : {2, 4, 8, 16}) {
    const size_t count = 64 * n;  // divisible: the formulas are exact
    for (int r = 0; r < n; ++r) {
      const RankSchedule ar = build("halving-doubling", desc(OpType::allreduce, n, count, false), r);
      EXPECT_EQ(ar.steps.size(), static_cast<size_t>(2 * log2_exact(n)));
      EXPECT_EQ(elements_sent(ar), 2 * count * (n - 1) / n);
      EXPECT_EQ(elements_received(ar), 2 * count * (n - 1) / n);
      const RankSchedule rs = build("halving-doubling", desc(OpType::reducescatter, n, 64, false), r);
      EXPECT_EQ(rs.steps.size(), static_cast<size_t>(log2_exact(n)));
      EXPECT_EQ(elements_sent(rs), 64u * (n - 1));
      const RankSchedule ag = build("halving-doubling", desc(OpType::allgather, n, 64, false), r);
      EXPECT_EQ(ag.steps.size(), static_cast<size_t>(log2_exact(n)));
      EXPECT_EQ(elements_sent(ag), 64u * (n - 1));
    }
  }
}

TEST(ScheduleShapes, HalvingDoublingFold) {
  // n = 6: p = 4; ranks 0..3 pair up, 0 and 2 hand over.
  const int n = 6;
  const size_t count = 400;
  for (int r = 0; r < n; ++r) {
    const RankSchedule ar = build("halving-doubling", desc(OpType::allreduce, n, count, false), r);
    if (r < 4 && r % 2 == 0) {
      EXPECT_EQ(ar.steps.size(), 2u);
      EXPECT_EQ(elements_sent(ar), count);
      EXPECT_EQ(elements_received(ar), count);
    } else {
      EXPECT_EQ(ar.steps.size(), static_cast<size_t>(2 * 2 + (r < 4 ? 2 : 0)));
      EXPECT_EQ(elements_sent(ar), 2 * count * 3 / 4 + (r < 4 ? count : 0));
    }
  }
}

TEST(ScheduleShapes, RecursiveDoubling) {
  for (int n : {2, 4, 8}) {
    for (int r = 0; r < n; ++r) {
      const RankSchedule s = build("recursive-doubling", desc(OpType::allreduce, n, 10, false), r);
      EXPECT_EQ(s.steps.size(), static_cast<size_t>(log2_exact(n)));
      EXPECT_EQ(elements_sent(s), 10u * log2_exact(n));
    }
  }
  // n = 5: the folded rank 0 sends and receives the vector once; rank 1 has 2 more steps.
  EXPECT_EQ(build("recursive-doubling", desc(OpType::allreduce, 5, 10, false), 0).steps.size(), 2u);
  EXPECT_EQ(build("recursive-doubling", desc(OpType::allreduce, 5, 10, false), 1).steps.size(), 4u);
}

TEST(ScheduleShapes, Hierarchical) {
  // 2 hosts x 3 ranks, 600 elements: 2 intra steps each way, 2 inter steps; per rank
  // 2*600*2/3 over shared memory and 2*600*1/(2*3) over the network.
  const Topology topo = hosts_of({0, 0, 0, 1, 1, 1});
  CollectiveDesc d = desc(OpType::allreduce, 6, 600, false);
  d.topology = &topo;
  for (int r = 0; r < 6; ++r) {
    const RankSchedule s = build("hierarchical", d, r);
    EXPECT_EQ(s.steps.size(), 2u * 2 + 2u * 1);
    size_t intra = 0, inter = 0;
    for (const Step& st : s.steps) {
      for (const Action& a : st.actions) {
        if (a.kind != ActionKind::send) continue;
        (topo.host_of_rank[static_cast<size_t>(a.peer)] == topo.host_of_rank[static_cast<size_t>(r)] ? intra : inter) += a.src.count;
      }
    }
    EXPECT_EQ(intra, 2u * 600 * 2 / 3);
    EXPECT_EQ(inter, 2u * 600 / 6);
  }
}

TEST(ScheduleRegistry, NewAlgorithmsAreListed) {
  auto has = [](OpType op, const std::string& name) {
    const auto names = algorithms_for(op);
    return std::find(names.begin(), names.end(), name) != names.end();
  };
  EXPECT_TRUE(has(OpType::allreduce, "halving-doubling"));
  EXPECT_TRUE(has(OpType::reducescatter, "halving-doubling"));
  EXPECT_TRUE(has(OpType::allgather, "halving-doubling"));
  EXPECT_TRUE(has(OpType::allreduce, "recursive-doubling"));
  EXPECT_TRUE(has(OpType::allgather, "recursive-doubling"));
  EXPECT_TRUE(has(OpType::allreduce, "hierarchical"));
  // The default is unchanged.
  EXPECT_EQ(build_default(desc(OpType::allreduce, 4, 100, false), 0).algorithm, "ring");
}

}  // namespace
}  // namespace hoop::schedule
