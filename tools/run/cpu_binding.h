// Pinning the ranks hoop-run starts on this machine, one per CPU. Ranks that share a core with
// no pinning migrate and wait on each other's time slices: on a 2-core machine two unpinned
// ranks see small-message latencies from 1 to 30 us, pinned ones a steady sub-microsecond.
#pragma once

#include <string>
#include <vector>

namespace hoop::run {

// The CPUs hoop-run may run on (its affinity mask), in increasing order.
std::vector<int> allowed_cpus();

// The CPU of each rank, or -1 for "not pinned". `here[r]`: rank r starts on this machine (not
// through a launcher). mode "auto": pin when the ranks here fit in `cpus`, one each; "core":
// pin round-robin over `cpus` however many there are; "none": pin nothing.
std::vector<int> plan_binding(const std::string& mode, const std::vector<bool>& here,
                              const std::vector<int>& cpus);

}  // namespace hoop::run
