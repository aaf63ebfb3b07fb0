// Failure propagation: the first failure of a communicator is recorded in the store, so every
// rank reports it, and the links are poisoned so no peer waits for this rank any longer.
#include "comm/comm_impl.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

#include "comm/p2p_engine.h"
#include "core/log.h"
#include "transport/shm/region_port.h"
#include "transport/shm/shm_transport.h"

namespace hoop::detail {

void CommImpl::fail(const Error& raised) {
  const Error e = raised.code() == ErrorCode::timeout ? blame_stopped_member(raised) : raised;
  // The first failure of the communicator is recorded before anything else, so that every rank
  // that fails because of it (its links poisoned, a connection closed) can name it.
  const std::string mine = e.what();
  std::string first;
  try {
    const std::string key = fmt::format("hoop/c{:x}/error", comm_id_);
    const Bytes now = job_->store->compare_set(key, Bytes{}, Bytes(mine.begin(), mine.end()));
    first.assign(now.begin(), now.end());
  } catch (...) {
    // The store may be gone with the rank that served it: the local error says enough.
  }
  // Then the peers: what follows asks the store and the process table again, and a failure has
  // to travel from rank to rank along the links (a ring's ranks each wait on one neighbour).
  poison_links(mine);
  remove_unattached_segments();
  // A revoke explains whatever failed after it: the abort it raised, the links it poisoned.
  std::optional<std::string> revoked_by =
      e.code() == ErrorCode::mismatch ? revocation() : revocation_explaining_failure();
  if (revoked_by) {
    Error out(ErrorCode::revoked, fmt::format("the communicator was revoked: {}", *revoked_by), e.context());
    failure_ = out;
    throw out;
  }
  // The first to fail tells every member's watcher: a member stalled on a peer that failed
  // before it ever linked to it (no link to poison) gives up then.
  if (first == mine) announce_failure();
  const bool consequence = e.code() == ErrorCode::peer_failure || e.code() == ErrorCode::timeout;
  std::string detail = e.detail();
  if (consequence && !first.empty() && first != mine) {
    detail = fmt::format("{} [first failure in this communicator: {}]", e.detail(), first);
  }
  // The members known dead: those of this machine whose process is gone, and a peer of another
  // machine that this rank saw fail (nothing cheaper tells whether it lives).
  const int peer = e.context().peer;
  std::vector<int> failed =
      consequence ? dead_members(e.code() == ErrorCode::peer_failure ? peer : -1) : std::vector<int>{};
  if (e.code() == ErrorCode::peer_failure && peer >= 0 && peer < size() &&
      peers_[static_cast<size_t>(peer)].machine_id != peers_[static_cast<size_t>(rank_)].machine_id &&
      std::find(failed.begin(), failed.end(), peer) == failed.end()) {
    failed.push_back(peer);
    std::sort(failed.begin(), failed.end());
  }
  if (!failed.empty()) detail += fmt::format(" [failed ranks: {}]", fmt::join(failed, ", "));
  Error out(e.code(), detail, e.context(), std::move(failed));
  failure_ = out;
  HOOP_WARN("{}", out.what());
  throw out;
}

// A member that died or stopped may have created the shared-memory segment of a link to this
// rank that this rank never reached (a non-root running calls ahead of its root), and nobody
// else would remove it. A failed communicator makes no link again, so on failure this rank
// removes every segment of its own pairs still named in /dev/shm.
void CommImpl::remove_unattached_segments() const noexcept {
  if (local_size_ <= 1) return;
  try {
    transport::shm_remove_rank_segments(job_->job_id, comm_id_, rank_);
  } catch (...) {
    // Best effort on the failure path: the launcher removes what is left of the job.
  }
}

void CommImpl::poison_links(const std::string& reason) noexcept {
  if (region_) region_->poison(reason);
  for (auto& per_channel : links_) {
    for (auto& l : per_channel) {
      if (l) l->poison(reason);
    }
  }
}

void CommImpl::abort(const std::string& reason) {
  p2p_->note_abort_reason(reason, ErrorCode::aborted);
  abort_flag_.store(true);
  waiter_.interrupt();
  p2p_->abort(reason);
  std::lock_guard lk(mu_);
  if (!busy_) poison_links(fmt::format("rank {} aborted the communicator: {}", rank_, reason));
}

}  // namespace hoop::detail
