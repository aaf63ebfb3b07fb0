// The layout of a shared-memory link segment, as both processes see it.
//
//   [SegmentHeader][RingControl lower->higher][RingControl higher->lower]  (padded to a page)
//   [data of ring 0: capacity bytes][data of ring 1: capacity bytes]
//
// Every field one side writes often sits on its own cache line, so the writer's position and
// the reader's position never share a line. The data areas start page aligned, and capacity
// is a multiple of 64, so every ring offset that is a multiple of 8 is 8-byte aligned.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

namespace hoop::transport::shm {

inline constexpr size_t kCacheLine = 64;
inline constexpr size_t kReasonBytes = 256;
inline constexpr uint64_t kSegmentReady = 0x6d68732d706f6f68ULL;  // "hoop-shm"
inline constexpr uint32_t kLayoutVersion = 1;

// RingControl::poisoned: 0 = healthy; kPoisonWriting while the reason is being written; then
// kPoisonedBy + the side (0: lower rank, 1: higher rank) that poisoned it.
inline constexpr uint32_t kPoisonWriting = 1;
inline constexpr uint32_t kPoisonedBy = 2;

struct alignas(kCacheLine) SegmentHeader {
  std::atomic<uint64_t> ready;  // kSegmentReady, stored (release) once everything is set
  uint32_t layout_version;
  uint32_t reserved;
  uint64_t capacity;            // data bytes per ring
  uint64_t total_bytes;         // the whole segment
  uint64_t comm_id;
  int32_t lower_rank;
  int32_t higher_rank;
  std::atomic<int32_t> pid[2];  // the process of each side (0: lower rank), 0 until attached
};

// One direction. The writer owns write_pos, data_seq and writer_waiting; the reader owns
// read_pos, space_seq and reader_waiting.
struct RingControl {
  alignas(kCacheLine) std::atomic<uint64_t> write_pos;  // bytes ever written (monotonic)
  alignas(kCacheLine) std::atomic<uint64_t> read_pos;   // bytes ever consumed
  alignas(kCacheLine) std::atomic<uint32_t> data_seq;   // futex: bumped after each publish
  alignas(kCacheLine) std::atomic<uint32_t> space_seq;  // futex: bumped after each consume
  alignas(kCacheLine) std::atomic<uint32_t> reader_waiting;
  alignas(kCacheLine) std::atomic<uint32_t> writer_waiting;
  alignas(kCacheLine) std::atomic<uint32_t> poisoned;
  char reason[kReasonBytes];  // NUL-terminated; valid once poisoned >= kPoisonedBy
};

struct SegmentControl {
  SegmentHeader header;
  RingControl rings[2];  // [0]: lower -> higher rank, [1]: higher -> lower rank
};

inline constexpr size_t kPageSize = 4096;
inline constexpr size_t kDataOffset = (sizeof(SegmentControl) + kPageSize - 1) / kPageSize * kPageSize;

inline constexpr size_t segment_bytes(size_t capacity) { return kDataOffset + 2 * capacity; }

static_assert(std::atomic<uint64_t>::is_always_lock_free);
static_assert(std::atomic<uint32_t>::is_always_lock_free);
static_assert(std::atomic<int32_t>::is_always_lock_free);

}  // namespace hoop::transport::shm
