// The communicator's inside: turns a call into (algorithm, schedule, engine run), keeps the
// issue order with a queue and a progress thread, owns the links to the peers. Its members are
// defined in one file per concern (docs/ARCHITECTURE.md, "The communicator's files"):
// comm_impl.cc (construction), comm_queue.cc (issue order, progress thread), comm_validate.cc,
// comm_dispatch.cc (running a collective), comm_half.cc (f16/bf16 staging), comm_tuning.cc
// (algorithm choice), comm_links.cc, comm_failure.cc (failure propagation, abort),
// comm_split.cc, comm_stats.cc, comm_region.cc (the shared region and the schedules' cache).
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "comm/work_state.h"
#include "engine/engine.h"
#include "engine/scratch.h"
#include "hoop/communicator.h"
#include "schedule/schedule.h"
#include "transport/link.h"
#include "transport/tcp/tcp_transport.h"
#include "transport/waiter.h"
#include "tuner/tuner.h"

namespace hoop::transport::shm {
class RegionPort;
}

namespace hoop::detail {

// The communicator's stall timeout: CommOptions::timeout, else HOOP_TIMEOUT, else
// CommOptions::fallback_timeout, else HOOP_TIMEOUT's default. Start-up is bounded by it too.
std::chrono::milliseconds comm_timeout(const CommOptions& opts);

class P2pEngine;
struct RevokeWatch;    // comm_revoke.cc
struct SurvivorQuery;  // survivors.h

// What every rank publishes about itself at start-up.
struct PeerInfo {
  std::string host_id;
  std::string machine_id;  // the kernel it runs on: ranks of one machine share its cores
  int pid = 0;
  std::vector<std::string> tcp;  // the listener's addresses
};

// How many of `peers` share rank `rank`'s host (comm_impl.cc).
int local_count(const std::vector<PeerInfo>& peers, int rank);

std::string encode_peer_info(const PeerInfo& p);
PeerInfo decode_peer_info(const std::string& json);

// Shared by a world communicator and every communicator split from it.
struct JobContext {
  std::string job_id;
  std::shared_ptr<Store> store;
  std::shared_ptr<transport::TcpListener> listener;
  // The cost model every rank agreed on at the world communicator's creation (null: defaults).
  std::shared_ptr<const tuner::CostModel> cost_model;
};

// One call, as queued.
struct OpTask {
  schedule::CollectiveDesc desc;
  DataType dtype = DataType::f32;
  const void* send = nullptr;
  void* recv = nullptr;
  OpOptions opts;
  std::shared_ptr<WorkState> work;
  uint64_t seq = 0;
  int tag = 0;  // send and recv
};

class CommImpl {
 public:
  CommImpl(std::shared_ptr<JobContext> job, uint64_t comm_id, int rank, std::vector<PeerInfo> peers,
           const CommOptions& opts);
  ~CommImpl();

  int rank() const { return rank_; }
  int size() const { return static_cast<int>(peers_.size()); }
  int local_rank() const { return local_rank_; }
  int local_size() const { return local_size_; }
  const std::string& job_id() const { return job_->job_id; }
  uint64_t comm_id() const { return comm_id_; }

  // Validates (throwing invalid_argument at once), then runs in issue order. A blocking call
  // returns once done, with an empty handle when it ran on the caller's thread.
  Work submit(OpTask task, bool blocking);
  // Point-to-point (p2p_engine.h): validated, then run by the point-to-point engine.
  RecvStatus point_to_point(const OpTask& t);
  Work point_to_point_async(const OpTask& t);
  P2pEngine& p2p() { return *p2p_; }
  std::shared_ptr<Communicator> split(int color, int key);
  void abort(const std::string& reason);
  bool aborted() const { return abort_flag_.load(); }
  // Surviving a dead rank: comm_revoke.cc, comm_shrink.cc.
  void revoke(const std::string& reason);
  bool revoked() const { return revoked_flag_.load(); }
  std::shared_ptr<Communicator> shrink();
  Agreement agree(bool value);
  std::shared_ptr<Communicator> grow(int k);  // comm_grow.cc
  int64_t waiting_newcomers();

  void set_timeout(std::chrono::milliseconds t) { timeout_ms_.store(t.count()); }
  std::chrono::milliseconds timeout() const { return std::chrono::milliseconds(timeout_ms_.load()); }

