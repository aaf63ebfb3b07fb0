// The shared-memory region of one communicator whose ranks all run on this host.
//
// Rank 0 creates the region as a memfd (no name in /dev/shm, so nothing to leave behind),
// reserves and pre-faults it, initialises it and publishes /proc/<its pid>/fd/<fd> in the store;
// every other rank waits for that path, opens and maps it (pre-faulted as well) and records
// itself. Rank 0 holds the descriptor until every rank has mapped the region (or a rank still
// out is dead, or a short grace ends): a peer slower than rank 0's whole first operation can
// still open it.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "core/clock.h"
#include "direct/direct_layout.h"
#include "hoop/error.h"
#include "hoop/store.h"

namespace hoop::direct {

struct RegionParams {
  std::string job_id;
  uint64_t comm_id = 0;
  int rank = 0;
  int nranks = 0;
  std::vector<pid_t> pids;  // of every rank, for liveness checks while attaching
  size_t cell_bytes = 0;    // used by rank 0 only; the others read the geometry from the header
  size_t chunk_bytes = 0;
  size_t stages = 0;
};

class Region {
 public:
  // Creates (rank 0) or attaches to (the others) the region; throws hoop::Error at deadline,
  // when the communicator is aborted or when rank 0 dies first.
  static std::unique_ptr<Region> open(const RegionParams& p, Store& store, TimePoint deadline,
                                      const std::atomic<bool>& abort_flag, const ErrorContext& ctx);
  ~Region();
  Region(const Region&) = delete;
  Region& operator=(const Region&) = delete;

  const RegionGeometry& geometry() const { return geo_; }
  int nranks() const { return geo_.nranks; }
  const std::string& name() const { return name_; }

  RankControl& control(int rank) const { return ranks_[rank]; }
  CellHeader& cell_header(int rank, int buffer) const { return cell_headers_[rank * 2 + buffer]; }
  std::byte* cell(int rank, int buffer) const {
    return base_ + geo_.cells_offset() + static_cast<size_t>(rank * 2 + buffer) * geo_.cell_bytes;
  }
  SlotHeader& slot_header(int rank, size_t stage) const {
    return slot_headers_[static_cast<size_t>(rank) * geo_.stages + stage];
  }
  std::byte* slot(int rank, size_t stage) const {
    return base_ + geo_.slots_offset() +
           (static_cast<size_t>(rank) * geo_.stages + stage) * geo_.chunk_bytes;
  }

  bool poisoned() const { return poison_->state.load(std::memory_order_acquire) != 0; }
  // Marks the region failed with a reason and wakes every rank (first reason wins).
  void poison(int by_rank, const std::string& reason) noexcept;
  // Throws peer_failure with the recorded reason (call when poisoned()).
  [[noreturn]] void raise_poisoned(const ErrorContext& ctx) const;

 private:
  Region(std::byte* base, size_t bytes, std::string name, int fd);

  std::byte* base_;
  size_t bytes_;
  std::string name_;  // the path the peers open (/proc/<rank 0's pid>/fd/<fd>)
  int fd_;            // rank 0: the memfd, held so that the peers can open it; else -1
  std::vector<pid_t> pids_;  // every rank's, for the wait at close
  static constexpr auto kCloseGrace = std::chrono::seconds(2);
  RegionGeometry geo_;
  PoisonBlock* poison_;
  RankControl* ranks_;
  CellHeader* cell_headers_;
  SlotHeader* slot_headers_;
};

}  // namespace hoop::direct
