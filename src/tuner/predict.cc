#include "tuner/predict.h"

#include <fmt/format.h>

#include <algorithm>
#include <functional>
#include <map>
#include <memory>
#include <span>
#include <unordered_map>
#include <unordered_set>

#include "core/op_traits.h"
#include "hoop/error.h"
#include "tuner/region_price.h"
#include "tuner/step_cost.h"

namespace hoop::tuner {

using schedule::Action;
using schedule::ActionKind;
using schedule::RankSchedule;

LinkClass LinkView::between(int a, int b) const {
  if (force == Force::shm) return LinkClass::shm;
  if (force == Force::tcp) return LinkClass::tcp;
  return host_of(a) == host_of(b) ? LinkClass::shm : LinkClass::tcp;
}

schedule::Reach LinkView::reach(int nranks) const {
  schedule::Reach r;
  r.shared_memory = force != Force::tcp;
  for (int q = 1; q < nranks && r.one_host; ++q) r.one_host = host_of(q) == host_of(0);
  if (force == Force::shm) r.one_host = true;
  return r;
}

int LinkView::host_of(int rank) const {
  if (!topology || topology->host_of_rank.empty()) return 0;
  return topology->host_of_rank.at(static_cast<size_t>(rank));
}

int LinkView::machine_of(int rank) const {
  if (!machine_of_rank || machine_of_rank->empty()) return host_of(rank);
  return machine_of_rank->at(static_cast<size_t>(rank));
}

namespace {

constexpr int kEvaluateAllUpTo = 64;
constexpr int kSampleTarget = 32;
constexpr int kMaxPerHost = 8;

bool is_recv(ActionKind k) { return k == ActionKind::recv_copy || k == ActionKind::recv_reduce; }

// One connection and direction in one step.
struct Conn {
  int peer;
  int channel;
  bool out;
  LinkClass cls;
  double bytes;
  // Of the bytes, those the receiving end takes without a copy: a stream's reduced on arrival
  // through a shared-memory ring that holds many calls (Evaluator::reduces_from_ring).
  double uncopied = 0;
  // Of the others, those a stream moves through such a ring: each end copies them at the rate
  // of a copy through memory (Evaluator::streams_through_ring).
  double streamed = 0;
};

struct StepTotals {
  double local_seconds = 0;  // reductions and copies
  double tcp_out = 0, tcp_in = 0;
  double copied_bytes = 0;  // bytes the rank copies itself into or out of a link (sends, plain receives)
  bool waits_on_peer_flag = false;  // waits on a peer's flag in the shared region (to read, reduce or go on)
};

uint64_t conn_key(int peer, int channel, bool out) {
  return (static_cast<uint64_t>(static_cast<uint32_t>(peer)) << 32) |
         (static_cast<uint64_t>(static_cast<uint32_t>(channel)) << 1) | (out ? 1u : 0u);
}

// The ordinal-th send to `peer` on `channel`: ranks below 2^21, channels below 2^10 (conn_key
// leaves no room for the ordinal beyond 256 ranks).
uint64_t send_key(int peer, int channel, uint32_t ordinal) {
  return static_cast<uint64_t>(static_cast<uint32_t>(peer)) | (static_cast<uint64_t>(static_cast<uint32_t>(channel)) << 21) |
         (static_cast<uint64_t>(ordinal) << 31);
}

// What the walk keeps of a rank's schedule, in flat arrays (a walk may hold every rank of a
// large job): step k's connections are conns[conn_begin[k], conn_begin[k + 1]), its receives
// from other ranks recvs[recv_begin[k], recv_begin[k + 1]).
struct RankInfo {
  struct Recv {
    int peer;
    int channel;
    uint32_t ordinal;  // the ordinal-th transfer from `peer` on `channel`
  };
  // A send that forwards a receive (Action::after), by send_key.
  struct Relay {
    uint64_t key;
    uint32_t feed;  // the receive it forwards, an index into recvs
    double hop;     // one slice through that receive
    double bytes;   // that receive's bytes
  };
  std::vector<Conn> conns;
  std::vector<uint32_t> conn_begin{0};
  std::vector<StepTotals> totals;
  std::vector<Recv> recvs;
  std::vector<uint32_t> recv_begin{0};
  std::vector<Relay> relays;  // sorted by key
  std::vector<uint64_t> opening_sends;  // send_key of each send of step 0, sorted
  bool forwards = false;      // has a send with `after`
  bool uses_shm = false, uses_tcp = false;  // has connections of the class
  std::vector<double> recv_lag;  // per receive (memo, -1 unknown): see Evaluator::recv_lag

