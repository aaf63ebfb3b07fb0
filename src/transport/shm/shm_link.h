// The Link over an attached shared-memory segment: two single-producer single-consumer byte
// rings, one per direction.
//
// Writer: copy into the ring, publish write_pos (release), bump data_seq, and wake the reader
// only when it said it sleeps (reader_waiting). Reader: symmetric with read_pos, space_seq and
// writer_waiting. A sleeper raises its flag before re-checking the ring and sleeps on the
// sequence value read before that re-check, so a publish racing with arm() either shows up
// in the re-check or changes the word the futex compares against; it is never lost.
//
// A peer that exits is reported by check_peer_alive() only once the bytes it wrote before
// exiting have been read: a rank may finish and leave while its last bytes are in flight.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

#include "hoop/error.h"
#include "transport/link.h"
#include "transport/shm/process_liveness.h"
#include "transport/shm/shm_layout.h"

namespace hoop::transport::shm {

class ShmLink final : public Link {
 public:
  // Takes over a mapping of the whole segment (munmapped by the destructor).
  ShmLink(void* base, size_t mapped_bytes, int my_rank, int peer_rank, pid_t peer_pid,
          std::string segment_name);
  ~ShmLink() override;

  std::string_view kind() const noexcept override { return "shm"; }
  size_t write_some(const void* src, size_t n) override;
  // All parts copied, then one publish: one wake-up of the peer.
  size_t write_parts(std::span<const WritePart> parts) override;
  std::span<const std::byte> readable() override;
  void consume(size_t n) override;
  bool arm(Waiter& w, bool want_read, bool want_write) override;
  void disarm() noexcept override;
  void check_peer_alive() override;
  void poison(const std::string& reason) noexcept override;

  size_t capacity() const noexcept { return capacity_; }
  // The creator's side: remove the segment's name at destruction if the peer never attached
  // and nothing was written for it.
  void remove_name_if_never_attached() noexcept { remove_unattached_ = true; }

 private:
  void throw_if_poisoned(const RingControl& ring) const {
    if (ring.poisoned.load(std::memory_order_acquire) != 0) [[unlikely]]
      raise_poisoned(ring);
  }
  [[noreturn]] void raise_poisoned(const RingControl& ring) const;
  [[noreturn]] void raise_corrupt(const char* what, uint64_t write_pos, uint64_t read_pos) const;
  pid_t peer_pid() const noexcept;
  // Copies into the ring without publishing; returns the bytes taken.
  size_t copy_in(const void* src, size_t n);
  // Makes the last n bytes copied in visible to the peer and wakes it if it sleeps.
  void publish(size_t n);
  ErrorContext error_context() const;

  void* base_;
  size_t mapped_bytes_;
  SegmentControl* control_;
  RingControl* out_;  // this side writes
  RingControl* in_;   // this side reads
  std::byte* out_data_;
  const std::byte* in_data_;
  size_t capacity_;
  int side_;  // 0: this is the lower rank
  int my_rank_;
  pid_t peer_pid_hint_;
  std::string segment_name_;

  // This side's own positions (the shared copies are only ever stored by us), and the last
  // seen position of the other side, to avoid touching its cache line on every call.
  uint64_t write_pos_ = 0;
  uint64_t peer_read_pos_ = 0;
  uint64_t read_pos_ = 0;
  uint64_t readable_end_ = 0;  // write_pos seen by the last readable()
  bool armed_read_ = false;
  bool armed_write_ = false;
  bool remove_unattached_ = false;

  // Identity of the peer process seen by the first liveness check (its start time), so that
  // a recycled pid is not mistaken for the peer.
  ProcessLiveness liveness_;
};

}  // namespace hoop::transport::shm
