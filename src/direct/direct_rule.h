// shm-direct's tunables. Which collectives it runs and where is the schedule registry's
// (schedule::runs_here); whether it runs when nothing is forced is the tuner's choice.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <string_view>
#include <vector>

#include "hoop/types.h"

namespace hoop::direct {

// Region geometry and path choice, from HOOP_DIRECT_* or the defaults. Every rank of a job must
// see the same values (like HOOP_SLICE_BYTES).
struct Tunables {
  size_t cell_bytes;   // small-message cell per rank (and buffer); HOOP_DIRECT_CELL_BYTES
  size_t small_bytes;  // inputs up to this use the cells; HOOP_DIRECT_SMALL_BYTES
  size_t chunk_bytes;  // pipelined chunk slot per rank and stage; HOOP_DIRECT_CHUNK_BYTES
  size_t stages;       // chunks in flight; HOOP_DIRECT_STAGES
  // AllReduce and Broadcast buffers of at least this many bytes (ReduceScatter and AllGather:
  // N blocks) are read straight from the peers' buffers (process_vm_readv) where the kernel
  // allows it, with no slot in between; HOOP_DIRECT_SINGLE_COPY_BYTES, 0: never.
  size_t single_copy_bytes;
  // AllReduce also needs this many bytes: below, its pipelined slots measured faster in place
  // (16 MiB, 2 ranks: 13.3 against 8.8 GB/s), and a rank cannot take its path from its own
  // in-place-ness (the peers' may differ); HOOP_DIRECT_SINGLE_COPY_ALLREDUCE_BYTES.
  size_t single_copy_allreduce_bytes;
  // AllToAll from this many bytes per rank (0: never): HOOP_DIRECT_SINGLE_COPY_ALLTOALL_BYTES
  // times N². A single-copy call ends waiting for every reader of the rank's buffers, which
  // costs more the more ranks share the cores: measured, it wins from 64 KiB on 2 ranks,
  // 256 KiB on 4 and 1 MiB on 8, and loses below.
  size_t single_copy_alltoall_bytes;
  // What a single-copy reduction reads from one peer per process_vm_readv: the call's cost
  // (pinning the peer's pages) wants large pieces; HOOP_DIRECT_SINGLE_COPY_PART_BYTES.
  size_t single_copy_part_bytes;
};

// Whether every process of `pids` may read the others' memory with process_vm_readv: the same
// user, and no Yama restriction beyond the classic ptrace rules. The same answer on every rank
// of one machine (it reads the same files).
bool single_copy_possible(const std::vector<pid_t>& pids);
const Tunables& tunables(int nranks);

}  // namespace hoop::direct