  size_t nsteps() const { return totals.size(); }
  std::span<const Conn> step_conns(size_t k) const {
    return std::span<const Conn>(conns).subspan(conn_begin[k], conn_begin[k + 1] - conn_begin[k]);
  }
  std::span<const Recv> step_recvs(size_t k) const {
    return std::span<const Recv>(recvs).subspan(recv_begin[k], recv_begin[k + 1] - recv_begin[k]);
  }
};

class Evaluator {
 public:
  Evaluator(int nranks, std::function<RankSchedule(int)> build, size_t elem, const LinkView& links,
            const CostModel& model)
      : n_(nranks),
        build_(std::move(build)),
        elem_(static_cast<double>(elem)),
        links_(links),
        m_(model),
        ranks_(static_cast<size_t>(nranks)) {}

  RankInfo& info(int r) {
    auto& slot = ranks_.at(static_cast<size_t>(r));
    if (!slot) {
      slot = std::make_unique<RankInfo>();
      profile(r, build_(r), *slot);
    }
    return *slot;
  }

  // The ranks of each host whose traffic is counted for the NIC share, and by how much to
  // scale their sum to the whole host.
  void set_host_members(std::map<int, std::vector<int>> members, std::map<int, double> scale) {
    host_members_ = std::move(members);
    host_scale_ = std::move(scale);
    host_tcp_.clear();
  }

  // The same for the machines whose ranks outnumber their cores (their processor time is
  // shared), with how they share them.
  struct MachineShare {
    std::vector<int> members;  // evaluated ranks of the machine
    double scale = 1;          // the machine's ranks over its evaluated ones
    Contention contention;
    std::vector<double> demand;  // per step, the machine's processor time (memo)
  };
  void set_machines(std::map<int, MachineShare> machines) { machines_ = std::move(machines); }

  int nranks() const { return n_; }

  bool relay_analysis = false;
  // Priced as one of a stream of like calls (Broadcast, a Reduce's chain): see lag().
  bool streamed = false;

  // The steps one after another, plus the pipeline fill of forwarded receives once: a
  // forwarding chain fills at its first step; later steps' transfers overlap the previous
  // steps' forwarding tails (a tree's chunks stream through it), so the fill is not paid again.
  // A host whose link sustains less than it takes in a burst (sustained_rate) moves the
  // whole operation's bytes at no more than that rate in each direction.
  // A step taking only messages sent at the start pays their latency once: the later ones
  // travelled while the first was waited for. On a contended machine, the call's skew on top of
  // the steps, inside the bound of the link: while ranks wait for late ones the link idles and
  // its token bucket refills, so calls back to back stay held to the sustained rate only.
  double rank_seconds(int r) {
    RankInfo& ri = info(r);
    double t = 0, fill = 0;
    bool opening_waited = false;
    for (size_t k = 0; k < ri.nsteps(); ++k) {
      const bool opening = takes_only_opening_messages(r, k);
      t += step_seconds(r, static_cast<int>(k), opening && opening_waited);
      opening_waited = opening_waited || opening;
      fill = std::max(fill, lag(r, static_cast<int>(k)));
    }
    const double skew = contended(r) ? call_skew(ri.uses_shm, ri.uses_tcp, m_) : 0;
    return call_seconds(t + fill, skew, sustained_seconds(r));
  }

 private:
  double bytes(const schedule::Range& range) const { return static_cast<double>(range.count) * elem_; }

  // The connection of `key` among conns[from, end), if it has one yet: a linear search over a
  // step's few connections, an index once a step has many (the root of a naive algorithm
  // talks to all).
  static Conn* find_conn(std::vector<Conn>& conns, size_t from, std::unordered_map<uint64_t, size_t>& index,
                         uint64_t key, const Action& a) {
    constexpr size_t kIndexFrom = 16;
    if (index.empty() && conns.size() - from >= kIndexFrom) {
      for (size_t i = from; i < conns.size(); ++i) {
        index.emplace(conn_key(conns[i].peer, conns[i].channel, conns[i].out), i);
      }
    }
    if (!index.empty()) {
      auto it = index.find(key);
      return it == index.end() ? nullptr : &conns[it->second];
    }
    const bool out = a.kind == ActionKind::send;
    auto it = std::find_if(conns.begin() + static_cast<std::ptrdiff_t>(from), conns.end(), [&](const Conn& c) {
      return c.peer == a.peer && c.channel == a.channel && c.out == out;
    });
    return it == conns.end() ? nullptr : &*it;
  }

