// The price of one step of one rank, shared by the schedule walk (predict.cc) and the
// symmetry-reduced forms (symmetric_forms.h), so both price a step by the same rule:
//  - each connection costs alpha + bytes/beta of its class; the step waits for the slowest;
//  - per class and direction, the endpoint: alpha plus overhead_fraction * alpha of CPU per
//    further message, plus the bytes / endpoint_beta, where a tcp endpoint's bytes are its
//    host's (the NIC is shared by the host's ranks in the same step);
//  - plus the local work (reductions, copies).
#pragma once

#include <algorithm>
#include <span>

#include "tuner/cost_model.h"

namespace hoop::tuner {

// A connection and direction of one step: anything with `cls`, `out` and `bytes`.
// host_tcp: bytes the rank's host sends and receives over tcp in this step (whole host).
template <class Conn>
double step_price(std::span<const Conn> conns, double host_tcp_out, double host_tcp_in, double local_seconds,
                  const CostModel& m) {
  double comm = 0;
  double msgs[2][2] = {{0, 0}, {0, 0}}, total[2][2] = {{0, 0}, {0, 0}};
  for (const Conn& c : conns) {
    const LinkCost& l = m.link(c.cls);
    comm = std::max(comm, l.alpha + c.bytes / l.beta);
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
      const double t = l.alpha * (1 + (msgs[ci][di] - 1) * m.overhead_fraction) +
                       std::max(endpoint_bytes, total[ci][di]) / l.endpoint_beta;
      comm = std::max(comm, t);
    }
  }
  return comm + local_seconds;
}

// Whether any connection of the step is over tcp (then the host's share is needed).
template <class Conn>
bool any_tcp_conn(std::span<const Conn> conns) {
  return std::any_of(conns.begin(), conns.end(), [](const Conn& c) { return c.cls == LinkClass::tcp; });
}

}  // namespace hoop::tuner
