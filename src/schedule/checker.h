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
//  - shared-region steps (shm-direct: publish, wait_flag, read, read_reduce) run their actions in
//    order; a wait or a read of a peer waits until the peer's flag reaches the value named.
//    Happens-before is tracked with vector clocks (a wait takes the peer's clock at that
//    publish), and every access to another rank's memory is checked against it: a read must
//    follow the publish after the owner's last write there, an owner's write must follow the
//    publish after each peer's read there, and a rank may return only once every read of its
//    send and recv buffers by a peer is ordered before (region windows are the transport's to
//    recycle between operations).
//
// Checked: ranges inside their buffers (send/recv sizes of the op, in-place aliasing, scratch
// within scratch_count); no write to the caller's input (send out of place, or any buffer of a
// non-root in Reduce); peers, channels and `after` valid; matched sends and receives of equal
// size; no two concurrent transfers of a step writing overlapping memory, none reading what
// another writes (except a send forwarding its own `after` receive from the same place); each
// reduction combines the same element of disjoint sets of ranks, both defined and divided alike;
// no deadlock (the ranks left waiting, and on whom or which flag, are named); and the outputs: AllReduce every
// element of every rank reduced over all ranks exactly once with the same expression on every
// rank; ReduceScatter chunk r on rank r; AllGather block r = rank r's input; Broadcast the
// root's input; Reduce at the root only; avg divided exactly once (or not at all when N = 1);
// Barrier: every rank has (transitively) heard from every rank before it finishes; AllToAll(v)
// block q of rank r = rank q's block for r; Gather(v) block q at the root = rank q's input;
// Scatter(v) rank r = the root's block r; AllGatherv block q = rank q's input; ReduceScatterv
// rank r = block r reduced over all ranks; for the v-forms, recv elements outside every block
// untouched, and each receiver's count equal to its sender's (else the calls do not match).
// The v-forms' calls differ between ranks (each names its own counts): they are checked from
// one CollectiveDesc per rank.
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
// The same with each rank's own call (descs[r]; op, N, root, redop and channels from descs[0]).
std::string check_schedules(const std::vector<CollectiveDesc>& descs, const std::vector<RankSchedule>& schedules);

// Builds `algorithm` for every rank and checks the result (also "" or the problem).
std::string check_algorithm(const std::string& algorithm, const CollectiveDesc& desc);
std::string check_algorithm(const std::string& algorithm, const std::vector<CollectiveDesc>& descs);

}  // namespace hoop::schedule