  void profile(int r, const RankSchedule& sched, RankInfo& ri) {
    auto& counter = counter_;
    auto& conn_index = conn_index_;
    counter.clear();
    const size_t nsteps = sched.steps.size();
    size_t ntransfers = 0, nrecvs = 0;
    for (const auto& step : sched.steps) {
      for (const Action& a : step.actions) {
        ntransfers += a.kind == ActionKind::send || is_recv(a.kind);
        nrecvs += is_recv(a.kind);
      }
    }
    ri.conns.reserve(ntransfers);
    ri.recvs.reserve(nrecvs);
    ri.totals.resize(nsteps);
    ri.conn_begin.reserve(nsteps + 1);
    ri.recv_begin.reserve(nsteps + 1);
    auto& ordinal = ordinal_;
    auto& recv_of_action = recv_of_action_;
    for (size_t k = 0; k < nsteps; ++k) {
      StepTotals& sp = ri.totals[k];
      const size_t from = ri.conns.size();
      conn_index.clear();
      ordinal.clear();
      recv_of_action.clear();
      bool synced = false;  // a step of shared-region actions pays one synchronisation
      for (const Action& a : sched.steps[k].actions) {
        const bool out = a.kind == ActionKind::send;
        const bool in = is_recv(a.kind);
        recv_of_action.push_back(kNoRecv);
        if (schedule::is_region_action(a.kind)) {
          ordinal.push_back(0);
          sp.local_seconds += region_action_seconds(a, r, bytes(a.kind == ActionKind::write ? a.src : a.dst), m_, synced);
          continue;
        }
        if (!out && !in) {
          ordinal.push_back(0);
          sp.local_seconds += bytes(a.dst) * (a.kind == ActionKind::copy ? m_.copy : m_.gamma);
          continue;
        }
        if (a.after >= 0) ri.forwards = true;
        const uint32_t ord = counter[conn_key(a.peer, a.channel, out)]++;
        ordinal.push_back(ord);
        if (in && a.peer >= 0 && a.peer < n_) {
          recv_of_action.back() = static_cast<uint32_t>(ri.recvs.size());
          ri.recvs.push_back({a.peer, a.channel, ord});
        }
        if (out && k == 0) ri.opening_sends.push_back(send_key(a.peer, a.channel, ord));
        const double b = out ? bytes(a.src) : bytes(a.dst);
        if (a.kind == ActionKind::recv_reduce) sp.local_seconds += b * m_.gamma;
        else sp.copied_bytes += b;
        const LinkClass cls = links_.between(r, a.peer);
        (cls == LinkClass::shm ? ri.uses_shm : ri.uses_tcp) = true;
        const uint64_t key = conn_key(a.peer, a.channel, out);
        const double uncopied = a.kind == ActionKind::recv_reduce && reduces_from_ring(cls, b) ? b : 0;
        const double streamed_bytes = uncopied == 0 && streams_through_ring(cls, b) ? b : 0;
        if (Conn* c = find_conn(ri.conns, from, conn_index, key, a)) {
          c->bytes += b;
          c->uncopied += uncopied;
          c->streamed += streamed_bytes;
        } else {
          if (!conn_index.empty()) conn_index.emplace(key, ri.conns.size());
          ri.conns.push_back({a.peer, a.channel, out, cls, b, uncopied, streamed_bytes});
        }
        if (cls == LinkClass::tcp) (out ? sp.tcp_out : sp.tcp_in) += b;
      }
      sp.waits_on_peer_flag = synced;
      ri.conn_begin.push_back(static_cast<uint32_t>(ri.conns.size()));
      ri.recv_begin.push_back(static_cast<uint32_t>(ri.recvs.size()));
      index_relays(r, sched.steps[k].actions, ordinal, recv_of_action, ri);
    }
    ri.recv_lag.assign(ri.recvs.size(), -1);
    std::sort(ri.relays.begin(), ri.relays.end(),
              [](const RankInfo::Relay& x, const RankInfo::Relay& y) { return x.key < y.key; });
    std::sort(ri.opening_sends.begin(), ri.opening_sends.end());
  }

