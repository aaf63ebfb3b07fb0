// The price of one step of one rank, shared by the schedule walk (predict.cc) and the
// symmetry-reduced forms (symmetric_forms.h), so both price a step by the same rule:
//  - each connection costs alpha + bytes/beta of its class; the step waits for the slowest;
//  - per class and direction, the endpoint: alpha plus the processor time of each further
//    message (the class's cpu, or overhead_fraction * alpha where it is not measured), plus the
//    bytes / endpoint_beta, where a tcp endpoint's bytes are its host's (the NIC is shared by
//    the host's ranks in the same step);
//  - plus the local work (reductions, copies);
//  - a step whose messages were sent at the start and travelled while the rank's earlier steps
//    took theirs (latency_paid: a naive root's second receive on) pays no alpha again: its
//    connections their bytes, its endpoint the processor time of each message;
//  - when the ranks of the rank's machine outnumber its cores (contended_price): at least the
//    processor time of all of them in that step over the cores, and a step that waits for a
//    peer it heard from before a hand-over per rank of a core on top: the peer sends once those
//    ahead of it on its core have had their turn (a step waiting on a peer's flag in the shared
//    region one per other rank of a core: predict.cc). A step that exchanges with its peer waits the
//    same one turn: on the lab's 8 ranks of 2 cores, while waits on TCP links slept at once,
//    steps of 64 B of the ring, halving-doubling and recursive doubling cost alike (about
//    37 us), beside about 93 us a call (fit_contended_step fits the hand-over and that skew
//    to a ring and a recursive doubling AllReduce);
//  - not a step's: on such a machine a call pays the skew (LinkCost::skew) of the classes its
//    rank uses once (call_skew; call_seconds adds it to the steps, inside the link's sustained
//    bound, for predict.cc's rank_seconds and ring_phase's fold_rank).
#pragma once

#include <algorithm>
#include <span>

#include "tuner/cost_model.h"

namespace hoop::tuner {

// A connection and direction of one step: anything with `cls`, `out` and `bytes`.
// host_tcp: bytes the rank's host sends and receives over tcp in this step (whole host).
template <class Conn>
double step_price(std::span<const Conn> conns, double host_tcp_out, double host_tcp_in, double local_seconds,
                  const CostModel& m, bool latency_paid = false) {
  double comm = 0;
  double msgs[2][2] = {{0, 0}, {0, 0}}, total[2][2] = {{0, 0}, {0, 0}};
  for (const Conn& c : conns) {
    const LinkCost& l = m.link(c.cls);
    comm = std::max(comm, (latency_paid ? 0 : l.alpha) + c.bytes / l.beta);
    const int ci = c.cls == LinkClass::shm ? 0 : 1, di = c.out ? 1 : 0;
    msgs[ci][di] += 1;
    total[ci][di] += c.bytes;
  }
  for (int ci = 0; ci < 2; ++ci) {
    const LinkClass cls = ci == 0 ? LinkClass::shm : LinkClass::tcp;
    const LinkCost& l = m.link(cls);
    for (int di = 0; di < 2; ++di) {
      if (msgs[ci][di] == 0) continue;
      const double endpoint_bytes = cls == LinkClass::shm ? total[ci][di] : (di == 1 ? host_tcp_out : host_tcp_in);
      const double further = l.cpu > 0 ? l.cpu : m.overhead_fraction * l.alpha;
      const double first = latency_paid ? further : l.alpha;
      const double t = first + (msgs[ci][di] - 1) * further + std::max(endpoint_bytes, total[ci][di]) / l.endpoint_beta;
      comm = std::max(comm, t);
    }
  }
  return comm + local_seconds;
}

// The processor time of a rank's step: each transfer's message and the bytes it copies at this
// end (the class's cpu and cpu_byte; a Conn's `uncopied` bytes cost none, its `streamed` ones a
// copy through memory, predict.cc), and the local work.
template <class Conn>
double step_demand(std::span<const Conn> conns, double local_seconds, const CostModel& m) {
  double t = local_seconds;
  for (const Conn& c : conns) {
    const LinkCost& l = m.link(c.cls);
    t += l.cpu + (c.bytes - c.uncopied - c.streamed) * l.cpu_byte + c.streamed * m.memory_copy;
  }
  return t;
}

// How the ranks of one machine share its cores.
struct Contention {
  double cores = 0;
  double ranks_per_core = 0;  // above 1: they wait for each other's turn
  bool on() const { return ranks_per_core > 1; }
};

// A machine of `machine_ranks` ranks under model m (m.cores is the calibrating machine's).
inline Contention contention_of(int machine_ranks, const CostModel& m) {
  if (m.cores <= 0 || machine_ranks <= m.cores) return {};
  return {static_cast<double>(m.cores), static_cast<double>(machine_ranks) / m.cores};
}

// A step priced `price` alone, on a contended machine whose ranks' processor time in the step
// is `machine_demand`; handoff: the hand-over of the class of the peer the step waits for (0:
// none, see predict.cc's chained_handoff).
inline double contended_price(double price, double machine_demand, double handoff, const Contention& c) {
  if (!c.on()) return price;
  return std::max(price, machine_demand / c.cores) + handoff * c.ranks_per_core;
}

// The skew a call of a contended rank pays once, over the classes of link it uses.
inline double call_skew(bool uses_shm, bool uses_tcp, const CostModel& m) {
  return std::max(uses_shm ? m.shm.skew : 0.0, uses_tcp ? m.tcp.skew : 0.0);
}

// A rank's time of a call: its steps and the call's skew, or what its host's link sustains
// over the call's bytes (`sustained_bound`, 0: none), whichever is longer. While ranks wait for
// late ones the link idles and its token bucket refills: the skew is not added to the bound.
inline double call_seconds(double steps, double skew, double sustained_bound) {
  return std::max(steps + skew, sustained_bound);
}

// Whether any connection of the step is over tcp (then the host's share is needed).
template <class Conn>
bool any_tcp_conn(std::span<const Conn> conns) {
  return std::any_of(conns.begin(), conns.end(), [](const Conn& c) { return c.cls == LinkClass::tcp; });
}

}  // namespace hoop::tuner
