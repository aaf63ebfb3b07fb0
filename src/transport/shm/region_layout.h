// The layout of a communicator's shared region (the transport of shm-direct), as every rank of
// the host maps it.
//
//   [RegionHeader][PoisonBlock][RankControl x N][WindowHeader x N x 2]   (padded to a page)
//   [windows: N x 2 x window_bytes]
//
// Each rank writes only its own RankControl, its own window headers and its own windows; the
// others read them. Operations alternate between a rank's two windows (operation o uses window
// o % 2), so that one operation's schedule starts on a fresh window while slow peers still read
// the previous one. A window header holds, on one cache line, everything a peer polls: the
// flag (the operation number and how many times the owner published in it), the call it
// belongs to (compared, so that different calls fail as a mismatch instead of being read as
// data) and where the owner's own buffers are (single copy); a second line says how to map
// them when they are registered (zero copy). The sleep flag and the futex word that peers bump
// sit on lines of their own; the futex word's line also holds the call the owner runs now over
// any path (links or the region), so that a peer waiting in another path can tell a mismatch.
// Windows are page aligned.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "transport/shm/shm_layout.h"

namespace hoop::transport::shm {

inline constexpr size_t kRegionPage = 4096;
inline constexpr uint64_t kRegionReady = 0x6e6f696765722d68ULL;  // "h-region"
inline constexpr uint32_t kRegionVersion = 5;
// PoisonBlock::state: 0 healthy, kPoisonWriting while the reason is written (as a link's), then
// kRegionPoisoned.
inline constexpr uint32_t kRegionPoisoned = 2;

// A window header's flag: the operation number in the high bits, the publishes of this rank in
// that operation in the low kFlagBits (a 16 TiB AllReduce on 512 KiB chunks is 2^25 publishes:
// far beyond any call). Operations count from 1, so a zero flag is older than any operation.
inline constexpr unsigned kFlagBits = 24;
inline constexpr uint64_t kMaxFlag = (uint64_t{1} << kFlagBits) - 1;
inline constexpr uint64_t flag_word(uint64_t op, uint64_t flag) { return (op << kFlagBits) | flag; }
inline constexpr uint64_t op_of(uint64_t word) { return word >> kFlagBits; }

// What a rank called, as its peers compare it with their own call.
struct CallSignature {
  uint64_t seq = 0;
  uint64_t count = 0;
  int32_t root = -1;
  uint8_t op = 0;
  uint8_t dtype = 0;
  uint8_t redop = 0;
  uint8_t phase = 0;
  bool operator==(const CallSignature&) const = default;
};

// WindowHeader::bits: what the owner's call is like, for the decisions every rank takes alike
// from what all published (schedule::Branch).
inline constexpr uint8_t kInPlaceBit = 1;
inline constexpr uint8_t kRegisteredBit = 2;  // the call's buffers are all registered

// A registered buffer of the owner's call (buffer_registry.h), as a peer maps it: the owner's
// descriptor of the file, the page-aligned file range to map, and where the call's buffer
// starts in that mapping. fd < 0: not registered (peers read it through the kernel).
struct AnnouncedBuffer {
  int32_t fd;
  uint32_t id;  // the owner's registration, for the peers' cache of mappings
  uint64_t map_offset;
  uint64_t map_bytes;
  uint64_t delta;
};

struct alignas(kCacheLine) WindowHeader {
  std::atomic<uint64_t> flag;  // flag_word(operation, publishes), stored (release) by publish
  // The owner's call in that operation (a CallSignature as words), written before its first
  // publish. Atomic: a peer still waiting in the operation two back may read it while the owner
  // rewrites it, and peer_call() checks the flag again after reading.
  std::atomic<uint64_t> call[3];
  uint64_t input_addr;         // the owner's input and output buffers, in its address space
  uint64_t output_addr;
  uint8_t bits;
  // Line 2, read only by peers that take the registered buffers' path: input, output.
  alignas(kCacheLine) AnnouncedBuffer buffers[2];
};

struct alignas(kCacheLine) RegionHeader {
  std::atomic<uint64_t> ready;  // kRegionReady, stored (release) once everything is set
  uint32_t version;
  int32_t nranks;
  uint64_t comm_id;
  uint64_t total_bytes;
  uint64_t window_bytes;
  uint64_t shape_key;             // the creator's window tunables: every rank must use the same
  std::atomic<int32_t> attached;  // ranks that mapped the region
};

struct alignas(kCacheLine) PoisonBlock {
  std::atomic<uint32_t> state;
  int32_t by_rank;
  char reason[kReasonBytes];
};

struct RankControl {
  // owner: about to sleep on `wake` until the peer it names publishes (RegionPort::sleeping_on)
  alignas(kCacheLine) std::atomic<uint32_t> sleeping;
  std::atomic<int32_t> cpu;                             // owner: the CPU it last waited on
  int32_t pid;
  alignas(kCacheLine) std::atomic<uint32_t> wake;      // futex: peers bump it to wake the owner
  // The CallSignature of the owner's current operation, whatever runs it (RegionPort::declare);
  // word 0 (its sequence number) 0 while the others are written. On the line of `wake`, which
  // peers touch only to wake a sleeping owner: a line of its own grew the control blocks, moved
  // every window header, and 1 KiB AllGathers on 2 ranks took 0.47 us instead of 0.37.
  std::atomic<uint64_t> call[3];
};
static_assert(sizeof(RankControl) == 2 * kCacheLine);

static_assert(std::atomic<uint64_t>::is_always_lock_free);
static_assert(std::atomic<uint32_t>::is_always_lock_free);
static_assert(sizeof(CallSignature) == 24);
static_assert(sizeof(AnnouncedBuffer) == 32);
static_assert(sizeof(WindowHeader) == 2 * kCacheLine);

inline constexpr size_t region_round_up(size_t x, size_t to) { return (x + to - 1) / to * to; }

// Byte offsets of every part of the region.
struct RegionGeometry {
  int nranks = 0;
  size_t window_bytes = 0;

  static constexpr size_t poison_offset() { return sizeof(RegionHeader); }
  static constexpr size_t ranks_offset() {
    return region_round_up(poison_offset() + sizeof(PoisonBlock), kCacheLine);
  }
  size_t headers_offset() const { return ranks_offset() + n() * sizeof(RankControl); }
  size_t windows_offset() const {
    return region_round_up(headers_offset() + n() * 2 * sizeof(WindowHeader), kRegionPage);
  }
  size_t window_offset(int rank, unsigned w) const {
    return windows_offset() + (static_cast<size_t>(rank) * 2 + w) * window_bytes;
  }
  size_t total_bytes() const { return windows_offset() + n() * 2 * window_bytes; }

 private:
  size_t n() const { return static_cast<size_t>(nranks); }
};

}  // namespace hoop::transport::shm
