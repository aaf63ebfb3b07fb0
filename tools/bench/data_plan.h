// What one rank passes to a collective and what it must find afterwards, for the verification
// patterns of bench_data.h: the count and displacement arrays of the v-forms, how much of its
// input it writes, and which span of whose input (or of the reduction) each block of its recv
// buffer must hold. Header-only so the unit tests can include it.
#pragma once

#include <cstddef>
#include <vector>

#include "bench_math.h"
#include "hoop/types.h"

namespace hoop::bench {

// The arrays of a call on one rank, for the collectives that split S among ranks (empty for the
// others). Packed blocks in rank order: AllToAll(v) sends pair_count(blocks, rank, j) elements
// to rank j and receives pair_count(blocks, s, rank) from rank s; the others send or receive
// the layout's blocks.
struct VectorArgs {
  std::vector<size_t> send_counts, send_displs;  // per destination rank
  std::vector<size_t> recv_counts, recv_displs;  // per source rank
};

inline VectorArgs vector_args(OpType c, const Layout& l, int rank) {
  VectorArgs v;
  if (c == OpType::alltoall || c == OpType::alltoallv) {
    const int n = static_cast<int>(l.blocks.size());
    for (int peer = 0; peer < n; ++peer) {
      v.send_counts.push_back(pair_count(l.blocks, rank, peer));
      v.recv_counts.push_back(pair_count(l.blocks, peer, rank));
    }
  } else {
    v.send_counts = v.recv_counts = l.blocks;
  }
  v.send_displs = displacements(v.send_counts);
  v.recv_displs = displacements(v.recv_counts);
  return v;
}

// A run of the recv buffer and what it must hold: elements [first, first + count) of rank
// `source`'s input, or of the reduction over all ranks (source kReduced).
inline constexpr int kReduced = -1;
struct ExpectedBlock {
  size_t offset = 0;  // elements into the recv buffer
  size_t count = 0;
  int source = kReduced;
  size_t first = 0;
};

struct DataPlan {
  size_t input_count = 0;  // this rank's input: elements [0, input_count) of the send buffer
  std::vector<ExpectedBlock> outputs;
};

inline DataPlan data_plan(OpType c, const Layout& l, const VectorArgs& v, int rank, int nranks,
                          int root) {
  DataPlan p;
  const bool is_root = rank == root;
  const auto me = static_cast<size_t>(rank);
  // Block s of the recv buffer from rank s, starting at element `first_of(s)` of its input.
  auto from_every_rank = [&](auto first_of) {
    for (int s = 0; s < nranks; ++s) {
      const auto k = static_cast<size_t>(s);
      p.outputs.push_back({v.recv_displs[k], v.recv_counts[k], s, first_of(s)});
    }
  };
  switch (c) {
    case OpType::allreduce:
      p.input_count = l.count;
      p.outputs.push_back({0, l.count, kReduced, 0});
      break;
    case OpType::reduce:
      p.input_count = l.count;
      if (is_root) p.outputs.push_back({0, l.count, kReduced, 0});
      break;
    case OpType::broadcast:
      p.input_count = is_root ? l.count : 0;
      p.outputs.push_back({0, l.count, root, 0});
      break;
    case OpType::reducescatter:
    case OpType::reducescatterv:
      p.input_count = l.count;
      p.outputs.push_back({0, l.blocks[me], kReduced, v.send_displs[me]});
      break;
    case OpType::scatter:
    case OpType::scatterv:
      p.input_count = is_root ? l.count : 0;
      p.outputs.push_back({0, l.blocks[me], root, v.send_displs[me]});
      break;
    case OpType::allgather:
    case OpType::allgatherv:
      p.input_count = l.blocks[me];
      from_every_rank([](int) { return size_t{0}; });
      break;
    case OpType::gather:
    case OpType::gatherv:
      p.input_count = l.blocks[me];
      if (is_root) from_every_rank([](int) { return size_t{0}; });
      break;
    case OpType::alltoall:
    case OpType::alltoallv:
      p.input_count = l.count;
      // Rank s's data for this rank starts where s's send buffer holds its block for rank.
      from_every_rank([&](int s) { return vector_args(c, l, s).send_displs[me]; });
      break;
    default: break;
  }
  return p;
}

}  // namespace hoop::bench
