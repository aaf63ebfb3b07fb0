// A link: a duplex, ordered byte stream between this rank and one peer of one communicator,
// over shared memory or TCP. Every call is non-blocking; the engine drives many links at once
// and sleeps on a Waiter when none can move. Framing (headers, op sequence) is the engine's
// business: a link only moves bytes, in order, and reports a dead or failed peer.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

namespace hoop::transport {

class Waiter;

// The most parts a link takes in one gathered write (one sendmsg on TCP): a header and the
// data and padding of up to 15 sends.
constexpr size_t kMaxWriteParts = 32;

// One piece of a gathered write.
struct WritePart {
  const void* data = nullptr;
  size_t size = 0;
};

class Link {
 public:
  explicit Link(int peer) : peer_(peer) {}
  virtual ~Link() = default;
  Link(const Link&) = delete;
  Link& operator=(const Link&) = delete;

  int peer() const noexcept { return peer_; }
  virtual std::string_view kind() const noexcept = 0;  // "shm" or "tcp"

  // Copies up to n bytes into the stream; returns how many were taken (0 when there is no
  // room now). Throws hoop::Error{peer_failure} (peer set) when the peer is gone or poisoned
  // the link, hoop::Error{transport} on other failures.
  virtual size_t write_some(const void* src, size_t n) = 0;

  // Copies the parts into the stream in order, as far as there is room; returns the bytes taken
  // in all. TCP sends them with one system call, so that a frame header and a small payload
  // leave in one segment (one wake-up of the peer instead of two).
  virtual size_t write_parts(std::span<const WritePart> parts) {
    size_t total = 0;
    for (const WritePart& p : parts) {
      const size_t w = write_some(p.data, p.size);
      total += w;
      if (w < p.size) break;
    }
    return total;
  }

  // The bytes readable now, contiguous; may be fewer than are buffered (wrap-around), empty
  // when none. Stays valid until consume(). Throws like write_some. Spans returned for a
  // stream offset that is a multiple of 8 start 8-byte aligned.
  virtual std::span<const std::byte> readable() = 0;
  // Releases the first n bytes of readable().
  virtual void consume(size_t n) = 0;

  // Before sleeping: registers with `w` what signals progress in the wanted directions and
  // returns true; returns false when progress is already possible (then do not sleep).
  virtual bool arm(Waiter& w, bool want_read, bool want_write) = 0;
  // After the sleep (whether or not arm() returned true).
  virtual void disarm() noexcept = 0;

  // After a sleep that made no progress: throws hoop::Error{peer_failure} when the peer is
  // known to be dead (its process is gone, its socket closed).
  virtual void check_peer_alive() = 0;

  // Best effort: make the peer's next call on this link fail with peer_failure, carrying
  // `reason` where the transport can (shared memory can, TCP closes the socket).
  virtual void poison(const std::string& reason) noexcept = 0;

  uint64_t bytes_written() const noexcept { return bytes_written_; }
  uint64_t bytes_read() const noexcept { return bytes_read_; }

 protected:
  int peer_;
  uint64_t bytes_written_ = 0;  // maintained by implementations
  uint64_t bytes_read_ = 0;
};

}  // namespace hoop::transport
