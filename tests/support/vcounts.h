// Uneven counts for the tests of the v-forms (AllToAllv, Gatherv, Scatterv, AllGatherv,
// ReduceScatterv): how many elements rank `from` sends to rank `to` under a pattern, and the
// blocks laid out from them, packed or spread with gaps in reverse rank order.
#pragma once

#include <cstddef>
#include <vector>

#include "hoop/types.h"
#include "schedule/schedule.h"

namespace hoop::test {

inline constexpr int kCountPatterns = 5;

// Pattern 0: all zero; 1: all one; 2: 0..4 with zeros for some peers; 3: larger, prime-ish;
// 4: only even targets get data.
size_t vcount(int pattern, int from, int to, int n);

// Blocks of `counts`: packed in rank order, or (spread) in reverse rank order with a gap of
// (j % 3) elements before block j.
schedule::Blocks layout_blocks(const std::vector<size_t>& counts, bool spread);

// The counts of `op` on rank r of n under `pattern`: what each rank's call names.
//  alltoallv: send (r -> j) and recv (j -> r) per peer; gatherv (root): recv, rank j's
//  sendcount; scatterv (root): send, rank j's recvcount; allgatherv: recv, reducescatterv:
//  send, rank j's count.
std::vector<size_t> send_counts(OpType op, int pattern, int r, int n, int root);
std::vector<size_t> recv_counts(OpType op, int pattern, int r, int n, int root);
// This rank's own count argument: gatherv's sendcount, scatterv's recvcount.
size_t own_count(OpType op, int pattern, int r, int n, int root);

// Every rank's CollectiveDesc of a v-form call (schedule checker).
std::vector<schedule::CollectiveDesc> v_descs(OpType op, int n, int pattern, bool spread, int root,
                                              bool in_place, RedOp redop);

}  // namespace hoop::test
