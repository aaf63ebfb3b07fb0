// Ring algorithms: AllReduce (ReduceScatter then AllGather around the ring), ReduceScatter and
// AllGather. Every rank sends to r+1 and receives from r-1.
#include "schedule/schedule_builders.h"

namespace hoop::schedule {

int ring_allreduce_owned_chunk(int rank, int nranks) { return (rank + 1) % nranks; }

RankSchedule ring_allreduce(const CollectiveDesc& d, int r, RingPhases phases) {
  RankSchedule s;
  s.algorithm = "ring";
  const int n = d.nranks;
  const Chunking chunks{d.count, n};
  auto chunk = [&](Buf b, int c) { return Range{b, chunks.offset(c), chunks.size(c)}; };
  if (n == 1) {
    if (!d.in_place && phases == RingPhases::both) {
      s.steps.push_back({{local_copy(Range{Buf::send, 0, d.count}, Range{Buf::recv, 0, d.count})}});
    }
    return s;
  }
  const int right = wrap(r + 1, n), left = wrap(r - 1, n);
  const bool avg = d.redop == RedOp::avg;
  const int owned = ring_allreduce_owned_chunk(r, n);

  if (phases != RingPhases::allgather_only) {
    // ReduceScatter: the chunk sent at step k is the one reduced at step k-1.
    for (int k = 0; k < n - 1; ++k) {
      const int sc = wrap(r - k, n), rc = wrap(r - k - 1, n);
      Step step;
      step.actions.push_back(send_to(right, chunk(k == 0 ? Buf::send : Buf::recv, sc)));
      step.actions.push_back(recv_reduce_from(left, chunk(Buf::send, rc), chunk(Buf::recv, rc)));
      s.steps.push_back(std::move(step));
    }
    if (avg && phases == RingPhases::reduce_scatter_only) {
      s.steps.push_back({{finish_avg(chunk(Buf::recv, owned))}});
    }
  }
  if (phases != RingPhases::reduce_scatter_only) {
    // AllGather: at step k forward the chunk received at step k-1, starting with the owned one.
    for (int k = 0; k < n - 1; ++k) {
      const int sc = wrap(r + 1 - k, n), rc = wrap(r - k, n);
      Step step;
      if (k == 0 && avg && phases == RingPhases::both) {
        step.actions.push_back(finish_avg(chunk(Buf::recv, owned)));
      }
      step.actions.push_back(send_to(right, chunk(Buf::recv, sc)));
      step.actions.push_back(recv_copy_from(left, chunk(Buf::recv, rc)));
      s.steps.push_back(std::move(step));
    }
  }
  return s;
}

RankSchedule ring_reducescatter(const CollectiveDesc& d, int r) {
  RankSchedule s;
  s.algorithm = "ring";
  const int n = d.nranks;
  const size_t c = d.count;  // elements per rank
  auto input = [&](int i) { return Range{Buf::send, static_cast<size_t>(i) * c, c}; };
  const Range out{Buf::recv, 0, c};
  if (n == 1) {
    if (!d.in_place) s.steps.push_back({{local_copy(input(0), out)}});
    return s;
  }
  const int right = wrap(r + 1, n), left = wrap(r - 1, n);
  // Partial sums alternate between two scratch slots: at step k the send reads the slot written
  // at step k-1 while the receive writes the other one. The last step reduces into recv.
  auto slot = [&](int k) { return Range{Buf::scratch, static_cast<size_t>(k % 2) * c, c}; };
  for (int k = 0; k < n - 1; ++k) {
    const int sc = wrap(r - k - 1, n), rc = wrap(r - k - 2, n);
    Step step;
    step.actions.push_back(send_to(right, k == 0 ? input(sc) : slot(k - 1)));
    step.actions.push_back(recv_reduce_from(left, input(rc), k == n - 2 ? out : slot(k)));
    s.steps.push_back(std::move(step));
  }
  s.scratch_count = n > 2 ? 2 * c : 0;
  if (d.redop == RedOp::avg) s.steps.push_back({{finish_avg(out)}});
  return s;
}

RankSchedule ring_allgather(const CollectiveDesc& d, int r) {
  RankSchedule s;
  s.algorithm = "ring";
  const int n = d.nranks;
  const size_t c = d.count;  // elements per rank
  auto block = [&](int i) { return Range{Buf::recv, static_cast<size_t>(i) * c, c}; };
  const Range mine{Buf::send, 0, c};
  if (n == 1) {
    if (!d.in_place) s.steps.push_back({{local_copy(mine, block(0))}});
    return s;
  }
  const int right = wrap(r + 1, n), left = wrap(r - 1, n);
  for (int k = 0; k < n - 1; ++k) {
    Step step;
    if (k == 0 && !d.in_place) step.actions.push_back(local_copy(mine, block(r)));
    step.actions.push_back(send_to(right, k == 0 ? mine : block(wrap(r - k, n))));
    step.actions.push_back(recv_copy_from(left, block(wrap(r - k - 1, n))));
    s.steps.push_back(std::move(step));
  }
  return s;
}

}  // namespace hoop::schedule
