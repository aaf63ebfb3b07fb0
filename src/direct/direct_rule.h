// When shm-direct runs, and its tunables. Until the tuner exists, preferred() is the whole
// size rule that picks shm-direct over the schedule-based algorithms for ranks of one host.
#pragma once

#include <cstddef>
#include <string_view>

#include "hoop/types.h"

namespace hoop::direct {

inline constexpr std::string_view kAlgorithmName = "shm-direct";

// The collectives shm-direct implements.
bool supports(OpType op);

// The fixed rule: should a call of `bytes` (the larger of the rank's input and output, in the
// caller's dtype) on `nranks` ranks of one host use shm-direct when nothing is forced?
bool preferred(OpType op, size_t bytes, int nranks);

// Region geometry and path choice, from HOOP_DIRECT_* or the defaults. Every rank of a job must
// see the same values (like HOOP_SLICE_BYTES).
struct Tunables {
  size_t cell_bytes;   // small-message cell per rank (and buffer); HOOP_DIRECT_CELL_BYTES
  size_t small_bytes;  // inputs up to this use the cells; HOOP_DIRECT_SMALL_BYTES
  size_t chunk_bytes;  // pipelined chunk slot per rank and stage; HOOP_DIRECT_CHUNK_BYTES
  size_t stages;       // chunks in flight; HOOP_DIRECT_STAGES
};
const Tunables& tunables(int nranks);

}  // namespace hoop::direct
