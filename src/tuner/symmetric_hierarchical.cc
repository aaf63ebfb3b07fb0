#include "tuner/symmetric_hierarchical.h"

#include <map>

#include "schedule/schedule.h"
#include "tuner/ring_phase.h"

namespace hoop::tuner {

std::optional<Prediction> hierarchical_form(const schedule::CollectiveDesc& d, size_t elem_bytes,
                                            const LinkView& links, const CostModel& m) {
  if (!d.topology || links.force != LinkView::Force::none || d.op != OpType::allreduce) return std::nullopt;
  const auto& host_of = d.topology->host_of_rank;
  if (host_of.size() != static_cast<size_t>(d.nranks)) return std::nullopt;
  const int nhosts = d.topology->nhosts();
  std::vector<int> size(static_cast<size_t>(nhosts), 0);
  for (int h : host_of) ++size[static_cast<size_t>(h)];
  const int S = size[0];
  for (int s : size) {
    if (s != S) return std::nullopt;  // uneven hosts hand vectors over first: the walk prices those
  }
  if (nhosts < 2) return std::nullopt;  // one host: the ring (the walk)
  // The builder drops transfers of nothing (and then empty steps), which shifts ranks' steps
  // against each other: only calls whose every chunk holds an element are priced here.
  const schedule::Chunking slices{d.count, S};
  if (d.count / static_cast<size_t>(S) < static_cast<size_t>(nhosts)) return std::nullopt;

  // Ranks sharing a machine's cores beyond one per core: every rank of the machine runs the
  // same phase at once. Hosts on machines of different sizes do not play the same part.
  Contention contention;
  double machine_ranks = 0;
  if (m.cores > 0 && d.nranks > m.cores) {
    std::map<int, int> per_machine;
    for (int r = 0; r < d.nranks; ++r) ++per_machine[links.machine_of(r)];
    const int first = per_machine.begin()->second;
    for (const auto& [machine, count] : per_machine) {
      if (count != first) return std::nullopt;
    }
    contention = contention_of(first, m);
    machine_ranks = first;
  }
  auto shared = [&](RingView v) {
    if (!contention.on()) return v;
    v.contention = contention;
    v.machine_ranks = machine_ranks;
    v.machine_message_cpu = machine_ranks * (m.link(v.out_cls).cpu + m.link(v.in_cls).cpu);
    v.machine_out_byte_cpu = machine_ranks * m.link(v.out_cls).cpu_byte;
    v.machine_in_byte_cpu = machine_ranks * m.link(v.in_cls).cpu_byte;
    return v;
  };
  const double e = static_cast<double>(elem_bytes);
  const std::vector<PartChunks> local_chunks{{d.count / static_cast<size_t>(S), d.count % static_cast<size_t>(S)}};
  const std::vector<int> none, self{0};
  Prediction pred;
  pred.applicable = true;
  // Local index i of host 0: every host plays the same part.
  for (int i = 0; i < S; ++i) {
    RankTotals t(1);
    if (S == 1 && !d.in_place) {
      t.seconds += static_cast<double>(d.count) * e * m.copy;
      ++t.steps;
    }
    const RingView inside = shared({S, i, LinkClass::shm, LinkClass::shm, &local_chunks, &none, &none, 1.0});
    if (S > 1) add_ring_phase(inside, Phase{S - 1, 0, -1, true, 0, true}, e, m, t);
    const size_t slice = slices.size(S > 1 ? schedule::ring_allreduce_owned_chunk(i, S) : 0);
    const std::vector<PartChunks> slice_chunks{{slice / static_cast<size_t>(nhosts), slice % static_cast<size_t>(nhosts)}};
    // Across hosts: position 0 of the ring of hosts; the host's S ranks send (receive) their
    // slices' chunks in the same step, slices within an element of each other.
    const RingView across =
        shared({nhosts, 0, LinkClass::tcp, LinkClass::tcp, &slice_chunks, &self, &self, static_cast<double>(S)});
    add_ring_phase(across, Phase{nhosts - 1, 0, -1, true, 0, true}, e, m, t);
    add_ring_phase(across, Phase{nhosts - 1, 1, 0, false, 0}, e, m, t);
    if (d.redop == RedOp::avg) {
      t.seconds += static_cast<double>(slice) * e * m.gamma;
      ++t.steps;
    }
    if (S > 1) add_ring_phase(inside, Phase{S - 1, 1, 0, false, 0}, e, m, t);
    fold_rank(t, i, pred, m);
  }
  pred.sampled = true;
  return pred;
}

}  // namespace hoop::tuner
