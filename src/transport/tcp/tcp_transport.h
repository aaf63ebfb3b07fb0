// TCP links between hosts (and, when forced with HOOP_TRANSPORT=tcp, within one host).
//
// Each process has one TcpListener, shared by its communicators. For a pair of ranks the lower
// rank connects and the higher accepts, so both sides may call tcp_connect in any order without
// deadlock. Every connection starts with a handshake (magic, protocol version, job key, secret
// key, communicator id, both ranks, channel); anything else on the port is rejected, logged and
// closed without disturbing the job.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <functional>
#include <vector>

#include "core/clock.h"
#include "transport/link.h"

namespace hoop::transport {

class Waiter;

struct TcpLinkParams {
  uint64_t comm_id = 0;
  int my_rank = -1;    // ranks within the communicator
  int peer_rank = -1;
  int channel = 0;     // several sockets per peer pair (multi-ring)
  // The peer's published addresses ("1.2.3.4:5000", "[::1]:5000"), tried in order.
  std::vector<std::string> peer_addresses;
  bool same_host = false;  // peer is on this host: connect over loopback
  size_t staging_bytes = 0;  // the link's receive staging; 0: HOOP_TCP_STAGING_BYTES
  // The peer's process when it runs on this machine (0: elsewhere or unknown): a connection
  // that waits for it ends with Error{peer_failure} once it is gone, not at the deadline.
  int peer_pid = 0;
  // Asked while waiting for the peer's connection (cheap: a flag): true once the communicator
  // failed elsewhere (the peer may have failed before it ever connected), ending the wait.
  std::function<bool()> gave_up;
};

class TcpListener {
 public:
  // Listens on all interfaces; publishes the addresses of the interfaces HOOP_SOCKET_IFNAME
  // selects ("eth0", prefix match; "^docker,lo" excludes; "=eth0" exact), else every
  // non-loopback interface that is up, plus loopback. HOOP_SOCKET_FAMILY=AF_INET|AF_INET6 keeps
  // one family. job_id and HOOP_SECRET go into the handshake keys. A connection that has not
  // sent its whole handshake within HOOP_TCP_HANDSHAKE_TIMEOUT seconds (default 5) is dropped.
  explicit TcpListener(const std::string& job_id);
  ~TcpListener();
  TcpListener(const TcpListener&) = delete;
  TcpListener& operator=(const TcpListener&) = delete;

  // Addresses for peers on other hosts, then the loopback ones ("127.0.0.1:p", "[::1]:p").
  std::vector<std::string> addresses() const;
  uint16_t port() const;
  uint64_t job_key() const;
  uint64_t secret_key() const;
  // Connections rejected so far (bad handshake, wrong job or secret, garbage).
  uint64_t rejected() const;

  // Returns the connected socket of the handshake (comm_id, from=peer, to=my_rank, channel),
  // accepting and sorting incoming connections until it arrives; throws at deadline.
  // peer_pid as TcpLinkParams::peer_pid.
  int accept_from(uint64_t comm_id, int peer, int my_rank, int channel, TimePoint deadline, int peer_pid = 0,
                  const std::function<bool()>& gave_up = {});
  // The same without waiting: the socket if that handshake has arrived, else -1. With `drive`,
  // runs one round of the accept loop (without sleeping) unless another thread is driving it;
  // without, only takes what a round already brought in (a caller asking for several peers at
  // once drives for the first only).
  int try_accept(uint64_t comm_id, int peer, int my_rank, int channel, bool drive = true);
  // For a caller of try_accept about to sleep: registers the listening socket and the
  // connections whose handshake is under way (when no other thread drives the loop) with `w`.
  void arm(Waiter& w);

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

// The link to params.peer_rank: the lower rank connects (retrying with backoff until the
// deadline), the higher one waits in listener.accept_from. Sockets get TCP_NODELAY and
// HOOP_SOCKET_BUFFER-sized buffers (default 4 MiB; 0 keeps the kernel's autotuning); received
// bytes are staged in HOOP_TCP_STAGING_BYTES (default 4 MiB). The link's bytes_read() counts
// consumed bytes. Throws Error{timeout} at the deadline, Error{protocol} when the peer's
// listener refuses the handshake (other job or secret).
std::unique_ptr<Link> tcp_connect(TcpListener& listener, const TcpLinkParams& params,
                                  TimePoint deadline);

}  // namespace hoop::transport
