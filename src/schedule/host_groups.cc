#include "schedule/host_groups.h"

#include <fmt/format.h>

#include "core/errors.h"
#include "schedule/fold.h"

namespace hoop::schedule {

Hosts hosts_of(const CollectiveDesc& d, int r, const char* algorithm) {
  const Topology topo = d.topology ? *d.topology : Topology::single_host(d.nranks);
  if (topo.host_of_rank.size() != static_cast<size_t>(d.nranks)) {
    throw_error(ErrorCode::internal, fmt::format("{}: topology of {} ranks for {} ranks", algorithm,
                                                 topo.host_of_rank.size(), d.nranks));
  }
  // Every host's ranks in one pass (ranks_of_host per host would cost N per host: at 65,536
  // ranks on 8,192 hosts that is most of the time of a schedule).
  Hosts h;
  h.members.resize(static_cast<size_t>(topo.nhosts()));
  for (int q = 0; q < d.nranks; ++q) {
    h.members[static_cast<size_t>(topo.host_of_rank[static_cast<size_t>(q)])].push_back(q);
  }
  h.of_rank = topo.host_of_rank[static_cast<size_t>(r)];
  return h;
}

void append_mapped(RankSchedule& out, const RankSchedule& sub, const std::vector<int>& members,
                   Buf input, size_t offset) {
  auto place = [&](Range r) {
    if (r.buf == Buf::send) r.buf = input;
    r.offset += offset;
    return r;
  };
  for (const Step& step : sub.steps) {
    Step mapped;
    std::vector<int> index(step.actions.size(), -1);
    for (size_t i = 0; i < step.actions.size(); ++i) {
      Action a = step.actions[i];
      const bool transfer = a.kind == ActionKind::send || a.kind == ActionKind::recv_copy ||
                            a.kind == ActionKind::recv_reduce;
      const size_t moved = a.kind == ActionKind::send ? a.src.count : a.dst.count;
      if (transfer && moved == 0) continue;
      if (a.peer >= 0) a.peer = members.at(static_cast<size_t>(a.peer));
      a.src = place(a.src);
      a.dst = place(a.dst);
      if (a.after >= 0) a.after = index[static_cast<size_t>(a.after)];
      index[i] = static_cast<int>(mapped.actions.size());
      mapped.actions.push_back(a);
    }
    add_step(out, std::move(mapped));
  }
}

}  // namespace hoop::schedule