  // What joins this communicator's ranks, for the registry to say which algorithms run here
  // (schedule::runs_here): every rank on this host, and shared memory not forbidden.
  schedule::Reach reach() const;

  CommStats stats();
  void reset_stats();
  std::string last_algorithm();

  // Algorithm selection (comm_tuning.cc). calibrate: collective, once at the world
  // communicator's creation; tuner: the communicator's tuner (created on first use).
  void calibrate(Communicator& self);
  tuner::Tuner& tuner();
  const std::vector<PeerInfo>& peers() const { return peers_; }  // for tools
  struct AlgoChoice {
    std::string name;  // "" only when nothing is registered (the registry's default then)
    int nchannels = 1;
  };
  AlgoChoice choose_algorithm(const OpTask& t);
  // shm-direct's shape for elements of `elem`: what its schedules are cut by (comm_region.cc).
  const schedule::RegionShape& region_shape(DataType elem);
  // The agreed model's CostModel::single_copy_read_bytes (0: defaults), for direct_tunables.
  size_t single_copy_read_bytes() const;

 private:
  void validate(const OpTask& t) const;
  void execute(const OpTask& t);
  void run_schedule(const schedule::RankSchedule& s, DataType elem, const engine::Buffers& bufs,
                    const engine::OpIdentity& id, std::chrono::milliseconds timeout);
  void run_half_precision(const OpTask& t, const std::string& algo, engine::OpIdentity id,
                          std::chrono::milliseconds timeout);
  transport::Link& link(int peer, int channel, TimePoint deadline);
  // The shared region of the communicator's ranks (shm-direct), opened at first use.
  transport::shm::RegionPort& region(TimePoint deadline);
  // The rank's schedule of `algo` for `desc`, built once per call shape (comm_region.cc).
  std::shared_ptr<const schedule::RankSchedule> schedule_for(const std::string& algo,
                                                             const schedule::CollectiveDesc& desc, DataType elem);
  // What a call runs: its algorithm, channels and (but for f16/bf16 staging) its schedule,
  // worked out once per call shape; the last call's is kept, so a repeated call (a training
  // loop's, a benchmark's) looks nothing up (comm_dispatch.cc).
  struct Prepared {
    bool valid = false;
    OpType op = OpType::allreduce;
    DataType dtype = DataType::f32;
    size_t count = 0;
    int root = 0;
    RedOp redop = RedOp::sum;
    bool in_place = false;
    bool registered = false;
    std::string forced;  // OpOptions::algo
    std::string algo;    // "" only when nothing is registered (the registry's default then)
    int nchannels = 1;
    std::shared_ptr<const schedule::RankSchedule> schedule;  // null: f16/bf16 staging
  };
  const Prepared& prepare(const OpTask& t, bool registered);
  // This call's buffers as the shared region announces them: registered ones with what a peer
  // maps ([0] send, [1] recv; fd -1 where not), `all` when every buffer it uses is registered.
  struct Registration {
    bool all = false;
    transport::shm::AnnouncedBuffer buffers[2]{{-1, 0, 0, 0, 0}, {-1, 0, 0, 0, 0}};
  };
  Registration registration(const OpTask& t) const;
  void fail(const Error& e);
  // The first member to fail sets every other member's watch key to say so (comm_revoke.cc);
  // a member's watcher then raises failed_elsewhere_, which its stalled waits give up on.
  void announce_failure() noexcept;
  void on_failed_elsewhere();
  // Revocation (comm_revoke.cc): the watcher thread's start (at the first operation: a
  // communicator that runs none costs no store request for it), its end, what a member does
  // once it learns of a revoke, the record of one (if any), and the members whose process is gone.
  void start_revoke_watch();
  void stop_revoke_watch() noexcept;
  void on_revoked(const std::string& message);
  // Throws ErrorCode::revoked, naming `t`, once a revoke is heard: later operations fail at once.
  void refuse_if_revoked(const OpTask& t) const;
  std::optional<std::string> revocation() const;
  std::optional<std::string> revocation_in_store() const;
  // What explains a failure as a revoke: the one heard, else the store's record (then heard).
  std::optional<std::string> revocation_explaining_failure();
  // What shrink and agree settle on (survivors.h): the n-th of kind `op` on this communicator.
  SurvivorQuery survivor_query(const char* op, uint64_t n);
  // `suspect`: a peer seen to fail, given a moment to be gone.
  std::vector<int> dead_members(int suspect = -1) const;
  // The members of this machine whose process is stopped (SIGSTOP, a debugger).
  std::vector<int> stopped_members() const;
  // A timeout behind a stopped member names it: the rank this one waited on may itself be
  // waiting on the stopped one, and whichever times out first must say what holds them all.
  Error blame_stopped_member(const Error& timeout) const;
  void poison_links(const std::string& reason) noexcept;
  void remove_unattached_segments() const noexcept;
  void worker_loop();
  void run_task(OpTask& t);

