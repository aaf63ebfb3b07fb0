// Shared-memory links between ranks of one host.
//
// One segment per pair of ranks of a communicator, holding two single-producer
// single-consumer rings (one per direction). Whichever side arrives first creates it
// (O_CREAT|O_EXCL) and initialises it; the second maps it and unlinks the name at once, so
// nothing is left in /dev/shm once both are attached, whatever happens to them later. A
// segment whose creator dies before its peer attached is orphaned: the peer removes it when
// its communicator fails (shm_remove_rank_segments), the launcher removes what is left of the
// job (shm_remove_job_segments), and a link made with remove_if_unattached removes its own
// unused segment when it goes away before its peer came. Pages are pre-faulted at creation.
//
// A segment of the same name left by an earlier run under the same job id (already attached
// by someone in our place, or created by a process other than params.peer_pid) is never
// attached to: the lower rank removes it and both start over.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "core/clock.h"
#include "transport/link.h"

namespace hoop::transport {

struct ShmLinkParams {
  std::string job_id;     // names segments: /dev/shm/hoop-<job_id>-...
  uint64_t comm_id = 0;
  int my_rank = -1;       // ranks within the communicator
  int peer_rank = -1;
  int channel = 0;        // one segment per channel of a peer pair (multi-ring)
  pid_t peer_pid = 0;     // for liveness checks
  size_t capacity = 0;    // bytes per direction; 0: HOOP_SHM_RING_BYTES's value or default
  // For a link the peer may never need (point-to-point): when this side created the segment,
  // wrote nothing and the peer never attached, the link removes the name at destruction.
  bool remove_if_unattached = false;
};

// The ring per direction of a link between two of a host's `ranks_on_host` ranks:
// HOOP_SHM_RING_BYTES when set; else 4 MiB, halved (down to 16 KiB) while the rings of every
// pair of the host's L ranks, L(L-1) of them, would pass 4 GiB (every_pair_fits): 4 MiB up to
// 32 ranks, 1 MiB up to 64, 256 KiB up to 128, 64 KiB up to 256, 16 KiB up to 512 (every pair
// fits no more from 513). A link's rings are reserved whole when it connects (a full /dev/shm
// is an error then, not a SIGBUS later). Exchange algorithms connect about log2(L) peers per
// rank, but AllToAllv's pairwise (its only algorithm) connects every pair: with 512 KiB rings
// on 256 ranks its links would have held 32 GiB.
size_t ring_bytes_for_host(int ranks_on_host);
// A link's ring before it shrinks on a host of many ranks: HOOP_SHM_RING_BYTES's value, 4 MiB
// unset (where the tuner weighs the algorithms that link every pair: CostModel::shm_ring_full_bytes).
size_t full_ring_bytes();
// Whether every pair of a host's `ranks_on_host` ranks may hold a link with rings of
// `ring_bytes` (L(L-1) rings): within 4 GiB. An algorithm that connects every pair (pairwise)
// holds them; with 4 MiB rings that is up to 32 ranks, with the default rings up to 512 (the
// tuner weighs the others' pairwise at full_ring_bytes: pricing.cc).
bool every_pair_fits(int ranks_on_host, size_t ring_bytes);

// Blocks until the link is attached on this side (never waits for the peer to attach, only
// for a peer that created the segment to finish initialising it), or throws at deadline.
std::unique_ptr<Link> shm_connect(const ShmLinkParams& params, TimePoint deadline);

// "hoop-<job_id>-": the name prefix of every segment of a job.
std::string shm_segment_prefix(const std::string& job_id);
// Unlinks every segment of the job left in /dev/shm; returns how many.
size_t shm_remove_job_segments(const std::string& job_id);
// Unlinks every segment of communicator comm_id between `rank` and another rank, every
// channel, left in /dev/shm (one side died or stopped before the other attached), once that
// communicator failed on `rank`, which will attach to none of them again; returns how many.
size_t shm_remove_rank_segments(const std::string& job_id, uint64_t comm_id, int rank);

}  // namespace hoop::transport
