// What connecting to a peer of a communicator takes: the transport (a row of the table in
// transports.h: shared memory for a peer on this host unless the mode says otherwise) and the
// parameters of its connect function. Shared by the collective links and the point-to-point ones.
#pragma once

#include <atomic>

#include <cstdint>
#include <string>
#include <vector>

#include "comm/comm_impl.h"
#include "comm/transports.h"
#include "transport/shm/shm_transport.h"
#include "transport/tcp/tcp_transport.h"

namespace hoop::detail {

struct LinkTarget {
  const JobContext& job;
  uint64_t comm_id;
  int rank;
  const std::vector<PeerInfo>& peers;
  const std::string& mode;  // auto, shm, tcp
  // Raised once another member announced the communicator's failure: waits for a peer give up.
  const std::atomic<bool>* failed_elsewhere = nullptr;

  // The transport the mode picks for `peer`: the one it names, or with "auto" the first row
  // that can reach the peer. Not checked: a forced one may not reach it.
  const Transport& selected(int peer) const;
  // The same, checked: throws invalid_argument when the mode forces a transport that cannot
  // reach the peer (shared memory to another host).
  const Transport& transport(int peer) const;
  bool over_shm(int peer) const { return transport(peer).kind == TransportKind::shm; }
  transport::ShmLinkParams shm(int peer, int channel) const;
  transport::TcpLinkParams tcp(int peer, int channel) const;
};

}  // namespace hoop::detail
