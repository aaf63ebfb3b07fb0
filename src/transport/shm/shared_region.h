// The shared region of one communicator whose ranks all run on this host: the memory that
// shm-direct's schedules publish into and read from (region_layout.h).
//
// Rank 0 creates the region as a memfd (no name in /dev/shm, so nothing to leave behind),
// reserves it, initialises it and publishes /proc/<its pid>/fd/<fd> in the store; every other
// rank waits for that path, opens and maps it and records itself. Each rank pre-faults only
// the pages it writes. Rank 0 holds the descriptor until every rank has mapped the region (or a
// rank still out is dead, or a short grace ends): a peer slower than rank 0's whole first
// operation can still open it.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "core/clock.h"
#include "hoop/error.h"
#include "hoop/store.h"
#include "transport/shm/region_layout.h"

namespace hoop::transport::shm {

struct RegionParams {
  std::string job_id;
  uint64_t comm_id = 0;
  int rank = 0;
  int nranks = 0;
  std::vector<pid_t> pids;  // of every rank, for liveness checks while attaching
  size_t window_bytes = 0;  // each of a rank's two windows (whole pages)
  // The tunables the windows were cut for (schedules are built from them): a rank whose own
  // differ cannot read its peers' windows right, and fails at attach.
  uint64_t shape_key = 0;
};

class SharedRegion {
 public:
  // Creates (rank 0) or attaches to (the others) the region; throws hoop::Error at deadline,
  // when the communicator is aborted, when rank 0 dies first, or when the creator cut the
  // windows for other tunables.
  static std::unique_ptr<SharedRegion> open(const RegionParams& p, Store& store, TimePoint deadline,
                                            const std::atomic<bool>& abort_flag, const ErrorContext& ctx);
  ~SharedRegion();
  SharedRegion(const SharedRegion&) = delete;
  SharedRegion& operator=(const SharedRegion&) = delete;

  const RegionGeometry& geometry() const { return geo_; }
  int nranks() const { return geo_.nranks; }
  const std::string& name() const { return name_; }

  RankControl& control(int rank) const { return ranks_[rank]; }
  WindowHeader& header(int rank, unsigned w) const { return headers_[static_cast<size_t>(rank) * 2 + w]; }
  std::byte* window(int rank, unsigned w) const { return base_ + geo_.window_offset(rank, w); }

  bool poisoned() const { return poison_->state.load(std::memory_order_acquire) != 0; }
  // Marks the region failed with a reason and wakes every rank (first reason wins).
  void poison(int by_rank, const std::string& reason) noexcept;
  // Throws peer_failure with the recorded reason (call when poisoned()).
  [[noreturn]] void raise_poisoned(const ErrorContext& ctx) const;

 private:
  SharedRegion(std::byte* base, size_t bytes, std::string name, int fd);

  std::byte* base_;
  size_t bytes_;
  std::string name_;  // the path the peers open (/proc/<rank 0's pid>/fd/<fd>)
  int fd_;            // rank 0: the memfd, held so that the peers can open it; else -1
  std::vector<pid_t> pids_;  // every rank's, for the wait at close
  static constexpr auto kCloseGrace = std::chrono::seconds(2);
  RegionGeometry geo_;
  PoisonBlock* poison_;
  RankControl* ranks_;
  WindowHeader* headers_;
};

}  // namespace hoop::transport::shm
