// f16/bf16 reductions through an f32 staging buffer.
#include "comm/comm_impl.h"

#include "core/errors.h"
#include "kernels/reduce.h"

namespace hoop::detail {

using schedule::CollectiveDesc;

// f16/bf16 reductions accumulate in f32 and round once: inputs are widened into a staging
// buffer, reduced as f32 in place there (shm-direct too), and the result narrowed. The ring AllReduce narrows each owned
// chunk before its AllGather phase, so the gather moves 16-bit data.
void CommImpl::run_half_precision(const OpTask& t, const std::string& algo, engine::OpIdentity id,
                                  std::chrono::milliseconds timeout) {
  const auto& d = t.desc;
  const int n = size();
  CollectiveDesc d32 = d;
  d32.in_place = true;
  const size_t es = dtype_size(t.dtype);
  auto* out = static_cast<std::byte*>(t.recv);
  switch (d.op) {
    case OpType::allreduce: {
      auto* f = static_cast<float*>(staging_.get(d.count * sizeof(float)));
      kernels::to_f32(f, t.send, t.dtype, d.count);
      const auto chosen_schedule = schedule_for(algo, d32, DataType::f32);
      const auto& chosen = *chosen_schedule;
      if (chosen.algorithm != "ring") {
        run_schedule(chosen, DataType::f32, {f, f, nullptr}, id, timeout);
        kernels::from_f32(out, t.dtype, f, d.count);
        return;
      }
      id.phase = 0;
      run_schedule(schedule::ring_allreduce(d32, rank_, schedule::RingPhases::reduce_scatter_only),
                   DataType::f32, {f, f, nullptr}, id, timeout);
      const schedule::Chunking chunks{d.count, n};
      const int owned = schedule::ring_allreduce_owned_chunk(rank_, n);
      const size_t off = chunks.offset(owned);
      kernels::from_f32(out + off * es, t.dtype, f + off, chunks.size(owned));
      id.phase = 1;
      run_schedule(schedule::ring_allreduce(d32, rank_, schedule::RingPhases::allgather_only),
                   t.dtype, {t.recv, t.recv, nullptr}, id, timeout);
      return;
    }
    case OpType::reducescatter:
    case OpType::reducescatterv: {
      const schedule::Blocks in = d.blocks ? d.blocks->send : schedule::Blocks::uniform(d.count, n);
      const size_t total = in.total();
      auto* f = static_cast<float*>(staging_.get(total * sizeof(float)));
      kernels::to_f32(f, t.send, t.dtype, total);
      float* mine = f + in.displ(rank_);
      run_schedule(*schedule_for(algo, d32, DataType::f32), DataType::f32, {f, mine, nullptr}, id, timeout);
      kernels::from_f32(out, t.dtype, mine, in.count(rank_));
      return;
    }
    case OpType::reduce: {
      auto* f = static_cast<float*>(staging_.get(d.count * sizeof(float)));
      kernels::to_f32(f, t.send, t.dtype, d.count);
      run_schedule(*schedule_for(algo, d32, DataType::f32), DataType::f32, {f, f, nullptr}, id, timeout);
      if (rank_ == d.root) kernels::from_f32(out, t.dtype, f, d.count);
      return;
    }
    default:
      throw_error(ErrorCode::internal, "run_half_precision called for a non-reducing op");
  }
}

}  // namespace hoop::detail
