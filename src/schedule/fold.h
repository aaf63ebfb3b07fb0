// Folding a rank count that is not a power of two onto the largest power of two below it, for
// the recursive halving/doubling schedules: of the first 2*(N - 2^k) ranks, each even rank hands
// its data to the odd rank after it before the exchanges and gets the result back after them.
// The 2^k ranks left ("virtual ranks") are the odd ranks of those pairs and every rank after
// them, in order; virtual rank v stands for the real ranks first_real(v) .. end_real(v)-1, so
// per-rank blocks of virtual ranks are contiguous and in rank order.
#pragma once

#include "schedule/schedule_builders.h"

namespace hoop::schedule {

struct Fold {
  int n = 1;
  int p2 = 1;   // largest power of two <= n
  int rem = 0;  // n - p2
  int levels = 0;  // log2(p2)

  explicit Fold(int nranks) : n(nranks) {
    while (p2 * 2 <= n) {
      p2 *= 2;
      ++levels;
    }
    rem = n - p2;
  }
  // Hands its data to rank r+1 and takes no part in the exchanges.
  bool folded_away(int r) const { return r < 2 * rem && r % 2 == 0; }
  // Takes the data of rank r-1 and returns it the result.
  bool absorbs(int r) const { return r < 2 * rem && r % 2 == 1; }
  int virtual_rank(int r) const { return r < 2 * rem ? r / 2 : r - rem; }
  int real_rank(int v) const { return v < rem ? 2 * v + 1 : v + rem; }
  // Real ranks [first_real(v), first_real(v+1)) are represented by virtual rank v (v <= p2).
  int first_real(int v) const { return v < rem ? 2 * v : v + rem; }
};

// The part every folded AllReduce shares: one rank (copy in to out), no data (nothing) and a
// rank folded away (hand its vector to r+1, get the result back) need no exchanges. Returns
// true when `s` is then complete.
inline bool fold_trivial_allreduce(const CollectiveDesc& d, int r, const Fold& f, RankSchedule& s) {
  const Range all_in{Buf::send, 0, d.count}, all_out{Buf::recv, 0, d.count};
  if (d.nranks == 1) {
    if (!d.in_place && d.count > 0) s.steps.push_back({{local_copy(all_in, all_out)}});
    return true;
  }
  if (d.count == 0) return true;
  if (f.folded_away(r)) {
    s.steps.push_back({{send_to(r + 1, all_in)}});
    s.steps.push_back({{recv_copy_from(r + 1, all_out)}});
    return true;
  }
  return false;
}

// Adds a transfer only when it moves data: both sides of a transfer compute the same count,
// so skipping empty ones on both sides keeps them matched and saves a header per link.
inline void add_transfer(Step& step, const Action& a) {
  const size_t count = a.kind == ActionKind::send ? a.src.count : a.dst.count;
  if (count > 0) step.actions.push_back(a);
}
inline void add_step(RankSchedule& s, Step step) {
  if (!step.actions.empty()) s.steps.push_back(std::move(step));
}

}  // namespace hoop::schedule