  // Whether step k of r only receives, and only messages their senders sent in their first
  // step: such messages travel at once, all together (a naive root's receives). Up to
  // kEvaluateAllUpTo ranks: beyond, finding out builds every sender's schedule (a naive root of
  // 65,536 ranks has 65,535 senders: hoop-sim's 21 sizes took 47 s instead of 4.6), and an
  // algorithm that funnels every rank through one is not the one chosen there.
  bool takes_only_opening_messages(int r, size_t k) {
    if (n_ > kEvaluateAllUpTo) return false;
    const RankInfo& ri = info(r);
    if (ri.step_recvs(k).empty()) return false;
    for (const Conn& c : ri.step_conns(k)) {
      if (c.out) return false;
    }
    for (const RankInfo::Recv& a : ri.step_recvs(k)) {
      const std::vector<uint64_t>& sent = info(a.peer).opening_sends;
      if (!std::binary_search(sent.begin(), sent.end(), send_key(r, a.channel, a.ordinal))) return false;
    }
    return true;
  }

  // The sends of a step that forward a receive, with the time one slice takes through it.
  void index_relays(int r, const std::vector<Action>& actions, const std::vector<uint32_t>& ordinal,
                    const std::vector<uint32_t>& recv_of_action, RankInfo& ri) const {
    for (size_t i = 0; i < actions.size(); ++i) {
      const Action& send = actions[i];
      if (send.kind != ActionKind::send || send.after < 0) continue;
      const uint32_t feed_recv = recv_of_action[static_cast<size_t>(send.after)];
      if (feed_recv == kNoRecv) continue;
      const Action& feed = actions[static_cast<size_t>(send.after)];
      const double piece = std::min(static_cast<double>(m_.slice_bytes), bytes(feed.dst));
      const LinkCost& l = m_.link(links_.between(feed.peer, r));
      const double reduce = feed.kind == ActionKind::recv_reduce ? piece * m_.gamma : 0;
      const double hop = l.alpha + l.transfer_seconds(piece) + reduce;
      ri.relays.push_back({send_key(send.peer, send.channel, ordinal[i]), feed_recv, hop, bytes(feed.dst)});
    }
  }

  // Bytes the host of `r` moves over tcp in step k (both directions), scaled to the whole host:
  // summed once per host for all its steps, the same for each of its ranks.
  std::pair<double, double> host_tcp(int r, int k) {
    const int h = links_.host_of(r);
    auto it = host_members_.find(h);
    if (it == host_members_.end()) {
      const auto& s = info(r).totals[static_cast<size_t>(k)];
      return {s.tcp_out, s.tcp_in};
    }
    auto [memo, fresh] = host_tcp_.try_emplace(h);
    auto& per_step = memo->second;
    if (fresh) {
      for (int mate : it->second) per_step.resize(std::max(per_step.size(), info(mate).nsteps()));
      for (size_t step = 0; step < per_step.size(); ++step) {
        double out = 0, in = 0;
        for (int mate : it->second) {
          const auto& totals = info(mate).totals;
          if (step < totals.size()) {
            out += totals[step].tcp_out;
            in += totals[step].tcp_in;
          }
        }
        const double scale = host_scale_[h];
        per_step[step] = {out * scale, in * scale};
      }
    }
    return per_step.at(static_cast<size_t>(k));
  }

  double step_seconds(int r, int k, bool latency_paid = false) {
    const RankInfo& ri = info(r);
    const StepTotals& sp = ri.totals[static_cast<size_t>(k)];
    const std::span<const Conn> conns = ri.step_conns(static_cast<size_t>(k));
    if (streamed && !contended(r) && !conns.empty() && only_shm(conns)) {
      // In a stream through shared memory on cores of their own, each rank works at its own
      // pace: a call costs it one hand-over through the ring, its own copies and reductions.
      return m_.shm.alpha + sp.copied_bytes * m_.copy + sp.local_seconds;
    }
    std::pair<double, double> host{0, 0};
    if (any_tcp_conn(conns)) host = host_tcp(r, k);
    const double price = step_price(conns, host.first, host.second, sp.local_seconds, m_, latency_paid);
    auto machine = machines_.find(links_.machine_of(r));
    if (machine == machines_.end()) return price;
    // A step that waits on a peer's flag in the shared region waits for that peer to have run
    // since the step before, as a chained receive does, but gives its core away at once where
    // the peer shares it (RegionPort::shares_cpu_with): a hand-over for each of the core's other
    // ranks, not one for every rank of it. (Charged every rank's, 4 ranks of 2 cores priced a
    // 1 KiB shm-direct AllReduce 36 us against 12-15 measured, and at 64 KiB 79 against 31-42,
    // above the leaders' 62, which took 65-96.)
    const Contention& c = machine->second.contention;
    // contended_price charges its handoff once per rank of a core: (R - 1) / R of one here.
    const double region_handoff = sp.waits_on_peer_flag ? m_.shm.handoff * (c.ranks_per_core - 1) / c.ranks_per_core : 0.0;
    const double handoff = std::max(chained_handoff(r, k), region_handoff);
    return contended_price(price, machine_demand(machine->second, k), handoff, c);
  }

