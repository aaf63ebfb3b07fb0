// Which network interfaces a rank publishes to its peers. HOOP_SOCKET_IFNAME follows NCCL's
// NCCL_SOCKET_IFNAME: a comma-separated list of name prefixes ("eth,ib"), a leading '^' to
// exclude them instead ("^docker,lo"), a '=' (after the '^' if any) for exact names ("=eth0").
// HOOP_SOCKET_FAMILY=AF_INET|AF_INET6 keeps one address family.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/socket_address.h"

namespace hoop::transport::tcp {

struct InterfaceFilter {
  bool exclude = false;  // '^': select the interfaces that do NOT match
  bool exact = false;    // '=': names must match whole, not as a prefix
  std::vector<std::string> names;

  static InterfaceFilter parse(std::string_view spec);
  bool selects(std::string_view ifname) const;
};

struct InterfaceAddress {
  std::string ifname;
  SocketAddress address;  // port 0
};

// Addresses of the interfaces that are up and selected: by `filter` when given, else every
// non-loopback interface. Loopback addresses and IPv6 link-local ones are never returned
// (loopback is published separately). `family`: AF_INET, AF_INET6 or AF_UNSPEC for both.
std::vector<InterfaceAddress> selected_interface_addresses(const std::optional<InterfaceFilter>& filter,
                                                           int family);

// AF_INET, AF_INET6 or AF_UNSPEC from HOOP_SOCKET_FAMILY; throws invalid_argument on other values.
int socket_family_from_env();

// The interface holding a local address ("lo", "eth0"), or "?" when none does.
std::string interface_of(const SocketAddress& local);

}  // namespace hoop::transport::tcp
