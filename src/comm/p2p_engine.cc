#include "comm/p2p_engine.h"

#include <algorithm>
#include <cstring>

#include <fmt/format.h>

#include "comm/p2p_engine_state.h"
#include "core/errors.h"
#include "core/log.h"

namespace hoop::detail {

namespace {

// The group calls open on this thread, per engine.
struct OpenGroup {
  const P2pEngine* engine;
  int depth;
  std::shared_ptr<P2pEngine::Group> group;
};
thread_local std::vector<OpenGroup> t_open_groups;

OpenGroup* open_group(const P2pEngine* e) {
  for (auto& g : t_open_groups) {
    if (g.engine == e) return &g;
  }
  return nullptr;
}

}  // namespace

P2pEngine::P2pEngine(LinkTarget target, engine::EngineConfig cfg, const std::atomic<bool>& abort_flag)
    : target_(target),
      rank_(target.rank),
      nranks_(static_cast<int>(target.peers.size())),
      cfg_(cfg),
      abort_(abort_flag),
      counters_(std::make_unique<Counters[]>(target.peers.size())),
      links_(target),
      peers_(target.peers.size()) {}

P2pEngine::~P2pEngine() {
  {
    std::lock_guard lk(mu_);
    stop_ = true;
  }
  stopping_.store(true);
  cv_.notify_all();
  waiter_.interrupt();
  if (thread_.joinable()) thread_.join();
  // Nobody drives any more. What is still pending cannot finish (bytes already handed to a
  // link still reach the peer: only the links with unfinished messages are poisoned).
  adopt();
  const Error gone(ErrorCode::aborted, "the communicator was destroyed before the operation finished",
                   ErrorContext{rank_, "p2p", 0, -1});
  for (int q = 0; q < nranks_; ++q) {
    Peer& p = peers_[static_cast<size_t>(q)];
    if (!p.sends.empty() || p.rx_target || p.rx_buffering) break_peer(q, gone);
  }
  fail_all(gone);
}

// ---------------------------------------------------------------------------------------------
// Calls

std::shared_ptr<P2pEngine::Op> P2pEngine::make_op(const P2pCall& c) {
  auto op = std::make_shared<Op>();
  op->call = c;
  op->bytes = c.count * dtype_size(c.dtype);
  return op;
}

// With mu_ held.
void P2pEngine::enqueue(const std::shared_ptr<Op>& op) {
  incoming_.push_back(op);
  has_incoming_.store(true, std::memory_order_release);
  pending_.fetch_add(1, std::memory_order_relaxed);
  if (driving_) {
    waiter_.interrupt();
  } else {
    wake_progress_thread();
  }
}

// With mu_ held: the progress thread (started at the first need) takes over the driving.
void P2pEngine::wake_progress_thread() {
  if (!thread_.joinable()) thread_ = std::thread([this] { progress_loop(); });
  cv_.notify_one();
}

RecvStatus P2pEngine::run(const P2pCall& c) {
  if (open_group(this)) {
    post(c);
    return RecvStatus{c.peer, c.tag, c.count};
  }
  auto op = make_op(c);
  std::unique_lock lk(mu_);
  op->seq = ++next_seq_;
  const bool drive_here = !driving_;
  if (drive_here) {
    // The fast path: this thread drives the engine itself, no thread switch.
    driving_ = true;
    incoming_.push_back(op);
    has_incoming_.store(true, std::memory_order_release);
    pending_.fetch_add(1, std::memory_order_relaxed);
    lk.unlock();
    drive([&] { return op->done; });
    release_driver();
    if (op->error) op->error.raise();
    return op->status;
  }
  op->work = std::make_shared<WorkState>(op->seq);
  enqueue(op);
  lk.unlock();
  op->work->wait();
  return op->status;
}

Work P2pEngine::post(const P2pCall& c) {
  auto op = make_op(c);
  if (OpenGroup* g = open_group(this)) {
    op->group = g->group;
    std::lock_guard glk(g->group->mu);
    ++g->group->left;
  }
  std::lock_guard lk(mu_);
  op->seq = ++next_seq_;
  op->work = std::make_shared<WorkState>(op->seq);
  enqueue(op);
  return Work(op->work);
}

void P2pEngine::group_start() {
  if (OpenGroup* g = open_group(this)) {
    ++g->depth;
    return;
  }
  t_open_groups.push_back(OpenGroup{this, 1, std::make_shared<Group>()});
}

Work P2pEngine::group_end_async() {
  OpenGroup* g = open_group(this);
  if (!g) {
    throw_error(ErrorCode::invalid_argument, "group_end() without a group_start() on this thread",
                ErrorContext{rank_, "group_end", 0, -1});
  }
  std::shared_ptr<Group> group = g->group;
  if (--g->depth == 0) {
    std::erase_if(t_open_groups, [this](const OpenGroup& o) { return o.engine == this; });
    group->one_done(Failure{});  // closed: its operations are all posted
  }
  return Work(group->work);
}

void P2pEngine::group_end() {
  const OpenGroup* g = open_group(this);
  const std::shared_ptr<Group> group = g && g->depth == 1 ? g->group : nullptr;
  Work w = group_end_async();
  if (!group) return;
  std::unique_lock lk(mu_);
  if (!driving_) {
    // Drive here rather than wait for the progress thread to.
    driving_ = true;
    lk.unlock();
    drive([&] { return group->finished(); });
    release_driver();
  } else {
    lk.unlock();
  }
  w.wait();
}

void P2pEngine::note_abort_reason(const std::string& reason, ErrorCode code) {
  std::lock_guard lk(mu_);
  if (abort_reason_.empty()) {
    abort_reason_ = reason;
    abort_code_ = code;
  }
}

void P2pEngine::abort(const std::string& reason, ErrorCode code) {
  note_abort_reason(reason, code);
  std::unique_lock lk(mu_);
  if (driving_) {
    waiter_.interrupt();  // the driver sees the flag
    return;
  }
  driving_ = true;
  lk.unlock();
  drive([] { return true; });
  release_driver();
}

void P2pEngine::reset_counters() {
  ops_done_.store(0);
  for (int q = 0; q < nranks_; ++q) {
    counters_[static_cast<size_t>(q)].sent.store(0);
    counters_[static_cast<size_t>(q)].received.store(0);
  }
}

// ---------------------------------------------------------------------------------------------
// Who drives

void P2pEngine::release_driver() {
  std::lock_guard lk(mu_);
  driving_ = false;
  if (pending_.load(std::memory_order_relaxed) > 0 && !stop_) wake_progress_thread();
}

void P2pEngine::progress_loop() {
  std::unique_lock lk(mu_);
  for (;;) {
    cv_.wait(lk, [&] { return stop_ || (!driving_ && pending_.load(std::memory_order_relaxed) > 0); });
    if (stop_) return;
    driving_ = true;
    lk.unlock();
    drive([&] { return pending_.load(std::memory_order_relaxed) == 0 || stopping_.load(std::memory_order_relaxed); });
    lk.lock();
    driving_ = false;
  }
}

template <class Done>
void P2pEngine::drive(const Done& done) {
  TimePoint last_move = Clock::now();
  TimePoint last_liveness = last_move;
  TimePoint next_accept = last_move;
  for (;;) {
    if (abort_.load(std::memory_order_relaxed) && !failed_) {
      adopt();
      std::string reason;
      ErrorCode code;
      {
        std::lock_guard lk(mu_);
        reason = abort_reason_.empty() ? "abort() called" : abort_reason_;
        code = abort_code_;
      }
      const std::string what =
          code == ErrorCode::aborted ? fmt::format("rank {} aborted the communicator: {}", rank_, reason) : reason;
      const Error e(code, what, ErrorContext{rank_, "p2p", 0, -1});
      for (int q = 0; q < nranks_; ++q) {
        if (q != rank_) break_peer(q, e);
      }
      fail_all(e);
    }
    if (has_incoming_.load(std::memory_order_acquire)) adopt();
    const bool moved = sweep();
    if (done()) return;
    if (moved) {
      last_move = Clock::now();
      continue;
    }
    const TimePoint now = Clock::now();
    if (now - last_move < std::max(cfg_.spin, std::chrono::microseconds(spin_floor_us_.load(std::memory_order_relaxed)))) {
      engine::spin_once(cfg_, spin_holds_core_.load(std::memory_order_relaxed));
      continue;
    }
    // The listener, when no receive waits for a TCP peer that has not connected, is looked at
    // every kAcceptSlice only: otherwise every sleep would watch its socket beside the
    // shared-memory words, the costlier mixed sleep (transport/waiter.h), and every wake-up
    // would poll it.
    const bool listen = receive_awaits_accept();
    if (listen || now >= next_accept) {
      next_accept = now + kAcceptSlice;
      if (accept_incoming()) {
        last_move = now;
        continue;
      }
    }
    expire(now);
    if (now - last_liveness >= kLivenessPeriod) {
      last_liveness = now;
      check_liveness();
    }
    if (done()) return;
    sleep(now, listen, next_accept);
  }
}

}  // namespace hoop::detail
