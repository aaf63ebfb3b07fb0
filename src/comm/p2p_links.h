// The point-to-point links of a communicator: a channel of their own per peer pair
// (kP2pChannel), so point-to-point bytes never interleave with a collective's stream.
//
// Connecting cannot deadlock because nothing here waits for a peer. Over shared memory the
// first of the pair to need the segment creates it and uses it at once; the other attaches
// when it first needs it (shm_connect never waits for the peer's arrival). Over TCP each
// direction has a socket of its own, connected by its sender: TcpConnector moves the connect
// and the handshake along from the progress loop, and the receiver takes the socket out of its
// listener with try_accept, which drives the listener itself when nobody else does. So a
// receive from kAnySource only accepts (it never connects to peers that may never send), and
// two ranks connecting to each other each answer the other's handshake from their own loop.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "comm/link_params.h"
#include "core/clock.h"
#include "transport/link.h"
#include "transport/tcp/tcp_connector.h"
#include "transport/waiter.h"

namespace hoop::detail {

// Channel number of the point-to-point links (collectives use 0 .. nchannels-1).
inline constexpr int kP2pChannel = 1 << 16;

class P2pLinks {
 public:
  explicit P2pLinks(LinkTarget target);

  // The link carrying this rank's messages to `peer`; null while it is being connected.
  transport::Link* tx(int peer, TimePoint deadline);
  // The link carrying peer's messages to this rank, for a receive that may match them: over
  // shared memory the pair's segment (created or attached now), over TCP the peer's socket if
  // it has connected (null otherwise).
  transport::Link* attach_rx(int peer, TimePoint deadline);
  // Over TCP: the peer's socket if it has connected by now, taken from the listener (that is
  // how messages nobody waits for yet get in). Over shared memory: the link if there is one.
  // `drove`, when given: whether the listener's accept loop already ran in this pass over the
  // peers (then it is not run again); set once it has.
  transport::Link* accept(int peer, bool* drove = nullptr);
  transport::Link* connected_rx(int peer) const { return peers_[static_cast<size_t>(peer)].in; }
  transport::Link* connected_tx(int peer) const { return peers_[static_cast<size_t>(peer)].out.get(); }
  // Registers what the connections under way wait for, and with `listen` the listener while a
  // TCP peer has not connected to this rank.
  void arm(transport::Waiter& w, bool listen) const;
  // Whether a peer known to be over TCP has not connected to this rank yet.
  bool accepting() const;
  // Whether `peer` is over TCP (as far as known) and has not connected to this rank yet.
  bool awaits_accept(int peer) const {
    const Peer& p = peers_[static_cast<size_t>(peer)];
    return !p.in && p.shm == 0;
  }
  // The earliest retry of a failed TCP connect (TimePoint::max() when none is due).
  TimePoint next_retry() const;
  // Throws peer_failure when the peer is known to be gone (see Link::check_peer_alive), as far as
  // the directions an operation waits on say: `sending` to it, `receiving` from it. Over TCP
  // each direction has its own socket, and a peer that exits after its last send closes the
  // socket this rank sends on while its data still arrives on the other.
  void check_alive(int peer, bool sending, bool receiving);
  void poison(int peer, const std::string& reason) noexcept;
  void poison_all(const std::string& reason) noexcept;
  // The transport of the peer's links ("shm", "tcp"; empty before the first one).
  std::string_view kind(int peer) const;

 private:
  struct Peer {
    std::unique_ptr<transport::Link> out;       // shm: both directions
    std::unique_ptr<transport::Link> accepted;  // tcp: the peer's socket to us
    transport::Link* in = nullptr;
    std::unique_ptr<transport::TcpConnector> connecting;
    int shm = -1;  // over shared memory: 1, TCP: 0, not known yet: -1
  };
  bool over_shm(int peer);
  LinkTarget target_;
  std::vector<Peer> peers_;
};

}  // namespace hoop::detail
