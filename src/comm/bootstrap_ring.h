// The world's peer table, gathered around a ring of TCP connections between the ranks (NCCL
// bootstraps the same way): rank r knows only its two neighbours' records (from the store),
// connects to r+1, accepts r-1 through the process's listener (the handshake carries the job
// and secret keys like every hoop connection), sends its own record and forwards every record
// it receives except its successor's own, until it holds all N. So a rank makes O(1) store
// requests whatever N is, and the N records travel N-1 hops each between the ranks.
//
// A failure (a neighbour that dies or never connects, a malformed frame, the deadline) throws
// and, best effort, sends the reason on to the successor, which passes it on around the ring:
// each survivor reports the first failure instead of a closed connection.
#pragma once

#include <vector>

#include "comm/comm_impl.h"
#include "core/clock.h"

namespace hoop::detail {

// The handshake's channel for the bootstrap ring (collectives use 0..K-1, point-to-point
// kP2pChannel = 1 << 16); the communicator id is the world's, 0.
inline constexpr int kBootstrapChannel = (1 << 16) + 1;

// Where a rank sits on the ring and what it knows before the exchange.
struct RingSeat {
  int rank = 0;
  int size = 1;
  PeerInfo me;
  PeerInfo prev;  // rank - 1 (mod size)
  PeerInfo next;  // rank + 1 (mod size)
};

// Every rank's record, in rank order (seat.me at seat.rank). Throws Error (peer_failure,
// timeout, protocol) naming the neighbour at fault; nothing waits past `deadline`.
std::vector<PeerInfo> ring_allgather_peers(transport::TcpListener& listener, const RingSeat& seat,
                                           TimePoint deadline);

}  // namespace hoop::detail
