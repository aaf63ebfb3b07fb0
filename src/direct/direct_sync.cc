#include "direct/direct_sync.h"

#include <algorithm>

#include "core/errors.h"
#include "hoop/types.h"

namespace hoop::direct {

Sync::Sync(Region& region, int rank, std::vector<pid_t> pids, transport::Waiter& waiter,
           const std::atomic<bool>& abort_flag, SpinPolicy spin)
    : region_(region),
      rank_(rank),
      pids_(std::move(pids)),
      liveness_(pids_.size()),
      waiter_(waiter),
      abort_(abort_flag),
      spin_(spin) {}

void Sync::sleep(uint32_t seen, TimePoint start) {
  waiter_.reset();
  waiter_.add_futex(&region_.control(rank_).wake, seen, /*shared=*/true);
  const auto left = timeout_ - (Clock::now() - start);
  waiter_.wait(std::clamp<nanoseconds>(left, nanoseconds(0), kLivenessPeriod));
}

void Sync::check_health() {
  if (abort_.load(std::memory_order_relaxed))
    throw_error(ErrorCode::aborted, "the communicator was aborted", ctx_);
  if (region_.poisoned()) region_.raise_poisoned(ctx_);
}

void Sync::check_same_call(int peer) const {
  if (peer < 0 || peer == rank_) return;
  const RankControl& pc = region_.control(peer);
  if (pc.op_number.load(std::memory_order_acquire) != op_number_) return;
  const OpSignature theirs = pc.op_sig;
  // Still the same op after the copy: the signature was not being rewritten for the next one.
  if (pc.op_number.load(std::memory_order_acquire) != op_number_) return;
  if (!(theirs == op_sig_)) raise_mismatch(peer, op_sig_, theirs);
}

void Sync::check_alive(int peer) {
  if (peer < 0 || static_cast<size_t>(peer) >= pids_.size()) return;
  const pid_t pid = pids_[static_cast<size_t>(peer)];
  if (pid <= 0 || liveness_[static_cast<size_t>(peer)].alive(pid)) return;
  ErrorContext c = ctx_;
  c.peer = peer;
  throw_error(ErrorCode::peer_failure, fmt::format("rank {} (pid {}) has exited", peer, static_cast<int>(pid)), c);
}

void Sync::raise_timeout(int peer, std::string_view what, nanoseconds waited) const {
  ErrorContext c = ctx_;
  c.peer = peer;
  throw_error(ErrorCode::timeout,
              fmt::format("timed out after {:.1f} s waiting for rank {} to {} (shm-direct)",
                          std::chrono::duration<double>(waited).count(), peer, what),
              c);
}

void Sync::raise_mismatch(int peer, const OpSignature& mine, const OpSignature& theirs) const {
  const auto text = [](const OpSignature& s) {
    return fmt::format("{} #{} count {} {} {} root {}", to_string(static_cast<OpType>(s.op)), s.seq,
                       s.count, to_string(static_cast<DataType>(s.dtype)),
                       to_string(static_cast<RedOp>(s.redop)), s.root);
  };
  ErrorContext c = ctx_;
  c.peer = peer;
  throw_error(ErrorCode::mismatch,
              fmt::format("rank {} called {} but this rank called {}", peer, text(theirs), text(mine)), c);
}

}  // namespace hoop::direct
