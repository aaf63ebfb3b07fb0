// The collective links to the peers, connected on first use.
#include "comm/comm_impl.h"

#include "comm/link_params.h"
#include "core/log.h"

namespace hoop::detail {

transport::Link& CommImpl::link(int peer, int channel, TimePoint deadline) {
  auto& per_channel = links_.at(static_cast<size_t>(peer));
  if (per_channel.size() <= static_cast<size_t>(channel)) per_channel.resize(static_cast<size_t>(channel) + 1);
  auto& slot = per_channel[static_cast<size_t>(channel)];
  if (slot) return *slot;
  const LinkTarget target{*job_, comm_id_, rank_, peers_, transport_mode_, &failed_elsewhere_};
  slot = target.transport(peer).connect(target, peer, channel, deadline);
  HOOP_INFO("communicator {:#x}: rank {} connected to rank {} (channel {}) over {}", comm_id_, rank_, peer,
            channel, slot->kind());
  return *slot;
}

}  // namespace hoop::detail
