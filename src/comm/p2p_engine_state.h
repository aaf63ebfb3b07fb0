// The point-to-point engine's own state: its operations, groups, unexpected messages and
// per-peer stream positions, shared by the files that implement it (p2p_engine.cc: calls and
// driving; p2p_matching.cc; p2p_progress.cc: moving bytes; p2p_failures.cc: waiting, timeouts,
// failures). Not part of any interface.
#pragma once

#include <chrono>
#include <cstddef>
#include <list>
#include <memory>
#include <optional>

#include "comm/p2p_engine.h"

namespace hoop::detail {

using transport::FrameHeader;
using transport::padded_size;

inline constexpr std::chrono::milliseconds kLivenessPeriod{100};
// How often the driver takes connections from TCP peers that no receive waits for yet (they
// wait that long at most for their first message to this rank to start).
inline constexpr std::chrono::milliseconds kAcceptSlice{1};
alignas(8) inline constexpr std::byte kZeros[8] = {};
inline constexpr size_t kHeaderBytes = sizeof(FrameHeader);

struct P2pEngine::Op {
  P2pCall call;
  uint64_t seq = 0;
  size_t bytes = 0;
  TimePoint last_progress;
  std::shared_ptr<WorkState> work;  // null for a blocking call driven by its own thread
  std::shared_ptr<Group> group;
  bool done = false;
  Failure error;
  RecvStatus status;

  bool matches(int source, int64_t tag) const {
    return (call.peer == kAnySource || call.peer == source) && (call.tag == kAnyTag || call.tag == tag);
  }
};

struct P2pEngine::Group {
  std::mutex mu;
  size_t left = 1;  // operations not finished, plus one while the group is open
  Failure first;
  std::shared_ptr<WorkState> work = std::make_shared<WorkState>(0);

  void one_done(const Failure& error) {
    Failure result;
    {
      std::lock_guard lk(mu);
      if (error && !first) first = error;
      if (--left > 0) return;
      result = first;
    }
    work->finish(result);
  }
  bool finished() {
    std::lock_guard lk(mu);
    return left == 0;
  }
};

// A message that arrived before any receive matched it.
struct P2pEngine::Unexpected {
  int source;
  FrameHeader header;
  std::unique_ptr<std::byte[]> data;
  bool complete = false;
  std::shared_ptr<Op> claimant;  // the receive that matched it while it was still arriving
};

struct P2pEngine::Peer {
  std::deque<std::shared_ptr<Op>> sends;  // in issue order; the front one is on the link
  FrameHeader tx_header;
  size_t tx_done = 0;  // wire bytes of the front send written (header, payload, padding)
  FrameHeader rx_header;
  size_t rx_header_done = 0;
  bool rx_in_message = false;
  size_t rx_done = 0;             // wire bytes of the current message's payload read (padding too)
  std::shared_ptr<Op> rx_target;  // the receive the current message streams into, or
  bool rx_buffering = false;      // the current message goes to rx_buffer
  std::list<Unexpected>::iterator rx_buffer;
  std::optional<Error> broken;  // the failure that ended this peer's point-to-point traffic
};

}  // namespace hoop::detail
