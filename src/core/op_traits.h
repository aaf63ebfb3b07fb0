// What kind of call an OpType and DataType make, for the layers that treat kinds alike: the one
// place these predicates are derived (add one here rather than a local switch).
#pragma once

#include "hoop/types.h"

namespace hoop {

// Combines the ranks' inputs with a RedOp.
inline bool is_reducing(OpType op) {
  return op == OpType::allreduce || op == OpType::reducescatter || op == OpType::reduce ||
         op == OpType::reducescatterv;
}

// Has a root rank (CollectiveDesc::root).
inline bool has_root(OpType op) {
  return op == OpType::broadcast || op == OpType::reduce || op == OpType::gather || op == OpType::gatherv ||
         op == OpType::scatter || op == OpType::scatterv;
}

// A v-form: per-rank counts and displacements (CollectiveDesc::blocks).
inline bool is_vector_op(OpType op) {
  return op == OpType::alltoallv || op == OpType::gatherv || op == OpType::scatterv ||
         op == OpType::allgatherv || op == OpType::reducescatterv;
}

// The v-forms whose counts differ between ranks' calls (each rank names only its own): the
// headers' count field is not compared for them, the payload sizes are.
inline bool has_per_rank_count(OpType op) {
  return op == OpType::alltoallv || op == OpType::gatherv || op == OpType::scatterv;
}

// Send or Recv: one peer, not a collective.
inline bool is_point_to_point(OpType op) { return op == OpType::send || op == OpType::recv; }

// Has an in-place form in the API (include/hoop/communicator.h): all but AllToAllv.
inline bool has_in_place(OpType op) { return op != OpType::alltoallv; }

// The send buffer holds one block per rank (at the root only, for Scatter).
inline bool sends_block_per_rank(OpType op) {
  return op == OpType::reducescatter || op == OpType::reducescatterv || op == OpType::scatter ||
         op == OpType::scatterv || op == OpType::alltoall || op == OpType::alltoallv;
}

// The receive buffer holds one block per rank (at the root only, for Gather).
inline bool receives_block_per_rank(OpType op) {
  return op == OpType::allgather || op == OpType::allgatherv || op == OpType::gather ||
         op == OpType::gatherv || op == OpType::alltoall || op == OpType::alltoallv;
}

// The 16-bit floating-point types, which hoop reduces in f32.
inline bool is_half(DataType dt) { return dt == DataType::f16 || dt == DataType::bf16; }

// A reduction of a half type: staged through f32, so that it is priced and run with 4-byte
// elements.
inline bool is_half_reduction(DataType dt, OpType op) { return is_half(dt) && is_reducing(op); }

}  // namespace hoop
