// Random collectives whose every result can be checked exactly, for the soak and the fault
// tests: all ranks draw the same sequence of operations from a shared seed; inputs are small
// integers (in every dtype, f16/bf16 included) so that sums, products, minima and averages
// over a power-of-two number of ranks are exact in any order of reduction, and the expected
// bits are computed here, independently of the library.
#pragma once

#include <cstddef>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "hoop/communicator.h"
#include "hoop/types.h"

namespace hoop::test {

struct RandomOp {
  OpType op = OpType::allreduce;  // never send/recv
  DataType dtype = DataType::f32;
  RedOp redop = RedOp::sum;
  size_t count = 0;  // the API's count (per rank for reducescatter/allgather)
  int root = 0;
  bool in_place = false;
  std::string describe() const;  // "allreduce(count 100, f32, sum, in place)"
};

// Draws one operation for a group of `nranks` (a power of two, so averages are exact).
// Counts up to max_count, skewed to small ones (half below 1024).
RandomOp draw_op(std::mt19937_64& rng, int nranks, size_t max_count);

// One rank's buffers for one operation: inputs filled at construction, checked after it ran.
class OpBuffers {
 public:
  // `tag` distinguishes the inputs of different operations (use a per-op counter or seed).
  OpBuffers(const RandomOp& op, uint64_t tag, int rank, int nranks);
  OpBuffers(const OpBuffers&) = delete;
  OpBuffers& operator=(const OpBuffers&) = delete;
  OpBuffers(OpBuffers&&) = default;

  void run(Communicator& c);     // blocking
  Work start(Communicator& c);   // asynchronous
  // "" when every element this rank holds is what it must be, else the first wrong element.
  std::string verify() const;

  const RandomOp& op() const { return op_; }

 private:
  const void* send_ptr() const;
  void* recv_ptr();

  RandomOp op_;
  uint64_t tag_;
  int rank_, nranks_;
  std::vector<uint8_t> send_, recv_;
};

}  // namespace hoop::test
