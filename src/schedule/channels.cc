// Multi-channel schedules: the elements are cut into K parts and each part runs the base
// algorithm on its own channel (its own link to each peer), so K transfers per peer move at
// once: more connections in flight over TCP, more copies in parallel over shared memory.
//
// Layout: part p covers elements Chunking{count, K}.offset(p) .. offset(p+1) of the vector
// (AllReduce, Broadcast, Reduce), or of every rank's block (ReduceScatter's send buffer,
// AllGather's recv buffer); each part's scratch follows the previous part's. Step k of the
// result runs step k of every part; a part's forwarding indices (Action::after) move with it.
//
// Small counts use fewer parts: at most count / kMinElementsPerChannel, at least one, so no
// part is ever empty (an empty part would still cost a header per link and a step's latency).
// Cost: that of the base algorithm on n/K elements, K of them overlapping.
#include <algorithm>

#include "core/errors.h"
#include "schedule/schedule_builders.h"

namespace hoop::schedule {

int channel_parts(size_t count, int channels) {
  if (channels <= 1 || count == 0) return 1;
  const size_t most = std::max<size_t>(1, count / kMinElementsPerChannel);
  return static_cast<int>(std::min<size_t>(static_cast<size_t>(channels), most));
}

RankSchedule with_channels(ScheduleBuilder base, const CollectiveDesc& d, int r, int channels) {
  const int parts = channel_parts(d.count, channels);
  CollectiveDesc one = d;
  one.nchannels = 1;
  if (parts == 1) return base(one, r);
  const Chunking split{d.count, parts};
  // Which buffer holds one block per rank (element offsets are then per block).
  const bool send_blocked = d.op == OpType::reducescatter;
  const bool recv_blocked = d.op == OpType::allgather;
  RankSchedule out;
  size_t scratch_base = 0;
  for (int p = 0; p < parts; ++p) {
    CollectiveDesc dp = one;
    dp.count = split.size(p);
    const RankSchedule sp = base(dp, r);
    out.algorithm = sp.algorithm;
    auto map = [&](Range range) {
      if (range.buf == Buf::scratch) {
        range.offset += scratch_base;
      } else if ((range.buf == Buf::send && send_blocked) || (range.buf == Buf::recv && recv_blocked)) {
        const size_t block = range.offset / dp.count, within = range.offset % dp.count;
        if (range.count > 0 && within + range.count > dp.count) {
          throw_error(ErrorCode::internal, "with_channels: a range spans several per-rank blocks");
        }
        range.offset = block * d.count + split.offset(p) + within;
      } else {
        range.offset += split.offset(p);
      }
      return range;
    };
    if (out.steps.size() < sp.steps.size()) out.steps.resize(sp.steps.size());
    for (size_t k = 0; k < sp.steps.size(); ++k) {
      auto& merged = out.steps[k].actions;
      const int first = static_cast<int>(merged.size());
      for (Action a : sp.steps[k].actions) {
        a.src = map(a.src);
        a.dst = map(a.dst);
        if (a.after >= 0) a.after += first;
        a.channel = p;
        merged.push_back(a);
      }
    }
    scratch_base += sp.scratch_count;
  }
  out.scratch_count = scratch_base;
  return out;
}

}  // namespace hoop::schedule
