#include "bootstrap/socket_address.h"

#include <arpa/inet.h>
#include <netinet/in.h>

#include <cstring>

#include <fmt/format.h>

namespace hoop::bootstrap {

std::string format_address(const sockaddr* addr, socklen_t len) {
  char text[INET6_ADDRSTRLEN] = {};
  if (addr->sa_family == AF_INET && len >= static_cast<socklen_t>(sizeof(sockaddr_in))) {
    const auto* in4 = reinterpret_cast<const sockaddr_in*>(addr);
    ::inet_ntop(AF_INET, &in4->sin_addr, text, sizeof text);
    return fmt::format("{}:{}", text, ntohs(in4->sin_port));
  }
  if (addr->sa_family == AF_INET6 && len >= static_cast<socklen_t>(sizeof(sockaddr_in6))) {
    const auto* in6 = reinterpret_cast<const sockaddr_in6*>(addr);
    if (IN6_IS_ADDR_V4MAPPED(&in6->sin6_addr)) {
      in_addr v4{};
      std::memcpy(&v4, in6->sin6_addr.s6_addr + 12, sizeof v4);
      ::inet_ntop(AF_INET, &v4, text, sizeof text);
      return fmt::format("{}:{}", text, ntohs(in6->sin6_port));
    }
    ::inet_ntop(AF_INET6, &in6->sin6_addr, text, sizeof text);
    return fmt::format("[{}]:{}", text, ntohs(in6->sin6_port));
  }
  return fmt::format("(address family {})", addr->sa_family);
}

std::string peer_address(int fd) {
  sockaddr_storage ss{};
  socklen_t len = sizeof ss;
  if (::getpeername(fd, reinterpret_cast<sockaddr*>(&ss), &len) != 0) return "?";
  return format_address(reinterpret_cast<const sockaddr*>(&ss), len);
}

std::string join_host_port(const std::string& host, unsigned port) {
  if (host.find(':') != std::string::npos) return fmt::format("[{}]:{}", host, port);
  return fmt::format("{}:{}", host, port);
}

}  // namespace hoop::bootstrap
