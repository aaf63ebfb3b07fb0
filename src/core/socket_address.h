// Numeric socket addresses as hoop publishes and logs them: "1.2.3.4:5000" and "[fd00::2]:5000".
// No name resolution: peers publish addresses, not host names.
#pragma once

#include <netinet/in.h>
#include <sys/socket.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace hoop {

struct SocketAddress {
  sockaddr_storage storage{};
  socklen_t length = 0;

  static std::optional<SocketAddress> parse(std::string_view text);
  static SocketAddress from(const sockaddr* addr, socklen_t length);

  int family() const noexcept { return storage.ss_family; }
  uint16_t port() const noexcept;
  void set_port(uint16_t port) noexcept;
  const sockaddr* get() const noexcept { return reinterpret_cast<const sockaddr*>(&storage); }

  bool is_loopback() const noexcept;    // 127.0.0.0/8, ::1 and ::ffff:127.x.y.z
  bool is_link_local() const noexcept;  // fe80::/10
  // An IPv4 address seen through an IPv6 socket (::ffff:a.b.c.d) as plain IPv4, else a copy.
  SocketAddress unmapped() const noexcept;
  // "a.b.c.d:port" or "[v6]:port"; IPv4-mapped IPv6 addresses print as IPv4.
  std::string to_string() const;
  // The address alone, without port or brackets.
  std::string host() const;
};

// "host:port", with brackets around an IPv6 literal (for messages about hosts by name).
std::string join_host_port(const std::string& host, unsigned port);

// Address of the local (getsockname) or remote (getpeername) end of a socket; empty on error.
std::optional<SocketAddress> local_address(int fd);
std::optional<SocketAddress> remote_address(int fd);

}  // namespace hoop
