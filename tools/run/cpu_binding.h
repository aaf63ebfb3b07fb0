// Pinning the ranks hoop-run starts on this machine, one per CPU, round-robin where they
// outnumber the CPUs. Ranks that share a core with no pinning migrate and wait on each other's
// time slices: on a 2-core machine two unpinned ranks see small-message latencies from 1 to 30
// us, pinned ones a steady sub-microsecond. Where they outnumber the CPUs (Open MPI leaves them
// unpinned there) the scheduler placed them differently from job to job, and a job's calls ran
// at one of two speeds throughout: 4 ranks on 2 cores took 23 or 58-70 us for an AllToAll of
// 256 KiB by the job; pinned round-robin, 22-24 in every job.
#pragma once

#include <string>
#include <vector>

namespace hoop::run {

// The CPUs hoop-run may run on (its affinity mask), in increasing order.
std::vector<int> allowed_cpus();

// The CPU of each rank, or -1 for "not pinned". `here[r]`: rank r starts on this machine (not
// through a launcher). mode "auto" and "core": pin round-robin over `cpus` however many ranks
// there are (one each where they fit); "none": pin nothing.
std::vector<int> plan_binding(const std::string& mode, const std::vector<bool>& here,
                              const std::vector<int>& cpus);

}  // namespace hoop::run
