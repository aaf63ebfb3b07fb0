// The transports a communicator can connect a peer over, as a table: a name (HOOP_TRANSPORT's
// values, Link::kind()), whether it can reach a peer, and how to connect a collective link.
// A new transport is one more row. HOOP_TRANSPORT=auto takes the first row that can reach the
// peer (rows are in order of preference); a name forces that row.
#pragma once

#include <memory>
#include <span>
#include <string_view>

#include "core/clock.h"
#include "transport/link.h"

namespace hoop::detail {

struct LinkTarget;

enum class TransportKind { shm, tcp };

struct Transport {
  TransportKind kind;
  std::string_view name;
  bool (*can_connect)(const LinkTarget& target, int peer);
  // Blocks until the link is connected (collective links; point-to-point links connect
  // without blocking, see p2p_links.h).
  std::unique_ptr<transport::Link> (*connect)(const LinkTarget& target, int peer, int channel,
                                              TimePoint deadline);
  std::string_view unreachable;  // why can_connect is false, for the error of a forced mode
};

std::span<const Transport> transports();
// "auto" or the name of a row.
bool is_transport_mode(std::string_view mode);
// The row a mode forces; null for "auto".
const Transport* forced_transport(std::string_view mode);

}  // namespace hoop::detail
