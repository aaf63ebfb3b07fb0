// Running one rank's schedule of shared-region actions (shm-direct) over the communicator's
// region: the actions of a step one after another, each wait through the engine's one wait
// loop (wait_loop.h), each peer's call compared with this rank's the first time it is seen
// in an operation (frame_check.h: one mismatch report for links and region alike).
#pragma once

#include <atomic>
#include <chrono>
#include <vector>

#include "engine/engine.h"

namespace hoop::engine {

struct RegionRunArgs {
  transport::shm::RegionPort& port;
  transport::Waiter& waiter;
  const std::atomic<bool>& abort;
  const EngineConfig& cfg;
  const Engine::FailureProbe& failure_probe;
  ScratchPool& bounce;  // pieces of peers' buffers read for a reduction
};

void run_region_schedule(const RegionRunArgs& args, const schedule::RankSchedule& sched, DataType elem, int nranks,
                         const Buffers& bufs, const OpIdentity& id, std::chrono::milliseconds stall_timeout,
                         std::vector<PeerCounters>& counters);

}  // namespace hoop::engine