  bool contended(int r) const { return machines_.contains(links_.machine_of(r)); }
  // Whether a shared-memory ring holds kCallsAhead messages of `bytes`. Measured on 4 and 8
  // ranks of one host of 2 cores, a Reduce's chain against shm-direct: with rings of 1, 4 and
  // 16 MiB, a ring of 16 or more of the chain's messages kept it ahead (2-4x at 256 KiB in
  // 4 MiB rings), 8 tied or lost, 4 lost by 1.2-2x; the ring's size, not the message's, set it.
  static constexpr double kCallsAhead = 16;
  bool ring_runs_ahead(double bytes) const { return kCallsAhead * bytes <= static_cast<double>(m_.shm_ring_bytes); }
  // A stream's receive that reduces a message its shared-memory ring holds many calls of reads
  // it from the ring in the reduction: no copy at this end (its gamma is in the local work).
  // Not beyond: there the chain's copies and reductions go through memory at a rate the model
  // does not have, and the copy it is still charged stands in for it (8 ranks of one host of 2
  // cores at 4-16 MiB: the chain and the tree 1.4-1.8x slower than shm-direct).
  bool reduces_from_ring(LinkClass cls, double bytes) const {
    return streamed && cls == LinkClass::shm && ring_runs_ahead(bytes);
  }
  // A stream's message through a shared-memory ring that holds many calls of it costs each end
  // the processor time of a copy through memory (CostModel::memory_copy, where measured), not
  // the calibrated cpu_byte, fitted to round trips of 8 B and 4 KiB messages that wait for each
  // other. Measured on 8 ranks of one host of 2 cores (a 2-core EPYC VM), back to back, wall
  // time per call over 4000 calls: a Broadcast's chain 6, 8, 25, 43 and 77 us at 4, 16, 64,
  // 128 and 256 KiB (shm-direct 18, 21, 31, 35, 48), a Reduce's 38 and 114 at 64 and 256 KiB
  // (shm-direct 102, 163): about 1 us and a copy at 26 GB/s per message end (the messages stay
  // in the caches), where cpu_byte is 4.2 GB/s and memcpy through memory 13-17: the chain is
  // priced up to twice what it takes, and still chosen up to 64-128 KiB and shm-direct beyond,
  // about where the wall times cross (between 64 and 128 KiB).
  bool streams_through_ring(LinkClass cls, double bytes) const {
    return m_.memory_copy > 0 && reduces_from_ring(cls, bytes);
  }
  static bool only_shm(std::span<const Conn> conns) {
    return std::all_of(conns.begin(), conns.end(), [](const Conn& c) { return c.cls == LinkClass::shm; });
  }

  // The hand-over a step of r waits for (0: none): a receive from a peer that r exchanges with
  // in that step or talked to in an earlier one. That peer sends once it has run since: it
  // waits for its turn on its core (a ring's predecessor, an exchange partner). A message its
  // sender could send at once (a naive root's receives, a ring's first step) does not.
  double chained_handoff(int r, int k) {
    std::vector<double>& memo = chained_[r];
    if (memo.empty()) {
      const RankInfo& ri = info(r);
      memo.assign(ri.nsteps(), 0);
      std::unordered_set<int> talked;
      for (size_t step = 0; step < ri.nsteps(); ++step) {
        const std::span<const Conn> conns = ri.step_conns(step);
        for (const Conn& in : conns) {
          if (in.out) continue;
          bool exchange = false;
          for (const Conn& out : conns) exchange = exchange || (out.out && out.peer == in.peer);
          if (exchange || talked.contains(in.peer)) memo[step] = std::max(memo[step], m_.link(in.cls).handoff);
        }
        for (const Conn& c : conns) talked.insert(c.peer);
      }
    }
    return static_cast<size_t>(k) < memo.size() ? memo[static_cast<size_t>(k)] : 0;
  }

