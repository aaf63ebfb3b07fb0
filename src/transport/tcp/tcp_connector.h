// Connecting a TCP link without blocking, for a progress loop that drives many links at once:
// each advance() moves the connect, the Hello and the wait for the reply as far as they go
// now; arm() tells a Waiter what the next step waits for. The accepting side is
// TcpListener::try_accept. Errors are those of tcp_connect.
#pragma once

#include <array>
#include <cstddef>
#include <memory>
#include <vector>

#include "core/clock.h"
#include "transport/link.h"
#include "transport/tcp/connect_targets.h"
#include "transport/tcp/handshake.h"
#include "transport/tcp/tcp_transport.h"
#include "transport/tcp/unique_fd.h"

namespace hoop::transport {

class TcpConnector {
 public:
  TcpConnector(const TcpListener& listener, TcpLinkParams params);

  // The link once the peer's listener accepted the Hello; null while under way.
  std::unique_ptr<Link> advance();
  // Registers the socket of the attempt under way; none between attempts (see retry_at).
  void arm(Waiter& w) const;
  // When the next attempt starts after a round of failed ones (the past while one runs).
  TimePoint retry_at() const { return retry_at_; }

 private:
  enum class Stage { idle, connecting, hello, reply };
  void start_attempt();
  void attempt_failed(int err);

  TcpLinkParams params_;
  std::vector<tcp::Target> targets_;
  std::array<std::byte, tcp::kHelloBytes> hello_{};
  std::array<std::byte, tcp::kReplyBytes> reply_{};
  size_t done_ = 0;  // bytes of the Hello sent, then of the reply received
  size_t target_ = 0;
  Stage stage_ = Stage::idle;
  tcp::UniqueFd fd_;
  TimePoint retry_at_{};
  milliseconds backoff_ = tcp::kFirstBackoff;
  int last_error_ = 0;
};

}  // namespace hoop::transport
