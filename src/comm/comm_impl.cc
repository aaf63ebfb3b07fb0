// CommImpl's construction: the communicator's identity, its place on the hosts, its options.
#include "comm/comm_impl.h"

#include <fmt/format.h>

#include "comm/link_params.h"
#include "comm/p2p_engine.h"
#include "comm/transports.h"
#include "core/params.h"
#include "core/errors.h"
#include "transport/shm/region_port.h"
#include "engine/timeline.h"

namespace hoop::detail {

std::chrono::milliseconds comm_timeout(const CommOptions& opts) {
  if (opts.timeout) return *opts.timeout;
  if (opts.fallback_timeout && !params::raw(params::Id::timeout)) return *opts.fallback_timeout;
  return params::seconds(params::Id::timeout);
}

namespace {

std::string transport_mode(const CommOptions& opts) {
  std::string m = opts.transport ? *opts.transport : *params::text(params::Id::transport);
  if (!is_transport_mode(m)) {
    throw_error(ErrorCode::invalid_argument,
                fmt::format("unknown transport '{}' (HOOP_TRANSPORT: auto, shm or tcp)", m));
  }
  return m;
}

// Position of `rank` among the ranks sharing its host (how many share it: local_count).
int local_index(const std::vector<PeerInfo>& peers, int rank) {
  int idx = 0;
  for (int r = 0; r < rank; ++r) idx += peers[static_cast<size_t>(r)].host_id == peers[static_cast<size_t>(rank)].host_id;
  return idx;
}
// Ranks running on the same machine as `rank`, whatever host they act as (network namespaces
// and HOOP_HOST_ID make separate hosts that still share this machine's cores).
int machine_count(const std::vector<PeerInfo>& peers, int rank) {
  int n = 0;
  for (const auto& p : peers) n += p.machine_id == peers[static_cast<size_t>(rank)].machine_id;
  return n;
}
schedule::Topology topology_of(const std::vector<PeerInfo>& peers) {
  std::vector<std::string> ids;
  ids.reserve(peers.size());
  for (const auto& p : peers) ids.push_back(p.host_id);
  return schedule::Topology::from_host_ids(ids);
}
}  // namespace

int local_count(const std::vector<PeerInfo>& peers, int rank) {
  int n = 0;
  for (const auto& p : peers) n += p.host_id == peers[static_cast<size_t>(rank)].host_id;
  return n;
}

CommImpl::CommImpl(std::shared_ptr<JobContext> job, uint64_t comm_id, int rank,
                   std::vector<PeerInfo> peers, const CommOptions& opts)
    : job_(std::move(job)),
      comm_id_(comm_id),
      rank_(rank),
      peers_(std::move(peers)),
      local_rank_(local_index(peers_, rank_)),
      local_size_(local_count(peers_, rank_)),
      transport_mode_(transport_mode(opts)),
      timeout_ms_(comm_timeout(opts).count()),
      topology_(topology_of(peers_)),
      links_(peers_.size()),
      engine_([this](int peer, int channel, TimePoint deadline) -> transport::Link& {
                return link(peer, channel, deadline);
              },
              waiter_, abort_flag_, engine::config_from_env(machine_count(peers_, rank_))),
      counters_(peers_.size()),
      signature_check_(params::integer(params::Id::check) != 0),
      p2p_(std::make_unique<P2pEngine>(LinkTarget{*job_, comm_id_, rank_, peers_, transport_mode_, &failed_elsewhere_},
                                       engine_.config(), abort_flag_)) {
  if (auto* timeline = engine::Timeline::global()) {
    timeline->set_identity(rank_, size(), job_->job_id);
    timeline->claim(comm_id_);
  }
  p2p_->set_revocation_lookup([this] { return revocation_explaining_failure(); });
  engine_.set_failure_probe([this] { return failed_elsewhere_.load(); });
  engine_.set_region_getter([this](std::chrono::milliseconds timeout) -> transport::shm::RegionPort& {
    return region_ ? *region_ : region(Clock::now() + timeout);
  });
  engine_.set_open_region([this] { return region_.get(); });
}

CommImpl::~CommImpl() {
  stop_revoke_watch();
  {
    std::lock_guard lk(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (worker_.joinable()) worker_.join();
  // The first communicator of the process writes the trace when it goes away.
  if (auto* timeline = engine::Timeline::global(); timeline && timeline->owns_identity(comm_id_)) {
    timeline->flush();
  }
}

}  // namespace hoop::detail
