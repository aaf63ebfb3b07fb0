// Argument rules of the rest of the collective set (AllToAll(v), Gather(v), Scatter(v),
// AllGatherv, ReduceScatterv), for CommImpl::validate.
#pragma once

#include <cstddef>

#include "comm/comm_impl.h"
#include "hoop/error.h"

namespace hoop::detail {

// Elements a call reads from send and writes to recv on `rank`, from its counts and
// displacements (the end of the last-ending block). Throws invalid_argument for spans that are
// not one entry per rank, blocks that overflow the address space, or a rank's own block
// whose two counts differ.
struct Extents {
  size_t send = 0;
  size_t recv = 0;
};
Extents vector_extents(const OpTask& t, int rank, int nranks, const ErrorContext& ctx);
// The same for a collective of one count (not a v-form): elements from its count, N blocks
// where it has one per rank; none where the rank does not use the buffer (a broadcast's
// non-root send, a reduce's non-root recv, ...).
Extents call_extents(OpType op, size_t count, int rank, int nranks, int root);

// What "in place" means for `op` (for the error about overlapping buffers).
const char* in_place_rule(OpType op);

}  // namespace hoop::detail
