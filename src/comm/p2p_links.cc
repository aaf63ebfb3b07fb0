#include "comm/p2p_links.h"

#include "core/log.h"
#include "transport/tcp/socket_options.h"
#include "transport/tcp/tcp_link.h"

namespace hoop::detail {

P2pLinks::P2pLinks(LinkTarget target) : target_(target), peers_(target.peers.size()) {}

bool P2pLinks::over_shm(int peer) {
  Peer& p = peers_[static_cast<size_t>(peer)];
  if (p.shm < 0) p.shm = target_.over_shm(peer) ? 1 : 0;
  return p.shm == 1;
}

transport::Link* P2pLinks::tx(int peer, TimePoint deadline) {
  Peer& p = peers_[static_cast<size_t>(peer)];
  if (p.out) return p.out.get();
  if (over_shm(peer)) {
    auto params = target_.shm(peer, kP2pChannel);
    params.remove_if_unattached = true;
    p.out = transport::shm_connect(params, deadline);
    p.in = p.out.get();
  } else {
    if (!p.connecting) {
      p.connecting = std::make_unique<transport::TcpConnector>(*target_.job.listener,
                                                               target_.tcp(peer, kP2pChannel));
    }
    p.out = p.connecting->advance();
    if (p.out) p.connecting.reset();
  }
  if (p.out) {
    HOOP_INFO("communicator {:#x}: rank {} sends to rank {} over {}", target_.comm_id, target_.rank,
              peer, p.out->kind());
  }
  return p.out.get();
}

transport::Link* P2pLinks::attach_rx(int peer, TimePoint deadline) {
  Peer& p = peers_[static_cast<size_t>(peer)];
  if (p.in) return p.in;
  return over_shm(peer) ? tx(peer, deadline) : accept(peer);
}

transport::Link* P2pLinks::accept(int peer, bool* drove) {
  Peer& p = peers_[static_cast<size_t>(peer)];
  if (p.in || over_shm(peer)) return p.in;
  const bool drive = !drove || !*drove;
  if (drove) *drove = true;
  const int fd = target_.job.listener->try_accept(target_.comm_id, peer, target_.rank, kP2pChannel, drive);
  if (fd < 0) return nullptr;
  transport::tcp::UniqueFd conn(fd);
  transport::tcp::configure_link_socket(conn.get());
  p.accepted = std::make_unique<transport::tcp::TcpLink>(std::move(conn), target_.rank, peer);
  p.in = p.accepted.get();
  return p.in;
}

void P2pLinks::arm(transport::Waiter& w, bool listen) const {
  for (const Peer& p : peers_) {
    if (p.connecting) p.connecting->arm(w);
  }
  if (listen && accepting()) target_.job.listener->arm(w);
}

bool P2pLinks::accepting() const {
  for (size_t i = 0; i < peers_.size(); ++i) {
    if (static_cast<int>(i) != target_.rank && awaits_accept(static_cast<int>(i))) return true;
  }
  return false;
}

TimePoint P2pLinks::next_retry() const {
  TimePoint t = TimePoint::max();
  for (const Peer& p : peers_) {
    if (p.connecting && p.connecting->retry_at() > Clock::now()) t = std::min(t, p.connecting->retry_at());
  }
  return t;
}

void P2pLinks::check_alive(int peer, bool sending, bool receiving) {
  Peer& p = peers_[static_cast<size_t>(peer)];
  const bool both_ways = p.out && p.out.get() == p.in;  // shared memory: one link
  // A receive from a peer that has not connected to this rank yet: the socket to it is the
  // only one that can tell that it is gone.
  const bool only_out = receiving && !p.in;
  if (p.out && (sending || both_ways || only_out)) p.out->check_peer_alive();
  if (p.accepted && receiving) p.accepted->check_peer_alive();
}

void P2pLinks::poison(int peer, const std::string& reason) noexcept {
  Peer& p = peers_[static_cast<size_t>(peer)];
  if (p.out) p.out->poison(reason);
  if (p.accepted) p.accepted->poison(reason);
}

void P2pLinks::poison_all(const std::string& reason) noexcept {
  for (size_t i = 0; i < peers_.size(); ++i) poison(static_cast<int>(i), reason);
}

std::string_view P2pLinks::kind(int peer) const {
  const Peer& p = peers_[static_cast<size_t>(peer)];
  return p.out ? p.out->kind() : p.in ? p.in->kind() : std::string_view{};
}

}  // namespace hoop::detail
