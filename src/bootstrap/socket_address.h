// Printable socket addresses for logs and errors: "127.0.0.1:29411", "[::1]:29411".
#pragma once

#include <sys/socket.h>

#include <string>

namespace hoop::bootstrap {

// IPv4-mapped IPv6 addresses are shown as IPv4.
std::string format_address(const sockaddr* addr, socklen_t len);
// The remote end of a connected socket ("?" when unknown).
std::string peer_address(int fd);
// "host:port", with brackets around an IPv6 literal.
std::string join_host_port(const std::string& host, unsigned port);

}  // namespace hoop::bootstrap