  // The processor time of a machine's ranks in step k (lockstep), scaled to the whole machine.
  double machine_demand(MachineShare& ms, int k) {
    if (ms.demand.empty()) {
      size_t steps = 0;
      for (int mate : ms.members) steps = std::max(steps, info(mate).nsteps());
      ms.demand.assign(steps, 0);
      for (int mate : ms.members) {
        const RankInfo& mi = info(mate);
        for (size_t step = 0; step < mi.nsteps(); ++step) {
          ms.demand[step] += step_demand(mi.step_conns(step), mi.totals[step].local_seconds, m_) * ms.scale;
        }
      }
    }
    return static_cast<size_t>(k) < ms.demand.size() ? ms.demand[static_cast<size_t>(k)] : 0;
  }

  // A forwarding rank on a contended machine passes a chunk on once it has its turn on its
  // core: a hand-over per rank of the core.
  double forwarder_handoff(int forwarder, int to) const {
    auto machine = machines_.find(links_.machine_of(forwarder));
    if (machine == machines_.end()) return 0;
    return m_.link(links_.between(forwarder, to)).handoff * machine->second.contention.ranks_per_core;
  }


  // The whole operation's tcp bytes of r's host over what the link sustains (0 when it
  // sustains what it takes in a burst): at least its busier direction's. Within a step the two
  // directions run at once; from step to step they do only as far as the schedule keeps both
  // busy. A direction idle while the other works (a naive root receives everything, then sends
  // it all) regains at most the link's burst, so the rest of its bytes wait for the other's.
  // A ring or an exchange moves as much each way in every step and never regains any.
  double sustained_seconds(int r) {
    if (m_.tcp.sustained <= 0) return 0;
    const RankInfo& ri = info(r);
    double out = 0, in = 0, in_turns = 0;
    for (size_t k = 0; k < ri.nsteps(); ++k) {
      const auto [o, i] = host_tcp(r, static_cast<int>(k));
      out += o;
      in += i;
      in_turns += std::max(o, i);
    }
    double bytes = std::max(out, in);
    if (m_.tcp.burst > 0) {
      const double regained = std::min(m_.tcp.burst, in_turns - out) + std::min(m_.tcp.burst, in_turns - in);
      bytes = std::max(bytes, in_turns - regained);
    }
    return bytes / m_.tcp.sustained;
  }

  // Extra wait of step k of rank r for senders that forward what they receive: the pipeline
  // upstream fills one slice per hop. The latest of the step's receives.
  double lag(int r, int k) {
    if (!relay_analysis) return 0;
    const RankInfo& ri = info(r);
    double worst = 0;
    for (uint32_t i = ri.recv_begin[static_cast<size_t>(k)]; i < ri.recv_begin[static_cast<size_t>(k) + 1]; ++i) {
      worst = std::max(worst, recv_lag(r, i));
    }
    return worst;
  }

  // The fill of r's i-th receive: nothing unless its sender forwards it from a receive of its
  // own (Action::after), then that receive's fill and one slice through the hop. A send
  // forwards one receive, and the engine moves each slice on as it lands: another receive of
  // the sender's step (a tree's rank hears from its parents in both trees, or from one child
  // for this chunk and the other for the next) does not hold it up. (Taking the step's latest
  // receive instead chained the two trees into each other: at 65,536 ranks a one-chunk tree
  // AllReduce was priced 13.4 ms, where its 17 steps and a hop per level each way come to 0.48.)
  double recv_lag(int r, uint32_t i) {
    RankInfo& ri = info(r);
    double& memo = ri.recv_lag[i];
    if (memo >= 0) return memo;
    memo = 0;  // breaks cycles
    const RankInfo::Recv a = ri.recvs[i];
    RankInfo& pi = info(a.peer);
    if (!pi.forwards) return 0;
    const uint64_t want = send_key(r, a.channel, a.ordinal);
    auto it = std::lower_bound(pi.relays.begin(), pi.relays.end(), want,
                               [](const RankInfo::Relay& relay, uint64_t key) { return relay.key < key; });
    if (it == pi.relays.end() || it->key != want) return 0;
    // In a stream, a hop fills while the calls before it drain: its sender hands the message
    // to the kernel or the ring and returns. Within a host, where the ranks share the cores,
    // only while the ring holds many calls' messages (ring_runs_ahead): with fewer, the
    // chain's ranks wait for each other's turns on the cores as in one call.
    const bool hidden = streamed && (links_.between(a.peer, r) == LinkClass::tcp || !contended(a.peer) ||
                                     ring_runs_ahead(it->bytes));
    memo = recv_lag(a.peer, it->feed) + (hidden ? 0 : it->hop + forwarder_handoff(a.peer, r));
    return memo;
  }