  std::shared_ptr<JobContext> job_;
  uint64_t comm_id_;
  int rank_;
  std::vector<PeerInfo> peers_;
  int local_rank_ = 0;
  int local_size_ = 1;
  std::string transport_mode_;  // auto, shm, tcp
  std::atomic<int64_t> timeout_ms_;
  schedule::Topology topology_;  // host of each rank, for hierarchical schedules and the tuner
  uint64_t split_count_ = 0;

  // Engine state: touched only by the thread running an operation (busy_ guards it).
  std::vector<std::vector<std::unique_ptr<transport::Link>>> links_;  // [peer][channel]
  transport::Waiter waiter_;
  std::atomic<bool> abort_flag_{false};
  engine::Engine engine_;
  engine::ScratchPool scratch_;
  engine::ScratchPool staging_;  // f32 copies for f16/bf16 reductions
  std::vector<engine::PeerCounters> counters_;
  std::unique_ptr<transport::shm::RegionPort> region_;  // shm-direct's region, opened at first use
  std::optional<bool> peers_read_memory_;  // single copy possible (read once)
  std::map<size_t, schedule::RegionShape> region_shapes_;  // per element size
  // Schedules built, per call shape: a small call must not pay for building its schedule again.
  struct ScheduleKey {
    std::string algo;
    OpType op;
    DataType elem;
    size_t count;
    int root;
    RedOp redop;
    bool in_place;
    int nchannels;
    auto operator<=>(const ScheduleKey&) const = default;
  };
  std::map<ScheduleKey, std::shared_ptr<const schedule::RankSchedule>> schedules_;
  size_t cached_actions_ = 0;
  Prepared last_call_;
  const bool signature_check_;  // HOOP_CHECK=1: compare every collective's call across ranks first
  uint64_t ops_done_ = 0;
  std::string last_algorithm_;
  std::mutex tuner_mu_;
  std::unique_ptr<tuner::Tuner> tuner_;
  // The choice made for each call shape (guarded by tuner_mu_): the same every time, and working
  // it out (candidate names, the tuner's key) cost 0.2 us of a 1 KiB AllReduce's 1.7 us.
  struct ChoiceKey {
    OpType op;
    DataType dtype;
    size_t count;
    int root;
    bool registered;
    std::string algo;
    auto operator<=>(const ChoiceKey&) const = default;
  };
  std::map<ChoiceKey, AlgoChoice> choices_;
  AlgoChoice work_out_algorithm(const OpTask& t);
  std::optional<Error> failure_;  // set once an operation failed: the communicator is unusable

  // Revocation: the first message heard (under revoke_mu_), and the state the watcher thread
  // shares with this communicator (it may outlive it while parked in the store).
  mutable std::mutex revoke_mu_;
  std::optional<std::string> revoked_;
  std::atomic<bool> revoked_flag_{false};
  std::atomic<bool> failed_elsewhere_{false};
  std::atomic<bool> watch_started_{false};  // the watcher starts with the first operation
  std::shared_ptr<RevokeWatch> revoke_watch_;
  uint64_t shrink_count_ = 0;  // shrinks and agreements so far: every live member counts alike
  uint64_t agree_count_ = 0;
  uint64_t grow_count_ = 0;

  // Issue order.
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<OpTask> queue_;
  bool busy_ = false;
  bool stop_ = false;
  uint64_t next_seq_ = 0;
  std::thread worker_;

  std::unique_ptr<P2pEngine> p2p_;  // last: goes first, while what its links name is still there
};

}  // namespace hoop::detail
