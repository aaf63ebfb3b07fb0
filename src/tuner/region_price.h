// The price of shm-direct's shared-region actions in a schedule walk (predict.cc): what a rank
// reads of a peer's memory is a copy by its own core (the copy rate, not a link's beta: no
// second process copies the bytes through a buffer), a reduction adds gamma per byte, and a
// step that waits on peers pays one synchronisation. A synchronisation
// is a flag stored and read in shared memory, not a framed message through a link: measured
// with pinned ranks, a 1 KiB AllReduce of 2 ranks takes 0.40 us over shm-direct and 2.87 us
// over the ring, so one is priced at a quarter of the shm alpha.
#pragma once

#include "schedule/schedule.h"
#include "tuner/cost_model.h"

namespace hoop::tuner {

inline constexpr double kSyncPerAlpha = 0.25;

// Seconds of one shared-region action of `rank`, `bytes` its data (a write's: its source); `synced`: whether the step
// already paid its synchronisation (set here when this action pays it).
inline double region_action_seconds(const schedule::Action& a, int rank, double bytes, const CostModel& m,
                                    bool& synced) {
  using schedule::ActionKind;
  if (a.kind == ActionKind::publish) return 0;
  const bool remote = a.peer != rank;
  double t = 0;
  if (remote && !synced) {
    t += kSyncPerAlpha * m.shm.alpha;
    synced = true;
  }
  if (a.kind == ActionKind::read || a.kind == ActionKind::write) t += bytes * m.copy;
  if (a.kind == ActionKind::read_reduce) t += bytes * m.gamma;
  return t;
}

}  // namespace hoop::tuner
