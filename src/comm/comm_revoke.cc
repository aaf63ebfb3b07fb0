// Revocation (MPI ULFM's MPI_Comm_revoke, NCCL's ncclCommRevoke): one member ends the
// communicator for every member. The revoker records why under hoop/c<id>/revoked (the first
// revoke wins), then sets every member's watch key. Each member has a watcher thread parked on
// its own key at the store (one request, nothing polled), from the member's first operation on
// (a revoke before it is found then at once); woken, it fails that member's pending operations
// and refuses later ones with ErrorCode::revoked. A member whose link fails before
// its watcher wakes (the revoker poisons its links) looks the record up itself (CommImpl::fail).
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <string>
#include <thread>

#include "bootstrap/store_values.h"
#include "bootstrap/store_wait.h"
#include "comm/comm_impl.h"
#include "comm/p2p_engine.h"
#include "core/clock.h"
#include "core/log.h"
#include "core/op_traits.h"
#include "transport/shm/process_liveness.h"

namespace hoop::detail {

namespace {

// How long one parked wait lasts before the watcher asks again: long, since the key is set when
// anything happens (a revoke, the communicator's end).
constexpr std::chrono::milliseconds kParkedSlice = std::chrono::minutes(10);
// How often a store that cannot park waits (a file store) is checked.
constexpr std::chrono::milliseconds kPollPeriod{200};

constexpr const char* kClosed = "closed";
constexpr const char* kRevoked = "revoked";
constexpr const char* kFailed = "failed";  // another member failed first (announce_failure)
// After a failure is heard the watcher waits for a revoke, woken by nothing at the
// communicator's end: it looks again this often.
constexpr std::chrono::milliseconds kAfterFailureSlice{1000};
// How long a failed peer's process is given to be gone before it is called alive.
constexpr std::chrono::milliseconds kSuspectGrace{250};

std::string revoked_key(uint64_t comm_id) { return fmt::format("hoop/c{:x}/revoked", comm_id); }
std::string watch_key(uint64_t comm_id, int rank) { return fmt::format("hoop/c{:x}/watch/{}", comm_id, rank); }

std::string text_of(const Bytes& b) { return std::string(b.begin(), b.end()); }

}  // namespace

// Shared by a communicator and its watcher thread, which is detached: while it is parked in the
// store the communicator may go away, and then the thread must not touch it.
struct RevokeWatch {
  std::mutex mu;
  CommImpl* comm = nullptr;  // null once the communicator is gone
  std::shared_ptr<Store> store;
  uint64_t comm_id = 0;
  int rank = 0;
};

void CommImpl::start_revoke_watch() {
  if (watch_started_.load(std::memory_order_acquire)) return;
  std::lock_guard guard(revoke_mu_);
  if (watch_started_.load(std::memory_order_relaxed)) return;
  watch_started_.store(true, std::memory_order_release);
  if (revoked_) return;
  auto w = std::make_shared<RevokeWatch>();
  w->comm = this;
  w->store = job_->store;
  w->comm_id = comm_id_;
  w->rank = rank_;
  revoke_watch_ = w;
  std::thread([w] {
    const std::string key = watch_key(w->comm_id, w->rank);
    const bool parked = bootstrap::parks_waits(*w->store);
    try {
      while (!bootstrap::key_set_within(*w->store, key, parked ? kParkedSlice : kPollPeriod, kPollPeriod)) {
        std::lock_guard lk(w->mu);
        if (!w->comm) return;
      }
      {
        // Woken by the communicator's end (it lets go of the watch before it sets the key):
        // nothing to read.
        std::lock_guard lk(w->mu);
        if (!w->comm) return;
      }
      const std::string what = text_of(w->store->get(key));
      if (what == kClosed) return;
      if (what == kFailed) {
        {
          std::lock_guard lk(w->mu);
          if (!w->comm) return;
          w->comm->on_failed_elsewhere();
        }
        // A revoke may still follow (the survivors of a failure revoke, then shrink).
        const std::string revoked = revoked_key(w->comm_id);
        while (!bootstrap::key_set_within(*w->store, revoked, kAfterFailureSlice, kPollPeriod)) {
          std::lock_guard lk(w->mu);
          if (!w->comm) return;
        }
      }
      const std::string why = text_of(w->store->get(revoked_key(w->comm_id)));
      std::lock_guard lk(w->mu);
      if (w->comm) w->comm->on_revoked(why);
    } catch (const std::exception& e) {
      // The store is gone (with the process that served it): nothing can be heard any more, and
      // the links still carry a revoke to the peers that talk to the revoker.
      std::lock_guard lk(w->mu);
      if (w->comm) HOOP_INFO("rank {}: revoke watch of communicator {:x} ended: {}", w->rank, w->comm_id, e.what());
    }
  }).detach();
}

void CommImpl::stop_revoke_watch() noexcept {
  std::shared_ptr<RevokeWatch> w;
  bool heard;
  {
    std::lock_guard lk(revoke_mu_);
    w = revoke_watch_;
    heard = revoked_.has_value();
  }
  if (!w) return;
  {
    std::lock_guard lk(w->mu);  // after revoke_mu_, never inside it: the watcher nests them the other way
    w->comm = nullptr;
  }
  if (heard) return;  // the watcher was woken already
  try {
    // Wakes the parked watcher so that its thread and store connection go now.
    job_->store->set(watch_key(comm_id_, rank_), bootstrap::to_bytes(kClosed));
  } catch (...) {
    // The store is gone: so is the watcher's wait.
  }
}

void CommImpl::announce_failure() noexcept {
  try {
    auto& store = *job_->store;
    for (int r = 0; r < size(); ++r) {
      if (r != rank_) store.set(watch_key(comm_id_, r), bootstrap::to_bytes(kFailed));
    }
  } catch (...) {
    // The store is gone: the links still tell the peers that talk to this rank.
  }
}

void CommImpl::on_failed_elsewhere() {
  failed_elsewhere_.store(true);
  waiter_.interrupt();
}

void CommImpl::revoke(const std::string& reason) {
  const std::string mine = fmt::format("rank {} revoked the communicator: {}", rank_, reason);
  std::string first = mine;
  try {
    auto& store = *job_->store;
    first = text_of(store.compare_set(revoked_key(comm_id_), Bytes{}, bootstrap::to_bytes(mine)));
    for (int r = 0; r < size(); ++r) store.set(watch_key(comm_id_, r), bootstrap::to_bytes(kRevoked));
  } catch (const Error& e) {
    HOOP_WARN("rank {}: revoke could not reach the store ({}); the links still tell the peers", rank_, e.what());
  }
  on_revoked(first);
}

void CommImpl::on_revoked(const std::string& message) {
  {
    std::lock_guard lk(revoke_mu_);
    if (revoked_) return;
    // The abort is raised before the revoke shows: a thread that sees revoked() and starts an
    // operation finds the engines aborted, not a link that still carries its message.
    p2p_->note_abort_reason(message, ErrorCode::revoked);
    abort_flag_.store(true);
    revoked_ = message;
    revoked_flag_.store(true);
  }
  HOOP_WARN("rank {}: {}", rank_, message);
  waiter_.interrupt();
  p2p_->abort(message, ErrorCode::revoked);
  std::lock_guard lk(mu_);
  // A running operation sees the flag and poisons the links as it fails.
  if (!busy_) poison_links(message);
}

void CommImpl::refuse_if_revoked(const OpTask& t) const {
  if (!revoked()) return;
  const int peer = is_point_to_point(t.desc.op) ? t.desc.root : -1;
  throw_error(ErrorCode::revoked, fmt::format("the communicator was revoked: {}", *revocation()),
              ErrorContext{rank_, std::string(to_string(t.desc.op)), t.seq, peer});
}

std::optional<std::string> CommImpl::revocation() const {
  std::lock_guard lk(revoke_mu_);
  return revoked_;
}

std::optional<std::string> CommImpl::revocation_in_store() const {
  try {
    auto& store = *job_->store;
    const std::string key = revoked_key(comm_id_);
    if (store.check(key)) return text_of(store.get(key));
  } catch (const Error&) {
    // No store: no record to read.
  }
  return std::nullopt;
}

std::optional<std::string> CommImpl::revocation_explaining_failure() {
  if (auto r = revocation()) return r;
  auto r = revocation_in_store();
  if (r) on_revoked(*r);
  return r;
}

std::vector<int> CommImpl::dead_members(int suspect) const {
  std::vector<int> dead;
  const std::string& here = peers_[static_cast<size_t>(rank_)].machine_id;
  for (int r = 0; r < size(); ++r) {
    const PeerInfo& p = peers_[static_cast<size_t>(r)];
    if (r == rank_ || p.pid <= 0 || p.machine_id != here) continue;
    transport::shm::ProcessLiveness liveness;
    bool alive = liveness.alive(static_cast<pid_t>(p.pid));
    // A peer seen to fail may still be on its way out (the kernel closes its sockets before it
    // is a zombie): give it a moment.
    const TimePoint until = Clock::now() + kSuspectGrace;
    while (alive && r == suspect && Clock::now() < until) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
      alive = liveness.alive(static_cast<pid_t>(p.pid));
    }
    if (!alive) dead.push_back(r);
  }
  return dead;
}

