// What the schedules over hosts share (hierarchical.cc, leaders.cc): the ranks of each host,
// and a schedule among some ranks laid into a rank's own schedule.
#pragma once

#include <vector>

#include "schedule/schedule.h"

namespace hoop::schedule {

// Every host's ranks, in rank order, and the host of `r`; desc.topology null means one host.
struct Hosts {
  std::vector<std::vector<int>> members;
  int of_rank = 0;
};
// Throws (naming `algorithm`) when the topology's rank count is not desc.nranks.
Hosts hosts_of(const CollectiveDesc& d, int r, const char* algorithm);

// Appends `sub` (a schedule among members[0..m-1]) to `out`: peers become real ranks, the
// send buffer is read from `input`, ranges move by `offset`, transfers of nothing are dropped.
void append_mapped(RankSchedule& out, const RankSchedule& sub, const std::vector<int>& members,
                   Buf input, size_t offset);

}  // namespace hoop::schedule
