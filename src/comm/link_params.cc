#include "comm/link_params.h"

#include <fmt/format.h>

#include "core/errors.h"

namespace hoop::detail {

const Transport& LinkTarget::selected(int peer) const {
  if (const Transport* forced = forced_transport(mode)) return *forced;
  for (const Transport& t : transports()) {
    if (t.can_connect(*this, peer)) return t;
  }
  throw_error(ErrorCode::internal, fmt::format("no transport reaches rank {}", peer), ErrorContext{rank, "connect", 0, peer});
}

const Transport& LinkTarget::transport(int peer) const {
  const Transport& t = selected(peer);
  if (!t.can_connect(*this, peer)) {
    throw_error(ErrorCode::invalid_argument,
                fmt::format("HOOP_TRANSPORT={} but rank {} {} ({})", t.name, peer, t.unreachable,
                            peers[static_cast<size_t>(peer)].host_id),
                ErrorContext{rank, "connect", 0, peer});
  }
  return t;
}

transport::ShmLinkParams LinkTarget::shm(int peer, int channel) const {
  transport::ShmLinkParams params;
  params.job_id = job.job_id;
  params.comm_id = comm_id;
  params.my_rank = rank;
  params.peer_rank = peer;
  params.channel = channel;
  params.peer_pid = peers[static_cast<size_t>(peer)].pid;
  params.capacity = transport::ring_bytes_for_host(local_count(peers, rank));
  return params;
}

transport::TcpLinkParams LinkTarget::tcp(int peer, int channel) const {
  const PeerInfo& p = peers[static_cast<size_t>(peer)];
  transport::TcpLinkParams params;
  params.comm_id = comm_id;
  params.my_rank = rank;
  params.peer_rank = peer;
  params.channel = channel;
  params.peer_addresses = p.tcp;
  params.same_host = p.host_id == peers[static_cast<size_t>(rank)].host_id;
  if (p.machine_id == peers[static_cast<size_t>(rank)].machine_id) params.peer_pid = p.pid;
  if (failed_elsewhere) params.gave_up = [flag = failed_elsewhere] { return flag->load(); };
  return params;
}

}  // namespace hoop::detail
