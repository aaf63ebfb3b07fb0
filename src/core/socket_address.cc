#include "core/socket_address.h"

#include <arpa/inet.h>
#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cstring>

namespace hoop {

namespace {

std::optional<uint16_t> parse_port(std::string_view text) {
  unsigned value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc{} || end != text.data() + text.size() || text.empty() || value > 65535) {
    return std::nullopt;
  }
  return static_cast<uint16_t>(value);
}

const sockaddr_in6& as_v6(const sockaddr_storage& s) {
  return *reinterpret_cast<const sockaddr_in6*>(&s);
}
const sockaddr_in& as_v4(const sockaddr_storage& s) {
  return *reinterpret_cast<const sockaddr_in*>(&s);
}

}  // namespace

std::optional<SocketAddress> SocketAddress::parse(std::string_view text) {
  SocketAddress out;
  std::string host;
  std::string_view port_text;
  if (!text.empty() && text.front() == '[') {
    const size_t close = text.find(']');
    if (close == std::string_view::npos || close + 1 >= text.size() || text[close + 1] != ':') {
      return std::nullopt;
    }
    host = std::string(text.substr(1, close - 1));
    port_text = text.substr(close + 2);
    auto& a = *reinterpret_cast<sockaddr_in6*>(&out.storage);
    a.sin6_family = AF_INET6;
    if (::inet_pton(AF_INET6, host.c_str(), &a.sin6_addr) != 1) return std::nullopt;
    out.length = sizeof(sockaddr_in6);
  } else {
    const size_t colon = text.rfind(':');
    if (colon == std::string_view::npos) return std::nullopt;
    host = std::string(text.substr(0, colon));
    port_text = text.substr(colon + 1);
    auto& a = *reinterpret_cast<sockaddr_in*>(&out.storage);
    a.sin_family = AF_INET;
    if (::inet_pton(AF_INET, host.c_str(), &a.sin_addr) != 1) return std::nullopt;
    out.length = sizeof(sockaddr_in);
  }
  auto port = parse_port(port_text);
  if (!port) return std::nullopt;
  out.set_port(*port);
  return out;
}

SocketAddress SocketAddress::from(const sockaddr* addr, socklen_t length) {
  SocketAddress out;
  out.length = std::min<socklen_t>(length, sizeof out.storage);
  std::memcpy(&out.storage, addr, out.length);
  return out;
}

uint16_t SocketAddress::port() const noexcept {
  if (family() == AF_INET) return ntohs(as_v4(storage).sin_port);
  if (family() == AF_INET6) return ntohs(as_v6(storage).sin6_port);
  return 0;
}

void SocketAddress::set_port(uint16_t port) noexcept {
  if (family() == AF_INET) reinterpret_cast<sockaddr_in*>(&storage)->sin_port = htons(port);
  if (family() == AF_INET6) reinterpret_cast<sockaddr_in6*>(&storage)->sin6_port = htons(port);
}

SocketAddress SocketAddress::unmapped() const noexcept {
  if (family() != AF_INET6 || !IN6_IS_ADDR_V4MAPPED(&as_v6(storage).sin6_addr)) return *this;
  SocketAddress out;
  auto& a = *reinterpret_cast<sockaddr_in*>(&out.storage);
  a.sin_family = AF_INET;
  std::memcpy(&a.sin_addr, &as_v6(storage).sin6_addr.s6_addr[12], 4);
  a.sin_port = as_v6(storage).sin6_port;
  out.length = sizeof(sockaddr_in);
  return out;
}

bool SocketAddress::is_loopback() const noexcept {
  const SocketAddress a = unmapped();
  if (a.family() == AF_INET) return (ntohl(as_v4(a.storage).sin_addr.s_addr) >> 24) == 127;
  if (a.family() == AF_INET6) return IN6_IS_ADDR_LOOPBACK(&as_v6(a.storage).sin6_addr);
  return false;
}

bool SocketAddress::is_link_local() const noexcept {
  return family() == AF_INET6 && IN6_IS_ADDR_LINKLOCAL(&as_v6(storage).sin6_addr);
}

std::string SocketAddress::host() const {
  const SocketAddress a = unmapped();
  char buf[INET6_ADDRSTRLEN] = {};
  if (a.family() == AF_INET) {
    ::inet_ntop(AF_INET, &as_v4(a.storage).sin_addr, buf, sizeof buf);
  } else if (a.family() == AF_INET6) {
    ::inet_ntop(AF_INET6, &as_v6(a.storage).sin6_addr, buf, sizeof buf);
  } else {
    return "?";
  }
  return buf;
}

std::string SocketAddress::to_string() const {
  const SocketAddress a = unmapped();
  if (a.family() == AF_INET6) return fmt::format("[{}]:{}", a.host(), a.port());
  if (a.family() == AF_INET) return fmt::format("{}:{}", a.host(), a.port());
  return "<unknown address>";
}

std::optional<SocketAddress> local_address(int fd) {
  sockaddr_storage s{};
  socklen_t len = sizeof s;
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&s), &len) != 0) return std::nullopt;
  return SocketAddress::from(reinterpret_cast<sockaddr*>(&s), len);
}

std::optional<SocketAddress> remote_address(int fd) {
  sockaddr_storage s{};
  socklen_t len = sizeof s;
  if (::getpeername(fd, reinterpret_cast<sockaddr*>(&s), &len) != 0) return std::nullopt;
  return SocketAddress::from(reinterpret_cast<sockaddr*>(&s), len);
}

std::string join_host_port(const std::string& host, unsigned port) {
  if (host.find(':') != std::string::npos) return fmt::format("[{}]:{}", host, port);
  return fmt::format("{}:{}", host, port);
}

}  // namespace hoop
