// The communicator's shared region (shm-direct's transport) and the schedules it runs: the
// region opened at the first operation that needs it, the shape schedules are cut by, and the
// schedules kept per call shape.
#include <fmt/format.h>

#include "comm/comm_impl.h"
#include "comm/region_shape.h"
#include "core/log.h"
#include "core/op_traits.h"
#include "transport/shm/region_port.h"
#include "tuner/cost_model.h"

namespace hoop::detail {

namespace {

// A schedule kept per call shape costs memory for its actions: larger ones are rebuilt (their
// data movement dwarfs the build), and past the total the memory starts over.
constexpr size_t kCachedActionsPerSchedule = size_t{1} << 16;
constexpr size_t kCachedActionsInAll = size_t{1} << 18;

size_t action_count(const schedule::RankSchedule& s) {
  size_t n = 0;
  for (const auto& step : s.steps) n += step.actions.size();
  for (const auto& v : s.variants)
    for (const auto& step : v) n += step.actions.size();
  return n;
}

}  // namespace

size_t CommImpl::single_copy_read_bytes() const {
  return job_->cost_model ? job_->cost_model->single_copy_read_bytes : 0;
}

transport::shm::RegionPort& CommImpl::region(TimePoint deadline) {
  if (region_) return *region_;
  const DirectTunables& t = direct_tunables(size(), single_copy_read_bytes());
  transport::shm::RegionParams p;
  p.job_id = job_->job_id;
  p.comm_id = comm_id_;
  p.rank = rank_;
  p.nranks = size();
  for (const auto& peer : peers_) p.pids.push_back(static_cast<pid_t>(peer.pid));
  p.window_bytes = t.window_bytes();
  p.shape_key = t.key();
  const ErrorContext ctx{rank_, "shm-direct region", 0, -1};
  auto region = transport::shm::SharedRegion::open(p, *job_->store, deadline, abort_flag_, ctx);
  region_ = std::make_unique<transport::shm::RegionPort>(std::move(region), rank_, std::move(p.pids));
  return *region_;
}

const schedule::RegionShape& CommImpl::region_shape(DataType elem) {
  const size_t es = dtype_size(elem);
  if (auto it = region_shapes_.find(es); it != region_shapes_.end()) return it->second;
  if (!peers_read_memory_) {
    std::vector<pid_t> pids;
    for (const auto& peer : peers_) pids.push_back(static_cast<pid_t>(peer.pid));
    peers_read_memory_ = local_size_ == size() && transport::shm::peers_can_read_each_other(pids);
  }
  return region_shapes_.emplace(es, detail::region_shape(direct_tunables(size(), single_copy_read_bytes()), es, *peers_read_memory_))
      .first->second;
}

std::shared_ptr<const schedule::RankSchedule> CommImpl::schedule_for(const std::string& algo,
                                                                     const schedule::CollectiveDesc& d, DataType elem) {
  // A v-form's blocks are this call's own: built each time.
  if (d.blocks) return std::make_shared<const schedule::RankSchedule>(schedule::build(algo, d, rank_));
  ScheduleKey key{algo, d.op, elem, d.count, has_root(d.op) ? d.root : -1, d.redop, d.in_place, d.nchannels};
  if (auto it = schedules_.find(key); it != schedules_.end()) return it->second;
  auto built = std::make_shared<const schedule::RankSchedule>(schedule::build(algo, d, rank_));
  const size_t actions = action_count(*built);
  if (actions > kCachedActionsPerSchedule) return built;
  if (cached_actions_ + actions > kCachedActionsInAll) {
    schedules_.clear();
    cached_actions_ = 0;
  }
  cached_actions_ += actions;
  schedules_.emplace(std::move(key), built);
  return built;
}

}  // namespace hoop::detail
