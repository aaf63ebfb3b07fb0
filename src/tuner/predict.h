// Prices a schedule under a cost model. The time is evaluated from the very schedules the
// library would run (schedule::build), not from a second copy of formulas:
//  - a rank's steps run one after another; the actions of a step run concurrently;
//  - a step costs the slowest of its connections (alpha + bytes/beta), or of its endpoint
//    (bytes of all its connections of a class / endpoint_beta: a rank's copy rate for shm, its
//    host's NIC for tcp, shared with the host's other ranks in the same step), plus the CPU
//    part of further messages (overhead_fraction * alpha each), plus reduced bytes * gamma and
//    copied bytes * copy;
//  - a receive whose sender forwards it (Action::after) waits for the sender's own pipeline to
//    fill: one slice time per hop upstream (chains and trees), paid once per rank (its longest
//    fill), since later steps overlap the earlier steps' forwarding; a Broadcast (and a
//    Reduce's chain) is priced as one call of a stream of them, whose hops (within a host: of
//    a call under a slice) fill while the calls before drain;
//  - ranks advance in lockstep (step k of every rank at the same time): right for the
//    symmetric algorithms, an approximation for the others; the predicted time is the slowest
//    evaluated rank.
// For N <= 64 every rank is evaluated. Beyond that a sample: whole hosts (rank 0's, the last
// rank's, the root's and hosts spread evenly) until about 32 ranks, at most 8 ranks of one host.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "schedule/schedule.h"
#include "tuner/cost_model.h"

namespace hoop::tuner {

// Which link class joins two ranks: the topology's hosts (same host: shm), unless a transport
// is forced for every pair.
struct LinkView {
  const schedule::Topology* topology = nullptr;  // null: one host
  enum class Force { none, shm, tcp } force = Force::none;
  // The machine (kernel) each rank runs on: its ranks share the machine's cores, and hosts made
  // of network namespaces share one machine. Null or empty: every host is a machine.
  const std::vector<int>* machine_of_rank = nullptr;
  LinkClass between(int a, int b) const;
  int host_of(int rank) const;
  int machine_of(int rank) const;
  // What joins `nranks` ranks (for the registry's runs_here: shm-direct needs one host).
  schedule::Reach reach(int nranks) const;
};

struct Prediction {
  bool applicable = false;   // false: the algorithm cannot build this call
  std::string why_not;
  double seconds = 0;        // the slowest evaluated rank
  int critical_rank = -1;
  size_t steps = 0;          // most steps of an evaluated rank
  uint64_t max_rank_bytes_sent = 0;  // most bytes one evaluated rank sends
  uint64_t max_link_bytes = 0;       // most bytes over one connection, one direction
  uint64_t max_host_tcp_bytes = 0;   // most bytes one host sends over tcp (evaluated hosts)
  int ranks_evaluated = 0;
  bool sampled = false;      // true when not every rank was evaluated
  std::vector<std::pair<int, double>> rank_seconds;  // each evaluated rank's time
};

// Which ranks the walk evaluates: the sample above beyond 64 ranks (the tuner), or every rank
// (hoop-sim --exact, and the reference the symmetric forms are tested against).
enum class Walk { sampled, every_rank };

// Prices algorithm `name` for `desc` with elements of `elem_bytes` bytes. Never throws for an
// algorithm that does not apply: applicable is false then.
Prediction predict(const std::string& name, const schedule::CollectiveDesc& desc, size_t elem_bytes,
                   const LinkView& links, const CostModel& model, Walk walk = Walk::sampled);

// The same for an already built set of schedules (all ranks): for tests on hand-made schedules.
Prediction predict_schedules(const std::vector<schedule::RankSchedule>& ranks, size_t elem_bytes,
                             const LinkView& links, const CostModel& model);

}  // namespace hoop::tuner
