// The addresses, retry rule and Hello of the connecting side (see connect_targets.h).
#include "transport/tcp/connect_targets.h"

#include <sys/socket.h>

#include <algorithm>
#include <cerrno>

#include <fmt/ranges.h>

namespace hoop::transport::tcp {

bool worth_retrying(int err) {
  return err == ECONNREFUSED || err == ETIMEDOUT || err == EHOSTUNREACH || err == ENETUNREACH ||
         err == ECONNRESET || err == EAGAIN || err == EINTR || err == EADDRNOTAVAIL ||
         err == ENOBUFS;
}

int open_stream_socket(int family) {
  bool retry = true;
  int fd = -1;
  for (int attempt = 0; attempt < 2 && retry; ++attempt) {
    fd = keep_link_descriptor(::socket(family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0), &retry);
  }
  return fd;
}

ErrorContext context_of(const TcpLinkParams& p) {
  return ErrorContext{.rank = p.my_rank, .op = "tcp.connect", .seq = 0, .peer = p.peer_rank};
}

std::vector<Target> targets_for(const TcpLinkParams& p) {
  std::vector<Target> loopback, remote;
  for (const auto& text : p.peer_addresses) {
    auto addr = SocketAddress::parse(text);
    if (!addr) {
      throw_error(ErrorCode::invalid_argument,
                  fmt::format("rank {} published an unparsable address '{}'", p.peer_rank, text),
                  context_of(p));
    }
    (addr->is_loopback() ? loopback : remote).push_back({text, *addr});
  }
  std::stable_sort(loopback.begin(), loopback.end(), [](const Target& a, const Target& b) {
    return a.address.family() == AF_INET && b.address.family() != AF_INET;
  });
  auto& chosen = p.same_host ? loopback : remote;
  // Channel c starts with the peer's c-th interface: with one interface per rail, each channel
  // of a multi-ring runs over its own link.
  if (!p.same_host && chosen.size() > 1 && p.channel > 0) {
    std::rotate(chosen.begin(), chosen.begin() + static_cast<long>(static_cast<size_t>(p.channel) % chosen.size()),
                chosen.end());
  }
  if (chosen.empty()) {
    throw_error(ErrorCode::transport,
                fmt::format("rank {} published no {} address (it published: {})", p.peer_rank,
                            p.same_host ? "loopback" : "non-loopback",
                            fmt::join(p.peer_addresses, ", ")),
                context_of(p));
  }
  return chosen;
}

Hello hello_for(const TcpListener& listener, const TcpLinkParams& p) {
  Hello hello;
  hello.job_key = listener.job_key();
  hello.secret_key = listener.secret_key();
  hello.comm_id = p.comm_id;
  hello.from_rank = p.my_rank;
  hello.to_rank = p.peer_rank;
  hello.channel = p.channel;
  return hello;
}

}  // namespace hoop::transport::tcp
