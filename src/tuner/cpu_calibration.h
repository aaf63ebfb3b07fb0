// What a message costs the processor, measured at start-up (calibration.h): rank 0 and a
// partner on its own machine run on one core for the measurement (both pinned to the core rank
// 0 is on, their affinity restored after) and exchange bursts of messages through the
// communicator's send/recv. On one core nothing overlaps: a round of k messages each way takes
// 4k message ends (cpu + bytes * cpu_byte each) and two hand-overs between the ranks. Bursts
// of 1 and 8 small messages, and of 8 larger ones, taking turns, give the three (fastest round
// of each: noise only adds time). These are what ranks sharing a machine's cores (a lab of network namespaces,
// more ranks than cores) pay for every message.
#pragma once

#include <array>

#include "hoop/communicator.h"
#include "tuner/cost_model.h"

namespace hoop::tuner {

// Called by rank 0 and `partner` (a rank of rank 0's machine) together. On rank 0, sets l.cpu,
// l.cpu_byte and l.handoff when both could be pinned and the figures make sense; otherwise,
// and on the partner, leaves l as it is. Over a shaped link (l.sustained > 0 on rank 0) each
// round waits first for the link's token buckets to refill for it.
void measure_processor(Communicator& comm, int partner, LinkCost& l);

// Where every rank is a host of its own on one machine of fewer cores (a lab of network
// namespaces), the tcp hand-over and the call's skew (LinkCost::handoff, skew) are fitted to
// what the ranks pay together, stepping as an algorithm's ranks do: a ring AllReduce and a
// recursive doubling one of a few bytes (2(N-1) and log2 N steps), each call's time its slowest
// rank's, the median over calls (as hoop-bench reports a call). The pair of measure_processor,
// alone on a core while the machine's other ranks sleep, gives the fastest hand-over the core
// allows: on the lab's 8 ranks of 2 cores its rounds came at two speeds (17-22 and 32-42 us
// for one message each way), the fastest made `handoff` 3.2 us in some calibrations and 5.5 in
// others, and nothing priced a call's wait for ranks still ending the call before: the ring,
// the tree and recursive doubling at 1-4 KiB measured 1.3-1.7x what they were priced.

// The elements of each rank in the fitted calls: kFitElemsPerRank per rank of the ring.
inline constexpr size_t kFitElemsPerRank = 2;
inline size_t contended_fit_count(int nranks) { return kFitElemsPerRank * static_cast<size_t>(nranks); }

// Every rank of `comm` calls it: AllReduces of contended_fit_count floats forced to each of
// `algos` in turn; returns for each the median over its calls of each call's slowest rank, in
// seconds, on every rank.
std::array<double, 2> allreduce_call_seconds(Communicator& comm, const std::array<const char*, 2>& algos);

// Sets m.tcp.handoff and m.tcp.skew so that the model (m.cores cores, nranks hosts of one rank
// on one machine) prices the ring's and recursive doubling's calls at the measured times (it
// is linear in both). A fit that comes out negative keeps no skew and the ring's hand-over.
// False (m unchanged) when the ranks do not outnumber the cores or the algorithms do not apply.
bool fit_contended_step(double ring_call, double rd_call, int nranks, CostModel& m);

// The processors this machine has online (what the engine compares its ranks with).
int machine_cores();

// The three figures from the fastest rounds (seconds): 1 and 8 messages of `small` bytes, and
// 8 of `large` bytes, each way. False when they do not make sense (a round of 8 no slower than
// one of 1).
bool processor_costs_from_rounds(double one_small, double eight_small, double eight_large, size_t small, size_t large,
                                 LinkCost& l);

}  // namespace hoop::tuner
