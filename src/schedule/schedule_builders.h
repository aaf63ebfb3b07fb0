// Small constructors shared by the schedule builders.
#pragma once

#include "schedule/schedule.h"

namespace hoop::schedule {

inline int wrap(int x, int n) { return ((x % n) + n) % n; }

inline Action send_to(int peer, Range src, int after = -1) {
  Action a;
  a.kind = ActionKind::send;
  a.peer = peer;
  a.src = src;
  a.after = after;
  return a;
}
inline Action recv_copy_from(int peer, Range dst) {
  Action a;
  a.kind = ActionKind::recv_copy;
  a.peer = peer;
  a.dst = dst;
  return a;
}
// dst = op(local, received)
inline Action recv_reduce_from(int peer, Range local, Range dst) {
  Action a;
  a.kind = ActionKind::recv_reduce;
  a.peer = peer;
  a.src = local;
  a.dst = dst;
  return a;
}
inline Action local_copy(Range src, Range dst) {
  Action a;
  a.kind = ActionKind::copy;
  a.src = src;
  a.dst = dst;
  return a;
}
inline Action finish_avg(Range dst) {
  Action a;
  a.kind = ActionKind::finish_avg;
  a.dst = dst;
  return a;
}

// Shared-region actions (shm-direct).
inline Action publish() { return Action{.kind = ActionKind::publish}; }
inline Action wait_flag(int peer, uint32_t flag) {
  return Action{.kind = ActionKind::wait_flag, .peer = peer, .flag = flag};
}
// dst = `remote` of `peer`, once its flag reaches `flag`.
inline Action read_from(int peer, uint32_t flag, Range remote, Range dst) {
  return Action{.kind = ActionKind::read, .peer = peer, .dst = dst, .remote = remote, .flag = flag};
}
// dst = op(local, `remote` of `peer`), once its flag reaches `flag`.
inline Action read_reduce_from(int peer, uint32_t flag, Range remote, Range local, Range dst) {
  return Action{.kind = ActionKind::read_reduce, .peer = peer, .src = local, .dst = dst, .remote = remote, .flag = flag};
}
// `remote` of `peer` (its send or recv) = src, once its flag reaches `flag`.
inline Action write_to(int peer, uint32_t flag, Range remote, Range src) {
  return Action{.kind = ActionKind::write, .peer = peer, .src = src, .remote = remote, .flag = flag};
}

}  // namespace hoop::schedule
