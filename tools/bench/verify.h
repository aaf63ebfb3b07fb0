// Verification of one collective's results: fills this rank's inputs with the patterns of
// bench_data.h stored in the element type, and counts the output elements that differ from
// the exact expected values.
#pragma once

#include <cstddef>
#include <vector>

#include "hoop/types.h"

namespace hoop::bench {

class Verifier {
 public:
  Verifier(OpType collective, DataType dt, RedOp op, int rank, int nranks);

  size_t elem_size() const { return elem_; }

  // Writes this rank's input elements [first, first + n) into dst.
  void fill_input(void* dst, size_t n, size_t first = 0) const;
  // Overwrites n elements with 0xA5 bytes, a value no correct float result takes here (a tiny
  // negative number), so an output the collective forgot to write is caught. (For 8-bit
  // integers it is 165 / -91, which a wrapped sum over many ranks may legitimately equal.)
  void poison(void* dst, size_t n) const;
  // Elements of data (pattern indices [first, first + n)) that differ from the reduction over
  // all ranks.
  size_t count_wrong_reduced(const void* data, size_t n, size_t first) const;
  // Elements that differ from rank `src`'s input (the collectives that move data).
  size_t count_wrong_input(int src, const void* data, size_t n, size_t first) const;

 private:
  size_t count_wrong(const std::byte* table, const void* data, size_t n, size_t first) const;

  DataType dt_;
  size_t elem_;
  int rank_;
  // One pattern period per table, stored in the element type.
  std::vector<std::byte> inputs_;    // every rank's input, rank after rank
  std::vector<std::byte> reduced_;   // the expected reduction (reducing collectives only)
};

}  // namespace hoop::bench
