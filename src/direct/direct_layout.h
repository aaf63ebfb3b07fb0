// The layout of a communicator's shm-direct region, as every rank of the host maps it.
//
//   [RegionHeader][PoisonBlock][RankControl x N][CellHeader x N x 2][SlotHeader x N x stages]
//   (padded to a page)
//   [cell data: N x 2 x cell_bytes]          small messages, double-buffered per rank
//   [slot data: N x stages x chunk_bytes]    pipelined chunks of large messages
//
// Each rank writes only its own RankControl counters, its own cells and its own slots; the
// others read them. Counters one rank publishes share a cache line (one writer), the sleep flag
// and the futex word that peers bump sit on lines of their own. Data areas are page aligned and
// cell_bytes / chunk_bytes are multiples of the page size.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>

namespace hoop::direct {

inline constexpr size_t kLine = 64;
inline constexpr size_t kPage = 4096;
inline constexpr uint64_t kRegionReady = 0x7463657269642d68ULL;  // "h-direct"
inline constexpr uint32_t kRegionVersion = 1;
inline constexpr size_t kReasonBytes = 256;
// PoisonBlock::state: 0 healthy, kPoisonWriting while the reason is written, then kPoisoned.
inline constexpr uint32_t kPoisonWriting = 1;
inline constexpr uint32_t kPoisoned = 2;

// What a rank called; compared across ranks so that different calls fail as a mismatch
// instead of being read as data.
struct OpSignature {
  uint64_t seq = 0;
  uint64_t count = 0;
  int32_t root = -1;
  uint8_t op = 0;
  uint8_t dtype = 0;
  uint8_t redop = 0;
  uint8_t pad = 0;
  bool operator==(const OpSignature&) const = default;
};

struct alignas(kLine) RegionHeader {
  std::atomic<uint64_t> ready;  // kRegionReady, stored (release) once everything is set
  uint32_t version;
  int32_t nranks;
  uint64_t comm_id;
  uint64_t total_bytes;
  uint64_t cell_bytes;
  uint64_t chunk_bytes;
  uint32_t stages;
  std::atomic<int32_t> attached;  // ranks that mapped the region (a diagnostic)
};

struct alignas(kLine) PoisonBlock {
  std::atomic<uint32_t> state;
  int32_t by_rank;
  char reason[kReasonBytes];
};

struct RankControl {
  // Written by the owner only. Each counts completed units since the region was created.
  alignas(kLine) std::atomic<uint64_t> small_done;     // small ops whose cells it finished reading
  std::atomic<uint64_t> chunk_in;                      // chunks copied into its slot
  std::atomic<uint64_t> chunk_reduced;                 // chunks whose own part it reduced
  std::atomic<uint64_t> chunk_done;                    // chunks it no longer reads
  // The op it runs (counted over every op on the region) and its call, stored (release) at the
  // start of each op: a peer stuck waiting compares it with its own, so ranks whose calls
  // differ enough to take different paths still fail as a mismatch, not a timeout.
  std::atomic<uint64_t> op_number;
  OpSignature op_sig;
  alignas(kLine) std::atomic<uint32_t> sleeping;       // owner: about to sleep on `wake`
  std::atomic<int32_t> cpu;                            // owner: the CPU it last waited on
  int32_t pid;
  alignas(kLine) std::atomic<uint32_t> wake;           // futex: peers bump it to wake the owner
};

// Small-message cell: `seq` is the op number whose data the cell holds (stored with release
// after the data and the signature), so a reader polls one word and then reads the data.
struct alignas(kLine) CellHeader {
  std::atomic<uint64_t> seq;
  OpSignature sig;
};

// Written before the owner publishes chunk_in: the chunk the slot holds and the call.
struct alignas(kLine) SlotHeader {
  uint64_t chunk;
  OpSignature sig;
  // Single-copy collectives: where the owner's input and output buffers are, in its address
  // space (peers read them with process_vm_readv).
  uint64_t input_addr;
  uint64_t output_addr;
};

static_assert(std::atomic<uint64_t>::is_always_lock_free);
static_assert(sizeof(OpSignature) == 24);
static_assert(std::atomic<uint32_t>::is_always_lock_free);

inline constexpr size_t round_up(size_t x, size_t to) { return (x + to - 1) / to * to; }

// The part of a chunk of `len` elements that rank p reduces when N ranks split it: [lo, hi),
// cut at 64-byte boundaries (the last parts may be short or empty).
struct Part {
  size_t lo = 0, hi = 0;
  size_t count() const { return hi - lo; }
};
inline Part part_of(size_t len, int p, int nranks, size_t esize) {
  const size_t align = std::max<size_t>(1, kLine / esize);
  const size_t n = static_cast<size_t>(nranks);
  const size_t per = round_up((len + n - 1) / n, align);
  const size_t lo = std::min(len, per * static_cast<size_t>(p));
  return {lo, std::min(len, lo + per)};
}

// Byte offsets of every part of the region for the given geometry.
struct RegionGeometry {
  int nranks = 0;
  size_t cell_bytes = 0;
  size_t chunk_bytes = 0;
  size_t stages = 0;

  static constexpr size_t header_offset() { return 0; }
  static constexpr size_t poison_offset() { return sizeof(RegionHeader); }
  static constexpr size_t ranks_offset() { return round_up(poison_offset() + sizeof(PoisonBlock), kLine); }
  size_t cell_headers_offset() const { return ranks_offset() + n() * sizeof(RankControl); }
  size_t slot_headers_offset() const { return cell_headers_offset() + n() * 2 * sizeof(CellHeader); }
  size_t cells_offset() const {
    return round_up(slot_headers_offset() + n() * stages * sizeof(SlotHeader), kPage);
  }
  size_t slots_offset() const { return cells_offset() + n() * 2 * cell_bytes; }
  size_t total_bytes() const { return slots_offset() + n() * stages * chunk_bytes; }

 private:
  size_t n() const { return static_cast<size_t>(nranks); }
};

}  // namespace hoop::direct
