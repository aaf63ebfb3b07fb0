// A Link over one connected TCP socket. Writes go straight to the socket; reads land in a
// staging buffer so the engine can look at received bytes in place (a frame header, a chunk
// to reduce) before consuming them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "transport/link.h"
#include "transport/tcp/unique_fd.h"

namespace hoop::transport::tcp {

class TcpLink final : public Link {
 public:
  // Takes a connected, configured socket. staging_bytes: HOOP_TCP_STAGING_BYTES or 4 MiB when 0.
  TcpLink(UniqueFd fd, int my_rank, int peer, size_t staging_bytes = 0);
  ~TcpLink() override;

  std::string_view kind() const noexcept override { return "tcp"; }
  size_t write_some(const void* src, size_t n) override;
  size_t write_parts(std::span<const WritePart> parts) override;
  std::span<const std::byte> readable() override;
  void consume(size_t n) override;
  bool arm(Waiter& w, bool want_read, bool want_write) override;
  void disarm() noexcept override {}
  void check_peer_alive() override;
  void poison(const std::string& reason) noexcept override;

  int fd() const noexcept { return fd_.get(); }
  size_t staging_capacity() const noexcept { return capacity_; }

 private:
  [[noreturn]] void fail_closed() const;
  [[noreturn]] void fail_errno(const char* what, int err) const;
  // After consume(): moves unconsumed bytes to the front when the free tail is short and the
  // move is cheap compared to what it frees (each byte is moved at most once on average).
  void make_room() noexcept;
  // Applies the links' buffer cap to fd_ if it changed since this link last looked.
  void follow_buffer_cap() noexcept;
  size_t head_offset() const noexcept { return static_cast<size_t>(bytes_read_ % 8); }

  UniqueFd fd_;
  int my_rank_;
  struct FreeBytes {
    void operator()(std::byte* p) const noexcept;
  };
  std::unique_ptr<std::byte[], FreeBytes> staging_;  // 64-byte aligned
  size_t capacity_ = 0;
  // [read_, write_) holds received, unconsumed bytes; read_ % 8 == bytes_read_ % 8 always,
  // so the stream's 8-byte boundaries fall on 8-byte addresses.
  size_t read_ = 0;
  size_t write_ = 0;
  int recv_error_ = 0;        // errno of a failed recv, reported once the buffer drains
  uint32_t buffer_cap_seen_ = ~0u;  // buffer_cap_generation() last applied to fd_
  bool peer_closed_ = false;  // recv returned 0
  // readable() showed every buffered byte and nothing was consumed since: arming for reading
  // then means the caller needs more than is buffered, so it may sleep on the socket.
  bool seen_all_ = false;
  // The peer closed, the caller saw the last bytes that will ever arrive and armed for more.
  bool wants_more_than_final_ = false;
  std::string poison_reason_;
};

}  // namespace hoop::transport::tcp
