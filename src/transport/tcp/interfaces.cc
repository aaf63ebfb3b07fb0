#include "transport/tcp/interfaces.h"

#include <ifaddrs.h>
#include <net/if.h>

#include <algorithm>
#include <cctype>
#include <cstring>

#include "core/errors.h"
#include "core/params.h"

namespace hoop::transport::tcp {

InterfaceFilter InterfaceFilter::parse(std::string_view spec) {
  InterfaceFilter f;
  if (!spec.empty() && spec.front() == '^') {
    f.exclude = true;
    spec.remove_prefix(1);
  }
  if (!spec.empty() && spec.front() == '=') {
    f.exact = true;
    spec.remove_prefix(1);
  }
  while (!spec.empty()) {
    const size_t comma = spec.find(',');
    std::string_view item = spec.substr(0, comma);
    while (!item.empty() && std::isspace(static_cast<unsigned char>(item.front()))) item.remove_prefix(1);
    while (!item.empty() && std::isspace(static_cast<unsigned char>(item.back()))) item.remove_suffix(1);
    if (!item.empty()) f.names.emplace_back(item);
    if (comma == std::string_view::npos) break;
    spec.remove_prefix(comma + 1);
  }
  return f;
}

bool InterfaceFilter::selects(std::string_view ifname) const {
  const bool matched = std::any_of(names.begin(), names.end(), [&](const std::string& n) {
    return exact ? ifname == n : ifname.substr(0, n.size()) == n;
  });
  return matched != exclude;
}

std::vector<InterfaceAddress> selected_interface_addresses(const std::optional<InterfaceFilter>& filter,
                                                           int family) {
  std::vector<InterfaceAddress> out;
  ifaddrs* list = nullptr;
  if (::getifaddrs(&list) != 0) return out;
  for (ifaddrs* ifa = list; ifa; ifa = ifa->ifa_next) {
    if (!ifa->ifa_addr || !(ifa->ifa_flags & IFF_UP)) continue;
    const int fam = ifa->ifa_addr->sa_family;
    if (fam != AF_INET && fam != AF_INET6) continue;
    if (family != AF_UNSPEC && fam != family) continue;
    const std::string_view name = ifa->ifa_name;
    if (filter ? !filter->selects(name) : (ifa->ifa_flags & IFF_LOOPBACK) != 0) continue;
    const auto addr = SocketAddress::from(
        ifa->ifa_addr, fam == AF_INET ? sizeof(sockaddr_in) : sizeof(sockaddr_in6));
    if (addr.is_loopback() || addr.is_link_local()) continue;
    out.push_back({std::string(name), addr});
  }
  ::freeifaddrs(list);
  return out;
}

int socket_family_from_env() {
  auto v = params::text(params::Id::socket_family);
  if (!v) return AF_UNSPEC;
  std::string s = *v;
  for (auto& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  if (s == "AF_INET" || s == "INET" || s == "IPV4" || s == "4") return AF_INET;
  if (s == "AF_INET6" || s == "INET6" || s == "IPV6" || s == "6") return AF_INET6;
  throw_error(ErrorCode::invalid_argument,
              fmt::format("HOOP_SOCKET_FAMILY='{}' is not AF_INET or AF_INET6", *v));
}

std::string interface_of(const SocketAddress& local) {
  const SocketAddress want = local.unmapped();
  std::string found = "?";
  ifaddrs* list = nullptr;
  if (::getifaddrs(&list) != 0) return found;
  for (ifaddrs* ifa = list; ifa; ifa = ifa->ifa_next) {
    if (!ifa->ifa_addr || ifa->ifa_addr->sa_family != want.family()) continue;
    const auto addr = SocketAddress::from(
        ifa->ifa_addr, want.family() == AF_INET ? sizeof(sockaddr_in) : sizeof(sockaddr_in6));
    if (addr.host() == want.host()) {
      found = ifa->ifa_name;
      break;
    }
  }
  ::freeifaddrs(list);
  return found;
}

}  // namespace hoop::transport::tcp
