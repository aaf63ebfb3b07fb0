// The non-blocking connecting side of a TCP link (see tcp_connector.h).
#include "transport/tcp/tcp_connector.h"

#include <poll.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstring>

#include "core/errors.h"
#include "core/log.h"
#include "transport/tcp/socket_options.h"
#include "transport/tcp/tcp_link.h"
#include "transport/waiter.h"

namespace hoop::transport {

TcpConnector::TcpConnector(const TcpListener& listener, TcpLinkParams params)
    : params_(std::move(params)),
      targets_(tcp::targets_for(params_)),
      hello_(tcp::encode_hello(tcp::hello_for(listener, params_))) {}

void TcpConnector::start_attempt() {
  const SocketAddress& addr = targets_[target_].address;
  fd_.reset(tcp::open_stream_socket(addr.family()));
  if (!fd_) return attempt_failed(errno);
  tcp::set_buffer_sizes(fd_.get(), tcp::socket_buffer_bytes());
  done_ = 0;
  if (::connect(fd_.get(), addr.get(), addr.length) == 0) {
    stage_ = Stage::hello;
  } else if (errno == EINPROGRESS || errno == EINTR) {
    stage_ = Stage::connecting;
  } else {
    attempt_failed(errno);
  }
}

// Next address; after the last one, a pause (or an error when retrying cannot help).
void TcpConnector::attempt_failed(int err) {
  HOOP_TRACE("tcp: connect to rank {} at {} failed: {}", params_.peer_rank, targets_[target_].text,
             std::strerror(err));
  fd_.reset();
  stage_ = Stage::idle;
  last_error_ = err;
  if (++target_ < targets_.size()) return;
  target_ = 0;
  if (!tcp::worth_retrying(err)) {
    throw_error(ErrorCode::transport,
                fmt::format("cannot connect to rank {} at any of its addresses (last: {}{})",
                            params_.peer_rank, std::strerror(err), out_of_descriptors_note(err)),
                tcp::context_of(params_));
  }
  retry_at_ = Clock::now() + backoff_;
  backoff_ = std::min(backoff_ * 2, tcp::kMaxBackoff);
}

std::unique_ptr<Link> TcpConnector::advance() {
  if (stage_ == Stage::idle) {
    if (Clock::now() < retry_at_) return nullptr;
    start_attempt();
  }
  if (stage_ == Stage::connecting) {
    pollfd pfd{fd_.get(), POLLOUT, 0};
    if (::poll(&pfd, 1, 0) <= 0) return nullptr;
    int so_error = 0;
    socklen_t len = sizeof so_error;
    if (::getsockopt(fd_.get(), SOL_SOCKET, SO_ERROR, &so_error, &len) != 0) so_error = errno;
    if (so_error != 0) {
      attempt_failed(so_error);
      return nullptr;
    }
    stage_ = Stage::hello;
  }
  if (stage_ == Stage::hello) {
    const ssize_t n = ::send(fd_.get(), hello_.data() + done_, hello_.size() - done_, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
      attempt_failed(errno);
      return nullptr;
    }
    done_ += n > 0 ? static_cast<size_t>(n) : 0;
    if (done_ < hello_.size()) return nullptr;
    done_ = 0;
    stage_ = Stage::reply;
  }
  const ssize_t n = ::recv(fd_.get(), reply_.data() + done_, reply_.size() - done_, MSG_DONTWAIT);
  if (n == 0) {
    throw_error(ErrorCode::protocol,
                fmt::format("{} closed the connection during the handshake (is it rank {}'s hoop "
                            "listener?)", targets_[target_].text, params_.peer_rank),
                tcp::context_of(params_));
  }
  if (n < 0) {
    if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) attempt_failed(errno);
    return nullptr;
  }
  done_ += static_cast<size_t>(n);
  if (done_ < reply_.size()) return nullptr;
  const auto status = tcp::parse_reply(reply_);
  if (status != tcp::HelloStatus::ok) {
    throw_error(ErrorCode::protocol,
                fmt::format("rank {} at {} refused the connection: {}", params_.peer_rank,
                            targets_[target_].text,
                            status ? tcp::to_string(*status) : "an answer that is not hoop's"),
                tcp::context_of(params_));
  }
  tcp::configure_link_socket(fd_.get());
  HOOP_INFO("tcp: link to rank {} (communicator {:#x}, channel {}) connected to {}", params_.peer_rank,
            params_.comm_id, params_.channel, targets_[target_].text);
  return std::make_unique<tcp::TcpLink>(std::move(fd_), params_.my_rank, params_.peer_rank,
                                        params_.staging_bytes);
}

void TcpConnector::arm(Waiter& w) const {
  if (stage_ == Stage::connecting || stage_ == Stage::hello) w.add_fd(fd_.get(), false, true);
  if (stage_ == Stage::reply) w.add_fd(fd_.get(), true, false);
}

}  // namespace hoop::transport
