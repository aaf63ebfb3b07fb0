// Point-to-point: MPI's matching and a progress engine of its own, apart from the issue order
// of the collectives (see docs/ARCHITECTURE.md, "Point-to-point").
//
// Every message is a FrameHeader (op send, dtype, count, tag, the sender's sequence number)
// and its padded payload, on the pair's point-to-point link (P2pLinks). A receive matches the
// first message, in arrival order, from its source (or any) with its tag (or any); a message
// that no posted receive matches is read into a buffer of its own (eager), so that what
// follows it on the link stays reachable. One thread at a time drives the engine: a blocking
// call drives it itself when nobody does (no thread switch on the fast path), otherwise the
// engine's progress thread drives it while asynchronous operations are pending.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <list>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "comm/p2p_links.h"
#include "comm/work_state.h"
#include "engine/engine.h"
#include "hoop/communicator.h"
#include "transport/frame.h"
#include "transport/waiter.h"

namespace hoop::detail {

// One send or receive, as called (peer may be kAnySource and tag kAnyTag for a receive).
struct P2pCall {
  bool send = false;
  int peer = -1;
  int tag = 0;
  DataType dtype = DataType::u8;
  size_t count = 0;
  const void* send_buf = nullptr;
  void* recv_buf = nullptr;
  std::chrono::milliseconds timeout{0};
};

class P2pEngine {
 public:
  P2pEngine(LinkTarget target, engine::EngineConfig cfg, const std::atomic<bool>& abort_flag);
  ~P2pEngine();
  P2pEngine(const P2pEngine&) = delete;
  P2pEngine& operator=(const P2pEngine&) = delete;

  // Blocking: returns once done, rethrowing its error; inside a group, at once (the status is
  // then the call's own source, tag and count).
  RecvStatus run(const P2pCall& c);
  // Asynchronous (inside a group: the group's, and an empty handle).
  Work post(const P2pCall& c);

  void group_start();
  void group_end();
  Work group_end_async();

  // Fails every pending and later operation with `code` (aborted: "rank R aborted the
  // communicator: <reason>"; revoked: the reason as it is), poisons the links (any thread).
  void abort(const std::string& reason, ErrorCode code = ErrorCode::aborted);
  // The first half of abort(): records why, so that a driver that sees the communicator's
  // abort flag, set after this, reports it.
  void note_abort_reason(const std::string& reason, ErrorCode code);
  // Asked when a peer fails: a revocation that explains it (the revoker poisons its links), to
  // report ErrorCode::revoked instead. Set once, before any operation.
  void set_revocation_lookup(std::function<std::optional<std::string>()> lookup) { revocation_lookup_ = std::move(lookup); }

  // Payload bytes per peer (headers and padding excluded).
  uint64_t bytes_sent(int peer) const { return counters_[static_cast<size_t>(peer)].sent.load(); }
  uint64_t bytes_received(int peer) const { return counters_[static_cast<size_t>(peer)].received.load(); }
  uint64_t ops_done() const { return ops_done_.load(); }  // finished without error
  void reset_counters();
  // While set, a wait spins at least this long before it sleeps (the calibration's timing of a
  // link: a sleeping receiver would time its own wake-up with the link).
  void set_spin_floor(std::chrono::microseconds floor) { spin_floor_us_.store(floor.count(), std::memory_order_relaxed); }
  // While set, a wait's spin keeps the core, even where the ranks outnumber the cores (the
  // calibration's pair pinned to one core: tuner::TimingWait::hold).
  void set_spin_holds_core(bool on) { spin_holds_core_.store(on, std::memory_order_relaxed); }

  struct Op;
  struct Group;

 private:
  struct Unexpected;
  struct Peer;
  struct Counters {
    std::atomic<uint64_t> sent{0}, received{0};
  };

  std::shared_ptr<Op> make_op(const P2pCall& c);
  void enqueue(const std::shared_ptr<Op>& op);
  void wake_progress_thread();
  // Drives until done() holds; the caller holds the driver role (driving_).
  template <class Done>
  void drive(const Done& done);
  void release_driver();
  void progress_loop();

  // Driver only.
  void adopt();
  void adopt_recv(const std::shared_ptr<Op>& op);
  bool sweep();
  bool advance_send(int peer, Peer& p);
  bool advance_recv(int peer, Peer& p);
  void begin_message(int peer, Peer& p);
  void end_message(Peer& p);
  bool accept_incoming();
  bool receive_awaits_accept() const;
  void expire(TimePoint now);
  void check_liveness();
  void sleep(TimePoint now, bool listen, TimePoint next_accept);
  void fail_all(const Error& e);
  void break_peer(int peer, const Error& e);
  void finish(Op& op, const Failure& error);
  void deliver(Op& op, const Unexpected& u);
  // Throws mismatch when the message cannot go into the receive.
  void check_match(const Op& op, int source, const transport::FrameHeader& h) const;
  ErrorContext ctx(const Op& op, int peer) const;

  LinkTarget target_;
  int rank_;
  int nranks_;
  engine::EngineConfig cfg_;
  const std::atomic<bool>& abort_;
  std::unique_ptr<Counters[]> counters_;
  std::atomic<uint64_t> ops_done_{0};
  std::atomic<int64_t> spin_floor_us_{0};  // set_spin_floor
  std::atomic<bool> spin_holds_core_{false};  // set_spin_holds_core

  // Shared with posting threads (mu_).
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::shared_ptr<Op>> incoming_;
  std::atomic<bool> has_incoming_{false};
  std::atomic<size_t> pending_{0};  // posted, not finished
  bool driving_ = false;
  bool stop_ = false;
  std::atomic<bool> stopping_{false};  // stop_, for the progress thread's drive loop
  std::string abort_reason_;
  ErrorCode abort_code_ = ErrorCode::aborted;
  std::function<std::optional<std::string>()> revocation_lookup_;
  uint64_t next_seq_ = 0;
  std::thread thread_;
  transport::Waiter waiter_;

  // The driver's state.
  P2pLinks links_;
  std::vector<Peer> peers_;
  std::deque<std::shared_ptr<Op>> posted_;  // receives not matched yet, in posting order
  std::list<Unexpected> unexpected_;        // messages no receive took yet, in arrival order
  std::vector<std::shared_ptr<Op>> active_;  // every adopted, unfinished operation
  std::optional<Error> failed_;              // abort: later operations fail with it
};

}  // namespace hoop::detail
