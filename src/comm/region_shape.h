// shm-direct's tunables (HOOP_DIRECT_*): how big the shared region's windows are, and for a
// call of a given element type the RegionShape its schedules are cut by (which path, chunk
// sizes). Every rank of a job must see the same values (like HOOP_SLICE_BYTES): the region's
// creator records them, and a rank whose own differ fails when it attaches.
#pragma once

#include <cstddef>
#include <cstdint>

#include "hoop/types.h"
#include "schedule/schedule.h"

namespace hoop::detail {

struct DirectTunables {
  size_t cell_bytes;   // small-message window per rank; HOOP_DIRECT_CELL_BYTES
  size_t small_bytes;  // inputs up to this go through the cells; HOOP_DIRECT_SMALL_BYTES
  size_t chunk_bytes;  // pipelined slot per rank and stage; HOOP_DIRECT_CHUNK_BYTES
  size_t stages;       // chunks in flight; HOOP_DIRECT_STAGES
  // AllReduce and Broadcast buffers of at least this many bytes (ReduceScatter and AllGather:
  // N blocks) are read straight from the peers' buffers (process_vm_readv) where the kernel
  // allows it, with no slot in between; HOOP_DIRECT_SINGLE_COPY_BYTES, 0: never.
  size_t single_copy_bytes;
  // AllReduce also needs this many bytes: below, its pipelined slots measured faster in place
  // (16 MiB, 2 ranks: 13.3 against 8.8 GB/s), and a rank cannot take its path from its own
  // in-place-ness (the peers' may differ); HOOP_DIRECT_SINGLE_COPY_ALLREDUCE_BYTES.
  size_t single_copy_allreduce_bytes;
  // AllGather also needs this many bytes (N blocks): with more ranks on the host than cores, an
  // eighth of single_copy_bytes per block times the ranks per core. Each rank reads N-1 blocks
  // with a kernel call each and ends waiting for every reader of its own, and with the cores
  // shared those cost turns of the scheduler: on 8 ranks over 2 cores the slots measured 1.3-1.5x
  // faster at 1-2 MiB and single copy 1.4x faster at 4 MiB; on 4, the slots 1.1x faster at
  // 512 KiB and single copy 1.3x faster at 1 MiB; on 2 ranks single copy wins from 1 MiB.
  size_t single_copy_allgather_bytes;
  // AllToAll from this many bytes per rank (0: never): HOOP_DIRECT_SINGLE_COPY_ALLTOALL_BYTES
  // times N². A single-copy call ends waiting for every reader of the rank's buffers, which
  // costs more the more ranks share the cores: measured, it wins from 64 KiB on 2 ranks,
  // 256 KiB on 4 and 1 MiB on 8, and loses below.
  size_t single_copy_alltoall_bytes;
  // What a single-copy reduction reads from one peer per part: the kernel's read (pinning the
  // peer's pages) wants large pieces; HOOP_DIRECT_SINGLE_COPY_PART_BYTES.
  size_t single_copy_part_bytes;
  // AllReduce and Reduce from this many bytes decide at run time, alike on every rank, whether
  // every rank's buffers are registered (zero copy); HOOP_DIRECT_REGISTERED_BYTES, 0: never.
  size_t registered_bytes;
  // Outputs of at least this many bytes are stored around the caches where a rank copies them
  // itself (zero copy's results, single copy's reads of registered buffers): below, the output
  // fits the caches and the caller finds it there; HOOP_DIRECT_STREAM_BYTES, 0: never.
  size_t stream_bytes;
  // This host runs more ranks than it has cores (RegionShape::broadcast_cells_done).
  bool more_ranks_than_cores;

  // Each of a rank's two windows: room for the cells or for every stage's slot.
  size_t window_bytes() const;
  // A digest of what the windows are cut by, recorded by the region's creator.
  uint64_t key() const;
};

// DirectTunables::single_copy_allgather_bytes for `nranks` ranks on a machine of `cores` cores
// (0: AllGather goes by single_copy_bytes alone).
size_t single_copy_allgather_bytes(size_t single_copy_bytes, int nranks, long cores);

// From HOOP_DIRECT_* (read once per rank count and measurement). `single_copy_read_bytes`: the
// calibration's CostModel::single_copy_read_bytes (0: not measured); the single-copy thresholds
// of ReduceScatter, AllGather, Broadcast and AllToAll that the environment leaves unset scale
// with it beyond 32 KiB, the read their defaults stand for.
const DirectTunables& direct_tunables(int nranks, size_t single_copy_read_bytes);

// The shape of shm-direct's schedules for elements of `elem_bytes` on `nranks` ranks; single
// copy only where the peers can read each other's memory (transport::shm::peers_can_read_each_other).
schedule::RegionShape region_shape(const DirectTunables& t, size_t elem_bytes, bool single_copy_possible);

}  // namespace hoop::detail
