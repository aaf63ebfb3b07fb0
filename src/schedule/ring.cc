// Ring algorithms: AllReduce (ReduceScatter then AllGather around the ring), ReduceScatter and
// AllGather, and their v-forms on uneven blocks. Every rank sends to r+1 and receives from r-1.
#include <algorithm>

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

namespace {

// Ring ReduceScatter over the blocks of the send buffer: rank r ends with the reduction of
// block r in recv.
RankSchedule ring_reducescatter_of(const CollectiveDesc& d, int r, const Blocks& in) {
  RankSchedule s;
  s.algorithm = "ring";
  const int n = d.nranks;
  const Range out{Buf::recv, 0, in.count(r)};
  if (n == 1) {
    if (!d.in_place) s.steps.push_back({{local_copy(in.range(Buf::send, 0), out)}});
    return s;
  }
  const int right = wrap(r + 1, n), left = wrap(r - 1, n);
  const size_t most = *std::max_element(in.counts.begin(), in.counts.end());
  // Partial sums alternate between two scratch slots: at step k the send reads the slot written
  // at step k-1 while the receive writes the other one. The last step reduces into recv.
  auto slot = [&](int k, int block) { return Range{Buf::scratch, static_cast<size_t>(k % 2) * most, in.count(block)}; };
  for (int k = 0; k < n - 1; ++k) {
    const int sc = wrap(r - k - 1, n), rc = wrap(r - k - 2, n);
    Step step;
    step.actions.push_back(send_to(right, k == 0 ? in.range(Buf::send, sc) : slot(k - 1, sc)));
    step.actions.push_back(recv_reduce_from(left, in.range(Buf::send, rc), k == n - 2 ? out : slot(k, rc)));
    s.steps.push_back(std::move(step));
  }
  s.scratch_count = n > 2 ? 2 * most : 0;
  if (d.redop == RedOp::avg) s.steps.push_back({{finish_avg(out)}});
  return s;
}

// Ring AllGather into the blocks of the recv buffer: rank r's input (block r's count) lands in
// block r on every rank.
RankSchedule ring_allgather_of(const CollectiveDesc& d, int r, const Blocks& out) {
  RankSchedule s;
  s.algorithm = "ring";
  const int n = d.nranks;
  const Range mine{Buf::send, 0, out.count(r)};
  auto block = [&](int i) { return out.range(Buf::recv, wrap(i, n)); };
  if (n == 1) {
    if (!d.in_place) s.steps.push_back({{local_copy(mine, block(0))}});
    return s;
  }
  const int right = wrap(r + 1, n), left = wrap(r - 1, n);
  for (int k = 0; k < n - 1; ++k) {
    Step step;
    if (k == 0 && !d.in_place) step.actions.push_back(local_copy(mine, block(r)));
    step.actions.push_back(send_to(right, k == 0 ? mine : block(r - k)));
    step.actions.push_back(recv_copy_from(left, block(r - k - 1)));
    s.steps.push_back(std::move(step));
  }
  return s;
}

}  // namespace

RankSchedule ring_reducescatter(const CollectiveDesc& d, int r) {
  return ring_reducescatter_of(d, r, Blocks::uniform(d.count, d.nranks));
}

RankSchedule ring_allgather(const CollectiveDesc& d, int r) {
  return ring_allgather_of(d, r, Blocks::uniform(d.count, d.nranks));
}

RankSchedule ring_reducescatterv(const CollectiveDesc& d, int r) { return ring_reducescatter_of(d, r, d.blocks->send); }

RankSchedule ring_allgatherv(const CollectiveDesc& d, int r) { return ring_allgather_of(d, r, d.blocks->recv); }

}  // namespace hoop::schedule
