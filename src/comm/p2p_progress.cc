// Point-to-point progress: moving the bytes of the front send and the current message of each peer.
#include "comm/p2p_engine.h"

#include <algorithm>
#include <cstring>

#include <fmt/format.h>

#include "comm/p2p_engine_state.h"
#include "core/errors.h"
#include "core/log.h"

namespace hoop::detail {

bool P2pEngine::sweep() {
  bool moved = false;
  for (int q = 0; q < nranks_; ++q) {
    Peer& p = peers_[static_cast<size_t>(q)];
    if (p.broken) continue;
    try {
      if (!p.sends.empty()) moved |= advance_send(q, p);
      if (links_.connected_rx(q)) moved |= advance_recv(q, p);
    } catch (const Error& e) {
      break_peer(q, e);
      moved = true;
    }
  }
  return moved;
}

bool P2pEngine::advance_send(int peer, Peer& p) {
  bool moved = false;
  while (!p.sends.empty()) {
    Op& op = *p.sends.front();
    if (op.done) {  // failed before its first byte left
      p.sends.pop_front();
      continue;
    }
    transport::Link* link = links_.tx(peer, Clock::now() + op.call.timeout);
    if (!link) return moved;
    if (p.tx_done == 0) {
      FrameHeader& h = p.tx_header;
      h = FrameHeader{};
      h.op = static_cast<uint8_t>(OpType::send);
      h.dtype = static_cast<uint8_t>(op.call.dtype);
      h.src_rank = rank_;
      h.root = peer;
      h.seq = op.seq;
      h.count = op.call.count;
      h.payload_bytes = op.bytes;
      h.comm_id = target_.comm_id;
      h.tag = op.call.tag;
    }
    // What is left of the header, the payload and its padding, in one write.
    const size_t payload = op.bytes, total = kHeaderBytes + padded_size(payload);
    const size_t at = p.tx_done;
    transport::WritePart parts[3];
    size_t n = 0;
    if (at < kHeaderBytes) parts[n++] = {reinterpret_cast<const std::byte*>(&p.tx_header) + at, kHeaderBytes - at};
    const size_t data_at = at > kHeaderBytes ? at - kHeaderBytes : 0;
    if (data_at < payload) parts[n++] = {static_cast<const std::byte*>(op.call.send_buf) + data_at, payload - data_at};
    const size_t pad_at = std::max(at, kHeaderBytes + payload) - kHeaderBytes - payload;
    if (total - kHeaderBytes - payload > pad_at) parts[n++] = {kZeros, total - kHeaderBytes - payload - pad_at};
    const size_t w = link->write_parts({parts, n});
    if (w == 0) return moved;
    moved = true;
    const size_t data_end = std::min(at + w, kHeaderBytes + payload);
    if (data_end > std::max(at, kHeaderBytes)) {
      counters_[static_cast<size_t>(peer)].sent.fetch_add(data_end - std::max(at, kHeaderBytes), std::memory_order_relaxed);
    }
    p.tx_done += w;
    op.last_progress = Clock::now();
    if (p.tx_done < total) return moved;
    p.tx_done = 0;
    auto sent = std::move(p.sends.front());
    p.sends.pop_front();
    finish(*sent, Failure{});
  }
  return moved;
}

bool P2pEngine::advance_recv(int peer, Peer& p) {
  transport::Link* link = links_.connected_rx(peer);
  bool moved = false;
  for (;;) {
    if (!p.rx_in_message) {
      const auto span = link->readable();
      if (span.empty()) return moved;
      const size_t take = std::min(span.size(), kHeaderBytes - p.rx_header_done);
      std::memcpy(reinterpret_cast<std::byte*>(&p.rx_header) + p.rx_header_done, span.data(), take);
      link->consume(take);
      p.rx_header_done += take;
      moved = true;
      if (p.rx_header_done < kHeaderBytes) return moved;
      p.rx_header_done = 0;
      p.rx_done = 0;
      p.rx_in_message = true;
      begin_message(peer, p);
    }
    const size_t payload = p.rx_header.payload_bytes, total = padded_size(payload);
    std::byte* dst = p.rx_target ? static_cast<std::byte*>(p.rx_target->call.recv_buf) : p.rx_buffer->data.get();
    const size_t before = p.rx_done;
    while (p.rx_done < total) {
      const auto span = link->readable();
      if (span.empty()) break;
      const size_t take = std::min(span.size(), total - p.rx_done);
      if (p.rx_done < payload) std::memcpy(dst + p.rx_done, span.data(), std::min(take, payload - p.rx_done));
      link->consume(take);
      p.rx_done += take;
    }
    if (p.rx_done > before) {
      moved = true;
      const size_t data = std::min(p.rx_done, payload) - std::min(before, payload);
      counters_[static_cast<size_t>(peer)].received.fetch_add(data, std::memory_order_relaxed);
      Op* waiting = p.rx_target ? p.rx_target.get() : p.rx_buffer->claimant.get();
      if (waiting) waiting->last_progress = Clock::now();
    }
    if (p.rx_done < total) return moved;
    end_message(p);
  }
}

// Whether a receive not matched yet may take its message from a TCP peer that has not
// connected to this rank: then the listener is watched while the driver sleeps.
bool P2pEngine::receive_awaits_accept() const {
  for (const auto& op : posted_) {
    if (op->done) continue;
    if (op->call.peer == kAnySource ? links_.accepting() : links_.awaits_accept(op->call.peer)) return true;
  }
  return false;
}

bool P2pEngine::accept_incoming() {
  bool got = false;
  bool drove = false;  // one round of the listener's accept loop serves every peer
  for (int q = 0; q < nranks_; ++q) {
    if (q == rank_ || peers_[static_cast<size_t>(q)].broken || links_.connected_rx(q)) continue;
    try {
      got |= links_.accept(q, &drove) != nullptr;
    } catch (const Error& e) {
      break_peer(q, e);
    }
  }
  return got;
}

}  // namespace hoop::detail
