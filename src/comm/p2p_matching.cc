// Point-to-point matching: posted receives against arriving and unexpected messages.
#include "comm/p2p_engine.h"

#include <algorithm>
#include <cstring>

#include <fmt/format.h>

#include "comm/p2p_engine_state.h"
#include "core/errors.h"
#include "core/log.h"

namespace hoop::detail {

void P2pEngine::adopt() {
  std::deque<std::shared_ptr<Op>> batch;
  {
    std::lock_guard lk(mu_);
    batch.swap(incoming_);
    has_incoming_.store(false, std::memory_order_relaxed);
  }
  for (auto& op : batch) {
    const int peer = op->call.peer;
    if (failed_) {
      finish(*op, Failure(Error(failed_->code(), failed_->detail(), ctx(*op, peer))));
      continue;
    }
    op->last_progress = Clock::now();
    active_.push_back(op);
    if (!op->call.send) {
      adopt_recv(op);
    } else if (const auto& broken = peers_[static_cast<size_t>(peer)].broken) {
      finish(*op, Failure(Error(broken->code(), broken->detail(), ctx(*op, peer))));
    } else {
      peers_[static_cast<size_t>(peer)].sends.push_back(op);
    }
  }
}

void P2pEngine::adopt_recv(const std::shared_ptr<Op>& op) {
  // The earliest message that arrived for it, if any.
  for (auto it = unexpected_.begin(); it != unexpected_.end(); ++it) {
    if ((it->claimant && !it->claimant->done) || !op->matches(it->source, it->header.tag)) continue;
    try {
      check_match(*op, it->source, it->header);
    } catch (const Error& e) {
      finish(*op, Failure::of(std::current_exception()));
      break_peer(it->source, e);
      return;
    }
    if (it->complete) {
      deliver(*op, *it);
      unexpected_.erase(it);
    } else {
      it->claimant = op;
    }
    return;
  }
  const int src = op->call.peer;
  if (src != kAnySource && peers_[static_cast<size_t>(src)].broken) {
    const Error& b = *peers_[static_cast<size_t>(src)].broken;
    finish(*op, Failure(Error(b.code(), b.detail(), ctx(*op, src))));
    return;
  }
  posted_.push_back(op);
  // Be reachable by the senders it may match (a shared-memory segment is made or attached now;
  // over TCP the senders connect).
  const TimePoint deadline = Clock::now() + op->call.timeout;
  for (int q = src == kAnySource ? 0 : src; q < (src == kAnySource ? nranks_ : src + 1); ++q) {
    if (q == rank_ || peers_[static_cast<size_t>(q)].broken) continue;
    try {
      links_.attach_rx(q, deadline);
    } catch (const Error& e) {
      break_peer(q, e);
    }
  }
}

void P2pEngine::check_match(const Op& op, int source, const FrameHeader& h) const {
  const auto dt = static_cast<DataType>(h.dtype);
  if (dt != op.call.dtype) {
    throw_error(ErrorCode::mismatch,
                fmt::format("rank {} sent {} elements of {} (send #{}, tag {}) to a receive of {} "
                            "elements of {} by rank {}: the element types differ",
                            source, h.count, to_string(dt), h.seq, h.tag, op.call.count,
                            to_string(op.call.dtype), rank_),
                ctx(op, source));
  }
  if (h.payload_bytes > op.bytes) {
    throw_error(ErrorCode::mismatch,
                fmt::format("rank {}'s send #{} (tag {}) has {} elements of {} ({} bytes), more than "
                            "the {} elements ({} bytes) rank {} receives",
                            source, h.seq, h.tag, h.count, to_string(dt), h.payload_bytes,
                            op.call.count, op.bytes, rank_),
                ctx(op, source));
  }
}

void P2pEngine::deliver(Op& op, const Unexpected& u) {
  if (u.header.payload_bytes > 0) std::memcpy(op.call.recv_buf, u.data.get(), u.header.payload_bytes);
  op.status = RecvStatus{u.source, static_cast<int>(u.header.tag), u.header.count};
  finish(op, Failure{});
}

void P2pEngine::begin_message(int peer, Peer& p) {
  const FrameHeader& h = p.rx_header;
  const ErrorContext where{rank_, "recv", 0, peer};
  if (auto bad = transport::validate_frame(h)) {
    throw_error(ErrorCode::protocol, fmt::format("malformed message header from rank {}: {}", peer, *bad), where);
  }
  if (h.comm_id != target_.comm_id || h.src_rank != peer || h.root != rank_ ||
      static_cast<OpType>(h.op) != OpType::send ||
      h.payload_bytes != h.count * dtype_size(static_cast<DataType>(h.dtype))) {
    throw_error(ErrorCode::protocol,
                fmt::format("rank {} sent a header that is not a point-to-point message to rank {} of "
                            "communicator {:#x} (op {}, communicator {:#x}, from {} to {}, {} bytes)",
                            peer, rank_, target_.comm_id, h.op, h.comm_id, h.src_rank, h.root,
                            h.payload_bytes),
                where);
  }
  for (auto it = posted_.begin(); it != posted_.end();) {
    if ((*it)->done) {
      it = posted_.erase(it);
      continue;
    }
    if (!(*it)->matches(peer, h.tag)) {
      ++it;
      continue;
    }
    p.rx_target = *it;
    posted_.erase(it);
    check_match(*p.rx_target, peer, h);  // on error, break_peer fails the receive
    p.rx_target->status = RecvStatus{peer, static_cast<int>(h.tag), h.count};
    return;
  }
  Unexpected u{peer, h, std::unique_ptr<std::byte[]>(new std::byte[h.payload_bytes]), false, nullptr};
  p.rx_buffer = unexpected_.insert(unexpected_.end(), std::move(u));
  p.rx_buffering = true;
}

void P2pEngine::end_message(Peer& p) {
  p.rx_in_message = false;
  if (p.rx_target) {
    auto op = std::move(p.rx_target);
    p.rx_target = nullptr;
    finish(*op, Failure{});
    return;
  }
  p.rx_buffering = false;
  Unexpected& u = *p.rx_buffer;
  u.complete = true;
  if (u.claimant && !u.claimant->done) {
    deliver(*u.claimant, u);
    unexpected_.erase(p.rx_buffer);
  } else {
    u.claimant = nullptr;  // its receive gave up: the message waits for another
  }
}

}  // namespace hoop::detail
