// Reference computations for the end-to-end tests of the collectives: deterministic inputs
// per (case seed, rank, element index), the expected reductions computed independently of the
// library (integers exactly, with wrap-around; floats in double), and a hash of buffers so that
// the parent can compare what every rank received.
//
// Inputs are chosen per (dtype, op) so that every result is checkable:
//   floats: sum/avg in [0.5, 1.5) (no cancellation), prod in [0.9, 1.1] (stays finite),
//           min/max in [-100, 100) (exact);
//   integers: sum/min/max over the full range (sums wrap), prod odd values over the full range
//           (products wrap), avg small enough that the sum of 8 ranks cannot overflow.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "hoop/types.h"

namespace hoop::test::ref {

uint64_t mix64(uint64_t x) noexcept;

// Bits of input element `index` of `rank`, in the low dtype_size(dt) bytes.
uint64_t input_bits(DataType dt, RedOp op, uint64_t seed, int rank, size_t index);

// buf[j] = input(rank, first + j) for j < n.
void fill_inputs(void* buf, DataType dt, RedOp op, uint64_t seed, int rank, size_t first,
                 size_t n);

// Checks out[j] == op over ranks 0..nranks-1 of input(r, first + j), for j < n: integers
// exactly (avg: the sum divided by nranks, truncating), min/max exactly, other float results
// within relative_tolerance(dt) and, for f16/bf16 (accumulated in f32, rounded once), within
// half a unit in the last place. Returns "" when all match, else the first mismatch and how
// many elements differ.
std::string check_reduction(const void* out, DataType dt, RedOp op, uint64_t seed, int nranks,
                            size_t first, size_t n);

// Checks out[j] == input(rank, first + j) bit for bit, for j < n; "" or the first mismatch.
std::string check_inputs(const void* out, DataType dt, RedOp op, uint64_t seed, int rank,
                         size_t first, size_t n);

// Relative tolerance of a float result against the float64 reference; 0 for integers.
double relative_tolerance(DataType dt);

// Element j of buf as a double (integers converted), for messages.
double element_value(const void* buf, DataType dt, size_t j);

// A 64-bit hash of n bytes.
uint64_t hash_bytes(const void* data, size_t n) noexcept;

// Fills n bytes with a recognisable pattern (0xA5): memory nobody should write.
void fill_sentinel(void* data, size_t n);
// Index of the first byte that is not the sentinel, or n.
size_t first_non_sentinel(const void* data, size_t n);

}  // namespace hoop::test::ref