  int n_;
  std::function<RankSchedule(int)> build_;
  double elem_;
  const LinkView& links_;
  const CostModel& m_;
  std::vector<std::unique_ptr<RankInfo>> ranks_;
  std::map<int, std::vector<int>> host_members_;
  std::map<int, double> host_scale_;
  std::unordered_map<int, std::vector<std::pair<double, double>>> host_tcp_;  // per host, per step
  std::map<int, MachineShare> machines_;  // contended machines only
  std::unordered_map<int, std::vector<double>> chained_;  // per rank, per step (memo)
  // Scratch of profile(), kept to spare their allocations.
  std::unordered_map<uint64_t, uint32_t> counter_;
  std::unordered_map<uint64_t, size_t> conn_index_;
  std::vector<uint32_t> ordinal_;
  std::vector<uint32_t> recv_of_action_;  // per action of a step: its index in recvs, or kNoRecv
  static constexpr uint32_t kNoRecv = UINT32_MAX;
};

// Up to `limit` ranks of `all`: first, last and evenly spread.
std::vector<int> spread(const std::vector<int>& all, int limit) {
  if (static_cast<int>(all.size()) <= limit) return all;
  std::vector<int> out;
  for (int i = 0; i < limit; ++i) {
    out.push_back(all[static_cast<size_t>(i) * (all.size() - 1) / static_cast<size_t>(limit - 1)]);
  }
  return out;
}

struct Sample {
  std::vector<int> ranks;
  std::map<int, std::vector<int>> host_members;
  std::map<int, double> host_scale;
  bool sampled = false;
};

Sample choose_sample(int n, int root, const LinkView& links, Walk walk) {
  const int all_up_to = walk == Walk::every_rank ? n : kEvaluateAllUpTo;
  Sample s;
  std::map<int, std::vector<int>> by_host;
  for (int r = 0; r < n; ++r) by_host[links.host_of(r)].push_back(r);
  std::vector<int> hosts;
  auto add_host = [&](int h) {
    if (std::find(hosts.begin(), hosts.end(), h) == hosts.end()) hosts.push_back(h);
  };
  if (n <= all_up_to) {
    for (const auto& [h, rs] : by_host) add_host(h);
  } else {
    s.sampled = true;
    const int r0 = std::clamp(root, 0, n - 1);
    add_host(links.host_of(0));
    add_host(links.host_of(n - 1));
    add_host(links.host_of(r0));
    const int nh = static_cast<int>(by_host.size());
    const int per = std::min<int>(kMaxPerHost, static_cast<int>(by_host.begin()->second.size()));
    const int want = std::max(3, kSampleTarget / std::max(1, per));
    for (int i = 0; i < want && static_cast<int>(hosts.size()) < nh; ++i) {
      add_host(std::next(by_host.begin(), static_cast<long>(i) * (nh - 1) / std::max(1, want - 1))->first);
    }
  }
  for (int h : hosts) {
    const auto& all = by_host[h];
    std::vector<int> picked = n <= all_up_to ? all : spread(all, kMaxPerHost);
    if (n > all_up_to && by_host.size() == 1) {
      // One big host: spread over it, and the ranks around 0, N-1 and the root.
      picked = spread(all, kSampleTarget);
      for (int r : {root - 1, root, root + 1, 1, n - 2}) {
        if (r >= 0 && r < n && std::find(picked.begin(), picked.end(), r) == picked.end()) picked.push_back(r);
      }
    }
    s.ranks.insert(s.ranks.end(), picked.begin(), picked.end());
    s.host_members[h] = picked;
    s.host_scale[h] = static_cast<double>(all.size()) / static_cast<double>(picked.size());
  }
  return s;
}

// The machines whose ranks outnumber the cores (model.cores), with their evaluated ranks.
std::map<int, Evaluator::MachineShare> contended_machines(int n, const Sample& sample, const LinkView& links,
                                                          const CostModel& model) {
  std::map<int, Evaluator::MachineShare> out;
  if (model.cores <= 0 || n <= model.cores) return out;
  std::map<int, int> size;
  for (int r = 0; r < n; ++r) ++size[links.machine_of(r)];
  for (int r : sample.ranks) {
    const int m = links.machine_of(r);
    const Contention c = contention_of(size[m], model);
    if (c.on()) out[m].members.push_back(r);
  }
  for (auto& [m, share] : out) {
    share.scale = static_cast<double>(size[m]) / static_cast<double>(share.members.size());
    share.contention = contention_of(size[m], model);
  }
  return out;
}

Prediction evaluate(Evaluator& ev, const Sample& sample, const LinkView& links, const CostModel& model, size_t elem) {
  Prediction p;
  p.applicable = true;
  p.sampled = sample.sampled;
  ev.set_host_members(sample.host_members, sample.host_scale);
  ev.set_machines(contended_machines(ev.nranks(), sample, links, model));
  for (int r : sample.ranks) ev.relay_analysis = ev.relay_analysis || ev.info(r).forwards;
  std::map<int, double> host_tcp_out;
  std::unordered_map<uint64_t, uint64_t> per_link;
  for (int r : sample.ranks) {
    const RankInfo& ri = ev.info(r);
    const double t = ev.rank_seconds(r);
    p.rank_seconds.emplace_back(r, t);
    if (p.critical_rank < 0 || t > p.seconds) {
      p.seconds = t;
      p.critical_rank = r;
    }
    p.steps = std::max(p.steps, ri.nsteps());
    uint64_t sent = 0;
    per_link.clear();
    for (const Conn& c : ri.conns) {
      per_link[conn_key(c.peer, c.channel, c.out)] += static_cast<uint64_t>(c.bytes);
      if (c.out) sent += static_cast<uint64_t>(c.bytes);
    }
    double& host_out = host_tcp_out[links.host_of(r)];
    for (const StepTotals& step : ri.totals) host_out += step.tcp_out;
    for (const auto& [key, b] : per_link) p.max_link_bytes = std::max(p.max_link_bytes, b);
    p.max_rank_bytes_sent = std::max(p.max_rank_bytes_sent, sent);
  }
  for (const auto& [h, b] : host_tcp_out) {
    auto it = sample.host_scale.find(h);
    const double scale = it == sample.host_scale.end() ? 1.0 : it->second;
    p.max_host_tcp_bytes = std::max(p.max_host_tcp_bytes, static_cast<uint64_t>(b * scale));
  }
  p.ranks_evaluated = static_cast<int>(sample.ranks.size());
  (void)elem;
  return p;
}

}  // namespace

Prediction predict(const std::string& name, const schedule::CollectiveDesc& desc, size_t elem_bytes,
                   const LinkView& links, const CostModel& model, Walk walk) {
  if (has_per_rank_count(desc.op)) {
    // Every rank's schedule would be built from this rank's counts, which only it knows.
    Prediction p;
    p.why_not = fmt::format("{} is not priced: its counts differ between ranks", to_string(desc.op));
    return p;
  }
  const bool rooted = has_root(desc.op);
  const Sample sample = choose_sample(desc.nranks, rooted ? desc.root : 0, links, walk);
  // A branch is priced as every rank calling alike would take it.
  Evaluator ev(desc.nranks, [&](int r) {
    schedule::RankSchedule s = schedule::build(name, desc, r);
    if (s.branch == schedule::BranchRule::none) return s;
    return schedule::with_variant(s, schedule::branch_variant(s.branch, desc.in_place, desc.registered));
  }, elem_bytes, links, model);
  // A Reduce's chain streams as a Broadcast does (each rank sends its partial sum and returns);
  // its tree does not: an inner rank waits for two children, and in back-to-back calls on 8
  // ranks of one host it measured 76 us a call at 1 KiB where the chain took 5, 396 at 256 KiB
  // where shm-direct took 247.
  const bool chain = name == "chain" || name == "ring";
  ev.streamed = desc.op == OpType::broadcast || (desc.op == OpType::reduce && chain);
  try {
    return evaluate(ev, sample, links, model, elem_bytes);
  } catch (const Error& e) {
    Prediction p;
    p.why_not = e.detail();
    return p;
  }
}

Prediction predict_schedules(const std::vector<schedule::RankSchedule>& ranks, size_t elem_bytes,
                             const LinkView& links, const CostModel& model) {
  const int n = static_cast<int>(ranks.size());
  Sample sample = choose_sample(n, 0, links, Walk::sampled);
  Evaluator ev(n, [&](int r) { return ranks.at(static_cast<size_t>(r)); }, elem_bytes, links, model);
  return evaluate(ev, sample, links, model, elem_bytes);
}

}  // namespace hoop::tuner
