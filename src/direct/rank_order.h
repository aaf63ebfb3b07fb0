// The one reduction loop of shm-direct: inputs combined in rank order, so that every rank
// computing a piece of the result gets the same bits.
#pragma once

#include <cstddef>

#include "hoop/types.h"
#include "kernels/reduce.h"

namespace hoop::direct {

// dst = input(0) op input(1) op ... op input(n-1) over `count` elements (n >= 2), then the
// average's division. input(q) is called once per rank, in rank order, and returns where that
// rank's input is; partial results go to `partial` (which may be dst), only the last step writes
// dst, so dst may be an input consumed before that step.
template <class Input>
void reduce_in_rank_order(std::byte* dst, std::byte* partial, int n, Input&& input, size_t count, DataType dt,
                          RedOp op) {
  const std::byte* first = input(0);
  for (int q = 1; q < n; ++q) {
    std::byte* out = q == n - 1 ? dst : partial;
    const std::byte* next = input(q);
    kernels::reduce(out, q == 1 ? first : partial, next, count, dt, op);
  }
  if (op == RedOp::avg) kernels::finish_avg(dst, count, dt, n);
}

}  // namespace hoop::direct
