// The schedule checker: runs the schedules of all N ranks of one collective symbolically, without
// any I/O, and reports the first way in which they are wrong.
//
// Model. Every element holds a symbolic value: which input element it came from, the set of
// ranks whose inputs were reduced into it, how many times it was divided by N (avg), and a hash
// of the reduction's expression tree (commutative at each node, as IEEE addition is), so that
// ranks that reduce in different orders are told apart. The engine's semantics:
//  - a rank starts step k when its step k-1 is complete;
//  - the local actions of a step (copy, finish_avg) run first, in listed order; then the
//    transfers of the step run concurrently;
//  - the k-th send from a to b on channel c is matched with b's k-th receive from a on c
//    (program order: step, then position in the step); transfers on one (peer, direction,
//    channel) run in listed order;
//  - a transfer completes only while both sides are in the steps holding it (no buffering is
//    assumed: a schedule that needs the link to buffer a whole message is reported as a
//    deadlock); a send with `after` also waits for that receive of its own step.
//
// Checked: ranges inside their buffers (send/recv sizes of the op, in-place aliasing, scratch
// within scratch_count); no write to the caller's input (send out of place, or any buffer of a
// non-root in Reduce); peers, channels and `after` valid; matched sends and receives of equal
// size; no two concurrent transfers of a step writing overlapping memory, none reading what
// another writes (except a send forwarding its own `after` receive from the same place); each
// reduction combines the same element of disjoint sets of ranks, both defined and divided alike;
// no deadlock (the ranks left waiting, and on whom, are named); and the outputs: AllReduce every
// element of every rank reduced over all ranks exactly once with the same expression on every
// rank; ReduceScatter chunk r on rank r; AllGather block r = rank r's input; Broadcast the
// root's input; Reduce at the root only; avg divided exactly once; Barrier: every rank has
// (transitively) heard from every rank before it finishes.
// Up to kCheckerMaxRanks ranks; point-to-point operations are not modelled.
#pragma once

#include <string>
#include <vector>

#include "schedule/schedule.h"

namespace hoop::schedule {

inline constexpr int kCheckerMaxRanks = 64;

// "" when schedules[r] (for every rank r of desc.nranks) implement `desc` correctly, else a
// description of the first problem: algorithm, op, N, count, then rank, step and action.
std::string check_schedules(const CollectiveDesc& desc, const std::vector<RankSchedule>& schedules);

// Builds `algorithm` for every rank and checks the result (also "" or the problem).
std::string check_algorithm(const std::string& algorithm, const CollectiveDesc& desc);

}  // namespace hoop::schedule
