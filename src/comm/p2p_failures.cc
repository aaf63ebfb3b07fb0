// Point-to-point waiting, timeouts, liveness and failures.
#include "comm/p2p_engine.h"

#include <algorithm>
#include <cstring>

#include <fmt/format.h>

#include "comm/p2p_engine_state.h"
#include "core/errors.h"
#include "core/log.h"

namespace hoop::detail {

void P2pEngine::sleep(TimePoint now, bool listen, TimePoint next_accept) {
  waiter_.reset();
  std::vector<transport::Link*> armed;
  bool can_sleep = true;
  for (int q = 0; q < nranks_ && can_sleep; ++q) {
    const Peer& p = peers_[static_cast<size_t>(q)];
    if (p.broken) continue;
    transport::Link* in = links_.connected_rx(q);
    transport::Link* out = p.sends.empty() ? nullptr : links_.connected_tx(q);
    if (in && in == out) {
      armed.push_back(in);
      can_sleep = in->arm(waiter_, true, true);
      continue;
    }
    if (in) {
      armed.push_back(in);
      can_sleep = in->arm(waiter_, true, false);
    }
    if (out && can_sleep) {
      armed.push_back(out);
      can_sleep = out->arm(waiter_, false, true);
    }
  }
  if (can_sleep) {
    links_.arm(waiter_, listen);
    TimePoint until = std::min(now + kLivenessPeriod, links_.next_retry());
    if (!listen && links_.accepting()) until = std::min(until, next_accept);
    for (const auto& op : active_) {
      if (!op->done) until = std::min(until, op->last_progress + op->call.timeout);
    }
    waiter_.wait(std::max<nanoseconds>(until - Clock::now(), nanoseconds(0)));
  }
  for (auto* link : armed) link->disarm();
}

void P2pEngine::expire(TimePoint now) {
  std::erase_if(active_, [](const std::shared_ptr<Op>& op) { return op->done; });
  for (size_t i = 0; i < active_.size(); ++i) {
    const std::shared_ptr<Op> op = active_[i];
    if (op->done || now - op->last_progress < op->call.timeout) continue;
    const double secs = std::chrono::duration<double>(now - op->last_progress).count();
    const int peer = op->call.peer;
    if (op->call.send) {
      Peer& p = peers_[static_cast<size_t>(peer)];
      const bool started = !p.sends.empty() && p.sends.front() == op && p.tx_done > 0;
      const std::string what =
          !links_.connected_tx(peer)
              ? fmt::format("timed out after {:.1f} s connecting to rank {} (tag {})", secs, peer, op->call.tag)
              : fmt::format("timed out after {:.1f} s waiting for rank {} to take the message ({} of "
                            "{} bytes sent, tag {})",
                            secs, peer, started ? p.tx_done - kHeaderBytes : 0, op->bytes, op->call.tag);
      const Error e(ErrorCode::timeout, what, ctx(*op, peer));
      // Half a message on the link: the stream to that peer cannot go on.
      if (started) break_peer(peer, e);
      else finish(*op, Failure(e));
      continue;
    }
    int source = -1;
    for (int q = 0; q < nranks_; ++q) {
      if (peers_[static_cast<size_t>(q)].rx_target == op) source = q;
    }
    if (source >= 0) {
      const Peer& p = peers_[static_cast<size_t>(source)];
      break_peer(source, Error(ErrorCode::timeout,
                               fmt::format("timed out after {:.1f} s receiving from rank {} (tag {}, {} of {} "
                                           "bytes arrived)",
                                           secs, source, p.rx_header.tag, std::min(p.rx_done, op->bytes),
                                           p.rx_header.payload_bytes),
                               ctx(*op, source)));
      continue;
    }
    const std::string from = peer == kAnySource ? "any rank" : fmt::format("rank {}", peer);
    const std::string tag = op->call.tag == kAnyTag ? "any tag" : fmt::format("tag {}", op->call.tag);
    finish(*op, Failure(Error(
                    ErrorCode::timeout,
                    fmt::format("timed out after {:.1f} s: no message from {} with {} completed ({} "
                                "elements of {})",
                                secs, from, tag, op->call.count, to_string(op->call.dtype)),
                    ctx(*op, peer))));
  }
}

void P2pEngine::check_liveness() {
  std::vector<bool> sending(static_cast<size_t>(nranks_), false), receiving(sending);
  for (const auto& op : active_) {
    if (op->done || op->call.peer < 0) continue;
    (op->call.send ? sending : receiving)[static_cast<size_t>(op->call.peer)] = true;
  }
  for (int q = 0; q < nranks_; ++q) {
    const auto i = static_cast<size_t>(q);
    if (!(sending[i] || receiving[i]) || peers_[i].broken) continue;
    try {
      links_.check_alive(q, sending[i], receiving[i]);
    } catch (const Error& e) {
      break_peer(q, e);
    }
  }
}

void P2pEngine::break_peer(int peer, const Error& cause) {
  Error e = cause;
  if (cause.code() == ErrorCode::peer_failure && revocation_lookup_) {
    if (auto why = revocation_lookup_()) {
      e = Error(ErrorCode::revoked, fmt::format("the communicator was revoked: {}", *why), cause.context());
    }
  }
  Peer& p = peers_[static_cast<size_t>(peer)];
  if (!p.broken) {
    p.broken = e;
    links_.poison(peer, e.what());
    HOOP_INFO("rank {}: point-to-point traffic with rank {} ends: {}", rank_, peer, e.what());
  }
  const auto fail = [&](Op& op) {
    if (!op.done) finish(op, Failure(Error(e.code(), e.detail(), ctx(op, peer))));
  };
  for (auto& op : p.sends) fail(*op);
  p.sends.clear();
  p.tx_done = 0;
  if (p.rx_target) fail(*p.rx_target);
  p.rx_target = nullptr;
  if (p.rx_buffering) {
    if (p.rx_buffer->claimant) fail(*p.rx_buffer->claimant);
    unexpected_.erase(p.rx_buffer);
    p.rx_buffering = false;
  }
  p.rx_in_message = false;
  p.rx_header_done = 0;
  std::erase_if(posted_, [&](const std::shared_ptr<Op>& op) {
    if (op->call.peer != peer) return false;
    fail(*op);
    return true;
  });
}

void P2pEngine::fail_all(const Error& e) {
  failed_ = e;
  for (auto& op : active_) {
    if (!op->done) finish(*op, Failure(Error(e.code(), e.detail(), ctx(*op, op->call.peer))));
  }
  active_.clear();
  posted_.clear();
  for (auto& u : unexpected_) u.claimant = nullptr;
}

void P2pEngine::finish(Op& op, const Failure& error) {
  op.done = true;
  op.error = error;
  if (op.work) {
    if (!op.call.send && !error) op.work->set_status(op.status);
    op.work->finish(error);
  }
  if (op.group) op.group->one_done(error);
  if (!error) ops_done_.fetch_add(1, std::memory_order_relaxed);
  pending_.fetch_sub(1, std::memory_order_relaxed);
}

ErrorContext P2pEngine::ctx(const Op& op, int peer) const {
  return ErrorContext{rank_, op.call.send ? "send" : "recv", op.seq, peer};
}

}  // namespace hoop::detail
