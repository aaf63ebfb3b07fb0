#include "transport/shm/shm_link.h"

#include <sched.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>

#include "core/clock.h"
#include "core/errors.h"
#include "transport/shm/process_liveness.h"
#include "transport/waiter.h"

namespace hoop::transport::shm {

namespace {

// Touches every cache line of both rings through this process's own mapping: the outgoing one
// as its writer (a store of the byte already there, before this side writes anything into it),
// the incoming one as its reader (loads only: the peer may be writing it already).
// MAP_POPULATE fills the page tables, but on a virtual machine with shadow paging each page
// still costs an exit to the hypervisor at the first access from each process, and without
// this those exits fell on the first lap through the ring: a 64 KiB ring AllReduce on 8 ranks
// took 2.3-3.6 ms for its first 30-40 calls with the 4 MiB rings (0.6-0.8 ms after), and a job
// across hosts paid it on every link it opened. Every line, not one per page: memory fresh
// from the kernel is cold, and a 2-rank Reduce of 64 KiB (the chain) still took 6.6-7.1 us a
// call while its messages went through the first 4 MiB of the ring and 4.2-4.5 once they had.
void touch_rings(std::byte* out, const std::byte* in, size_t capacity) {
  for (size_t off = 0; off < capacity; off += kCacheLine) {
    auto* w = reinterpret_cast<volatile std::byte*>(out + off);
    *w = *w;
    (void)*reinterpret_cast<const volatile std::byte*>(in + off);
  }
}

}  // namespace

ShmLink::ShmLink(void* base, size_t mapped_bytes, int my_rank, int peer_rank, pid_t peer_pid,
                 std::string segment_name)
    : Link(peer_rank),
      base_(base),
      mapped_bytes_(mapped_bytes),
      control_(static_cast<SegmentControl*>(base)),
      side_(my_rank < peer_rank ? 0 : 1),
      my_rank_(my_rank),
      peer_pid_hint_(peer_pid),
      segment_name_(std::move(segment_name)) {
  capacity_ = control_->header.capacity;
  out_ = &control_->rings[side_];
  in_ = &control_->rings[1 - side_];
  auto* data = static_cast<std::byte*>(base) + kDataOffset;
  out_data_ = data + static_cast<size_t>(side_) * capacity_;
  in_data_ = data + static_cast<size_t>(1 - side_) * capacity_;
  // A fresh link starts at the positions in the segment (zero unless reattached).
  write_pos_ = out_->write_pos.load(std::memory_order_relaxed);
  peer_read_pos_ = out_->read_pos.load(std::memory_order_acquire);
  read_pos_ = in_->read_pos.load(std::memory_order_relaxed);
  readable_end_ = read_pos_;
  touch_rings(out_data_, in_data_, capacity_);
}

ShmLink::~ShmLink() {
  // Unless this side wrote bytes that the peer may still come for.
  if (remove_unattached_ && write_pos_ == 0 && control_->header.pid[1 - side_].load(std::memory_order_acquire) == 0)
    shm_unlink(segment_name_.c_str());
  munmap(base_, mapped_bytes_);
}

ErrorContext ShmLink::error_context() const {
  ErrorContext ctx;
  ctx.rank = my_rank_;
  ctx.peer = peer_;
  return ctx;
}

size_t ShmLink::write_some(const void* src, size_t n) {
  throw_if_poisoned(*out_);
  const size_t k = copy_in(src, n);
  if (k > 0) publish(k);
  return k;
}

size_t ShmLink::write_parts(std::span<const WritePart> parts) {
  throw_if_poisoned(*out_);
  size_t total = 0;
  for (const WritePart& p : parts) {
    const size_t k = copy_in(p.data, p.size);
    total += k;
    if (k < p.size) break;
  }
  if (total > 0) publish(total);
  return total;
}

size_t ShmLink::copy_in(const void* src, size_t n) {
  if (n == 0) return 0;
  if (capacity_ - (write_pos_ - peer_read_pos_) < n) {
    peer_read_pos_ = out_->read_pos.load(std::memory_order_acquire);
    if (peer_read_pos_ > write_pos_ || write_pos_ - peer_read_pos_ > capacity_)
      raise_corrupt("read position", write_pos_, peer_read_pos_);
  }
  const size_t k = std::min<size_t>(n, capacity_ - (write_pos_ - peer_read_pos_));
  if (k == 0) return 0;
  const size_t offset = write_pos_ % capacity_;
  const size_t first = std::min(k, capacity_ - offset);
  const auto* bytes = static_cast<const std::byte*>(src);
  std::memcpy(out_data_ + offset, bytes, first);
  if (k > first) std::memcpy(out_data_, bytes + first, k - first);
  write_pos_ += k;
  return k;
}

void ShmLink::publish(size_t n) {
  out_->write_pos.store(write_pos_, std::memory_order_release);
  out_->data_seq.fetch_add(1, std::memory_order_seq_cst);
  if (out_->reader_waiting.load(std::memory_order_seq_cst) != 0) Waiter::wake_shared(&out_->data_seq);
  bytes_written_ += n;
}

std::span<const std::byte> ShmLink::readable() {
  // Bytes the peer wrote before it poisoned the link are still good (as bytes sent before a
  // TCP close): a peer that finished this operation and failed in its next one must not fail
  // ours. The poison is reported once they are read. Its flag is loaded first: seeing it
  // makes every byte written before it visible.
  const bool poisoned = in_->poisoned.load(std::memory_order_acquire) != 0;
  const uint64_t end = in_->write_pos.load(std::memory_order_acquire);
  if (end < read_pos_ || end - read_pos_ > capacity_) raise_corrupt("write position", end, read_pos_);
  readable_end_ = end;
  if (end == read_pos_) {
    if (poisoned) throw_if_poisoned(*in_);
    return {};
  }
  const size_t offset = read_pos_ % capacity_;
  const size_t len = std::min<size_t>(end - read_pos_, capacity_ - offset);
  return {in_data_ + offset, len};
}

void ShmLink::consume(size_t n) {
  // Taking bytes readable() returned is always allowed; taking none reports a poison.
  if (n == 0) {
    throw_if_poisoned(*in_);
    return;
  }
  if (n > readable_end_ - read_pos_)
    throw_error(ErrorCode::internal,
                fmt::format("shared-memory link: consume({}) beyond the {} readable bytes", n,
                            readable_end_ - read_pos_),
                error_context());
  read_pos_ += n;
  in_->read_pos.store(read_pos_, std::memory_order_release);
  in_->space_seq.fetch_add(1, std::memory_order_seq_cst);
  if (in_->writer_waiting.load(std::memory_order_seq_cst) != 0) Waiter::wake_shared(&in_->space_seq);
  bytes_read_ += n;
}

bool ShmLink::arm(Waiter& w, bool want_read, bool want_write) {
  bool can_progress = false;
  if (want_read) {
    in_->reader_waiting.store(1, std::memory_order_seq_cst);
    armed_read_ = true;
    const uint32_t seen = in_->data_seq.load(std::memory_order_seq_cst);
    if (in_->write_pos.load(std::memory_order_acquire) != read_pos_ ||
        in_->poisoned.load(std::memory_order_acquire) != 0)
      can_progress = true;
    else
      w.add_futex(&in_->data_seq, seen, /*shared=*/true);
  }
  if (want_write) {
    out_->writer_waiting.store(1, std::memory_order_seq_cst);
    armed_write_ = true;
    const uint32_t seen = out_->space_seq.load(std::memory_order_seq_cst);
    peer_read_pos_ = out_->read_pos.load(std::memory_order_acquire);
    if (write_pos_ - peer_read_pos_ < capacity_ || out_->poisoned.load(std::memory_order_acquire) != 0)
      can_progress = true;
    else
      w.add_futex(&out_->space_seq, seen, /*shared=*/true);
  }
  return !can_progress;
}

void ShmLink::disarm() noexcept {
  if (armed_read_) in_->reader_waiting.store(0, std::memory_order_relaxed);
  if (armed_write_) out_->writer_waiting.store(0, std::memory_order_relaxed);
  armed_read_ = armed_write_ = false;
}

pid_t ShmLink::peer_pid() const noexcept {
  if (peer_pid_hint_ > 0) return peer_pid_hint_;
  return control_->header.pid[1 - side_].load(std::memory_order_acquire);
}

void ShmLink::check_peer_alive() {
  throw_if_poisoned(*in_);
  const pid_t pid = peer_pid();
  if (pid <= 0) return;  // the peer has not attached yet and its pid was not given
  const bool alive = liveness_.alive(pid);
  // Bytes it wrote before exiting are still good: report the death once they are read.
  if (!alive && in_->write_pos.load(std::memory_order_acquire) == read_pos_)
    throw_error(ErrorCode::peer_failure,
                fmt::format("rank {} (pid {}) has exited", peer_, static_cast<int>(pid)),
                error_context());
}

void ShmLink::poison(const std::string& reason) noexcept {
  // Mark both directions before waking anyone, so a woken peer finds both failed.
  for (RingControl* ring : {out_, in_}) {
    uint32_t healthy = 0;
    if (ring->poisoned.compare_exchange_strong(healthy, kPoisonWriting)) {
      const size_t len = std::min(reason.size(), kReasonBytes - 1);
      std::memcpy(ring->reason, reason.data(), len);
      ring->reason[len] = '\0';
      ring->poisoned.store(kPoisonedBy + static_cast<uint32_t>(side_), std::memory_order_release);
    }
  }
  // Wake a peer sleeping in either direction; its arm() re-check sees the flag.
  for (RingControl* ring : {out_, in_}) {
    ring->data_seq.fetch_add(1, std::memory_order_seq_cst);
    ring->space_seq.fetch_add(1, std::memory_order_seq_cst);
    Waiter::wake_shared(&ring->data_seq);
    Waiter::wake_shared(&ring->space_seq);
  }
}

void ShmLink::raise_poisoned(const RingControl& ring) const {
  // The poisoner writes at most 256 bytes between its two stores; give it a moment, but do
  // not depend on it (it may have been killed in between).
  uint32_t state = ring.poisoned.load(std::memory_order_acquire);
  const auto give_up = Clock::now() + std::chrono::milliseconds(2);
  while (state == kPoisonWriting && Clock::now() < give_up) {
    sched_yield();
    state = ring.poisoned.load(std::memory_order_acquire);
  }
  std::string reason = "(no reason given)";
  if (state >= kPoisonedBy) {
    reason.assign(ring.reason, strnlen(ring.reason, kReasonBytes));
    if (reason.empty()) reason = "(no reason given)";
  }
  const ErrorContext ctx = error_context();
  if (state == kPoisonedBy + static_cast<uint32_t>(side_))
    throw_error(ErrorCode::peer_failure,
                fmt::format("the shared-memory link to rank {} was poisoned by this rank: {}", peer_,
                            reason),
                ctx);
  throw_error(ErrorCode::peer_failure, fmt::format("rank {} failed: {}", peer_, reason), ctx);
}

void ShmLink::raise_corrupt(const char* what, uint64_t write_pos, uint64_t read_pos) const {
  throw_error(ErrorCode::transport,
              fmt::format("shared-memory segment {} is corrupt: {} out of range (write {}, read {}, "
                          "capacity {})",
                          segment_name_, what, write_pos, read_pos, capacity_),
              error_context());
}

}  // namespace hoop::transport::shm
