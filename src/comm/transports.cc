#include "comm/transports.h"

#include <algorithm>
#include <array>

#include "comm/link_params.h"
#include "transport/shm/shm_transport.h"
#include "transport/tcp/tcp_transport.h"

namespace hoop::detail {

namespace {

bool same_host(const LinkTarget& t, int peer) {
  return t.peers[static_cast<size_t>(peer)].host_id == t.peers[static_cast<size_t>(t.rank)].host_id;
}
bool anywhere(const LinkTarget&, int) { return true; }

std::unique_ptr<transport::Link> connect_shm(const LinkTarget& t, int peer, int channel, TimePoint deadline) {
  return transport::shm_connect(t.shm(peer, channel), deadline);
}
std::unique_ptr<transport::Link> connect_tcp(const LinkTarget& t, int peer, int channel, TimePoint deadline) {
  return transport::tcp_connect(*t.job.listener, t.tcp(peer, channel), deadline);
}

constexpr std::array kTransports = {
    Transport{TransportKind::shm, "shm", same_host, connect_shm, "is on another host"},
    Transport{TransportKind::tcp, "tcp", anywhere, connect_tcp, ""},
};

}  // namespace

std::span<const Transport> transports() { return kTransports; }

const Transport* forced_transport(std::string_view mode) {
  const auto it = std::find_if(kTransports.begin(), kTransports.end(),
                               [&](const Transport& t) { return t.name == mode; });
  return it == kTransports.end() ? nullptr : &*it;
}

bool is_transport_mode(std::string_view mode) { return mode == "auto" || forced_transport(mode) != nullptr; }

}  // namespace hoop::detail
