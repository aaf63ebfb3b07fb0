// The engine runs one rank's schedule over real links: it frames each link's traffic with a
// header, streams sends in slices, receives and reduces slices as they arrive (so reduction
// overlaps transfer), follows forwarding dependencies, and sleeps on a Waiter when nothing can
// move. It knows nothing of which algorithm produced the schedule.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

#include "core/clock.h"
#include "hoop/error.h"
#include "hoop/types.h"
#include "schedule/schedule.h"
#include "engine/scratch.h"
#include "transport/link.h"
#include "transport/shm/region_layout.h"
#include "transport/waiter.h"

namespace hoop::transport::shm {
class RegionPort;
}

namespace hoop::engine {

// What the headers say about the call, and the context of errors.
struct OpIdentity {
  OpType op = OpType::allreduce;
  DataType dtype = DataType::f32;  // the caller's element type
  RedOp redop = RedOp::sum;
  size_t count = 0;
  int root = -1;                   // root, or the peer of send/recv
  uint64_t seq = 0;
  uint64_t comm_id = 0;
  int rank = -1;
  uint8_t phase = 0;               // for operations run as several schedules
  bool in_place = false;           // the call's output is its input (announced in the shared region)
};

struct Buffers {
  const void* send = nullptr;
  void* recv = nullptr;
  void* scratch = nullptr;
  // Registered buffers (zero copy), as the shared region announces them to the peers: [0] send,
  // [1] recv, fd < 0 where not registered; null: none. all_registered: every buffer the call
  // uses is registered.
  const transport::shm::AnnouncedBuffer* registered = nullptr;
  bool all_registered = false;
  // Where range `r` (elements of `esize` bytes) lies; `region`: the rank's window in the
  // shared region, for the schedules that have one.
  std::byte* at(const schedule::Range& r, size_t esize, std::byte* region = nullptr) const {
    std::byte* base = nullptr;
    switch (r.buf) {
      case schedule::Buf::send: base = static_cast<std::byte*>(const_cast<void*>(send)); break;
      case schedule::Buf::recv: base = static_cast<std::byte*>(recv); break;
      case schedule::Buf::scratch: base = static_cast<std::byte*>(scratch); break;
      case schedule::Buf::region: base = region; break;
    }
    return base + r.offset * esize;
  }
};

// Payload bytes moved per peer (headers and padding excluded).
struct PeerCounters {
  uint64_t sent = 0;
  uint64_t received = 0;
};

struct EngineConfig {
  size_t slice_bytes = 256 * 1024;  // largest piece handed to a link at once
  std::chrono::microseconds spin{30};  // busy-poll this long before sleeping: a wait on a shared-memory link
  std::chrono::microseconds network_spin{30};  // the same, a wait on a TCP link
  std::chrono::microseconds region_spin{30};   // the same, a wait on a peer's flag in the shared region
  bool yield_while_spinning = false;   // oversubscribed: give the core away while polling
};

// HOOP_SPIN_US's defaults where the ranks running on a machine outnumber its cores (they yield
// while they spin there): a wait on a TCP link, and one on a shared-memory link. A wait on a
// peer's flag in the shared region does not spin there.
inline constexpr int64_t kOversubscribedNetworkSpinUs = 1000;
inline constexpr int64_t kOversubscribedLinkSpinUs = 20;

// One round of busy-waiting: yields the core when oversubscribed (unless `hold`), else a few
// pause instructions.
void spin_once(const EngineConfig& cfg, bool hold = false);

// Default configuration from HOOP_SLICE_BYTES / HOOP_SPIN_US and whether the ranks running on
// this machine (`machine_ranks`, separate hosts of a lab included) outnumber its cores.
EngineConfig config_from_env(int machine_ranks);

class Engine {
 public:
  // get_link(peer, channel, deadline) returns the (possibly newly connected) link to a peer on
  // one of its channels (parallel links of a multi-ring).
  using LinkGetter = std::function<transport::Link&(int peer, int channel, TimePoint deadline)>;
  // get_region(timeout) returns this rank's end of the communicator's shared region (opened at
  // first use, within `timeout`), for schedules of shared-region actions.
  using RegionGetter = std::function<transport::shm::RegionPort&(std::chrono::milliseconds timeout)>;

  Engine(LinkGetter get_link, transport::Waiter& waiter, const std::atomic<bool>& abort_flag,
         EngineConfig cfg);
  void set_region_getter(RegionGetter get_region) { get_region_ = std::move(get_region); }
  // The region if it is open already (null: not), where every operation declares its call
  // (RegionPort::declare) and a wait over links compares the peers' (a mismatch whose ranks
  // took different paths).
  using OpenRegion = std::function<transport::shm::RegionPort*()>;
  void set_open_region(OpenRegion open_region) { open_region_ = std::move(open_region); }

  // Runs `sched` to completion for this rank, over links or, for a schedule of shared-region
  // actions (RankSchedule::shared_region), over the region. `elem` is the element type the schedule moves
  // and reduces (f32 while reducing f16/bf16). Fails with hoop::Error carrying the op's context
  // when no progress is made for `stall_timeout`, a peer fails, headers mismatch or the
  // communicator is aborted.
  void run(const schedule::RankSchedule& sched, DataType elem, int nranks, const Buffers& bufs,
           const OpIdentity& id, std::chrono::milliseconds stall_timeout,
           std::vector<PeerCounters>& counters);

  const EngineConfig& config() const { return cfg_; }

  // Asked, while a step has made no progress for a while, whether the communicator failed
  // elsewhere. A peer that failed before it ever linked to this rank cannot poison a link, and
  // this rank would otherwise wait out its timeout. Called often: it must be cheap.
  using FailureProbe = std::function<bool()>;
  void set_failure_probe(FailureProbe probe) { failure_probe_ = std::move(probe); }

 private:
  // A schedule over links; `failed_peer`: the peer it waited on when it threw.
  [[gnu::noinline]] void run_links(const schedule::RankSchedule& sched, DataType elem, int nranks, const Buffers& bufs,
                                   const OpIdentity& id, std::chrono::milliseconds stall_timeout,
                                   std::vector<PeerCounters>& counters, transport::shm::RegionPort* board,
                                   int& failed_peer);

  LinkGetter get_link_;
  RegionGetter get_region_;
  OpenRegion open_region_;
  transport::Waiter& waiter_;
  const std::atomic<bool>& abort_;
  EngineConfig cfg_;
  FailureProbe failure_probe_;
  ScratchPool bounce_;  // peers' buffers read for a reduction (single copy), a piece at a time
};

}  // namespace hoop::engine