std::vector<int> CommImpl::stopped_members() const {
  std::vector<int> stopped;
  const std::string& here = peers_[static_cast<size_t>(rank_)].machine_id;
  for (int r = 0; r < size(); ++r) {
    const PeerInfo& p = peers_[static_cast<size_t>(r)];
    if (r == rank_ || p.pid <= 0 || p.machine_id != here) continue;
    if (transport::shm::ProcessLiveness::stopped(static_cast<pid_t>(p.pid))) stopped.push_back(r);
  }
  return stopped;
}

Error CommImpl::blame_stopped_member(const Error& timeout) const {
  const std::vector<int> stopped = stopped_members();
  if (stopped.empty()) return timeout;
  ErrorContext ctx = timeout.context();
  const bool waited_on_it = std::find(stopped.begin(), stopped.end(), ctx.peer) != stopped.end();
  const int held_by = waited_on_it ? ctx.peer : stopped.front();
  const PeerInfo& p = peers_[static_cast<size_t>(held_by)];
  std::string detail = timeout.detail();
  if (!waited_on_it) {
    detail += fmt::format(" [rank {} (pid {}) is stopped (SIGSTOP or a debugger): it holds up the ranks waiting on it]",
                          held_by, p.pid);
    ctx.peer = held_by;
  } else {
    detail += fmt::format(" [rank {} (pid {}) is stopped (SIGSTOP or a debugger)]", held_by, p.pid);
  }
  return Error(timeout.code(), detail, ctx, timeout.failed_ranks());
}

}  // namespace hoop::detail
