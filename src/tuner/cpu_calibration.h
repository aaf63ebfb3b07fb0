// What a message costs the processor, measured at start-up (calibration.h): rank 0 and a
// partner on its own machine run on one core for the measurement (both pinned to the core rank
// 0 is on, their affinity restored after) and exchange bursts of messages through the
// communicator's send/recv. On one core nothing overlaps: a round of k messages each way takes
// 4k message ends (cpu + bytes * cpu_byte each) and two hand-overs between the ranks. Bursts
// of 1 and 8 small messages, and of 8 larger ones, taking turns, give the three (fastest round
// of each: noise only adds time). These are what ranks sharing a machine's cores (a lab of network namespaces,
// more ranks than cores) pay for every message.
#pragma once

#include "hoop/communicator.h"
#include "tuner/cost_model.h"

namespace hoop::tuner {

// Called by rank 0 and `partner` (a rank of rank 0's machine) together. On rank 0, sets l.cpu,
// l.cpu_byte and l.handoff when both could be pinned and the figures make sense; otherwise,
// and on the partner, leaves l as it is. Over a shaped link (l.sustained > 0 on rank 0) each
// round waits first for the link's token buckets to refill for it.
void measure_processor(Communicator& comm, int partner, LinkCost& l);

// The processors this machine has online (what the engine compares its ranks with).
int machine_cores();

// The three figures from the fastest rounds (seconds): 1 and 8 messages of `small` bytes, and
// 8 of `large` bytes, each way. False when they do not make sense (a round of 8 no slower than
// one of 1).
bool processor_costs_from_rounds(double one_small, double eight_small, double eight_large, size_t small, size_t large,
                                 LinkCost& l);

}  // namespace hoop::tuner
