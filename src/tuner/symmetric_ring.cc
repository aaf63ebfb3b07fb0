#include "tuner/symmetric_ring.h"

#include <algorithm>
#include <array>
#include <map>
#include <span>
#include <tuple>
#include <vector>

#include "schedule/schedule.h"
#include "tuner/ring_phase.h"

namespace hoop::tuner {

namespace {

// Where each rank's ring neighbours live, and per host the ranks whose send (receive) of a
// step crosses to another host: the host's NIC carries all of theirs at once. Hosts are
// numbered 0..H-1 (schedule::Topology).
struct RingLayout {
  int n = 0;
  std::vector<LinkClass> out_cls, in_cls;  // to r+1, from r-1
  std::vector<int> host;
  std::vector<std::vector<int>> tcp_senders, tcp_receivers;  // by host
  std::vector<int> host_size;
  std::vector<int> reps;  // one rank of each class (see ring_classes)
};

// Classes: ranks whose neighbours are on the same hosts as theirs (or not), on hosts of the
// same size with as many ranks on the network, play the same part; with `machine_key` (per rank,
// empty: none), also on machines that share their cores alike.
using MachineKey = std::tuple<double, double, double, double>;
std::vector<int> ring_classes(const RingLayout& l, const std::vector<MachineKey>& machine_key = {}) {
  std::map<std::tuple<int, int, size_t, size_t, int, MachineKey>, int> reps;
  for (int r = 0; r < l.n; ++r) {
    const auto i = static_cast<size_t>(r);
    const auto h = static_cast<size_t>(l.host[i]);
    reps.emplace(std::make_tuple(static_cast<int>(l.out_cls[i]), static_cast<int>(l.in_cls[i]),
                                 l.tcp_senders[h].size(), l.tcp_receivers[h].size(), l.host_size[h],
                                 machine_key.empty() ? MachineKey{} : machine_key[i]),
                 r);
  }
  std::vector<int> out;
  for (const auto& [key, r] : reps) out.push_back(r);
  return out;
}

RingLayout ring_layout(int n, const LinkView& links) {
  RingLayout l;
  l.n = n;
  l.out_cls.resize(static_cast<size_t>(n));
  l.in_cls.resize(static_cast<size_t>(n));
  l.host.resize(static_cast<size_t>(n));
  int nhosts = 0;
  for (int r = 0; r < n; ++r) {
    l.host[static_cast<size_t>(r)] = links.host_of(r);
    nhosts = std::max(nhosts, l.host[static_cast<size_t>(r)] + 1);
  }
  l.tcp_senders.resize(static_cast<size_t>(nhosts));
  l.tcp_receivers.resize(static_cast<size_t>(nhosts));
  l.host_size.assign(static_cast<size_t>(nhosts), 0);
  for (int r = 0; r < n; ++r) {
    const auto i = static_cast<size_t>(r);
    const auto h = static_cast<size_t>(l.host[i]);
    l.out_cls[i] = links.between(r, ring_wrap(r + 1, n));
    l.in_cls[i] = links.between(ring_wrap(r - 1, n), r);
    if (l.out_cls[i] == LinkClass::tcp) l.tcp_senders[h].push_back(r);
    if (l.in_cls[i] == LinkClass::tcp) l.tcp_receivers[h].push_back(r);
    ++l.host_size[h];
  }
  l.reps = ring_classes(l);
  return l;
}

// The layout of the last (N, topology, forced transport) asked for: hoop-sim and the tuner ask
// for the same one for every size and channel count.
const RingLayout& cached_ring_layout(int n, const LinkView& links) {
  struct Entry {
    int n = -1;
    LinkView::Force force = LinkView::Force::none;
    std::vector<int> hosts;
    RingLayout layout;
  };
  thread_local Entry last;
  const std::vector<int> none;
  const std::vector<int>& hosts = links.topology ? links.topology->host_of_rank : none;
  if (last.n != n || last.force != links.force || last.hosts != hosts) {
    last.n = n;
    last.force = links.force;
    last.hosts = hosts;
    last.layout = ring_layout(n, links);
  }
  return last.layout;
}

// Where ranks share a machine's cores beyond one per core: each rank's machine's size and the
// processor time of its ranks' ring messages per step and channel. Empty when no machine is.
struct RingMachines {
  struct Share {
    double ranks = 0, message_cpu = 0, out_byte_cpu = 0, in_byte_cpu = 0;
    auto key() const { return std::make_tuple(ranks, message_cpu, out_byte_cpu, in_byte_cpu); }
  };
  std::vector<Share> of_rank;
};

RingMachines ring_machines(const RingLayout& l, const LinkView& links, const CostModel& m) {
  RingMachines out;
  if (m.cores <= 0 || l.n <= m.cores) return out;
  std::map<int, RingMachines::Share> per_machine;
  for (int r = 0; r < l.n; ++r) {
    auto& e = per_machine[links.machine_of(r)];
    const LinkCost& o = m.link(l.out_cls[static_cast<size_t>(r)]);
    const LinkCost& i = m.link(l.in_cls[static_cast<size_t>(r)]);
    e.ranks += 1;
    e.message_cpu += o.cpu + i.cpu;
    e.out_byte_cpu += o.cpu_byte;
    e.in_byte_cpu += i.cpu_byte;
  }
  bool any = false;
  for (const auto& [machine, e] : per_machine) any = any || contention_of(static_cast<int>(e.ranks), m).on();
  if (!any) return out;
  for (int r = 0; r < l.n; ++r) out.of_rank.push_back(per_machine[links.machine_of(r)]);
  return out;
}

}  // namespace

std::optional<Prediction> ring_form(const schedule::CollectiveDesc& d, size_t elem_bytes, const LinkView& links,
                                    const CostModel& m) {
  const int n = d.nranks;
  if (n < 2) return std::nullopt;  // one rank: a local copy, the walk is instant
  const RingLayout& layout = cached_ring_layout(n, links);
  // Hosts whose ranks are interleaved with other hosts' put many ranks on the network in each
  // step; the walk prices those.
  constexpr size_t kMostTcpRanksPerHost = 64;
  for (const auto& rs : layout.tcp_senders) {
    if (rs.size() > kMostTcpRanksPerHost) return std::nullopt;
  }
  const double e = static_cast<double>(elem_bytes);
  const int nparts = schedule::channel_parts(d.count, d.nchannels);
  const schedule::Chunking split{d.count, nparts};
  std::vector<PartChunks> parts;
  for (int p = 0; p < nparts; ++p) {
    const size_t c = split.size(p);
    parts.push_back(d.op == OpType::allreduce ? PartChunks{c / static_cast<size_t>(n), c % static_cast<size_t>(n)}
                                              : PartChunks{c, 0});
  }
  const bool avg = d.redop == RedOp::avg;
  std::vector<Phase> phases;
  // ReduceScatter's average: a step of its own.
  const bool avg_step = avg && d.op == OpType::reducescatter;
  double last_step_local = 0;
  if (d.op == OpType::allreduce) {
    Phase rs{n - 1, 0, -1, true, 0};
    Phase ag{n - 1, 1, 0, false, 0};
    phases = {rs, ag};
  } else if (d.op == OpType::reducescatter) {
    phases = {Phase{n - 1, -1, -2, true, 0}};
    if (avg) last_step_local = static_cast<double>(d.count) * e * m.gamma;
  } else {
    const double copy = d.in_place ? 0 : static_cast<double>(d.count) * e * m.copy;
    phases = {Phase{n - 1, 0, -1, false, copy}};
  }
  phases.front().first_contact = true;

  const RingMachines machines = ring_machines(layout, links, m);
  std::vector<int> reps = layout.reps;
  if (!machines.of_rank.empty()) {
    std::vector<MachineKey> keys;
    for (const auto& share : machines.of_rank) keys.push_back(share.key());
    reps = ring_classes(layout, keys);
  }
  Prediction pred;
  pred.applicable = true;
  for (int r : reps) {
    RankTotals t(parts.size());
    for (Phase ph : phases) {
      if (avg && d.op == OpType::allreduce && ph.send_off == 1) {
        // The average divides the owned chunk at the first step of the gather.
        for (const PartChunks& p : parts) ph.first_step_local += p.elements(ring_wrap(r + 1, n)) * e * m.gamma;
      }
      const auto h = static_cast<size_t>(layout.host[static_cast<size_t>(r)]);
      RingView view{n, r, layout.out_cls[static_cast<size_t>(r)], layout.in_cls[static_cast<size_t>(r)],
                    &parts, &layout.tcp_senders[h], &layout.tcp_receivers[h], 1.0};
      if (!machines.of_rank.empty()) {
        const RingMachines::Share& share = machines.of_rank[static_cast<size_t>(r)];
        view.contention = contention_of(static_cast<int>(share.ranks), m);
        view.machine_ranks = share.ranks;
        view.machine_message_cpu = share.message_cpu;
        view.machine_out_byte_cpu = share.out_byte_cpu;
        view.machine_in_byte_cpu = share.in_byte_cpu;
      }
      add_ring_phase(view, ph, e, m, t);
    }
    if (avg_step) {
      t.seconds += last_step_local;
      ++t.steps;
    }
    fold_rank(t, r, pred, m);
  }
  pred.sampled = true;
  return pred;
}

}  // namespace hoop::tuner
