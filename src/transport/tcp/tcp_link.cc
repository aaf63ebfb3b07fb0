#include "transport/tcp/tcp_link.h"

#include <poll.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "core/errors.h"
#include "core/log.h"
#include "core/params.h"
#include "transport/tcp/socket_options.h"
#include "transport/waiter.h"

namespace hoop::transport::tcp {

namespace {

constexpr size_t kMinStagingBytes = 4096;
// Unconsumed bytes this few are moved to the front whenever the tail runs short.
constexpr size_t kCheapMoveBytes = 4096;

bool peer_gone(int err) {
  return err == EPIPE || err == ECONNRESET || err == ETIMEDOUT || err == ECONNREFUSED ||
         err == EHOSTUNREACH || err == ENETUNREACH || err == ENOTCONN;
}

size_t staging_bytes_from_env() {
  return static_cast<size_t>(params::bytes(params::Id::tcp_staging_bytes));
}

}  // namespace

void TcpLink::FreeBytes::operator()(std::byte* p) const noexcept { std::free(p); }

TcpLink::TcpLink(UniqueFd fd, int my_rank, int peer, size_t staging_bytes)
    : Link(peer), fd_(std::move(fd)), my_rank_(my_rank) {
  if (staging_bytes == 0) staging_bytes = staging_bytes_from_env();
  capacity_ = (std::max(staging_bytes, kMinStagingBytes) + 63) & ~size_t{63};
  staging_.reset(static_cast<std::byte*>(std::aligned_alloc(64, capacity_)));
  if (!staging_) {
    throw_error(ErrorCode::transport,
                fmt::format("cannot allocate {} bytes of TCP staging buffer", capacity_),
                ErrorContext{.rank = my_rank_, .peer = peer_});
  }
  // Fault the pages in now rather than during the first transfer.
  std::memset(staging_.get(), 0, capacity_);
}

TcpLink::~TcpLink() = default;

void TcpLink::fail_closed() const {
  const ErrorContext ctx{.rank = my_rank_, .peer = peer_};
  if (!poison_reason_.empty()) {
    throw_error(ErrorCode::peer_failure,
                fmt::format("link to rank {} was shut down: {}", peer_, poison_reason_), ctx);
  }
  if (recv_error_ != 0) {
    throw_system_error(ErrorCode::peer_failure, fmt::format("connection to rank {} reset", peer_),
                       recv_error_, ctx);
  }
  throw_error(ErrorCode::peer_failure, fmt::format("rank {} closed the connection", peer_), ctx);
}

void TcpLink::fail_errno(const char* what, int err) const {
  const ErrorContext ctx{.rank = my_rank_, .peer = peer_};
  if (peer_gone(err)) {
    throw_system_error(ErrorCode::peer_failure, fmt::format("connection to rank {} reset", peer_),
                       err, ctx);
  }
  throw_system_error(ErrorCode::transport, fmt::format("{} rank {} failed", what, peer_), err, ctx);
}

void TcpLink::follow_buffer_cap() noexcept {
  if (const uint32_t cap = buffer_cap_generation(); cap != buffer_cap_seen_) {
    apply_buffer_cap(fd_.get());
    buffer_cap_seen_ = cap;
  }
}

size_t TcpLink::write_some(const void* src, size_t n) {
  if (!poison_reason_.empty()) fail_closed();
  if (n == 0) return 0;
  follow_buffer_cap();
  for (;;) {
    const ssize_t sent = ::send(fd_.get(), src, n, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (sent >= 0) {
      bytes_written_ += static_cast<uint64_t>(sent);
      return static_cast<size_t>(sent);
    }
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) return 0;
    fail_errno("send to", errno);
  }
}

size_t TcpLink::write_parts(std::span<const WritePart> parts) {
  if (parts.size() > kMaxWriteParts) return Link::write_parts(parts);
  if (!poison_reason_.empty()) fail_closed();
  iovec iov[kMaxWriteParts];
  size_t n = 0;
  for (const WritePart& p : parts) {
    if (p.size > 0) iov[n++] = iovec{const_cast<void*>(p.data), p.size};
  }
  if (n == 0) return 0;
  follow_buffer_cap();
  msghdr msg{};
  msg.msg_iov = iov;
  msg.msg_iovlen = n;
  for (;;) {
    const ssize_t sent = ::sendmsg(fd_.get(), &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (sent >= 0) {
      bytes_written_ += static_cast<uint64_t>(sent);
      return static_cast<size_t>(sent);
    }
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) return 0;
    fail_errno("send to", errno);
  }
}

void TcpLink::make_room() noexcept {
  if (read_ == write_) {
    read_ = write_ = head_offset();
    return;
  }
  // Without a move the caller still sees more than kCheapMoveBytes or a quarter of the buffer
  // contiguous once enough has arrived: more than any header it must look at whole.
  if (capacity_ - write_ >= capacity_ / 4) return;
  const size_t live = write_ - read_;
  const size_t head = head_offset();
  if (read_ > head && (read_ >= capacity_ / 2 || live <= kCheapMoveBytes)) {
    std::memmove(staging_.get() + head, staging_.get() + read_, live);
    read_ = head;
    write_ = head + live;
  }
}

std::span<const std::byte> TcpLink::readable() {
  if (!poison_reason_.empty()) fail_closed();
  if (read_ == write_) read_ = write_ = head_offset();
  follow_buffer_cap();
  if (!peer_closed_ && recv_error_ == 0) {
    // Only appends: a span returned earlier stays valid until consume().
    while (write_ < capacity_) {
      const ssize_t got = ::recv(fd_.get(), staging_.get() + write_, capacity_ - write_, MSG_DONTWAIT);
      if (got > 0) {
        write_ += static_cast<size_t>(got);
        break;
      }
      if (got == 0) {
        peer_closed_ = true;
        break;
      }
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) break;
      if (!peer_gone(errno)) fail_errno("receive from", errno);
      recv_error_ = errno;
      break;
    }
  }
  if (peer_closed_ || recv_error_ != 0) {
    // What is buffered is still delivered. A caller that saw all of it and then armed for more
    // waits for bytes that will never come.
    if (read_ == write_ || wants_more_than_final_) fail_closed();
  }
  seen_all_ = read_ < write_;
  return {staging_.get() + read_, write_ - read_};
}

