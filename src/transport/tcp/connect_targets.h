// Where and how often the connecting side of a TCP link tries, and what it says: the peer's
// published addresses worth trying, in order, the failures a later attempt may not see, the Hello.
#pragma once

#include <string>
#include <vector>

#include "core/clock.h"
#include "core/errors.h"
#include "core/open_files.h"
#include "core/socket_address.h"
#include "transport/tcp/handshake.h"
#include "transport/tcp/tcp_transport.h"

namespace hoop::transport::tcp {

struct Target {
  std::string text;
  SocketAddress address;
};

// Failures that a later attempt may not see: the peer not listening yet, a lost SYN, a route
// or an address still coming up. Others (no IPv6 on this host...) will not go away.
bool worth_retrying(int err);

// A non-blocking TCP socket of `family` for a connect, never among the soft limit's last
// kLeftFree descriptors (keep_link_descriptor: the limit is raised to make room, and a call
// that ran out tries once more). -1 with errno set (EMFILE where none is left to links).
int open_stream_socket(int family);
// The pause after a round of failed attempts: doubling from the first to the largest.
inline constexpr milliseconds kFirstBackoff{10};
inline constexpr milliseconds kMaxBackoff{1000};
// How long either side of a link being made waits for its peer before it heeds a failure
// elsewhere in the communicator (TcpLinkParams::gave_up), as the engine's stalled steps do.
inline constexpr milliseconds kGiveUpAfter{500};

ErrorContext context_of(const TcpLinkParams& p);

// The peer's addresses worth trying, in order: loopback ones (IPv4 first) for a peer on this
// host, the others for a peer elsewhere. Throws when there is none.
std::vector<Target> targets_for(const TcpLinkParams& p);

// The Hello the connecting side sends: the listener's keys, the link's ranks and channel.
Hello hello_for(const TcpListener& listener, const TcpLinkParams& p);

}  // namespace hoop::transport::tcp
