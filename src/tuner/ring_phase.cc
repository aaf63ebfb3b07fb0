#include "tuner/ring_phase.h"

#include <algorithm>
#include <span>

#include "tuner/step_cost.h"

namespace hoop::tuner {

namespace {

struct FormConn {
  LinkClass cls;
  bool out;
  double bytes;
};

}  // namespace

void fold_rank(const RankTotals& t, int rank, Prediction& pred, const CostModel& m) {
  const double sustained_bound =
      m.tcp.sustained > 0 ? std::max(t.host_tcp_out, t.host_tcp_in) / m.tcp.sustained : 0;
  const double seconds = call_seconds(t.seconds, t.skew, sustained_bound);
  if (pred.critical_rank < 0 || seconds > pred.seconds) {
    pred.seconds = seconds;
    pred.critical_rank = rank;
  }
  pred.steps = std::max(pred.steps, t.steps);
  pred.max_rank_bytes_sent = std::max(pred.max_rank_bytes_sent, static_cast<uint64_t>(t.sent));
  for (size_t p = 0; p < t.per_channel_out.size(); ++p) {
    pred.max_link_bytes = std::max(
        {pred.max_link_bytes, static_cast<uint64_t>(t.per_channel_out[p]), static_cast<uint64_t>(t.per_channel_in[p])});
  }
  pred.max_host_tcp_bytes = std::max(pred.max_host_tcp_bytes, static_cast<uint64_t>(t.host_tcp_out));
  ++pred.ranks_evaluated;
}

void add_ring_phase(const RingView& v, const Phase& ph, double elem, const CostModel& m, RankTotals& t) {
  if (ph.steps <= 0) return;
  const std::vector<PartChunks>& parts = *v.parts;
  auto bytes = [&](size_t p, int pos, int off, int k) {
    return parts[p].elements(ring_wrap(static_cast<long long>(pos) + off - k, v.n)) * elem;
  };
  // A chunk's size changes where its index wraps from 0 to N-1 and from rem to rem-1: the
  // steps between such points cost the same, so each run is priced once.
  std::vector<int> cuts{0, 1, ph.steps};
  auto cut_at = [&](int pos, int off) {
    for (const PartChunks& p : parts) {
      if (p.rem == 0) continue;
      cuts.push_back(ring_wrap(static_cast<long long>(pos) + off - (v.n - 1), v.n));
      cuts.push_back(ring_wrap(static_cast<long long>(pos) + off - static_cast<long long>(p.rem - 1), v.n));
    }
  };
  cut_at(v.pos, ph.send_off);
  cut_at(v.pos, ph.recv_off);
  for (int pos : *v.host_senders) cut_at(pos, ph.send_off);
  for (int pos : *v.host_receivers) cut_at(pos, ph.recv_off);
  std::sort(cuts.begin(), cuts.end());
  cuts.erase(std::unique(cuts.begin(), cuts.end()), cuts.end());
  std::vector<FormConn> conns;
  for (size_t i = 0; i + 1 < cuts.size() && cuts[i] < ph.steps; ++i) {
    const int k = cuts[i], len = std::min(cuts[i + 1], ph.steps) - k;
    if (len <= 0) continue;
    conns.clear();
    double local = k == 0 ? ph.first_step_local : 0, sent = 0;
    for (size_t p = 0; p < parts.size(); ++p) {
      const double out = bytes(p, v.pos, ph.send_off, k), in = bytes(p, v.pos, ph.recv_off, k);
      conns.push_back({v.out_cls, true, out});
      conns.push_back({v.in_cls, false, in});
      if (ph.reduce) local += in * m.gamma;
      sent += out;
      t.per_channel_out[p] += out * len;
      t.per_channel_in[p] += in * len;
    }
    double host_out = 0, host_in = 0;
    for (size_t p = 0; p < parts.size(); ++p) {
      for (int pos : *v.host_senders) host_out += bytes(p, pos, ph.send_off, k);
      for (int pos : *v.host_receivers) host_in += bytes(p, pos, ph.recv_off, k);
    }
    host_out *= v.host_scale;
    host_in *= v.host_scale;
    const std::span<const FormConn> step(conns);
    double price = step_price(step, host_out, host_in, local, m);
    if (v.contention.on()) {
      // The machine's ranks move about this rank's bytes and do its local work, each at its
      // own classes' costs.
      double machine = v.machine_ranks * local;
      for (size_t p = 0; p < parts.size(); ++p) {
        machine += v.machine_message_cpu + bytes(p, v.pos, ph.send_off, k) * v.machine_out_byte_cpu +
                   bytes(p, v.pos, ph.recv_off, k) * v.machine_in_byte_cpu;
      }
      const bool exchange = v.n == 2;  // the predecessor is the successor
      const bool chained = !(ph.first_contact && cuts[i] == 0) || exchange;
      price = contended_price(price, machine, chained ? m.link(v.in_cls).handoff : 0, v.contention);
      t.skew = std::max(t.skew, call_skew(v.out_cls == LinkClass::shm || v.in_cls == LinkClass::shm,
                                          v.out_cls == LinkClass::tcp || v.in_cls == LinkClass::tcp, m));
    }
    t.seconds += price * len;
    t.sent += sent * len;
    t.host_tcp_out += host_out * len;
    t.host_tcp_in += host_in * len;
  }
  t.steps += static_cast<size_t>(ph.steps);
}

}  // namespace hoop::tuner