void TcpLink::consume(size_t n) {
  if (n > write_ - read_) {
    throw_error(ErrorCode::internal,
                fmt::format("consume({}) on a TCP link with {} readable bytes", n, write_ - read_),
                ErrorContext{.rank = my_rank_, .peer = peer_});
  }
  if (n == 0) return;
  read_ += n;
  bytes_read_ += n;
  seen_all_ = false;
  wants_more_than_final_ = false;
  make_room();
}

bool TcpLink::arm(Waiter& w, bool want_read, bool want_write) {
  if (!poison_reason_.empty()) return false;
  if (want_read) {
    if (peer_closed_ || recv_error_ != 0) {
      // Nothing more will arrive: the next readable() or check_peer_alive() says so, unless
      // bytes the caller has not looked at yet are buffered.
      if (seen_all_) wants_more_than_final_ = true;
      return false;
    }
    // Buffered bytes the caller has not seen since its last consume(): progress is possible.
    // Bytes it saw and left (half an element, a partial frame) need more from the socket.
    if (read_ < write_ && !seen_all_) return false;
  }
  if (want_read || want_write) w.add_fd(fd_.get(), want_read, want_write);
  return true;
}

void TcpLink::check_peer_alive() {
  if (!poison_reason_.empty()) fail_closed();
  if (peer_closed_ || recv_error_ != 0) {
    if (read_ == write_ || wants_more_than_final_) fail_closed();
    return;  // data to deliver first
  }
  if (read_ < write_) return;
  pollfd p{fd_.get(), POLLIN | POLLRDHUP, 0};
  if (::poll(&p, 1, 0) <= 0) return;
  if (!(p.revents & (POLLERR | POLLHUP | POLLRDHUP))) return;
  // Hung up: only fatal once the kernel holds no more data from the peer.
  std::byte probe;
  for (;;) {
    const ssize_t got = ::recv(fd_.get(), &probe, 1, MSG_PEEK | MSG_DONTWAIT);
    if (got > 0) return;
    if (got == 0) {
      peer_closed_ = true;
      fail_closed();
    }
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) return;
    recv_error_ = errno;
    fail_closed();
  }
}

void TcpLink::poison(const std::string& reason) noexcept {
  try {
    poison_reason_ = reason.empty() ? "poisoned" : reason;
  } catch (...) {
    poison_reason_ = "poisoned";  // fits the small-string buffer: cannot throw
  }
  ::shutdown(fd_.get(), SHUT_RDWR);
}

}  // namespace hoop::transport::tcp
