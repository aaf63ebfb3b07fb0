// Host grouping of the ranks, as the schedules see it.
#include <algorithm>
#include <map>

#include "schedule/schedule.h"

namespace hoop::schedule {

int Topology::nhosts() const {
  int n = 0;
  for (int h : host_of_rank) n = std::max(n, h + 1);
  return n;
}

std::vector<int> Topology::ranks_of_host(int host) const {
  std::vector<int> out;
  for (size_t r = 0; r < host_of_rank.size(); ++r) {
    if (host_of_rank[r] == host) out.push_back(static_cast<int>(r));
  }
  return out;
}

Topology Topology::single_host(int nranks) {
  Topology t;
  t.host_of_rank.assign(static_cast<size_t>(nranks), 0);
  return t;
}

Topology Topology::from_host_ids(const std::vector<std::string>& host_ids) {
  Topology t;
  std::map<std::string, int> index;
  for (const auto& id : host_ids) {
    auto [it, fresh] = index.emplace(id, static_cast<int>(index.size()));
    t.host_of_rank.push_back(it->second);
  }
  return t;
}

}  // namespace hoop::schedule
